package engine

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/optlab/optlab/internal/testutil"

	"github.com/optlab/optlab/host/model"
	"github.com/optlab/optlab/host/tensor"
	"github.com/optlab/optlab/sdk/optim"
)

// TestGradFiniteDifference compares Grad's loss, accuracy and gradient with
// a float64 forward pass and its central finite differences, at the live
// parameters and at another vector.
func TestGradFiniteDifference(t *testing.T) {
	for _, eps := range []float64{0, 0.1} {
		t.Run(fmt.Sprintf("smoothing %g", eps), func(t *testing.T) {
			m := semTiny(t, []int64{4}, 6, 3)
			e := semEngine(t, Config{Seed: 4, LabelSmoothing: eps}, m)
			x, y := testutil.Features(8, 4, 3, 11)
			semBatch(t, e, 0, x, y)
			p := semRead(t, e, optim.Params)

			// At the live parameters.
			prog := optim.Prog().Alloc(1, 0).Fill(1, optim.K(9))
			ev := prog.Grad(1, optim.Params, optim.Batch{}, optim.BNUpdate)
			got := semEval(semExec(t, e, prog), ev)
			loss, acc := semLoss(m, p, x, y, eps)
			testutil.CheckVec(t, "loss, acc", got, []float64{loss, acc}, 1e-6, 1e-6)
			testutil.CheckVec(t, "gradient", semRead(t, e, 1), semFDGrad(m, p, x, y, eps), 1e-6, 1e-4)

			// At another vector: q = 0.5·θ + 0.3, Params untouched.
			semExec(t, e, optim.Prog().Alloc(2, 0).Copy(2, optim.Params).Scale(2, optim.K(0.5)).AddConst(2, optim.K(0.3)))
			q := semRead(t, e, 2)
			testutil.CheckVec(t, "q", q, semMap(p, func(v float64) float64 { return 0.5*v + 0.3 }), 1e-7, 1e-7)
			prog = optim.Prog()
			ev = prog.Grad(1, 2, optim.Batch{}, optim.BNUpdate)
			got = semEval(semExec(t, e, prog), ev)
			loss, acc = semLoss(m, q, x, y, eps)
			testutil.CheckVec(t, "loss, acc at q", got, []float64{loss, acc}, 1e-6, 1e-6)
			testutil.CheckVec(t, "gradient at q", semRead(t, e, 1), semFDGrad(m, q, x, y, eps), 1e-6, 1e-4)
			if !slices.Equal(semRead(t, e, optim.Params), p) {
				t.Error("Grad at another vector changed Params")
			}
			if qq := semRead(t, e, 2); !slices.Equal(qq, q) {
				t.Error("Grad changed the vector it was evaluated at")
			}

			// Out = At: the gradient overwrites the point it was taken at.
			prog = optim.Prog()
			prog.Grad(2, 2, optim.Batch{}, optim.BNUpdate)
			semExec(t, e, prog)
			testutil.CheckVec(t, "gradient written over At", semRead(t, e, 2), semFDGrad(m, q, x, y, eps), 1e-6, 1e-4)

			// Out = 0 writes nothing but still emits loss and accuracy.
			semExec(t, e, optim.Prog().Fill(1, optim.K(7)))
			prog = optim.Prog()
			ev = prog.Grad(0, optim.Params, optim.Batch{}, optim.BNUpdate)
			norm := prog.Norm(1)
			r := semExec(t, e, prog)
			loss, acc = semLoss(m, p, x, y, eps)
			testutil.CheckVec(t, "Out=0 scalars", []float64{r.Get(ev.Loss), r.Get(ev.Acc), r.Get(norm)},
				[]float64{loss, acc, 7 * math.Sqrt(float64(len(p)))}, 1e-6, 1e-6)
			if !slices.Equal(semRead(t, e, optim.Params), p) {
				t.Error("Grad with Out=0 changed Params")
			}
		})
	}
}

