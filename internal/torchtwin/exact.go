package torchtwin

import (
	"context"
	"testing"

	"github.com/optlab/optlab/sdk/optim"
	"github.com/optlab/optlab/sdk/optimtest"
)

// Follow is one teacher-forced comparison of an optimizer with its
// float64 reference script on optimtest's exact host (FollowsReference).
type Follow struct {
	Host     *optimtest.Host
	New      func() optim.Optimizer
	Steps    int
	Schedule func(step int64, epoch int) float64
	// Params are the run's hyperparameters; HParams the reference's (the
	// rule's defaults with Params applied over them).
	Params, HParams map[string]any
	Script          string
	Tol             float64 // largest relative difference at every step
}

// FollowsReference runs f.New() for f.Steps steps of member 0 on f.Host,
// feeds the reference script the gradients that run took (teacher forcing:
// the comparison is of the update rule, not of the gradients), and fails t
// at every step whose parameters differ from the script's by more than
// f.Tol relative. It logs the largest difference and how far θ moved.
func FollowsReference(t *testing.T, f Follow) {
	t.Helper()
	var lrs []float64
	sched := func(step int64, epoch int) float64 {
		lr := f.Schedule(step, epoch)
		lrs = append(lrs, lr)
		return lr
	}
	optimtest.MustRun(t, f.New(), f.Host, f.Steps, optimtest.WithSchedule(sched), optimtest.WithHParams(f.Params))
	recs := f.Host.Grads()
	if len(recs) != f.Steps || len(lrs) != f.Steps {
		t.Fatalf("%d gradients, %d rates for %d steps", len(recs), len(lrs), f.Steps)
	}
	l, err := f.Host.Layout(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	hp := map[string]any{}
	for k, v := range f.HParams {
		hp[k] = v
	}
	for k, v := range f.Params {
		hp[k] = v
	}
	in := Steps{Theta0: recs[0].At, LRs: lrs, HParams: hp}
	for _, ts := range l.Members[0].Tensors {
		in.Tensors = append(in.Tensors, Tensor{Name: ts.Name, Shape: ts.Shape})
	}
	for _, r := range recs {
		in.Grads = append(in.Grads, r.Grad)
	}
	want := Trajectory(t, f.Script, in)
	worst := 0.0
	for k := range f.Steps {
		got := f.Host.Params(0)
		if k+1 < f.Steps {
			got = recs[k+1].At
		}
		e := RelErr(got, want[k])
		worst = max(worst, e)
		if !(e <= f.Tol) {
			t.Errorf("after step %d: θ differs from PyTorch's by %.3g relative", k, e)
		}
	}
	t.Logf("largest relative difference from PyTorch over %d steps: %.2g (θ moved %.2g relative)",
		f.Steps, worst, RelErr(f.Host.Params(0), recs[0].At))
}
