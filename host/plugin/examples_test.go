package plugin

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/optlab/optlab/internal/testutil"
	"github.com/optlab/optlab/plugins/sam"
	"github.com/optlab/optlab/plugins/sam/variants"

	"github.com/optlab/optlab/sdk/optim"
	"github.com/optlab/optlab/sdk/optimtest"
	"github.com/optlab/optlab/sdk/protocoltest"
)

// TestThirdPartyPlugin builds examples/lookahead, a plugin in a module of
// its own that requires only the SDK, and drives it through the host's
// plugin client: the SDK is all an outside author needs.
func TestThirdPartyPlugin(t *testing.T) {
	bin, dir := buildExample(t, "lookahead")
	// The example's module requires the SDK and nothing of the host.
	list := exec.Command("go", "list", "-deps", ".")
	list.Dir = dir
	out, err := list.Output()
	if err != nil {
		t.Fatal(err)
	}
	for _, dep := range strings.Fields(string(out)) {
		if strings.HasPrefix(dep, "github.com/optlab/optlab/") && !strings.HasPrefix(dep, "github.com/optlab/optlab/sdk") ||
			strings.Contains(dep, "gotch") || strings.Contains(dep, "gonum") || strings.Contains(dep, "tablewriter") {
			t.Errorf("the example depends on %s", dep)
		}
	}

	ctx := context.Background()
	c, err := Launch(ctx, LaunchSpec{Path: bin, Logger: quietLogger(t), Output: testWriter{t}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	info, err := c.Info(ctx)
	if err != nil || info.Name != "lookahead" || !info.Features.Members {
		t.Fatalf("Info = %+v, %v", info, err)
	}
	host := protocoltest.NewFakeHost(4)
	if err := c.Configure(ctx, host, optim.Config{Params: map[string]any{"k": int64(2), "alpha": 0.5}, Members: 1}); err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		if _, err := c.Step(ctx, optim.StepInput{Step: int64(i), LR: 0.1}); err != nil {
			t.Fatalf("Step %d: %v", i, err)
		}
	}
	// Every Exec ran on the host; the second step synced the slow weights.
	progs := host.Programs()
	if len(progs) != 3 || len(progs[2].Ops) != 8 { // Grad, BaseStep, LinComb, Copy; the mean and its two Reports
		t.Fatalf("host saw %d programs (last %v)", len(progs), progs[len(progs)-1].Ops)
	}
}

// buildExample builds the plugin in examples/<name> (a module of its own)
// and returns the binary and the example's folder.
func buildExample(t *testing.T, name string) (bin, dir string) {
	t.Helper()
	if testing.Short() {
		t.Skip("builds a module")
	}
	bin = filepath.Join(t.TempDir(), name)
	build := exec.Command("go", "build", "-o", bin, ".")
	build.Dir = filepath.Join("..", "..", "examples", name)
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build in %s: %v\n%s", build.Dir, err, out)
	}
	return bin, build.Dir
}

