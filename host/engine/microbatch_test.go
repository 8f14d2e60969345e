package engine

import (
	"testing"

	"github.com/optlab/optlab/host/model"
	"github.com/optlab/optlab/host/tensor"
	"github.com/optlab/optlab/internal/testutil"
	"github.com/optlab/optlab/internal/torchtwin"
	"github.com/optlab/optlab/sdk/optim"
)

// microEngines makes two engines of the same model and seed on the same
// batch, the first with micro-batches.
func microEngines(t *testing.T, newModel func(int, []int64) (*model.Model, error), in []int64, k int) (*Engine, *Engine) {
	t.Helper()
	var es [2]*Engine
	for i, mb := range []int{k, 1} {
		m, err := newModel(10, in)
		if err != nil {
			t.Fatal(err)
		}
		es[i] = semEngine(t, Config{Seed: 3, MicroBatches: mb}, m)
		x, y := testutil.Features(32, int(numel(in)), 10, 17)
		shapedBatch(t, es[i], x, y, in)
		semExec(t, es[i], optim.Prog().Alloc(1, 0))
	}
	return es[0], es[1]
}

// Gradient accumulation (train.micro_batches, #42): without BatchNorm, the
// gradient, loss and accuracy of a pass in 4 micro-batches are the whole
// batch's to float32 precision; with an uneven split (32 samples in 5)
// too.
func TestMicroBatchesWithoutBatchNorm(t *testing.T) {
	for _, k := range []int{4, 5} {
		a, b := microEngines(t, model.NewMLP, []int64{16}, k)
		var regs [2][]float64
		for i, e := range []*Engine{a, b} {
			p := optim.Prog()
			ev := p.Grad(1, optim.Params, optim.Batch{}, optim.BNUpdate)
			regs[i] = semEval(semExec(t, e, p), ev)
		}
		ga, gb := semRead(t, a, 1), semRead(t, b, 1)
		if d := torchtwin.RelErr(ga, gb); !(d < 1e-6) {
			t.Errorf("%d micro-batches: gradient differs from the whole batch's by %.3g relative", k, d)
		}
		testutil.CheckVec(t, "loss, acc", regs[0], regs[1], 1e-6, 1e-6)
	}
}

// With BatchNorm, a pass in 4 micro-batches is 4 passes on the batch's
// quarters as PyTorch's gradient accumulation makes them: each quarter
// normalized by its own statistics, the running statistics updated once
// per quarter in turn, the gradient the quarters' mean, and the
// BatchNorm counter advanced 4 times.
func TestMicroBatchesBatchNorm(t *testing.T) {
	a, b := microEngines(t, model.NewCNN, []int64{1, 8, 8}, 4)
	p := optim.Prog()
	ev := p.Grad(1, optim.Params, optim.Batch{}, optim.BNUpdate)
	ra := semEval(semExec(t, a, p), ev)
	var g []float64
	var loss, acc float64
	for j := range int32(4) {
		p := optim.Prog()
		ev := p.Grad(1, optim.Params, optim.Batch{Part: j, Of: 4}, optim.BNUpdate)
		r := semEval(semExec(t, b, p), ev)
		loss, acc = loss+r[0]/4, acc+r[1]/4
		gj := semRead(t, b, 1)
		if g == nil {
			g = make([]float64, len(gj))
		}
		for i, v := range gj {
			g[i] += v / 4
		}
	}
	if d := torchtwin.RelErr(semRead(t, a, 1), g); !(d < 1e-6) {
		t.Errorf("gradient differs from the quarters' mean by %.3g relative", d)
	}
	testutil.CheckVec(t, "loss, acc", ra, []float64{loss, acc}, 1e-6, 1e-6)
	var bufs [2][]float64
	for i, e := range []*Engine{a, b} {
		semDo(t, e, func(s *tensor.Scope) error {
			bufs[i] = s.Float64s(e.members[0].Buf)
			return nil
		})
	}
	if d := torchtwin.RelErr(bufs[0], bufs[1]); !(d < 1e-6) {
		t.Errorf("running statistics differ from four quarter passes' by %.3g relative", d)
	}
	if na, nb := a.BNBatches(optim.Params), b.BNBatches(optim.Params); na != 4 || nb != 4 {
		t.Errorf("BatchNorm counters %d and %d, want 4 and 4", na, nb)
	}
}
