package plugin

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"google.golang.org/grpc/codes"

	"github.com/optlab/optlab/sdk/optim"
	"github.com/optlab/optlab/sdk/protocol"
	"github.com/optlab/optlab/sdk/protocoltest"
	"github.com/optlab/optlab/sdk/serve"
)

// quietLogger keeps go-plugin's log lines in the test log.
func quietLogger(t testing.TB) hclog.Logger {
	return hclog.New(&hclog.LoggerOptions{Name: "optlab", Level: hclog.Warn, Output: testWriter{t}})
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// launch starts the named test plugin and closes it at the end of the test.
func launch(t *testing.T, name string, timeouts Timeouts) *Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, err := Launch(ctx, LaunchSpec{Name: name, Dir: binDir, Timeouts: timeouts, Logger: quietLogger(t), Output: testWriter{t}})
	if err != nil {
		t.Fatalf("Launch(%s): %v", name, err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func configure(t *testing.T, c *Client, h optim.Host, params map[string]any) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cfg := optim.Config{Params: params, Seed: 1, TotalSteps: 10, StepsPerEpoch: 5, Members: 1}
	if err := c.Configure(ctx, h, cfg); err != nil {
		t.Fatalf("Configure: %v", err)
	}
}

func TestRoundTrip(t *testing.T) {
	c := launch(t, "toy", Timeouts{})
	ctx := context.Background()

	info, err := c.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.Name != "toy" || info.Version != "0.1.0" || info.ProtocolMinor != optim.ProtocolMinor {
		t.Fatalf("Info = %+v", info)
	}
	defaults := map[string]any{}
	for _, p := range info.Params {
		defaults[p.Name] = p.Default
	}
	wantDefaults := map[string]any{"scale": 1.0, "mode": "normal", "big_terms": int64(0), "verbose": false}
	if !reflect.DeepEqual(defaults, wantDefaults) {
		t.Fatalf("defaults = %#v, want %#v", defaults, wantDefaults)
	}

	opt := c.AsOptimizer()
	if f := opt.Info().Features; !f.Predictive || !f.State || !f.Finalize || !f.Members {
		t.Errorf("AsOptimizer of toy declares %+v, want members, predictive, state and finalize", f)
	}
	if !reflect.DeepEqual(opt.Info(), info) {
		t.Errorf("AsOptimizer().Info() = %+v, want %+v", opt.Info(), info)
	}

	host := protocoltest.NewFakeHost(1000)
	if err := opt.Configure(ctx, host, optim.Config{Params: map[string]any{"scale": 2.0}, Members: 1}); err != nil {
		t.Fatalf("Configure: %v", err)
	}
	// The fake host minimizes ½‖θ‖² from θ = 1 (1,000 parameters): the
	// toy's normalized step θ ← θ − 0.1·scale·g/‖g‖ (scale 2) shrinks ‖θ‖ by 0.2 a step.
	const steps = 3
	want := [][]optim.Op{{optim.Alloc{ID: protocoltest.GradVec}}}
	regs := optim.Prog() // registers to compare with (their program does not matter to DeepEqual)
	for i := range steps {
		out, err := opt.Step(ctx, optim.StepInput{Step: int64(i), LR: 0.1})
		if err != nil {
			t.Fatalf("Step %d: %v", i, err)
		}
		norm := math.Sqrt(1000) - 0.2*float64(i)
		if got := out.Metrics; math.Abs(got["gnorm"]-norm) > 1e-9 || math.Abs(got["loss"]-norm*norm/2) > 1e-9 {
			t.Fatalf("Step %d metrics = %v, want gnorm %v", i, got, norm)
		}
		want = append(want,
			[]optim.Op{optim.Grad{Out: protocoltest.GradVec, At: optim.Params}, optim.Norm{X: protocoltest.GradVec},
				optim.Read{X: regs.Reg(1)}, optim.Read{X: regs.Reg(2)}, optim.Read{X: regs.Reg(3)}},
			[]optim.Op{optim.Axpy{Dst: optim.Params, Alpha: optim.K(-0.1 * 2 / (out.Metrics["gnorm"] + 1e-12)), X: protocoltest.GradVec}})
	}
	var got [][]optim.Op
	for _, p := range host.Programs() {
		got = append(got, p.Ops)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("host saw programs\n%#v\nwant\n%#v", got, want)
	}
	// Deadlines propagate: every Exec during Step saw the Step deadline.
	for i, left := range host.Deadlines()[1:] {
		if left <= 0 || left > DefaultTimeouts().Step {
			t.Errorf("Exec %d during Step had %v left, want a deadline ≤ %v", i+1, left, DefaultTimeouts().Step)
		}
	}

	pred, err := opt.Predictive(ctx)
	wantPred := optim.Predictive{Kind: optim.Members, Vecs: []optim.Vec{optim.Params, protocoltest.GradVec}, Weights: []float64{0.5, 0.5}}
	if err != nil || !reflect.DeepEqual(pred, wantPred) {
		t.Fatalf("Predictive = %+v, %v; want %+v", pred, err, wantPred)
	}
	st := opt
	blob, vecs, err := st.SaveState(ctx)
	if err != nil || string(blob) != `{"steps":3}` || !reflect.DeepEqual(vecs, []optim.Vec{protocoltest.GradVec}) {
		t.Fatalf("SaveState = %q %v %v", blob, vecs, err)
	}
	if err := st.LoadState(ctx, []byte("restored")); err != nil {
		t.Fatal(err)
	}
	if blob, _, _ = st.SaveState(ctx); string(blob) != "restored" {
		t.Fatalf("SaveState after LoadState = %q", blob)
	}

	s := c.Stats()
	// Info ×2 (Launch, test), Configure, 3 Steps, Predictive, SaveState ×2, LoadState.
	if s.Calls != 10 || s.HostCalls != 2+2*steps || s.Bytes <= 0 {
		t.Fatalf("Stats = %+v", s)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Step(ctx, optim.StepInput{}); err == nil || !strings.Contains(err.Error(), "closed") {
		t.Fatalf("Step after Close: %v", err)
	}
	waitGone(t, c.Pid(), 5*time.Second)
}

func TestUndeclaredFeatures(t *testing.T) {
	c := launch(t, "plain", Timeouts{})
	if f := c.AsOptimizer().Info().Features; f != (optim.Features{}) {
		t.Errorf("plain plugin adapter declares %+v, want nothing", f)
	}
	ctx := context.Background()
	configure(t, c, protocoltest.NewFakeHost(10), nil)
	_, err := c.Predictive(ctx)
	if !errors.Is(err, errors.ErrUnsupported) {
		t.Errorf("Predictive of plain: %v, want ErrUnsupported", err)
	}
	if _, _, err := c.SaveState(ctx); !errors.Is(err, errors.ErrUnsupported) {
		t.Errorf("SaveState of plain: %v, want ErrUnsupported", err)
	}
	if err := c.LoadState(ctx, nil); !errors.Is(err, errors.ErrUnsupported) {
		t.Errorf("LoadState of plain: %v, want ErrUnsupported", err)
	}
	// The process is still fine.
	if _, err := c.Step(ctx, optim.StepInput{LR: 0.1}); err != nil {
		t.Fatal(err)
	}
}

// Finalize reaches a plugin whose optimizer is an optim.Finalizer, whose
// program reaches the host; for a plugin without one (plain) the adapter's
// Finalize does nothing and sends nothing.
func TestFinalize(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		name    string
		updates int
	}{{"toy", 1}, {"plain", 0}} {
		t.Run(c.name, func(t *testing.T) {
			cl := launch(t, c.name, Timeouts{})
			host := protocoltest.NewFakeHost(10)
			configure(t, cl, host, nil)
			f := cl.AsOptimizer()
			before := len(host.Programs())
			if err := f.Finalize(ctx); err != nil {
				t.Fatal(err)
			}
			if n := host.Stats(0).BNRecomputed; n != c.updates {
				t.Errorf("%d UpdateBN passes, want %d", n, c.updates)
			}
			if n := len(host.Programs()) - before; n != c.updates {
				t.Errorf("%d programs sent, want %d", n, c.updates)
			}
		})
	}
}

// The values a plugin's optimizer resolved in Configure come back with its
// reply: AsOptimizer is an optim.Resolver that answers them, none for an
// optimizer without Resolved (plain), and none again after a Configure
// that resolved nothing.
func TestResolved(t *testing.T) {
	auto := map[string]any{"scale": -1.0}
	for _, tc := range []struct {
		plugin string
		want   map[string]any
	}{
		{"toy", map[string]any{"scale": 1.0}},
		{"plain", nil},
	} {
		c := launch(t, tc.plugin, Timeouts{})
		r := c.AsOptimizer()
		if got := r.Resolved(); got != nil {
			t.Errorf("%s: Resolved before Configure = %v, want nil", tc.plugin, got)
		}
		configure(t, c, protocoltest.NewFakeHost(10), auto)
		if got := r.Resolved(); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: Resolved = %#v, want %#v", tc.plugin, got, tc.want)
		}
	}
	c := launch(t, "toy", Timeouts{})
	configure(t, c, protocoltest.NewFakeHost(10), auto)
	configure(t, c, protocoltest.NewFakeHost(10), map[string]any{"scale": 2.0})
	if got := c.Resolved(); got != nil {
		t.Errorf("Resolved after a Configure that resolved nothing = %v, want nil", got)
	}
}

func TestLargeMessages(t *testing.T) {
	c := launch(t, "toy", Timeouts{})
	host := protocoltest.NewFakeHost(10)
	const terms = 400_000
	configure(t, c, host, map[string]any{"big_terms": terms})
	ctx := context.Background()
	// plugin → host: a LinComb of 400k terms, over 4 MiB.
	if _, err := c.Step(ctx, optim.StepInput{LR: 0.1}); err != nil {
		t.Fatalf("Step with a big program: %v", err)
	}
	progs := host.Programs()
	last := progs[len(progs)-1]
	n, err := protocol.ProgramSize(last)
	if err != nil {
		t.Fatal(err)
	}
	if n <= 4<<20 {
		t.Fatalf("program is only %d bytes; the test needs > 4 MiB", n)
	}
	if lc, ok := last.Ops[1].(optim.LinComb); !ok || len(lc.Terms) != terms {
		t.Fatalf("host got %T with the wrong terms", last.Ops[1])
	}
	// host → plugin and back: an 8 MiB state blob.
	blob := bytes.Repeat([]byte("0123456789abcdef"), 8<<20/16)
	if err := c.LoadState(ctx, blob); err != nil {
		t.Fatalf("LoadState(8 MiB): %v", err)
	}
	got, _, err := c.SaveState(ctx)
	if err != nil || !bytes.Equal(got, blob) {
		t.Fatalf("SaveState: %d bytes, %v", len(got), err)
	}
}

func TestPanicInStep(t *testing.T) {
	c := launch(t, "toy", Timeouts{Step: 20 * time.Second})
	configure(t, c, protocoltest.NewFakeHost(10), map[string]any{"mode": protocoltest.ModePanic})
	_, err := c.Step(context.Background(), optim.StepInput{Step: 7})
	if err == nil {
		t.Fatal("Step succeeded, want the panic")
	}
	msg := err.Error()
	t.Logf("error:\n%s", msg)
	for _, want := range []string{
		"plugin toy: Step: panic in Step: toy optimizer exploded at step 7",
		"last stderr lines:",
		"recovered panic in optimizer", // the plugin's log line
		"protocoltest.(*Toy).Step",     // a frame of the stack from stderr
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("error lacks %q:\n%s", want, msg)
		}
	}
	if protocol.Code(err) != codes.Internal || errors.Is(err, ErrCrashed) {
		t.Errorf("code = %v, crashed = %v; want Internal, not crashed", protocol.Code(err), errors.Is(err, ErrCrashed))
	}
	// A recovered panic leaves the plugin serving.
	if _, err := c.Info(context.Background()); err != nil {
		t.Fatalf("Info after a recovered panic: %v", err)
	}
}

