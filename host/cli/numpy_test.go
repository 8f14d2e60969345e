package cli_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// host check loads an npz dataset, prints its shapes, and refuses what
// only the data can refuse (data.CheckSplit): a validation-split metric
// without a validation split. host run refuses it the same way before
// training anything.
func TestCheckNumPyDataset(t *testing.T) {
	npz, err := filepath.Abs(filepath.Join("..", "data", "testdata", "numpy", "tiny.npz"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	write := func(name, eval string) string {
		p := filepath.Join(dir, name+".toml")
		src := fmt.Sprintf("name = %q\nresults_dir = \"res\"\n[data]\ndataset = \"npz\"\npath = %q\n[model]\narchs = [\"mlp\"]\n[train]\nepochs = 1\nbatch_size = 2\n[eval]\n%s\n[[method]]\nname = \"SGD\"\nplugin = \"sgd\"\n", name, npz, eval)
		if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	ok := host(t, "check", "--plugins", pluginDir, write("fine", `temperature = "none"`))
	if ok.code != 0 || !strings.Contains(ok.stdout, "npz — 6 train / 3 test samples, 3 classes, input [2 3 3]") {
		t.Errorf("check: code %d, stdout:\n%s", ok.code, ok.stdout)
	}
	bad := write("bad", "temperature = \"none\"\nbest_epoch = \"acc\"\nevery_epochs = 1")
	for _, args := range [][]string{{"check", "--plugins", pluginDir, bad}, {"run", "-q", "--plugins", pluginDir, "--results", filepath.Join(dir, "res"), bad}} {
		cmd := args[0]
		r := host(t, args...)
		if r.code == 0 || !strings.Contains(r.stderr, "eval.best_epoch needs a validation split") {
			t.Errorf("%s: code %d, stderr:\n%s", cmd, r.code, r.stderr)
		}
	}
}
