package plugin

import (
	"context"
	"errors"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/optlab/optlab/internal/testutil"
	"github.com/optlab/optlab/plugins/sam"
	"github.com/optlab/optlab/sdk/optim"
	"github.com/optlab/optlab/sdk/optimtest"
	"github.com/optlab/optlab/sdk/protocoltest"
)

// Python plugins (sdk/python) are launched like any plugin: these tests
// drive examples/python-sam and internal/testplugin/pyfault through the
// host's plugin client, unchanged.

var (
	pySAM   = filepath.Join("..", "..", "examples", "python-sam", "sam.py")
	pyFault = filepath.Join("..", "..", "internal", "testplugin", "pyfault", "faultplugin.py")
)

// launchPython starts the Python plugin at path and closes it at cleanup.
func launchPython(t *testing.T, path string, out *testutil.SyncBuffer) *Client {
	t.Helper()
	spec := LaunchSpec{Path: path, Logger: quietLogger(t), Output: testWriter{t}}
	if out != nil {
		spec.Output = out
	}
	c, err := Launch(context.Background(), spec)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// TestPythonSAMTraceGolden runs the Python SAM against optimtest's exact
// host with OPTLAB_TRACE=1: the trace it writes (timings removed) is the
// Go SAM's golden trace byte for byte, in each golden's mode: the same
// ops, handle names and returned scalars. The Go SAM, run in process on a
// second such host, ends with bitwise the same parameters and metrics.
func TestPythonSAMTraceGolden(t *testing.T) {
	testutil.NeedPython(t)
	t.Setenv(optim.TraceEnv, "1")
	tests := []struct {
		golden  string
		members int
		params  map[string]any
	}{
		{"trace.golden", 2, nil},
		{"trace_asam_weights.golden", 1, map[string]any{"rho": 2.0, "adaptive": true, "adaptive_scope": "weights"}},
		{"trace_m2.golden", 1, map[string]any{"m": int64(2)}},
	}
	timing := regexp.MustCompile(`(?m)^(exec \d+: \d+ ops), \S+$`)
	for _, tt := range tests {
		t.Run(tt.golden, func(t *testing.T) {
			want, err := os.ReadFile(filepath.Join("..", "..", "plugins", "sam", "testdata", tt.golden))
			if err != nil {
				t.Fatal(err)
			}
			var out testutil.SyncBuffer
			c := launchPython(t, pySAM, &out)
			newHost := func() *optimtest.Host {
				return optimtest.MustHost(t, optimtest.NewMLP(optimtest.MLPConfig{Hidden: 4, Samples: 64}),
					optimtest.WithBatchSize(16), optimtest.WithMembers(tt.members))
			}
			h, goH := newHost(), newHost()
			outs := optimtest.MustRun(t, c.AsOptimizer(), h, 2, optimtest.WithLR(0.1), optimtest.WithHParams(tt.params))
			// Close only after the trace has arrived: closing first could
			// cut the plugin's stderr stream short on a busy machine.
			defer c.Close()
			goOuts := optimtest.MustRun(t, sam.New(), goH, 2, optimtest.WithLR(0.1), optimtest.WithHParams(tt.params))
			if !reflect.DeepEqual(outs, goOuts) {
				t.Errorf("step outputs: Python %v, Go %v", outs, goOuts)
			}
			for m := range tt.members {
				if py, gp := h.Params(m), goH.Params(m); !bitwiseEqual(py, gp) {
					t.Errorf("member %d: the parameters after the Python SAM differ from the Go SAM's", m)
				}
			}
			// The plugin's stderr reaches the host on a stream of its own:
			// wait for the last line while the plugin still runs.
			var got string
			for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
				if got = timing.ReplaceAllString(out.String(), "$1"); got == string(want) {
					return
				}
			}
			t.Errorf("trace of the Python SAM differs from plugins/sam/testdata/%s\n--- got\n%s\n--- want\n%s", tt.golden, got, want)
		})
	}
}

// bitwiseEqual reports whether a and b hold the same float64 bits.
func bitwiseEqual(a, b []float64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if math.Float64bits(a[i]) != math.Float64bits(b[i]) {
			return false
		}
	}
	return true
}