func TestCrashInStep(t *testing.T) {
	c := launch(t, "toy", Timeouts{Step: 20 * time.Second})
	configure(t, c, protocoltest.NewFakeHost(10), map[string]any{"mode": protocoltest.ModeCrash})
	start := time.Now()
	_, err := c.Step(context.Background(), optim.StepInput{})
	if !errors.Is(err, ErrCrashed) {
		t.Fatalf("Step: %v, want ErrCrashed", err)
	}
	if time.Since(start) > 10*time.Second {
		t.Errorf("crash took %v to report", time.Since(start))
	}
	msg := err.Error()
	t.Logf("error:\n%s", msg)
	for _, want := range []string{
		"plugin toy crashed (exit status 2) during Step; last stderr lines:",
		"panic: toy optimizer crashed the whole process",
		"goroutine ",
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("error lacks %q:\n%s", want, msg)
		}
	}
	// Later calls say the same at once.
	_, err = c.Info(context.Background())
	if !errors.Is(err, ErrCrashed) || !strings.Contains(err.Error(), "during Info") {
		t.Fatalf("Info after crash: %v", err)
	}
}

func TestHangingStep(t *testing.T) {
	c := launch(t, "toy", Timeouts{Step: time.Second})
	configure(t, c, protocoltest.NewFakeHost(10), map[string]any{"mode": protocoltest.ModeHang})
	start := time.Now()
	_, err := c.Step(context.Background(), optim.StepInput{})
	if !errors.Is(err, ErrTimeout) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Step: %v, want ErrTimeout", err)
	}
	t.Logf("error: %v", err)
	if want := "plugin toy did not answer Step within 1s"; !strings.Contains(err.Error(), want) {
		t.Fatalf("error %q lacks %q", err, want)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("timeout took %v", d)
	}
	// Close stops a hung plugin too.
	start = time.Now()
	_ = c.Close()
	waitGone(t, c.Pid(), 5*time.Second)
	t.Logf("closing the hung plugin took %v", time.Since(start))
}