// TestGradDirectionalMLP checks the built-in ReLU MLP's gradient along a
// random direction against a central difference of the engine's own loss.
func TestGradDirectionalMLP(t *testing.T) {
	m, err := model.NewMLP(3, []int64{4})
	if err != nil {
		t.Fatal(err)
	}
	e := semEngine(t, Config{Seed: 8}, m)
	x, y := testutil.Features(8, 4, 3, 21)
	semBatch(t, e, 0, x, y)
	const h = 1e-2
	semExec(t, e, optim.Prog().Alloc(1, 0).Alloc(2, 0).Alloc(3, 0).RandN(2, 1, 5))
	v := semRead(t, e, 2)
	vn := math.Sqrt(semDot(v, v))
	prog := optim.Prog().Scale(2, optim.K(1/vn))
	prog.Grad(1, optim.Params, optim.Batch{}, optim.BNUpdate)
	semExec(t, e, prog)
	g, v := semRead(t, e, 1), semRead(t, e, 2)
	prog = optim.Prog().LinComb(3, optim.Term{Coef: optim.K(1), X: optim.Params}, optim.Term{Coef: optim.K(h), X: 2})
	plus := prog.Grad(0, 3, optim.Batch{}, optim.BNUpdate)
	prog.LinComb(3, optim.Term{Coef: optim.K(1), X: optim.Params}, optim.Term{Coef: optim.K(-h), X: 2})
	minus := prog.Grad(0, 3, optim.Batch{}, optim.BNUpdate)
	r := semExec(t, e, prog)
	fd := (r.Get(plus.Loss) - r.Get(minus.Loss)) / (2 * h)
	dd := semDot(g, v)
	if math.Abs(fd-dd) > 1e-3+0.02*math.Abs(dd) {
		t.Errorf("directional derivative: gradient·v = %.6g, finite difference %.6g", dd, fd)
	}
}

// TestGradBatchParts checks Batch{Part, Of, Shuffle} against the float64
// loss on the samples each part should select.
func TestGradBatchParts(t *testing.T) {
	m := semTiny(t, []int64{3}, 4, 3)
	e := semEngine(t, Config{Seed: 6}, m)
	p := semRead(t, e, optim.Params)
	x8, y8 := testutil.Features(8, 3, 3, 31)
	x7, y7 := testutil.Features(7, 3, 3, 37)
	pick := func(x [][]float64, y []int64, idx []int64) ([][]float64, []int64) {
		var xs [][]float64
		var ys []int64
		for _, i := range idx {
			xs, ys = append(xs, x[i]), append(ys, y[i])
		}
		return xs, ys
	}
	span := func(a, b int64) []int64 {
		var out []int64
		for i := a; i < b; i++ {
			out = append(out, i)
		}
		return out
	}
	tests := []struct {
		name string
		x    [][]float64
		y    []int64
		b    optim.Batch
		idx  []int64 // the samples the part must use
	}{
		{"whole", x8, y8, optim.Batch{}, span(0, 8)},
		{"of 1", x8, y8, optim.Batch{Of: 1, Shuffle: 5}, span(0, 8)},
		{"first half", x8, y8, optim.Batch{Part: 0, Of: 2}, span(0, 4)},
		{"second half", x8, y8, optim.Batch{Part: 1, Of: 2}, span(4, 8)},
		{"third quarter", x8, y8, optim.Batch{Part: 2, Of: 4}, span(4, 6)},
		{"shuffled half 0", x8, y8, optim.Batch{Part: 0, Of: 2, Shuffle: 17}, Permutation(8, 17)[:4]},
		{"shuffled half 1", x8, y8, optim.Batch{Part: 1, Of: 2, Shuffle: 17}, Permutation(8, 17)[4:]},
		{"uneven first", x7, y7, optim.Batch{Part: 0, Of: 2}, span(0, 3)},
		{"uneven last drops remainder", x7, y7, optim.Batch{Part: 1, Of: 2}, span(3, 6)},
		{"uneven shuffled", x7, y7, optim.Batch{Part: 1, Of: 2, Shuffle: -3}, Permutation(7, -3)[3:6]},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			semBatch(t, e, 0, tc.x, tc.y)
			e.BeginStep(0, 0.1)
			prog := optim.Prog().Alloc(1, 0)
			ev := prog.Grad(1, optim.Params, tc.b, optim.BNUpdate)
			got := semEval(semExec(t, e, prog.Free(1)), ev)
			xs, ys := pick(tc.x, tc.y, tc.idx)
			loss, acc := semLoss(m, p, xs, ys, 0)
			testutil.CheckVec(t, "loss, acc", got, []float64{loss, acc}, 1e-6, 1e-6)
		})
	}

	// Shuffle ≠ 0 really permutes, and a later step sees the same
	// permutation for the same Shuffle. (That halves average to the whole
	// batch is in the conformance suite.)
	semBatch(t, e, 0, x8, y8)
	loss := func(b optim.Batch) float64 {
		prog := optim.Prog()
		ev := prog.Grad(0, optim.Params, b, optim.BNUpdate)
		return semExec(t, e, prog).Get(ev.Loss)
	}
	e.BeginStep(2, 0.1)
	a := loss(optim.Batch{Part: 0, Of: 2, Shuffle: 17})
	b := loss(optim.Batch{Part: 0, Of: 2})
	e.BeginStep(3, 0.1)
	c := loss(optim.Batch{Part: 0, Of: 2, Shuffle: 17})
	if a == b {
		t.Error("shuffled and contiguous halves have the same loss")
	}
	if a != c {
		t.Error("the same Shuffle gave another half after BeginStep")
	}

	b9 := optim.Batch{Part: 0, Of: 9}
	prog := optim.Prog()
	prog.Grad(0, optim.Params, b9, optim.BNUpdate)
	if _, err := e.Exec(context.Background(), prog); err == nil || !strings.Contains(err.Error(), "part") {
		t.Errorf("batch %+v of 8 samples: %v, want an error", b9, err)
	}
}