// TestPythonErrors checks what the host gets from a Python plugin's
// failures: an optlab.Error as the plugin's error, a failing op with its
// index (errors.As finds the *optim.OpError), and an exception as a panic
// with the traceback from the plugin's stderr.
func TestPythonErrors(t *testing.T) {
	testutil.NeedPython(t)
	ctx := context.Background()
	tests := []struct {
		param string
		want  []string
		check func(t *testing.T, err error)
	}{
		{"fail_at", []string{"plugin faultplugin.py: Step: faulty: simulated failure at step 0"}, nil},
		{"bad_op_at", []string{"plugin faultplugin.py: Step: faulty: step: op 1 (Norm): "}, func(t *testing.T, err error) {
			var oe *optim.OpError
			if !errors.As(err, &oe) || oe.Index != 1 || oe.Op != "Norm" {
				t.Errorf("errors.As(%v, *optim.OpError) = %+v; want op 1 (Norm)", err, oe)
			}
		}},
		{"raise_at", []string{
			"plugin faultplugin.py: Step: panic in Step: ZeroDivisionError: division by zero; last stderr lines:",
			"[ERROR] recovered panic in optimizer method=Step panic=ZeroDivisionError: division by zero",
			"Traceback (most recent call last):", `return {"loss": 1 / 0}`,
		}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.param, func(t *testing.T) {
			c := launchPython(t, pyFault, nil)
			if err := c.Configure(ctx, protocoltest.NewFakeHost(4), optim.Config{Params: map[string]any{tt.param: int64(0)}, Members: 1}); err != nil {
				t.Fatal(err)
			}
			_, err := c.Step(ctx, optim.StepInput{})
			if err == nil {
				t.Fatal("Step succeeded")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error does not say %q:\n%v", w, err)
				}
			}
			if tt.check != nil {
				tt.check(t, err)
			}
			if c.Exited() {
				t.Error("the plugin exited after a failed step")
			}
		})
	}
}

// TestPythonPluginByHand runs a Python plugin without the host: it says it
// is a plugin and exits with status 1, as Go plugins do.
func TestPythonPluginByHand(t *testing.T) {
	testutil.NeedPython(t)
	cmd := exec.Command(pySAM)
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 || !strings.Contains(string(out), "This binary is a plugin.") {
		t.Errorf("run by hand: %v, output %q; want exit status 1 and the plugin notice", err, out)
	}
}

// TestPythonWithoutGRPC starts the Python SAM with a python3 first on PATH
// that cannot import grpc (a virtual environment without system packages):
// the SDK runs the script again with /usr/bin/python3.
func TestPythonWithoutGRPC(t *testing.T) {
	testutil.NeedPython(t)
	venv := filepath.Join(t.TempDir(), "venv")
	if out, err := exec.Command("/usr/bin/python3", "-m", "venv", "--without-pip", venv).CombinedOutput(); err != nil {
		t.Skipf("cannot make a virtual environment: %v\n%s", err, out)
	}
	t.Setenv("PATH", filepath.Join(venv, "bin")+string(os.PathListSeparator)+os.Getenv("PATH"))
	c := launchPython(t, pySAM, nil)
	if info, err := c.Info(context.Background()); err != nil || info.Name != "python-sam" {
		t.Fatalf("Info = %+v, %v", info, err)
	}
}

// TestPythonBadOptlabPython: with a python3 without grpc first on PATH and
// OPTLAB_PYTHON naming no interpreter (a typo), the plugin fails saying so,
// instead of telling the user to set what they set.
func TestPythonBadOptlabPython(t *testing.T) {
	testutil.NeedPython(t)
	venv := filepath.Join(t.TempDir(), "venv")
	if out, err := exec.Command("/usr/bin/python3", "-m", "venv", "--without-pip", venv).CombinedOutput(); err != nil {
		t.Skipf("cannot make a virtual environment: %v\n%s", err, out)
	}
	cmd := exec.Command(filepath.Join(venv, "bin", "python3"), pySAM)
	cmd.Env = append(os.Environ(), "OPTLAB_PYTHON=/no/such/python3", "OPTLAB_OPTIMIZER_PLUGIN=7b1c2f0e-optlab-optimizer")
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "OPTLAB_PYTHON=/no/such/python3 names no executable interpreter") {
		t.Errorf("with a bad OPTLAB_PYTHON: %v, output %q; want a failure naming it", err, out)
	}
}

// TestPythonExitsWhenHostDies kills the host of a Python plugin: the plugin
// exits by itself and removes its socket directory.
func TestPythonExitsWhenHostDies(t *testing.T) {
	testutil.NeedPython(t)
	path, err := filepath.Abs(pySAM)
	if err != nil {
		t.Fatal(err)
	}
	helper, line := startHelperHost(t, path)
	pid, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil || !alive(pid) {
		t.Fatalf("helper host printed %q; plugin alive = %v", line, alive(pid))
	}
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })
	socketDir := envOf(t, pid, "PLUGIN_UNIX_SOCKET_DIR")
	if err := helper.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = helper.Wait()
	waitGone(t, pid, 5*time.Second)
	if _, err := os.Stat(socketDir); !os.IsNotExist(err) {
		t.Errorf("socket dir %s left behind: %v", socketDir, err)
	}
}