func TestCallerContext(t *testing.T) {
	c := launch(t, "toy", Timeouts{})
	configure(t, c, protocoltest.NewFakeHost(10), map[string]any{"mode": protocoltest.ModeHang})
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	_, err := c.Step(ctx, optim.StepInput{})
	if !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, ErrTimeout) {
		t.Fatalf("Step with a short caller deadline: %v", err)
	}
}

func TestOpErrorsReachTheHost(t *testing.T) {
	c := launch(t, "toy", Timeouts{})
	configure(t, c, protocoltest.NewFakeHost(10), map[string]any{"mode": protocoltest.ModeBadOp})
	_, err := c.Step(context.Background(), optim.StepInput{})
	var oe *optim.OpError
	if !errors.As(err, &oe) || oe.Index != 1 || protocol.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "op 1 (nil): nil op") {
		t.Fatalf("Step: %v (%#v), want InvalidArgument at op 1", err, oe)
	}
}

func TestPluginExitsWhenHostDies(t *testing.T) {
	helper, line := startHelperHost(t, filepath.Join(binDir, "toy"))
	pid, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil || !alive(pid) {
		t.Fatalf("helper host printed %q; plugin alive = %v", line, alive(pid))
	}
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })
	socketDir := envOf(t, pid, "PLUGIN_UNIX_SOCKET_DIR")
	if fi, err := os.Stat(socketDir); err != nil || !fi.IsDir() {
		t.Fatalf("plugin socket dir %q: %v", socketDir, err)
	}
	if err := helper.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = helper.Wait()
	start := time.Now()
	waitGone(t, pid, 5*time.Second)
	t.Logf("plugin %d exited %v after its host was killed", pid, time.Since(start))
	if _, err := os.Stat(socketDir); !os.IsNotExist(err) {
		t.Errorf("socket dir %s left behind: %v", socketDir, err)
	}
}