func TestPermutation(t *testing.T) {
	for _, n := range []int64{1, 2, 7, 64} {
		p := Permutation(n, 5)
		s := slices.Clone(p)
		slices.Sort(s)
		for i, v := range s {
			if v != int64(i) {
				t.Fatalf("Permutation(%d, 5) = %v is not a permutation", n, p)
			}
		}
		if !slices.Equal(p, Permutation(n, 5)) {
			t.Errorf("Permutation(%d, 5) is not deterministic", n)
		}
	}
	if slices.Equal(Permutation(64, 5), Permutation(64, 6)) {
		t.Error("seeds 5 and 6 give the same permutation")
	}
}

// The random halves of a shuffled split are a uniformly random split: over
// many seeds, each of the 24 orders of 4 samples, and each of the 70 halves
// of 8 samples (what OT-MDR's {0,2,s} selects), comes up equally often (a
// χ² test, at a significance of 0.001), for consecutive seeds and for
// seeds drawn the way the plugins draw them (64-bit PCG outputs). The
// engine computes the same permutations on the device (TestGradBatchParts;
// host/tensor's TestSplitMixPermutation checks the two bit for bit).
func TestPermutationUniform(t *testing.T) {
	pcg := rand.New(rand.NewPCG(1, 2))
	for _, seeds := range []struct {
		name string
		next func(i int) int64
	}{
		{"consecutive seeds", func(i int) int64 { return int64(i + 1) }},
		{"PCG seeds", func(int) int64 { return int64(pcg.Uint64()) }},
	} {
		// 4 samples: 24 orders, 24,000 seeds; χ²(23) ≤ 49.73 at p = 0.001.
		orders := map[[4]int64]int{}
		for i := range 24000 {
			orders[[4]int64(Permutation(4, seeds.next(i)))]++
		}
		if chi := chiSquare(orders, 24, 1000); len(orders) != 24 || chi > 49.73 {
			t.Errorf("%s: %d of 24 orders of 4 samples seen, χ² = %.1f (limit 49.73)", seeds.name, len(orders), chi)
		}
		// 8 samples: the first half is one of C(8,4) = 70 sets, 70,000 seeds;
		// χ²(69) ≤ 111.06 at p = 0.001.
		halves := map[[4]int64]int{}
		for i := range 70000 {
			h := [4]int64(Permutation(8, seeds.next(i))[:4])
			slices.Sort(h[:])
			halves[h]++
		}
		if chi := chiSquare(halves, 70, 1000); len(halves) != 70 || chi > 111.06 {
			t.Errorf("%s: %d of 70 halves of 8 samples seen, χ² = %.1f (limit 111.06)", seeds.name, len(halves), chi)
		}
	}
}