// BenchmarkPythonStepRoundTrip measures the protocol cost of a SAM step
// (Step → Exec [Grad, Norm] → Exec [Copy, Axpy, Grad, Copy, BaseStep]: 1
// host→plugin and 2 plugin→host calls) through the Python plugin
// (examples/python-sam) and through the Go plugin binary, against a fake
// host of 10 parameters whose arithmetic is negligible: the difference is
// what Python adds to every step, to read next to a model's step time.
func BenchmarkPythonStepRoundTrip(b *testing.B) {
	if err := exec.Command("/usr/bin/python3", "-c", "import grpc, google.protobuf").Run(); err != nil {
		b.Skipf("/usr/bin/python3 cannot import grpc and protobuf: %v", err)
	}
	goSAM := filepath.Join(b.TempDir(), "sam")
	if out, err := exec.Command("go", "build", "-o", goSAM, "github.com/optlab/optlab/plugins/sam/cmd/sam").CombinedOutput(); err != nil {
		b.Fatalf("go build: %v\n%s", err, out)
	}
	for _, p := range []struct{ name, path string }{{"go", goSAM}, {"python", pySAM}} {
		b.Run(p.name+"/sam", func(b *testing.B) {
			c, err := Launch(context.Background(), LaunchSpec{Path: p.path, Logger: quietLogger(b)})
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			benchClient(b, c, 10)
		})
	}
}

// failingHost is a fake host whose Execs fail, once fail is set, with
// the error of op 0 that err returns.
type failingHost struct {
	*protocoltest.FakeHost
	fail bool
	err  error
}

func (h *failingHost) Exec(ctx context.Context, p *optim.Program) (optim.Result, error) {
	if h.fail {
		return optim.Result{}, h.err
	}
	return h.FakeHost.Exec(ctx, p)
}

// A host error as long as libtorch's (reason, C++ frames, a Go stack:
// ~6 KB) reaches a Python plugin's Step as the failing op and its reason,
// bounded, not as gRPC's "Received RST_STREAM with error code 2", which
// Python's gRPC gave for status text over its 8 KiB metadata limit
// (hardening4/18).
//
// The script 18-python-plugin-gets-rst-stream-not-the-error.sh wants the
// run's record to say libtorch's "out of bounds" (the cross-entropy of
// logits too narrow for the labels), and finds instead that the run fails
// naming the logits' shape. Its expectation is wrong, not the host: its
// module narrows its logits only for batches over 2, past the old
// eval-mode probe of 2 samples, and since hardening4/10 the host probes
// the logits in train mode with 3 samples too and checks their shape on
// every forward (host/model's narrow module), so the run fails with the
// shape, before any op reaches libtorch's cross-entropy. What the script
// meant to check, a libtorch error inside a Python plugin's Exec, is
// this test with the host's side (the reason without C++ frames or Go
// stack) in host/tensor's TestTorchErrorsCleaned.
func TestPythonLongHostError(t *testing.T) {
	testutil.NeedPython(t)
	ctx := context.Background()
	const reason = "Target 7 is out of bounds."
	long := reason + "\nException raised from nll_loss_out_frame at ../aten/src/ATen/native/LossNLL.cpp:244:\n" +
		strings.Repeat("frame #0: c10::Error::Error(c10::SourceLocation, std::string) + 0x6c (0x7f00 in /usr/lib/libc10.so)\n", 60)
	h := &failingHost{FakeHost: protocoltest.NewFakeHost(8), err: &optim.OpError{Index: 0, Op: "Grad", Err: errors.New(long)}}
	c := launchPython(t, pySAM, nil)
	if err := c.Configure(ctx, h, optim.Config{Members: 1}); err != nil {
		t.Fatal(err)
	}
	h.fail = true
	_, err := c.Step(ctx, optim.StepInput{LR: 0.1})
	if err == nil {
		t.Fatal("Step succeeded")
	}
	msg := err.Error()
	if strings.Contains(msg, "RST_STREAM") || !strings.Contains(msg, "op 0 (Grad)") || !strings.Contains(msg, reason) {
		t.Errorf("Step: %.300s…; want the failing op and its reason", msg)
	}
	if len(msg) > 4<<10 {
		t.Errorf("Step's error holds %d bytes, want the host's message bounded", len(msg))
	}
	if c.Exited() {
		t.Error("the plugin exited after a failed step")
	}
}
