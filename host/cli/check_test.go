package cli_test

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/optlab/optlab/host/checkpoint"
)

// TestCheckCatchesRunFailures: host check fails, with the message the run
// would give, on experiments whose every run would fail at its start.
func TestCheckCatchesRunFailures(t *testing.T) {
	dir := t.TempDir()
	// A checkpoint of another architecture for init_from.
	wrongArch := filepath.Join(dir, "other.safetensors")
	if err := checkpoint.Write(wrongArch, []checkpoint.Tensor{checkpoint.NewF32("conv9.weight", []int64{2}, make([]float32, 2))}, nil); err != nil {
		t.Fatal(err)
	}
	notADir := filepath.Join(dir, "file")
	os.WriteFile(notADir, nil, 0o644)
	long := strings.Repeat("m", 240)
	cases := []struct {
		name  string
		s     spec
		extra string // appended to the file
		want  []string
	}{
		{"batch larger than the training set", spec{Batch: 4096, Methods: []method{{Name: "SGD", Plugin: "sgd"}}},
			"", []string{"method=SGD/arch=mlp/seed=1: the training set (1438 samples) is smaller than one batch (4096)"}},
		{"rho out of the plugin's range", spec{Methods: []method{{Name: "SAM", Plugin: "sam", Params: []string{"rho = -1"}}}},
			"", []string{`method "SAM": params.rho -1 is out of range [0,): want ≥ 0`}},
		{"particles out of the plugin's range", spec{Methods: []method{{Name: "OT", Plugin: "otmdr", Params: []string{"particles = 0"}}}},
			"", []string{`method "OT": params.particles 0 is out of range [1,): want ≥ 1`}},
		{"m larger than the batch", spec{Batch: 64, Methods: []method{{Name: "SAM", Plugin: "sam", Params: []string{"m = 100"}}}},
			"", []string{`method "SAM": params.m 100 is out of range [1,batch]: want ≥ 1 and ≤ 64, the batch size`}},
		{"m of 2⁶³−1 refused before configure", spec{Batch: 64, Methods: []method{{Name: "SAM", Plugin: "sam", Params: []string{"m = 9223372036854775807"}}}},
			"", []string{`method "SAM": params.m 9223372036854775807 is out of range [1,batch]: want ≥ 1 and ≤ 64, the batch size`}},
		{"rejected at configure", spec{Methods: []method{{Name: "SAM", Plugin: "sam", Params: []string{`adaptive_scope = "weights"`}}}},
			"", []string{`method=SAM/arch=mlp/seed=1: configure: plugin sam: Configure: sam: adaptive_scope "weights" applies to ASAM only: set adaptive = true`}},
		{"missing init_from", spec{Methods: []method{{Name: "SGD", Plugin: "sgd"}}},
			"[model]\n", []string{"model.init_from: reading checkpoint: open " + filepath.Join(dir, "missing.safetensors")}},
		{"init_from of another architecture", spec{Methods: []method{{Name: "SGD", Plugin: "sgd"}}},
			"[model]\n", []string{"model.init_from:", "other.safetensors"}},
		{"init_from a named pipe", spec{Methods: []method{{Name: "SGD", Plugin: "sgd"}}},
			"[model]\n", []string{"model.init_from:", "fifo.safetensors is a named pipe (FIFO), not a regular file; point it at a file"}},
		{"file names too long", spec{Methods: []method{{Name: long, Plugin: "sgd"}}},
			"", []string{"its file names would be", "more than the 255 file systems allow"}},
		{"experiment name too long", spec{Methods: []method{{Name: "SGD", Plugin: "sgd"}}},
			"", []string{"name: 300 bytes long, more than the 255 file systems allow in a file name"}},
		{"results paths too long", spec{Methods: []method{{Name: "SGD", Plugin: "sgd"}}},
			"", []string{"its files' paths would be up to", "choose a shorter results_dir"}},
		{"tensorboard folder a file", spec{Methods: []method{{Name: "SGD", Plugin: "sgd"}}},
			"", []string{"results_dir: cannot create", "tb is not a folder (TensorBoard files go there; make it a writable folder or set eval.tensorboard = false)"}},
		{"params folder a file", spec{Methods: []method{{Name: "SGD", Plugin: "sgd"}}},
			"", []string{"results_dir: cannot create", "params is not a folder (the parameter dumps go there; make it a writable folder or set train.dump_params_every = 0)"}},
		{"results folder not writable", spec{Methods: []method{{Name: "SGD", Plugin: "sgd"}}},
			"", []string{"results_dir: cannot create", "is not a folder"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.s.Name = "bad"
			path := c.s.write(t, t.TempDir())
			b, _ := os.ReadFile(path)
			text := string(b)
			switch c.name {
			case "missing init_from", "init_from of another architecture", "init_from a named pipe":
				from := filepath.Join(dir, "missing.safetensors")
				switch c.name {
				case "init_from of another architecture":
					from = wrongArch
				case "init_from a named pipe":
					from = filepath.Join(dir, "fifo.safetensors")
					if err := syscall.Mkfifo(from, 0o644); err != nil {
						t.Skip("mkfifo:", err)
					}
				}
				text = strings.Replace(text, "[model]\n", "[model]\ninit_from = \""+from+"\"\n", 1)
			case "experiment name too long":
				text = strings.Replace(text, `name = "bad"`, `name = "`+strings.Repeat("L", 300)+`"`, 1)
			case "results paths too long":
				text = "results_dir = \"" + filepath.Join(dir, strings.Repeat(strings.Repeat("d", 200)+"/", 20)) + "\"\n" + text
			case "tensorboard folder a file":
				res := filepath.Join(t.TempDir(), "res")
				os.MkdirAll(filepath.Join(res, "bad"), 0o755)
				os.WriteFile(filepath.Join(res, "bad", "tb"), nil, 0o644)
				text = "results_dir = \"" + res + "\"\n" + text
			case "params folder a file":
				res := filepath.Join(t.TempDir(), "res")
				os.MkdirAll(filepath.Join(res, "bad"), 0o755)
				os.WriteFile(filepath.Join(res, "bad", "params"), nil, 0o644)
				text = "results_dir = \"" + res + "\"\n" + strings.Replace(text, "[train]\n", "[train]\ndump_params_every = 2\n", 1)
			case "results folder not writable":
				text = "results_dir = \"" + filepath.Join(notADir, "results") + "\"\n" + text
			}
			os.WriteFile(path, []byte(text), 0o644)
			r := host(t, "check", "--plugins", pluginDir, path)
			if r.code != 1 {
				t.Fatalf("exit code %d, want 1\n%s", r.code, r.stdout)
			}
			for _, w := range c.want {
				if !strings.Contains(r.stderr, w) {
					t.Errorf("stderr does not say %q:\n%s", w, r.stderr)
				}
			}
			if strings.HasSuffix(r.stdout, "\nok\n") {
				t.Errorf("check says ok:\n%s", r.stdout)
			}
		})
	}
}
