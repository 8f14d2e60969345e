// Package torchtwin finds the PyTorch twin of optlab's model zoo
// (bench/torch_models.py) and a python that can run it, for tests that
// compare the host with PyTorch.
package torchtwin

import (
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
)

// Python is the interpreter Debian's python3-torch installs for (another
// python3 may come first on PATH).
const Python = "/usr/bin/python3"

// Script returns the path of bench/torch_models.py, skipping the test when
// Python has no torch (make test installs Debian's python3-torch).
func Script(t testing.TB) string {
	t.Helper()
	if err := exec.Command(Python, "-c", "import torch").Run(); err != nil {
		t.Skipf("%s has no torch (make test installs Debian's python3-torch): %v", Python, err)
	}
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		t.Fatal("torchtwin: cannot locate the repository")
	}
	return filepath.Join(filepath.Dir(file), "..", "..", "bench", "torch_models.py")
}

// Run runs torch_models.py with args and returns its combined output,
// failing the test when it fails.
func Run(t testing.TB, args ...string) string {
	t.Helper()
	return Exec(t, append([]string{Script(t)}, args...)...)
}

// Exec runs Python with args (a script and its arguments) and returns its
// combined output, failing the test when it fails.
func Exec(t testing.TB, args ...string) string {
	t.Helper()
	out, err := exec.Command(Python, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %v: %v\n%s", Python, args, err, out)
	}
	return string(out)
}