// TestGSAMAtZeroIsSAM runs the GSAM example plugin (examples/gsam) with
// α = 0 over the wire and the built-in SAM in process, each against its own
// exact host: GSAM's update d = gp − α·g⊥ is then SAM's gradient, so the
// trajectories must be equal bitwise. With α > 0 they must differ from
// SAM's and equal the built-in gsam's bitwise.
func TestGSAMAtZeroIsSAM(t *testing.T) {
	bin, _ := buildExample(t, "gsam")
	ctx := context.Background()
	newHost := func() *optimtest.Host {
		return optimtest.MustHost(t, optimtest.NewMLP(optimtest.MLPConfig{Hidden: 6, Samples: 64}),
			optimtest.WithMembers(2), optimtest.WithBatchSize(16), optimtest.WithBase(optimtest.BaseOptimizer{Momentum: 0.9}))
	}
	const steps = 8
	run := func(alpha float64) *optimtest.Host {
		c, err := Launch(ctx, LaunchSpec{Path: bin, Logger: quietLogger(t), Output: testWriter{t}})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		h := newHost()
		if err := c.Configure(ctx, h, optim.Config{Params: map[string]any{"rho": 0.05, "alpha": alpha}, Members: 2, Seed: 1}); err != nil {
			t.Fatal(err)
		}
		for s := range int64(steps) {
			in := optim.StepInput{Step: s, LR: 0.1}
			h.BeginStep(in)
			if _, err := c.Step(ctx, in); err != nil {
				t.Fatalf("GSAM step %d: %v", s, err)
			}
			if n, r := h.ExecCount(s), h.ReadCount(s); n != 1 || r != 0 {
				t.Errorf("GSAM step %d: %d Execs and %d reads, want 1 and 0", s, n, r)
			}
		}
		return h
	}
	ref := newHost()
	optimtest.MustRun(t, sam.New(), ref, steps, optimtest.WithLR(0.1),
		optimtest.WithHParams(map[string]any{"rho": 0.05}))
	g0, g1 := run(0), run(0.5)
	// The built-in gsam (plugins/sam/variants) computes the same update.
	builtin := newHost()
	optimtest.MustRun(t, variants.NewGSAM(), builtin, steps, optimtest.WithLR(0.1),
		optimtest.WithHParams(map[string]any{"rho": 0.05, "alpha": 0.5}))
	for m := range 2 {
		if got, want := g0.Params(m), ref.Params(m); !slices.Equal(got, want) {
			t.Errorf("member %d: GSAM(α=0) %v, SAM %v", m, got, want)
		}
		if slices.Equal(g1.Params(m), ref.Params(m)) {
			t.Errorf("member %d: GSAM(α=0.5) equals SAM", m)
		}
		if got, want := g1.Params(m), builtin.Params(m); !slices.Equal(got, want) {
			t.Errorf("member %d: the example GSAM(α=0.5) %v, the built-in gsam %v", m, got, want)
		}
	}
}

// TestInProcessSpec serves a built-in optimizer inside the test process
// (host run --in-process) and checks that Close stops serving it.
func TestInProcessSpec(t *testing.T) {
	ctx := context.Background()
	c, err := Launch(ctx, LaunchSpec{Name: "toy", InProcess: protocoltest.New, Logger: quietLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	if c.Pid() != os.Getpid() {
		t.Errorf("in-process plugin pid %d, want this process's %d", c.Pid(), os.Getpid())
	}
	host := protocoltest.NewFakeHost(10)
	if err := c.Configure(ctx, host, optim.Config{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Step(ctx, optim.StepInput{LR: 0.1}); err != nil {
		t.Fatal(err)
	}
	if n := len(host.Programs()); n != 3 {
		t.Fatalf("host saw %d programs, want 3", n)
	}
	_ = c.Close()
	if _, err := c.Step(ctx, optim.StepInput{}); err == nil {
		t.Fatal("Step after Close succeeded")
	}
}

// TestTraceReachesTheHost runs a plugin process with OPTLAB_TRACE=1: its
// trace of every Exec reaches the host's output.
func TestTraceReachesTheHost(t *testing.T) {
	t.Setenv(optim.TraceEnv, "1")
	var out testutil.SyncBuffer
	ctx := context.Background()
	c, err := Launch(ctx, LaunchSpec{Name: "toy", Dir: binDir, Logger: quietLogger(t), Output: &out})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	if err := c.Configure(ctx, protocoltest.NewFakeHost(4), optim.Config{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Step(ctx, optim.StepInput{LR: 0.1}); err != nil {
		t.Fatal(err)
	}
	_ = c.Close()
	for _, want := range []string{"exec 1: 1 ops", "Alloc     toy/grad member=0", "exec 2: 5 ops", "Norm      toy/grad  → #3", "Read      #3"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("plugin output lacks %q:\n%s", want, out.String())
		}
	}
}
