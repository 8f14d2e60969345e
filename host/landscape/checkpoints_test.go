package landscape

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/optlab/optlab/host/checkpoint"
	"github.com/optlab/optlab/host/experiment"
)

// writeCheckpoint writes a one-tensor checkpoint with metadata meta.
func writeCheckpoint(t *testing.T, path string, meta map[string]string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	ts := []checkpoint.Tensor{checkpoint.NewF32("fc.weight", []int64{2, 2}, make([]float32, 4))}
	if err := checkpoint.Write(path, ts, meta); err != nil {
		t.Fatal(err)
	}
}

func TestLoadCheckpoints(t *testing.T) {
	dir := t.TempDir()
	a, b, c := filepath.Join(dir, "a.safetensors"), filepath.Join(dir, "sub", "a.safetensors"), filepath.Join(dir, "b.st")
	writeCheckpoint(t, a, map[string]string{"optlab.run_key": "k", "experiment": "e", "optlab.archs": "cnn,mlp"})
	writeCheckpoint(t, b, nil)
	writeCheckpoint(t, c, map[string]string{"run_key": "bare", "optlab.run_key": "prefixed"})
	exp := &experiment.Experiment{}
	exp.Model.Archs = []string{"mlp"}
	cps, err := loadCheckpoints([]string{a, b, c}, "", exp)
	if err != nil {
		t.Fatal(err)
	}
	want := []loadedCheckpoint{
		{path: a, label: "a", arch: "cnn", runKey: "k", experiment: "e"},
		{path: b, label: "a-2", arch: "mlp"},
		{path: c, label: "b", arch: "mlp", runKey: "bare"},
	}
	for i, cp := range cps {
		if len(cp.tensors) != 1 {
			t.Errorf("%s: %d tensors", cp.path, len(cp.tensors))
		}
		got := [5]string{cp.path, cp.label, cp.arch, cp.runKey, cp.experiment}
		w := want[i]
		if got != [5]string{w.path, w.label, w.arch, w.runKey, w.experiment} {
			t.Errorf("checkpoint %d: %+v, want %+v", i, cp, want[i])
		}
	}
	cps, err = loadCheckpoints([]string{a}, "resnet", exp)
	if err != nil || cps[0].arch != "resnet" {
		t.Errorf("--arch resnet: %+v, %v", cps, err)
	}
	exp.Model.Archs = []string{"mlp", "cnn"}
	if _, err := loadCheckpoints([]string{b}, "", exp); err == nil || !strings.Contains(err.Error(), "pass --arch") {
		t.Errorf("two archs, no metadata: %v", err)
	}
}

func TestFileLabel(t *testing.T) {
	if got, want := fileLabel("method=SGD,arch=cnn/seed 1+x"), "method=SGD_arch=cnn_seed_1+x"; got != want {
		t.Errorf("fileLabel: %q, want %q", got, want)
	}
}
