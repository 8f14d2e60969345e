package engine

import (
	"math"
	"strings"
	"testing"

	"github.com/optlab/optlab/internal/testutil"

	"github.com/optlab/optlab/host/tensor"
	"github.com/optlab/optlab/sdk/optim"
)

// Two identical members evaluated jointly have the loss of one member, and
// each receives half of that member's gradient (p̄ = p, ∂p̄/∂θ_m = ∂p/∂θ/2).
func TestJointGradIdenticalMembers(t *testing.T) {
	const f, c = 4, 3
	x, y := testutil.Features(12, f, c, 5)
	e := semEngine(t, Config{Seed: 2}, semTiny(t, []int64{f}, 5, c), semTiny(t, []int64{f}, 5, c))
	semBatch(t, e, 0, x, y)
	semDo(t, e, func(*tensor.Scope) error {
		m0 := e.members[0]
		e.SetBatch(1, m0.x, m0.y)
		return nil
	})
	semExec(t, e, optim.Prog().Copy(optim.ParamsOf(1), optim.Params))
	prog := optim.Prog().Alloc(1, 0)
	ev := prog.Grad(1, optim.Params, optim.Batch{}, optim.BNFreeze)
	single := semEval(semExec(t, e, prog), ev)
	prog = optim.Prog().Alloc(2, 0).Alloc(3, 1)
	ev = prog.JointGrad([]optim.Vec{2, 3}, []optim.Vec{optim.Params, optim.ParamsOf(1)}, optim.Batch{}, optim.BNFreeze)
	joint := semEval(semExec(t, e, prog), ev)
	if math.Abs(single[0]-joint[0]) > 1e-6 || single[1] != joint[1] {
		t.Errorf("joint loss/acc %v, single member %v", joint, single)
	}
	g := semRead(t, e, 1)
	half := make([]float64, len(g))
	for i := range g {
		half[i] = g[i] / 2
	}
	testutil.CheckVec(t, "member 0's joint gradient", semRead(t, e, 2), half, 1e-7, 1e-5)
	testutil.CheckVec(t, "member 1's joint gradient", semRead(t, e, 3), half, 1e-7, 1e-5)
}

func TestJointGradNeedsSharedBatch(t *testing.T) {
	const f, c = 4, 3
	x, y := testutil.Features(6, f, c, 5)
	e := semEngine(t, Config{Seed: 2}, semTiny(t, []int64{f}, 5, c), semTiny(t, []int64{f}, 5, c))
	semBatch(t, e, 0, x, y)
	semBatch(t, e, 1, x, y)
	prog := optim.Prog()
	prog.JointGrad(nil, []optim.Vec{optim.Params, optim.ParamsOf(1)}, optim.Batch{}, optim.BNFreeze)
	_, err := e.Exec(t.Context(), prog)
	if err == nil || !strings.Contains(err.Error(), "does not share") {
		t.Errorf("members with their own batches: %v", err)
	}
}
