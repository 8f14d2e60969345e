// Package torchtwin finds the PyTorch twin of optlab's model zoo
// (bench/torch_models.py) and a python that can run it, for tests that
// compare the host with PyTorch.
package torchtwin

import (
	"bytes"
	"encoding/json"
	"math"
	"os"
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
	if ok {
		p := filepath.Join(filepath.Dir(file), "..", "..", "bench", "torch_models.py")
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	// A test binary run away from the tree it was built in (the device kit's
	// tests/*.test, run in their package's folder of another copy): the
	// nearest bench/torch_models.py above the working directory.
	if dir, err := os.Getwd(); err == nil {
		for d := dir; ; d = filepath.Dir(d) {
			p := filepath.Join(d, "bench", "torch_models.py")
			if _, err := os.Stat(p); err == nil {
				return p
			}
			if filepath.Dir(d) == d {
				break
			}
		}
	}
	t.Fatal("torchtwin: cannot locate bench/torch_models.py")
	return ""
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

// Tensor names a parameter tensor for a reference script.
type Tensor struct {
	Name  string  `json:"name"`
	Shape []int64 `json:"shape"`
}

// Steps is what an optimizer's reference script (a plugin's
// testdata/*_reference.py) reads on stdin: the tensors of the flat
// parameter vector, its initial values, the gradient and learning rate of
// every step, and the hyperparameters.
type Steps struct {
	Tensors []Tensor       `json:"tensors"`
	Theta0  []float64      `json:"theta0"`
	Grads   [][]float64    `json:"grads"`
	LRs     []float64      `json:"lrs"`
	HParams map[string]any `json:"hparams"`
}

// Trajectory runs an optimizer's reference script on in and returns the
// parameters after every step (its "thetas"), skipping the test without
// torch and failing it when the script fails or gives another number of
// steps.
func Trajectory(t testing.TB, script string, in Steps) [][]float64 {
	t.Helper()
	var res struct {
		Thetas [][]float64 `json:"thetas"`
	}
	Call(t, script, in, &res)
	if len(res.Thetas) != len(in.Grads) {
		t.Fatalf("%s gave %d steps for %d", script, len(res.Thetas), len(in.Grads))
	}
	return res.Thetas
}

// Call runs Python on script with in as JSON on stdin and decodes its
// stdout, JSON, into out, skipping the test without torch and failing it
// when the script fails: for references whose input is not Steps (a SAM
// variant's, which recomputes the loss at perturbed points).
func Call(t testing.TB, script string, in, out any) {
	t.Helper()
	Script(t)
	b, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(Python, script)
	cmd.Stdin = bytes.NewReader(b)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	res, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s: %v\n%s", script, err, stderr.String())
	}
	if err := json.Unmarshal(res, out); err != nil {
		t.Fatalf("%s: %v\n%s", script, err, res)
	}
}

// Thetas runs a reference script that reads in (any JSON) on stdin and
// writes {"thetas": [...]}, the parameters after each of steps steps, as
// Trajectory does for scripts fed gradients: for references that
// recompute the gradients themselves (the model and data in the input).
func Thetas(t testing.TB, script string, in any, steps int) [][]float64 {
	t.Helper()
	var res struct {
		Thetas [][]float64 `json:"thetas"`
	}
	Call(t, script, in, &res)
	if len(res.Thetas) != steps {
		t.Fatalf("%s gave %d steps for %d", script, len(res.Thetas), steps)
	}
	return res.Thetas
}

// RelErr returns ‖got − want‖₂/‖want‖₂.
func RelErr(got, want []float64) float64 {
	var d, w float64
	for i := range want {
		d += (got[i] - want[i]) * (got[i] - want[i])
		w += want[i] * want[i]
	}
	return math.Sqrt(d / w)
}
