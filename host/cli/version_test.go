package cli_test

import (
	"bytes"
	"strings"
	"testing"

	"github.com/optlab/optlab/host/cli"
	"github.com/optlab/optlab/host/tensor"
)

// TestVersionCommand: `host version` names libtorch, then the CUDA status
// (a CPU build says it is one; a CUDA build names the CUDA runtime, driver
// and cuDNN versions and the devices or why none is usable), then the BLAS.
func TestVersionCommand(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := cli.Main([]string{"version"}, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	out := stdout.String()
	t.Log(out)
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	if len(lines) < 3 || lines[0] != tensor.LibtorchDescription() {
		t.Fatalf("output:\n%s", out)
	}
	if strings.Contains(lines[0], "(CPU build") {
		if !strings.HasPrefix(lines[1], "CPU build: no CUDA") {
			t.Errorf("a CPU build must say so:\n%s", out)
		}
		return
	}
	for _, want := range []string{"CUDA runtime ", "NVIDIA driver", "cuDNN "} {
		if !strings.Contains(lines[1], want) {
			t.Errorf("a CUDA build's version lacks %q:\n%s", want, out)
		}
	}
	if !strings.HasPrefix(lines[2], "CUDA devices: ") && !strings.HasPrefix(lines[2], "no usable GPU: ") {
		t.Errorf("devices or why none:\n%s", out)
	}
}
