package plugin

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/optlab/optlab/internal/testutil"

	"github.com/optlab/optlab/sdk/optim"
	"github.com/optlab/optlab/sdk/protocoltest"
)

// TestThirdPartyPlugin builds examples/lookahead, a plugin in a module of
// its own that requires only the SDK, and drives it through the host's
// plugin client: the SDK is all an outside author needs.
func TestThirdPartyPlugin(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a module")
	}
	bin := filepath.Join(t.TempDir(), "lookahead")
	build := exec.Command("go", "build", "-o", bin, ".")
	build.Dir = filepath.Join("..", "..", "examples", "lookahead")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build in %s: %v\n%s", build.Dir, err, out)
	}
	// The example's module requires the SDK and nothing of the host.
	list := exec.Command("go", "list", "-deps", ".")
	list.Dir = build.Dir
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
	if err != nil || info.Name != "lookahead" || !info.Has(optim.CapMembers) {
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
	if len(progs) != 3 || len(progs[2].Ops) != 4 {
		t.Fatalf("host saw %d programs (last %v)", len(progs), progs[len(progs)-1].Ops)
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
	for _, want := range []string{"exec 1: 1 ops", "Alloc     toy/grad member=0", "exec 2: 2 ops", "Norm      toy/grad  → #3"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("plugin output lacks %q:\n%s", want, out.String())
		}
	}
}
