package cli_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/optlab/optlab/internal/torchtwin"
)

// host check loads a TorchScript arch, counts its parameters (optlab's cnn
// scripted from its PyTorch twin has the built-in cnn's), and refuses a
// module of the wrong number of classes with one message naming the file.
func TestCheckTorchScript(t *testing.T) {
	torchtwin.Script(t) // skips without PyTorch
	dir := t.TempDir()
	good, bad := filepath.Join(dir, "cnn.pt"), filepath.Join(dir, "cnn5.pt")
	torchtwin.Run(t, "--script", good, "--arch", "cnn", "--classes", "10", "--in-shape", "1,8,8")
	torchtwin.Run(t, "--script", bad, "--arch", "cnn", "--classes", "5", "--in-shape", "1,8,8")
	count := func(arch string) string {
		s := spec{Name: "ts", Arch: arch, Methods: []method{{Name: "SGD", Plugin: "sgd"}}}
		r := host(t, "check", "--plugins", pluginDir, s.write(t, t.TempDir()))
		if r.code != 0 {
			t.Fatalf("check %s: exit code %d\n%s%s", arch, r.code, r.stdout, r.stderr)
		}
		for _, line := range strings.Split(r.stdout, "\n") {
			if i := strings.LastIndex(line, ", "); i >= 0 && strings.HasSuffix(line, " parameters") {
				return line[i+2:]
			}
		}
		t.Fatalf("check %s prints no parameter count:\n%s", arch, r.stdout)
		return ""
	}
	if got, want := count("torchscript:"+good), count("cnn"); got != want {
		t.Errorf("the scripted cnn has %s, the built-in %s", got, want)
	}
	s := spec{Name: "ts", Arch: "torchscript:" + bad, Methods: []method{{Name: "SGD", Plugin: "sgd"}}}
	r := host(t, "check", "--plugins", pluginDir, s.write(t, t.TempDir()))
	first, _, _ := strings.Cut(r.stderr, "\n")
	if r.code != 1 || !strings.Contains(first, "torchscript:"+bad) || !strings.Contains(first, "returns logits of shape [2 5] for a batch of 2 in eval mode; the data has 10 classes") {
		t.Errorf("exit code %d, stderr:\n%s", r.code, r.stderr)
	}
}
