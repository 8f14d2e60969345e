package engine

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/optlab/optlab/internal/testutil"

	"github.com/optlab/optlab/sdk/optim"
)

// The op semantics are checked by the conformance suite
// (conformance_test.go); these tests cover what is the engine's own: the
// host stream of RandN across runs, float64 accumulation of Dot and Norm,
// and the Exec counters.

// TestRandNStreams checks that a seed-0 draw comes from the run's host
// stream (fixed by the run's seed, untouched by seeded draws) and that a
// seeded draw is the same in every run.
func TestRandNStreams(t *testing.T) {
	const n = 20000
	run := func(seed int64) *Engine {
		return semEngine(t, Config{Seed: seed}, semWide(t, n))
	}
	e := run(5)
	semExec(t, e, optim.Prog().Alloc(1, 0).RandN(1, 1, 11))
	v11 := semRead(t, e, 1)

	a := run(5)
	semExec(t, a, optim.Prog().Alloc(1, 0).RandN(1, 1, 0))
	a1 := semRead(t, a, 1)
	b := run(5)
	semExec(t, b, optim.Prog().Alloc(1, 0).Alloc(2, 0).RandN(2, 1, 11).RandN(1, 1, 0))
	b1 := semRead(t, b, 1)
	c := run(6)
	semExec(t, c, optim.Prog().Alloc(1, 0).RandN(1, 1, 0))
	c1 := semRead(t, c, 1)
	switch {
	case !slices.Equal(a1, b1):
		t.Error("seed-0 draw depends on an earlier seeded draw, or is not fixed by the run's seed")
	case slices.Equal(a1, c1):
		t.Error("seed-0 draws of runs with seeds 5 and 6 are identical")
	case slices.Equal(a1, v11):
		t.Error("seed-0 draw equals the seed-11 draw")
	}
	// A seeded draw is the same in another run and after seed-0 draws.
	semExec(t, c, optim.Prog().RandN(1, 1, 11))
	if !slices.Equal(semRead(t, c, 1), v11) {
		t.Error("seeded draw differs between runs")
	}
}

// TestDotNorm checks Dot and Norm against float64 sums of the float32
// contents, to float64's accuracy, as optim.Dot documents.
func TestDotNorm(t *testing.T) {
	const n = 20000
	e := semEngine(t, Config{Seed: 3}, semWide(t, n))
	r := rand.New(rand.NewPCG(1, 2))
	a, b := make([]float64, n), make([]float64, n)
	for i := range a {
		// Wide dynamic range and cancellation: float32 accumulation would
		// lose ~4 digits here.
		a[i] = float64(float32(math.Pow(10, 6*r.Float64()-3) * (2*r.Float64() - 1)))
		b[i] = float64(float32(1 + 1e-3*r.NormFloat64()))
		if i%2 == 1 {
			b[i] = -b[i-1]
			a[i] = a[i-1] * (1 + 1e-4)
			a[i] = float64(float32(a[i]))
		}
	}
	semExec(t, e, optim.Prog().Alloc(1, 0).Alloc(2, 0))
	semWrite(t, e, 1, a)
	semWrite(t, e, 2, b)
	prog := optim.Prog()
	slots := []optim.Reg{prog.Dot(1, 2), prog.Norm(1), prog.Dot(1, 1), prog.Norm(2), prog.Dot(2, optim.Params)}
	res := semExec(t, e, prog)
	p := semRead(t, e, optim.Params)
	dot := func(x, y []float64) float64 {
		var s float64
		for i := range x {
			s += x[i] * y[i]
		}
		return s
	}
	want := []float64{dot(a, b), math.Sqrt(dot(a, a)), dot(a, a), math.Sqrt(dot(b, b)), dot(b, p)}
	scale := []float64{dot(semMap(a, math.Abs), semMap(b, math.Abs)), want[1], want[2], want[3], dot(semMap(b, math.Abs), semMap(p, math.Abs))}
	for i, s := range slots {
		if got := res.Get(s); math.Abs(got-want[i]) > 1e-12*scale[i] {
			t.Errorf("scalar %d = %.17g, want %.17g (error %.3g of scale %.3g)", i, got, want[i], math.Abs(got-want[i]), scale[i])
		}
	}
}

// TestExecStats checks that Exec counts programs and ops.
func TestExecStats(t *testing.T) {
	e := semEngine(t, Config{Seed: 2}, semTiny(t, []int64{4}, 5, 3))
	x, y := testutil.Features(6, 4, 3, 5)
	semBatch(t, e, 0, x, y)
	execs0, ops0 := e.Stats()
	prog := optim.Prog().Alloc(1, 0).RandN(1, 1, 5)
	prog.Norm(1)
	prog.Grad(0, optim.Params, optim.Batch{}, optim.BNUpdate)
	semExec(t, e, prog)
	if execs, ops := e.Stats(); execs != execs0+1 || ops != ops0+int64(len(prog.Ops)) {
		t.Errorf("Stats: %d execs, %d ops after one program of %d ops (before: %d, %d)", execs, ops, len(prog.Ops), execs0, ops0)
	}
}

func semMap(v []float64, f func(float64) float64) []float64 {
	out := make([]float64, len(v))
	for i, x := range v {
		out[i] = f(x)
	}
	return out
}

func semDot(x, y []float64) float64 {
	var s float64
	for i := range x {
		s += x[i] * y[i]
	}
	return s
}