// chiSquare is Pearson's statistic of counts over k equally likely cells
// with expected count e each (cells never seen count too).
func chiSquare[K comparable](counts map[K]int, k int, e float64) float64 {
	chi := float64(k-len(counts)) * e
	for _, c := range counts {
		d := float64(c) - e
		chi += d * d / e
	}
	return chi
}

func TestGradNoBatch(t *testing.T) {
	e := semEngine(t, Config{Seed: 1}, semTiny(t, []int64{4}, 5, 3))
	prog := optim.Prog()
	prog.Grad(0, optim.Params, optim.Batch{}, optim.BNUpdate)
	_, err := e.Exec(context.Background(), prog)
	if err == nil || !strings.Contains(err.Error(), "no current batch") {
		t.Fatalf("Grad without a batch: %v", err)
	}
}

// TestGradPerMember checks that a Grad at another member's vector uses that
// member's model and batch.
func TestGradPerMember(t *testing.T) {
	m0, m1 := semTiny(t, []int64{4}, 5, 3), semTiny(t, []int64{4}, 7, 3)
	e := semEngine(t, Config{Seed: 12}, m0, m1)
	x0, y0 := testutil.Features(6, 4, 3, 41)
	x1, y1 := testutil.Features(4, 4, 3, 43)
	semBatch(t, e, 0, x0, y0)
	semBatch(t, e, 1, x1, y1)
	p0, p1 := semRead(t, e, optim.Params), semRead(t, e, optim.ParamsOf(1))
	prog := optim.Prog().Alloc(1, 1).Copy(1, optim.ParamsOf(1))
	ev0 := prog.Grad(0, optim.Params, optim.Batch{}, optim.BNUpdate)
	ev1 := prog.Grad(0, optim.ParamsOf(1), optim.Batch{}, optim.BNUpdate)
	evv := prog.Grad(1, 1, optim.Batch{}, optim.BNUpdate)
	r := semExec(t, e, prog)
	got := append(append(semEval(r, ev0), semEval(r, ev1)...), semEval(r, evv)...)
	l0, a0 := semLoss(m0, p0, x0, y0, 0)
	l1, a1 := semLoss(m1, p1, x1, y1, 0)
	testutil.CheckVec(t, "scalars", got, []float64{l0, a0, l1, a1, l1, a1}, 1e-6, 1e-6)
	testutil.CheckVec(t, "member 1 gradient", semRead(t, e, 1), semFDGrad(m1, p1, x1, y1, 0), 1e-6, 1e-4)
}

