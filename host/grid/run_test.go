package grid

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/optlab/optlab/host/results"
	"github.com/optlab/optlab/plugins/builtin"
	"github.com/optlab/optlab/sdk/optim"
)

// flaky is SGD whose Step fails at step 1 of every run.
type flaky struct{ optim.Optimizer }

func (f flaky) Step(ctx context.Context, in optim.StepInput) (optim.StepOutput, error) {
	if in.Step == 1 {
		return optim.StepOutput{}, errors.New("flaky: simulated failure at step 1")
	}
	return f.Optimizer.Step(ctx, in)
}

// inProcess are the built-in methods and flaky, served in this process.
func inProcess(t *testing.T) *optim.Registry {
	t.Helper()
	reg := builtin.Registry()
	sgd, ok := reg.Lookup("sgd")
	if !ok {
		t.Fatal("no sgd in the built-in registry")
	}
	if err := reg.Add(optim.Entry{Name: "flaky", New: func() optim.Optimizer { return flaky{sgd.New()} }}); err != nil {
		t.Fatal(err)
	}
	return reg
}

// writeExperiment writes a one-epoch experiment on UCI digits whose
// methods are the given name = plugin pairs, with seeds 1 and 2.
func writeExperiment(t *testing.T, dir, name string, methods ...string) string {
	t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, `name = %q
results_dir = %q
[model]
archs = ["mlp"]
[train]
epochs = 1
batch_size = 64
seeds = [1, 2]
threads = 1
device = "cpu"
[eval]
aac_steps = 10
`, name, filepath.Join(dir, "results"))
	for i := 0; i < len(methods); i += 2 {
		fmt.Fprintf(&b, "[[method]]\nname = %q\nplugin = %q\n", methods[i], methods[i+1])
	}
	path := filepath.Join(dir, name+".toml")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// plan loads and prepares an experiment with the in-process methods.
func plan(t *testing.T, path string) *Plan {
	t.Helper()
	exp, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	p, err := Prepare(context.Background(), exp, Plugins{Output: io.Discard, InProcess: inProcess(t)})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// When a run fails with a CUDA error that leaves the GPU unusable for the
// process (faked here: a CPU has no CUDA context to lose), the grid stops
// with one message instead of failing every later run; the failed run is
// recorded, the later ones are not started, and the next call goes on
// from there (the fault is still there: flaky fails again, but without a
// lost device the grid goes on).
func TestLostDeviceStopsGrid(t *testing.T) {
	dir := t.TempDir()
	path := writeExperiment(t, dir, "lost", "Flaky", "flaky", "SGD", "sgd")
	var log strings.Builder
	o := RunOptions{Log: &log, DeviceLost: func() error {
		return errors.New("add: CUDA error: an illegal memory access was encountered\nCUDA kernel errors might be asynchronously reported")
	}}
	_, err := Run(context.Background(), plan(t, path), o)
	for _, want := range []string{"run method=Flaky/arch=mlp/seed=1 failed with a CUDA error that leaves the GPU unusable for this process",
		"an illegal memory access was encountered)", "the 3 later runs of the grid were not started", "run the same command again (a new process)"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v, want it to say %q", err, want)
		}
	}
	l := results.NewLayout(filepath.Join(dir, "results"), "lost")
	recs, err := results.Read(l.Runs())
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 1 || recs[0].Status != results.StatusFailed || recs[0].Key != "method=Flaky/arch=mlp/seed=1" {
		t.Fatalf("records %+v, want the failed run only", recs)
	}
	o.DeviceLost = func() error { return nil }
	res, err := Run(context.Background(), plan(t, path), o)
	if err != nil {
		t.Fatal(err)
	}
	// Flaky fails on both seeds; its first failure stays on record.
	if res.Runs != 4 || res.Failed != 2 || len(res.Records) != 5 {
		t.Errorf("second call: %d runs, %d failed, %d records; want 4, 2 and 5", res.Runs, res.Failed, len(res.Records))
	}
	if !strings.Contains(log.String(), "flaky: simulated failure at step 1") {
		t.Errorf("log does not name the failure:\n%s", log.String())
	}
}

// A grid larger than RunOptions.WarnRuns is announced with a warning, and
// the time its remaining runs take is estimated after the first (hardening
// 26, also seen: a 10⁶-run grid was accepted silently).
func TestLargeGridWarns(t *testing.T) {
	dir := t.TempDir()
	path := writeExperiment(t, dir, "large", "SGD", "sgd", "SGD2", "sgd")
	var log strings.Builder
	if _, err := Run(context.Background(), plan(t, path), RunOptions{Log: &log, WarnRuns: 3}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"host: warning: the grid has 4 runs; check its sweep", "host: the first run took ", "; at that pace the 3 runs left take about "} {
		if !strings.Contains(log.String(), want) {
			t.Errorf("log lacks %q:\n%s", want, log.String())
		}
	}
	if strings.Count(log.String(), "at that pace") != 1 {
		t.Errorf("the estimate is given more than once:\n%s", log.String())
	}
	log.Reset()
	path = writeExperiment(t, dir, "small", "SGD", "sgd")
	if _, err := Run(context.Background(), plan(t, path), RunOptions{Log: &log, WarnRuns: 3}); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(log.String(), "warning") || strings.Contains(log.String(), "at that pace") {
		t.Errorf("a small grid warns:\n%s", log.String())
	}
}
