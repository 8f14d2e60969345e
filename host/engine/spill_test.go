package engine

import (
	"testing"

	"github.com/optlab/optlab/internal/testutil"

	"github.com/optlab/optlab/sdk/optim"
)

// With a device budget of one vector, further vectors (ensemble snapshots,
// say) are kept in host memory, and ops and predictions on them give the
// same results as on the device.
func TestSpillToHostMemory(t *testing.T) {
	const n, f, c = 10, 4, 3
	set := testutil.FeatureSet(n, f, c)
	x := testutil.Inputs(set)
	m := semTiny(t, []int64{f}, 5, c)
	e := semEngine(t, Config{Seed: 3, DeviceBudget: 4 * m.Numel}, m)
	ds := semUpload(t, e, set, true)
	p := semRead(t, e, optim.Params)
	semExec(t, e, optim.Prog().Alloc(1, 0).Alloc(2, 0).Alloc(3, 0).
		Copy(2, optim.Params).Copy(3, optim.Params).Scale(3, optim.K(0.5)).Axpy(1, optim.K(2), 3))
	if got := e.Spilled(); got != 2 {
		t.Fatalf("%d vectors spilled to host memory, want 2", got)
	}
	half := make([]float64, len(p))
	for i := range p {
		half[i] = 0.5 * p[i]
	}
	testutil.CheckVec(t, "axpy of spilled vectors", semRead(t, e, 1), semF32(scaled(half, 2)), 1e-6, 1e-6)
	got := semPredict(t, e, optim.Predictive{Kind: optim.Members, Vecs: []optim.Vec{2, 3}}, ds, 0, 1)
	want := semProbs(m, p, x)
	wantHalf := semProbs(m, semF32(half), x)
	for i := range want {
		want[i] = 0.5*want[i] + 0.5*wantHalf[i]
	}
	testutil.CheckVec(t, "prediction from spilled snapshots", got, want, 1e-6, 1e-5)
	semExec(t, e, optim.Prog().Free(2).Free(3))
	if got := e.Spilled(); got != 0 {
		t.Errorf("%d spilled vectors after freeing them", got)
	}
}

func scaled(v []float64, a float64) []float64 {
	out := make([]float64, len(v))
	for i := range v {
		out[i] = a * v[i]
	}
	return out
}
