package optimtest

import (
	"context"
	"slices"
	"testing"

	"github.com/optlab/optlab/sdk/optim"
)

// MustHost is NewHost for tests: it stops the test on error.
func MustHost(t testing.TB, p Problem, opts ...HostOption) *Host {
	t.Helper()
	h, err := NewHost(p, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// MustRun is Run for tests: it stops the test on error.
func MustRun(t testing.TB, opt optim.Optimizer, h optim.Host, steps int, opts ...RunOption) []optim.StepOutput {
	t.Helper()
	outs, err := Run(context.Background(), opt, h, steps, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return outs
}

// MustResume checks that a run interrupted after cut of its steps and
// resumed from the optimizer's saved state ends bitwise where the
// uninterrupted run ends, as the host resumes one: newHost makes a host
// of the problem (with the options given), newOpt a fresh optimizer. The
// first run takes steps steps; the second cut, then SaveState; a fresh
// optimizer on a fresh host holding the cut run's parameters is
// configured, receives the saved vectors (the host's part) and the blob
// (LoadState), and takes the remaining steps. It returns the saved state's
// vectors (a test may check what they hold) and stops the test on any
// error or difference; an unknown state version must be refused.
func MustResume(t testing.TB, newOpt func() optim.Optimizer, newHost func(...HostOption) *Host, steps, cut int, opts ...RunOption) []optim.Vec {
	t.Helper()
	ctx := context.Background()
	full := newHost()
	MustRun(t, newOpt(), full, steps, opts...)
	a, optA := newHost(), newOpt()
	MustRun(t, optA, a, cut, append(opts, WithTotalSteps(int64(steps)))...)
	blob, vecs, err := optA.SaveState(ctx)
	if err != nil {
		t.Fatal(err)
	}
	b, optB := newHost(WithParams(0, a.Params(0))), newOpt()
	run := NewHarness(optB, b, append(opts, WithStartStep(int64(cut)))...)
	if err := run.Configure(ctx, int64(steps)); err != nil {
		t.Fatal(err)
	}
	for _, v := range vecs {
		d, err := a.Vec(v)
		if err != nil {
			t.Fatal(err)
		}
		if err := b.SetVec(v, d); err != nil {
			t.Fatal(err)
		}
	}
	if err := optB.LoadState(ctx, blob); err != nil {
		t.Fatal(err)
	}
	if _, err := run.Run(ctx, steps-cut); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(b.Params(0), full.Params(0)) {
		t.Errorf("resumed after %d of %d steps, θ differs from the uninterrupted run", cut, steps)
	}
	if err := optB.LoadState(ctx, []byte(`{"version":999}`)); err == nil {
		t.Error("a state of an unknown version was accepted")
	}
	return vecs
}