// TestGradBatchNorm uses the cnn (BatchNorm) model: BNFreeze leaves the
// running statistics unchanged, BNUpdate moves them with the configured
// momentum, and both normalize with batch statistics.
func TestGradBatchNorm(t *testing.T) {
	in := []int64{1, 4, 4}
	const n = 6
	xs := make([]float32, n*16)
	for i := range xs {
		xs[i] = float32(math.Sin(float64(3*i+1))) * 2
	}
	ys := []int64{0, 1, 2, 0, 1, 2}
	mk := func(mom float64) (*Engine, *model.Model) {
		m, err := model.NewCNN(3, in)
		if err != nil {
			t.Fatal(err)
		}
		e := semEngine(t, Config{Seed: 3, BNMomentum: mom}, m)
		semDo(t, e, func(s *tensor.Scope) error {
			x := s.FromFloat32(xs, []int64{n, 1, 4, 4}, tensor.CPU)
			y := s.FromInt64(ys, []int64{n}, tensor.CPU)
			if err := s.Err(); err != nil {
				return err
			}
			e.SetBatch(0, s.Keep(x), s.Keep(y))
			return nil
		})
		return e, m
	}
	buf := func(e *Engine) []float64 {
		var out []float64
		semDo(t, e, func(s *tensor.Scope) error { out = s.Float64s(e.members[0].Buf); return nil })
		return out
	}
	e, m := mk(0)
	if len(m.Buffers) == 0 {
		t.Fatal("cnn has no BatchNorm buffers")
	}
	b0 := buf(e)
	prog := optim.Prog().Alloc(1, 0).Alloc(2, 0)
	evf := prog.Grad(1, optim.Params, optim.Batch{}, optim.BNFreeze)
	prog.Grad(0, optim.Params, optim.Batch{Part: 1, Of: 2, Shuffle: 3}, optim.BNFreeze)
	frozen := semEval(semExec(t, e, prog), evf)
	if !slices.Equal(buf(e), b0) {
		t.Fatal("BNFreeze changed the running statistics")
	}
	prog = optim.Prog()
	evu := prog.Grad(2, optim.Params, optim.Batch{}, optim.BNUpdate)
	updated := semEval(semExec(t, e, prog), evu)
	b1 := buf(e)
	if slices.Equal(b1, b0) {
		t.Fatal("BNUpdate left the running statistics unchanged")
	}
	// Train mode normalizes with batch statistics either way.
	testutil.CheckVec(t, "loss, acc (update vs freeze)", updated, frozen, 1e-6, 1e-6)
	testutil.CheckVec(t, "gradient (update vs freeze)", semRead(t, e, 2), semRead(t, e, 1), 1e-6, 1e-4)

	// Momentum: from mean 0 and var 1, one update gives mean = μ·m̂ and
	// var − 1 = μ·(v̂ − 1), so μ = 0.2 moves them twice as far as 0.1
	// (the default).
	e2, _ := mk(0.2)
	prog = optim.Prog()
	prog.Grad(0, optim.Params, optim.Batch{}, optim.BNUpdate)
	semExec(t, e2, prog)
	b2 := buf(e2)
	var moved int
	for i := range b1 {
		d1, d2 := b1[i]-b0[i], b2[i]-b0[i]
		if d1 != 0 {
			moved++
		}
		if math.Abs(d2-2*d1) > 1e-5*(1+math.Abs(d2)) {
			t.Errorf("buffer %d moved by %v with momentum 0.2, %v with 0.1", i, d2, d1)
			break
		}
	}
	if moved < len(b1)/2 {
		t.Errorf("only %d of %d buffer entries moved", moved, len(b1))
	}
}

// Counters.GradSamples counts the samples of every forward-backward pass:
// a whole batch, and a half with no gradient target (its backward pass
// still runs).
func TestGradSamplesCounted(t *testing.T) {
	e := semEngine(t, Config{Seed: 4}, semTiny(t, []int64{4}, 6, 3))
	x, y := testutil.Features(8, 4, 3, 11)
	semBatch(t, e, 0, x, y)
	before := e.Counters().GradSamples
	p := optim.Prog().Alloc(1, 0)
	p.Grad(1, optim.Params, optim.Batch{}, optim.BNUpdate)
	p.Grad(0, optim.Params, optim.Batch{Part: 1, Of: 2}, optim.BNFreeze)
	semExec(t, e, p)
	if got := e.Counters().GradSamples - before; got != 8+4 {
		t.Errorf("GradSamples counted %d, want 12 (8 + 4)", got)
	}
}

// Per-sample passes (protocol minor 10) count what they back-propagate:
// a pass with OutLosses and a gradient its batch, a forward-only one
// (OutLosses, Out = 0) nothing in GradSamples but its batch in
// ForwardSamples, a ranked pass its Keep samples.
func TestSampleGradCounted(t *testing.T) {
	e := semEngine(t, Config{Seed: 4, BatchSize: 8}, semTiny(t, []int64{4}, 6, 3))
	x, y := testutil.Features(8, 4, 3, 11)
	semBatch(t, e, 0, x, y)
	before := e.Counters()
	p := optim.Prog().Alloc(1, 0).AllocSamples(2, 0)
	p.GradOp(optim.Grad{Out: 1, At: optim.Params, OutLosses: 2})
	p.GradOp(optim.Grad{At: optim.Params, BN: optim.BNFreeze, OutLosses: 2})
	p.GradOp(optim.Grad{Out: 1, At: optim.Params, BN: optim.BNFreeze, Rank: 2, Keep: 3})
	semExec(t, e, p)
	after := e.Counters()
	if g, f := after.GradSamples-before.GradSamples, after.ForwardSamples-before.ForwardSamples; g != 8+3 || f != 8 {
		t.Errorf("GradSamples %d, ForwardSamples %d; want 11 and 8", g, f)
	}
}