// startHelperHost starts this test binary as a host (helperHost) that
// launches the plugin at path, and returns it with the line it printed (the
// plugin's PID) once the plugin runs. The helper is killed at cleanup.
func startHelperHost(t *testing.T, path string) (*exec.Cmd, string) {
	t.Helper()
	helper := exec.Command(os.Args[0], "-test.run=^$")
	helper.Env = append(os.Environ(), helperEnv+"="+path)
	helper.Stderr = testWriter{t}
	out, err := helper.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := helper.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = helper.Process.Kill(); _ = helper.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("helper host printed no PID: %v", err)
	}
	return helper, line
}

// envOf returns an environment variable of process pid (Linux).
func envOf(t *testing.T, pid int, name string) string {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/environ")
	if err != nil {
		t.Skipf("cannot read the plugin's environment: %v", err)
	}
	for _, kv := range strings.Split(string(b), "\x00") {
		if v, ok := strings.CutPrefix(kv, name+"="); ok {
			return v
		}
	}
	t.Fatalf("plugin has no %s", name)
	return ""
}

func TestUnknownPlugin(t *testing.T) {
	empty := t.TempDir()
	tests := []struct {
		name string
		spec LaunchSpec
		is   error
		want []string
	}{
		{"unknown name", LaunchSpec{Name: "sam", Dir: binDir}, ErrUnknownPlugin,
			[]string{`unknown plugin "sam"`, "installed plugins in " + binDir + ": future, notplugin, plain, toy"}},
		{"empty dir", LaunchSpec{Name: "sam", Dir: empty}, ErrUnknownPlugin, []string{"installed plugins in " + empty + ": none"}},
		{"missing dir", LaunchSpec{Name: "sam", Dir: filepath.Join(empty, "nope")}, ErrUnknownPlugin, []string{"cannot read"}},
		{"not executable", LaunchSpec{Name: "README", Dir: binDir}, ErrUnknownPlugin, []string{"not an executable file"}},
		{"path in name", LaunchSpec{Name: "../toy", Dir: binDir}, nil, []string{"invalid plugin name"}},
		{"nothing", LaunchSpec{}, nil, []string{"names no plugin"}},
		{"bad path", LaunchSpec{Path: filepath.Join(empty, "sam")}, nil, []string{"does not exist"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Launch(context.Background(), tt.spec)
			if err == nil {
				t.Fatal("Launch succeeded")
			}
			t.Logf("error: %v", err)
			if tt.is != nil && !errors.Is(err, tt.is) {
				t.Errorf("error %v is not %v", err, tt.is)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
}

func TestNotAPlugin(t *testing.T) {
	_, err := Launch(context.Background(), LaunchSpec{Name: "notplugin", Dir: binDir, Logger: quietLogger(t)})
	if err == nil {
		t.Fatal("Launch of a non-plugin succeeded")
	}
	for _, want := range []string{"launch plugin notplugin", "not a plugin handshake", "notplugin: something went wrong"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
}

func TestNewerMinorRejected(t *testing.T) {
	_, err := Launch(context.Background(), LaunchSpec{Name: "future", Dir: binDir, Logger: quietLogger(t)})
	if !errors.Is(err, ErrIncompatible) || !strings.Contains(err.Error(), fmt.Sprintf("speaks protocol 1.%d, newer than this host's 1.%d: rebuild the host", optim.ProtocolMinor+1, optim.ProtocolMinor)) {
		t.Fatalf("Launch(future): %v, want ErrIncompatible", err)
	}
}

func TestList(t *testing.T) {
	got, err := List(context.Background(), binDir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, in := range got {
		names = append(names, in.Name)
		switch in.Name {
		case "toy", "plain":
			if in.Err != nil || in.Info.Name != in.Name || in.Info.Version != "0.1.0" {
				t.Errorf("%s: %+v", in.Name, in)
			}
		default:
			if in.Err == nil {
				t.Errorf("%s: no error", in.Name)
			}
		}
	}
	if want := []string{"future", "notplugin", "plain", "toy"}; !reflect.DeepEqual(names, want) {
		t.Fatalf("List names = %v, want %v", names, want)
	}
}

type panickyHost struct{ protocoltest.FakeHost }

func (h *panickyHost) Exec(context.Context, *optim.Program) (optim.Result, error) {
	panic("host bug")
}

func TestHostPanicIsAnError(t *testing.T) {
	c := launch(t, "toy", Timeouts{})
	h := &panickyHost{FakeHost: *protocoltest.NewFakeHost(10)}
	err := c.Configure(context.Background(), h, optim.Config{})
	if err == nil || !strings.Contains(err.Error(), "host panic in Exec: host bug") {
		t.Fatalf("Configure with a panicking host: %v", err)
	}
}

func TestInProcessReattach(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	rc, stopped, err := serve.ServeInProcess(ctx, protocoltest.New)
	if err != nil {
		t.Fatal(err)
	}
	c, err := Launch(ctx, LaunchSpec{Reattach: rc, Name: "toy-inprocess", Logger: quietLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	host := protocoltest.NewFakeHost(10)
	configure(t, c, host, nil)
	if _, err := c.Step(ctx, optim.StepInput{LR: 0.1}); err != nil {
		t.Fatal(err)
	}
	if n := len(host.Programs()); n != 3 {
		t.Fatalf("host saw %d programs, want 3", n)
	}
	_ = c.Close()
	cancel()
	select {
	case <-stopped:
	case <-time.After(5 * time.Second):
		t.Fatal("in-process plugin did not stop")
	}
}

func TestCleanupAll(t *testing.T) {
	c := launch(t, "toy", Timeouts{})
	CleanupAll()
	waitGone(t, c.Pid(), 5*time.Second)
	if !c.Exited() {
		t.Fatal("Exited() = false after CleanupAll")
	}
}

func TestRingTail(t *testing.T) {
	r := newRing(3)
	w1, w2 := r.writer(), r.writer()
	_, _ = w1.Write([]byte("one\ntw"))
	_, _ = w2.Write([]byte("x\n"))
	_, _ = w1.Write([]byte("o\nthree\n"))
	_, _ = w2.Write([]byte(`{"@level":"error","@message":"boom","@timestamp":"t","stack":"a\nb"}` + "\n"))
	if got, want := r.snapshot(), []string{"two", "three", `{"@level":"error","@message":"boom","@timestamp":"t","stack":"a\nb"}`}; !reflect.DeepEqual(got, want) {
		t.Fatalf("snapshot = %q, want %q", got, want)
	}
	want := "  two\n  three\n  [ERROR] boom\n  stack:\n    a\n    b"
	if got := r.tail(); got != want {
		t.Fatalf("tail =\n%s\nwant\n%s", got, want)
	}
	if !r.waitFor("three", 0) || r.waitFor("nope", 10*time.Millisecond) {
		t.Fatal("waitFor")
	}
}

// alive reports whether pid is a live (not zombie) process.
func alive(pid int) bool {
	if err := syscall.Kill(pid, 0); err != nil {
		return false
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return !os.IsNotExist(err)
	}
	// The state follows the parenthesised command name.
	s := string(b)
	if i := strings.LastIndexByte(s, ')'); i >= 0 && i+2 < len(s) {
		return s[i+2] != 'Z'
	}
	return true
}

func waitGone(t *testing.T, pid int, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	for alive(pid) {
		if time.Now().After(deadline) {
			t.Fatalf("process %d still alive after %v", pid, d)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
