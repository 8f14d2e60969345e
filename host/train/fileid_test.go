package train

import (
	"crypto/sha256"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/optlab/optlab/host/experiment"
)

// TestRecordIdentifiesFiles (hardening 09): the content behind data.path
// (csv) and model.init_from is part of a run's configuration, so that
// another file under the same name is another run; a file that cannot be
// read, or is not a regular file, adds no key (and is not read).
func TestRecordIdentifiesFiles(t *testing.T) {
	dir := t.TempDir()
	csv := filepath.Join(dir, "d.csv")
	init := filepath.Join(dir, "m.safetensors")
	os.WriteFile(csv, []byte("1,2,0\n3,4,1\n"), 0o644)
	os.WriteFile(init, []byte("weights"), 0o644)
	exp := experiment.Default()
	exp.Data.Dataset = experiment.DatasetCSV
	exp.Data.Path = csv
	exp.Model.InitFrom = init
	r := &Runner{Exp: exp}
	run := experiment.Run{Key: "k", Label: "SGD"}
	cfg := r.Record(run, Optimizer{}).Config
	sum := sha256.Sum256([]byte("weights"))
	if want := fmt.Sprintf("7 bytes, sha256 %x", sum); cfg["model.init_from.content"] != want {
		t.Errorf("model.init_from.content = %v, want %q", cfg["model.init_from.content"], want)
	}
	sum = sha256.Sum256([]byte("1,2,0\n3,4,1\n"))
	if want := fmt.Sprintf("12 bytes, sha256 %x", sum); cfg["data.path.content"] != want {
		t.Errorf("data.path.content = %v, want %q", cfg["data.path.content"], want)
	}
	// The same name, other content (and a later mtime): another run.
	os.WriteFile(csv, []byte("1,2,0\n3,4,2\n"), 0o644)
	later := time.Now().Add(time.Minute)
	os.Chtimes(csv, later, later)
	if now := r.Record(run, Optimizer{}).Config; now["data.path.content"] == cfg["data.path.content"] {
		t.Errorf("edited csv: identity unchanged %v", now["data.path.content"])
	}
	// Not there, or a FIFO (not opened, which would block): no key.
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Skip(err)
	}
	exp.Data.Path = fifo
	exp.Model.InitFrom = filepath.Join(dir, "missing")
	now := r.Record(run, Optimizer{}).Config
	if _, ok := now["data.path.content"]; ok {
		t.Errorf("FIFO identified: %v", now["data.path.content"])
	}
	if _, ok := now["model.init_from.content"]; ok {
		t.Errorf("missing file identified: %v", now["model.init_from.content"])
	}
}

// An npz dataset is identified by its file's content, a folder of .npy
// files by each one's, named; the NHWC layout is recorded, the default
// NCHW is not (older records keep their configuration).
func TestRecordIdentifiesNumPyFiles(t *testing.T) {
	dir := t.TempDir()
	npz := filepath.Join(dir, "d.npz")
	os.WriteFile(npz, []byte("not really a zip"), 0o644)
	folder := filepath.Join(dir, "arrays")
	os.Mkdir(folder, 0o755)
	for _, n := range []string{"x_train", "y_train", "x_test", "y_test"} {
		os.WriteFile(filepath.Join(folder, n+".npy"), []byte(n), 0o644)
	}
	exp := experiment.Default()
	exp.Data.Dataset = experiment.DatasetNumPy
	exp.Data.Path = npz
	r := &Runner{Exp: exp}
	run := experiment.Run{Key: "k", Label: "SGD"}
	cfg := r.Record(run, Optimizer{}).Config
	sum := sha256.Sum256([]byte("not really a zip"))
	if want := fmt.Sprintf("16 bytes, sha256 %x", sum); cfg["data.path.content"] != want {
		t.Errorf("npz: data.path.content = %v, want %q", cfg["data.path.content"], want)
	}
	if _, ok := cfg["data.layout"]; ok {
		t.Errorf("the default layout is recorded: %v", cfg["data.layout"])
	}
	exp.Data.Path, exp.Data.Layout = folder, experiment.LayoutNHWC
	cfg = r.Record(run, Optimizer{}).Config
	id, _ := cfg["data.path.content"].(string)
	for _, n := range []string{"x_train.npy: 7 bytes", "y_test.npy: 6 bytes"} {
		if !strings.Contains(id, n) {
			t.Errorf("folder: data.path.content = %q, want %q in it", id, n)
		}
	}
	if cfg["data.layout"] != experiment.LayoutNHWC {
		t.Errorf("data.layout = %v", cfg["data.layout"])
	}
}

// A TorchScript arch is identified by its file's content: the same name
// with other weights is another run; a built-in arch adds no key.
func TestRecordIdentifiesTorchScriptFiles(t *testing.T) {
	dir := t.TempDir()
	pt := filepath.Join(dir, "net.pt")
	os.WriteFile(pt, []byte("scripted"), 0o644)
	r := &Runner{Exp: experiment.Default()}
	arch := experiment.TorchScriptPrefix + pt
	run := experiment.Run{Key: "k", Label: "SGD", Arch: arch + "*2+cnn", Members: []string{arch, arch, "cnn"}}
	cfg := r.Record(run, Optimizer{}).Config
	sum := sha256.Sum256([]byte("scripted"))
	if want := fmt.Sprintf("8 bytes, sha256 %x", sum); cfg["model.archs.content"] != want {
		t.Errorf("model.archs.content = %v, want %q", cfg["model.archs.content"], want)
	}
	os.WriteFile(pt, []byte("scriptee"), 0o644)
	later := time.Now().Add(time.Minute)
	os.Chtimes(pt, later, later)
	if now := r.Record(run, Optimizer{}).Config; now["model.archs.content"] == cfg["model.archs.content"] {
		t.Errorf("edited module: identity unchanged %v", now["model.archs.content"])
	}
	run.Members = []string{"cnn"}
	if now := r.Record(run, Optimizer{}).Config; now["model.archs.content"] != nil {
		t.Errorf("built-in arch identified: %v", now["model.archs.content"])
	}
}
