package engine

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/optlab/optlab/host/model"
	"github.com/optlab/optlab/sdk/optim"
)

// semBogusOp is an op type the engine does not know (it borrows isOp from
// an embedded op).
type semBogusOp struct{ optim.Fill }

func TestAllocFreeErrors(t *testing.T) {
	tests := []struct {
		name    string
		prog    *optim.Program
		errWith string // "" = success
		index   int
	}{
		{"alloc", optim.Prog().Alloc(1).AllocFor(2, 1), "", 0},
		{"alloc params handle", optim.Prog().Alloc(0), "reserved", 0},
		{"alloc member handle", optim.Prog().Alloc(1).Alloc(optim.ParamsOf(1)), "reserved", 1},
		{"alloc duplicate", optim.Prog().Alloc(1).Alloc(2).Alloc(1), "already allocated", 2},
		{"alloc no member", optim.Prog().AllocFor(1, 2), "no member 2", 0},
		{"alloc negative member", optim.Prog().AllocFor(1, -1), "no member -1", 0},
		{"free unallocated", optim.Prog().Free(3), "not allocated", 0},
		{"free params", optim.Prog().Free(optim.Params), "not allocated", 0},
		{"use after free", optim.Prog().Alloc(1).Free(1).Fill(1, 2), "not allocated", 2},
		{"realloc after free", optim.Prog().Alloc(1).Free(1).Alloc(1).Fill(1, 2), "", 0},
		{"no such member params", optim.Prog().Fill(optim.ParamsOf(5), 1), "no member 5", 0},
		{"copy across layouts", optim.Prog().Alloc(1).AllocFor(2, 1).Copy(1, 2), "different layouts", 2},
		{"axpy across layouts", optim.Prog().Alloc(1).Axpy(1, 2, optim.ParamsOf(1)), "different layouts", 1},
		{"lincomb across layouts", optim.Prog().Alloc(1).LinComb(1, optim.Term{Coef: 1, X: 1}, optim.Term{Coef: 1, X: optim.ParamsOf(1)}), "different layouts", 1},
		{"dot across layouts", optim.Prog().Dot(optim.Params, optim.ParamsOf(1)), "different layouts", 0},
		{"grad out across layouts", optim.Prog().AllocFor(1, 1).Grad(1, optim.Params, optim.Batch{}, optim.BNUpdate), "another member's layout", 1},
		{"fill range past the end", optim.Prog().Alloc(1).FillRange(1, 40, 4, 1), "outside a vector of 43", 1},
		{"fill range negative offset", optim.Prog().FillRange(optim.Params, -1, 2, 1), "outside", 0},
		{"fill range negative length", optim.Prog().FillRange(optim.Params, 3, -2, 1), "outside", 0},
		{"set_lr no member", optim.Prog().SetLR(2, 0.1), "no member 2", 0},
		{"set_lr negative", optim.Prog().SetLR(0, -0.1), "invalid learning rate", 0},
		{"set_lr NaN", optim.Prog().SetLR(0, math.NaN()), "invalid learning rate", 0},
		{"base step on allocated", optim.Prog().Alloc(1).BaseStep(1, 1), "not a member's live parameters", 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := semEngine(t, Config{Seed: 1}, semTiny(t, []int64{4}, 5, 3), semTiny(t, []int64{4}, 7, 3))
			x, y := semData(4, 4, 3, 9)
			semBatch(t, e, 0, x, y)
			semBatch(t, e, 1, x, y)
			_, err := e.Exec(context.Background(), tc.prog)
			if tc.errWith == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			var oe *OpError
			if !errors.As(err, &oe) {
				t.Fatalf("error %v is not an *OpError", err)
			}
			if oe.Index != tc.index || oe.OpIndex() != tc.index || !strings.Contains(err.Error(), tc.errWith) {
				t.Fatalf("error %q at op %d, want %q at op %d", err, oe.Index, tc.errWith, tc.index)
			}
		})
	}
	// Alloc gives a zero vector with the member's layout.
	e := semEngine(t, Config{Seed: 1}, semTiny(t, []int64{4}, 5, 3), semTiny(t, []int64{4}, 7, 3))
	semExec(t, e, optim.Prog().Alloc(1).AllocFor(2, 1))
	for h, m := range map[optim.Vec]*model.Model{1: e.members[0].Model, 2: e.members[1].Model} {
		v := semRead(t, e, h)
		if int64(len(v)) != m.Numel || slices.ContainsFunc(v, func(x float64) bool { return x != 0 }) {
			t.Errorf("handle %d: %d values (want %d zeros)", h, len(v), m.Numel)
		}
	}
}

func TestUnknownOps(t *testing.T) {
	tests := []struct {
		name  string
		op    optim.Op
		index int
	}{
		{"op type", semBogusOp{}, 3},
		{"unary kind", optim.Unary{Dst: 1, Src: 1, Kind: 99}, 3},
		{"unary kind zero", optim.Unary{Dst: 1, Src: 1}, 3},
		{"binary kind", optim.Binary{Dst: 1, A: 1, B: 1, Kind: 42}, 3},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := semEngine(t, Config{Seed: 1}, semTiny(t, []int64{4}, 5, 3))
			p := optim.Prog().Alloc(1).Fill(1, 2).Norm(1)
			p.Ops = append(p.Ops, tc.op, optim.Norm{X: 1})
			r, err := e.Exec(context.Background(), p)
			if !errors.Is(err, ErrUnimplemented) {
				t.Fatalf("error %v does not wrap ErrUnimplemented", err)
			}
			var oe *OpError
			if !errors.As(err, &oe) || oe.Index != tc.index {
				t.Fatalf("error %v: want an *OpError at op %d", err, tc.index)
			}
			if len(r.Scalars) != 0 {
				t.Errorf("failed program returned scalars %v", r.Scalars)
			}
		})
	}
}

// TestElementwiseOps checks every vector op against a float64 reference
// computed from the float32 inputs.
func TestElementwiseOps(t *testing.T) {
	m := semTiny(t, []int64{4}, 5, 3) // 43 parameters
	n := int(m.Numel)
	special := []float64{-3, -1, -0.5, 0, 0.25, 1, 2.5, 30, -30, 1e-3}
	r := rand.New(rand.NewPCG(3, 4))
	mk := func(withZero bool) []float64 {
		v := make([]float64, n)
		for i := range v {
			if i < len(special) && withZero {
				v[i] = special[i]
			} else {
				v[i] = 4*r.Float64() - 2
			}
		}
		return semF32(v)
	}
	a, b, d0, p0 := mk(true), mk(false), mk(false), mk(false)
	b[3], b[7] = 0, -2 // division by zero, mixed signs
	const A, B, D = optim.Vec(1), optim.Vec(2), optim.Vec(3)
	each := func(f func(i int) float64) []float64 {
		out := make([]float64, n)
		for i := range out {
			out[i] = f(i)
		}
		return out
	}
	unary := map[optim.UnaryKind]func(float64) float64{
		optim.Abs:  math.Abs,
		optim.Sign: func(x float64) float64 { return float64(semSign(x)) },
		optim.Sqrt: math.Sqrt, optim.Square: func(x float64) float64 { return x * x },
		optim.Softplus: func(x float64) float64 { return math.Log1p(math.Exp(x)) },
		optim.Exp:      math.Exp, optim.Log: math.Log,
		optim.Reciprocal: func(x float64) float64 { return 1 / x },
	}
	binary := map[optim.BinaryKind]func(x, y float64) float64{
		optim.Mul: func(x, y float64) float64 { return x * y },
		optim.Div: func(x, y float64) float64 { return x / y },
		optim.Add: func(x, y float64) float64 { return x + y },
		optim.Sub: func(x, y float64) float64 { return x - y },
		optim.Max: math.Max, optim.Min: math.Min,
	}
	type tcase struct {
		name string
		prog *optim.Program
		dst  optim.Vec
		want []float64
	}
	tests := []tcase{
		{"copy", optim.Prog().Copy(D, A), D, a},
		{"copy from params", optim.Prog().Copy(D, optim.Params), D, p0},
		{"copy into params", optim.Prog().Copy(optim.Params, B), optim.Params, b},
		{"fill", optim.Prog().Fill(D, 0.3), D, each(func(int) float64 { return float64(float32(0.3)) })},
		{"fill params", optim.Prog().Fill(optim.Params, -2), optim.Params, each(func(int) float64 { return -2 })},
		{"fill range", optim.Prog().FillRange(D, 5, 20, 0.5), D, each(func(i int) float64 {
			if i >= 5 && i < 25 {
				return 0.5
			}
			return d0[i]
		})},
		{"fill range to the end", optim.Prog().FillRange(D, int64(n-3), 3, -1).FillRange(D, 0, 0, 9), D, each(func(i int) float64 {
			if i >= n-3 {
				return -1
			}
			return d0[i]
		})},
		{"scale", optim.Prog().Scale(D, -1.5), D, each(func(i int) float64 { return -1.5 * d0[i] })},
		{"scale zero", optim.Prog().Scale(D, 0), D, each(func(int) float64 { return 0 })},
		{"add const", optim.Prog().AddConst(D, 2.25), D, each(func(i int) float64 { return d0[i] + 2.25 })},
		{"axpy", optim.Prog().Axpy(D, 0.7, A), D, each(func(i int) float64 { return d0[i] + 0.7*a[i] })},
		{"axpy alpha 1", optim.Prog().Axpy(D, 1, A), D, each(func(i int) float64 { return d0[i] + a[i] })},
		{"axpy alpha 0", optim.Prog().Axpy(D, 0, A), D, d0},
		{"axpy self", optim.Prog().Axpy(D, 1, D), D, each(func(i int) float64 { return 2 * d0[i] })},
		{"axpy self negative", optim.Prog().Axpy(D, -3, D), D, each(func(i int) float64 { return -2 * d0[i] })},
		{"axpy params", optim.Prog().Axpy(optim.Params, -0.1, A), optim.Params, each(func(i int) float64 { return p0[i] - 0.1*a[i] })},
		{"lincomb", optim.Prog().LinComb(D, optim.Term{Coef: 2, X: A}, optim.Term{Coef: -1, X: B}), D,
			each(func(i int) float64 { return 2*a[i] - b[i] })},
		{"lincomb dst among terms", optim.Prog().LinComb(D, optim.Term{Coef: 3, X: A}, optim.Term{Coef: 0.5, X: D}, optim.Term{Coef: -1, X: B}), D,
			each(func(i int) float64 { return 3*a[i] + 0.5*d0[i] - b[i] })},
		{"lincomb dst twice", optim.Prog().LinComb(D, optim.Term{Coef: 1, X: D}, optim.Term{Coef: 1, X: D}), D,
			each(func(i int) float64 { return 2 * d0[i] })},
		{"lincomb one term", optim.Prog().LinComb(D, optim.Term{Coef: -0.25, X: optim.Params}), D,
			each(func(i int) float64 { return -0.25 * p0[i] })},
		{"lincomb no terms", optim.Prog().LinComb(D), D, each(func(int) float64 { return 0 })},
		{"unary in place", optim.Prog().Unary(A, A, optim.Square), A, each(func(i int) float64 { return a[i] * a[i] })},
		{"binary dst among inputs", optim.Prog().Binary(D, D, A, optim.Sub), D, each(func(i int) float64 { return d0[i] - a[i] })},
		{"binary same input", optim.Prog().Binary(D, A, A, optim.Mul), D, each(func(i int) float64 { return a[i] * a[i] })},
	}
	for k, f := range unary {
		tests = append(tests, tcase{"unary " + semUnaryName(k), optim.Prog().Unary(D, A, k), D, each(func(i int) float64 { return f(a[i]) })})
	}
	for k, f := range binary {
		tests = append(tests, tcase{"binary " + semBinaryName(k), optim.Prog().Binary(D, A, B, k), D, each(func(i int) float64 { return f(a[i], b[i]) })})
	}
	slices.SortFunc(tests, func(x, y tcase) int { return strings.Compare(x.name, y.name) })
	e := semEngine(t, Config{Seed: 1}, m)
	semExec(t, e, optim.Prog().Alloc(A).Alloc(B).Alloc(D))
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			semWrite(t, e, A, a)
			semWrite(t, e, B, b)
			semWrite(t, e, D, d0)
			semWrite(t, e, optim.Params, p0)
			if got := semExec(t, e, tc.prog); len(got) != 0 {
				t.Errorf("emitted scalars %v", got)
			}
			semCheckVec(t, "result", semRead(t, e, tc.dst), tc.want, 1e-7, 2e-6)
			// Sources are untouched.
			for h, v := range map[optim.Vec][]float64{A: a, B: b, D: d0, optim.Params: p0} {
				if h == tc.dst {
					continue
				}
				if got := semRead(t, e, h); !slices.Equal(got, v) {
					t.Errorf("handle %d changed", h)
				}
			}
		})
	}
}

func semSign(x float64) int {
	switch {
	case x > 0:
		return 1
	case x < 0:
		return -1
	}
	return 0
}

func semUnaryName(k optim.UnaryKind) string {
	return [...]string{"?", "abs", "sign", "sqrt", "square", "softplus", "exp", "log", "reciprocal"}[k]
}

func semBinaryName(k optim.BinaryKind) string {
	return [...]string{"?", "mul", "div", "add", "sub", "max", "min"}[k]
}

func TestRandN(t *testing.T) {
	const n = 20000
	two := func(seed int64) *Engine {
		return semEngine(t, Config{Seed: seed}, semWide(t, n))
	}
	e := two(5)
	semExec(t, e, optim.Prog().Alloc(1).Alloc(2).Alloc(3).Alloc(4))
	semExec(t, e, optim.Prog().RandN(1, 1, 11).RandN(2, 1, 11).RandN(3, 1, 12).RandN(4, 2.5, 11))
	v1, v2, v3, v4 := semRead(t, e, 1), semRead(t, e, 2), semRead(t, e, 3), semRead(t, e, 4)
	if !slices.Equal(v1, v2) {
		t.Error("RandN with the same seed gave different vectors")
	}
	if slices.Equal(v1, v3) {
		t.Error("RandN with seeds 11 and 12 gave the same vector")
	}
	semCheckVec(t, "std 2.5 vs 2.5·(std 1), same seed", v4, semMap(v1, func(x float64) float64 { return 2.5 * x }), 1e-6, 1e-6)

	// Statistics of the draws respect Std.
	for _, std := range []float64{0.3, 4} {
		semExec(t, e, optim.Prog().RandN(1, std, 77))
		v := semRead(t, e, 1)
		var s, ss float64
		for _, x := range v {
			s += x
			ss += x * x
		}
		mean := s / n
		sd := math.Sqrt(ss/n - mean*mean)
		if math.Abs(mean) > 5*std/math.Sqrt(n) || math.Abs(sd/std-1) > 0.03 {
			t.Errorf("RandN std %v: sample mean %v, sample std %v", std, mean, sd)
		}
	}
	semExec(t, e, optim.Prog().RandN(1, 0, 3))
	if v := semRead(t, e, 1); slices.ContainsFunc(v, func(x float64) bool { return x != 0 }) {
		t.Error("RandN with std 0 is not zero")
	}

	// Seed 0 draws from the host stream: fresh each time, fixed by the
	// run's seed, and untouched by seeded draws.
	a := two(5)
	semExec(t, a, optim.Prog().Alloc(1).RandN(1, 1, 0))
	a1 := semRead(t, a, 1)
	semExec(t, a, optim.Prog().RandN(1, 1, 0))
	a2 := semRead(t, a, 1)
	b := two(5)
	semExec(t, b, optim.Prog().Alloc(1).Alloc(2).RandN(2, 1, 11).RandN(1, 1, 0))
	b1 := semRead(t, b, 1)
	c := two(6)
	semExec(t, c, optim.Prog().Alloc(1).RandN(1, 1, 0))
	c1 := semRead(t, c, 1)
	switch {
	case slices.Equal(a1, a2):
		t.Error("two seed-0 draws are identical")
	case !slices.Equal(a1, b1):
		t.Error("seed-0 draw depends on an earlier seeded draw, or is not fixed by the run's seed")
	case slices.Equal(a1, c1):
		t.Error("seed-0 draws of runs with seeds 5 and 6 are identical")
	case slices.Equal(a1, v1):
		t.Error("seed-0 draw equals the seed-11 draw")
	}
	// A seeded draw is the same in another run and after seed-0 draws.
	semExec(t, c, optim.Prog().RandN(1, 1, 11))
	if !slices.Equal(semRead(t, c, 1), v1) {
		t.Error("seeded draw differs between runs")
	}
	// RandN on live parameters.
	semExec(t, c, optim.Prog().RandN(optim.Params, 1, 11))
	if !slices.Equal(semRead(t, c, optim.Params), v1) {
		t.Error("seeded draw into Params differs")
	}
}

func semMap(v []float64, f func(float64) float64) []float64 {
	out := make([]float64, len(v))
	for i, x := range v {
		out[i] = f(x)
	}
	return out
}

// TestDotNorm checks Dot and Norm against float64 sums of the float32
// contents, to float64 accuracy.
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
	semExec(t, e, optim.Prog().Alloc(1).Alloc(2))
	semWrite(t, e, 1, a)
	semWrite(t, e, 2, b)
	got := semExec(t, e, optim.Prog().Dot(1, 2).Norm(1).Dot(1, 1).Norm(2).Dot(2, optim.Params))
	p := semRead(t, e, optim.Params)
	dot := func(x, y []float64) float64 {
		var s float64
		for i := range x {
			s += x[i] * y[i]
		}
		return s
	}
	want := []float64{dot(a, b), math.Sqrt(dot(a, a)), dot(a, a), math.Sqrt(dot(b, b)), dot(b, p)}
	if len(got) != len(want) {
		t.Fatalf("%d scalars, want %d", len(got), len(want))
	}
	scale := []float64{dot(semMap(a, math.Abs), semMap(b, math.Abs)), want[1], want[2], want[3], dot(semMap(b, math.Abs), semMap(p, math.Abs))}
	for i := range want {
		if math.Abs(got[i]-want[i]) > 1e-12*scale[i] {
			t.Errorf("scalar %d = %.17g, want %.17g (error %.3g of scale %.3g)", i, got[i], want[i], math.Abs(got[i]-want[i]), scale[i])
		}
	}
}

// TestScalarsInOpOrder checks that scalars come back in op order, with Grad
// emitting loss then accuracy, and that Exec counts ops.
func TestScalarsInOpOrder(t *testing.T) {
	m := semTiny(t, []int64{4}, 5, 3)
	e := semEngine(t, Config{Seed: 2}, m)
	x, y := semData(6, 4, 3, 5)
	semBatch(t, e, 0, x, y)
	semExec(t, e, optim.Prog().Alloc(2).RandN(2, 1, 5))
	r2 := semRead(t, e, 2)
	p := semRead(t, e, optim.Params)
	execs0, ops0 := e.Stats()
	prog := optim.Prog().Alloc(1).RandN(1, 1, 5).Norm(1).
		Grad(0, optim.Params, optim.Batch{}, optim.BNUpdate).
		Dot(1, optim.Params).Norm(optim.Params).
		Grad(1, 1, optim.Batch{}, optim.BNFreeze).Fill(1, 3).Norm(1)
	got := semExec(t, e, prog)
	norm := func(v []float64) float64 { return math.Sqrt(semDot(v, v)) }
	l1, a1 := semLoss(m, p, x, y, 0)
	l2, a2 := semLoss(m, r2, x, y, 0)
	want := []float64{norm(r2), l1, a1, semDot(r2, p), norm(p), l2, a2, 3 * math.Sqrt(float64(m.Numel))}
	semCheckVec(t, "scalars", got, want, 1e-6, 1e-6)
	if execs, ops := e.Stats(); execs != execs0+1 || ops != ops0+int64(len(prog.Ops)) {
		t.Errorf("Stats: %d execs, %d ops after one program of %d ops (before: %d, %d)", execs, ops, len(prog.Ops), execs0, ops0)
	}
	if r := semExec(t, e, optim.Prog()); len(r) != 0 {
		t.Errorf("empty program returned %v", r)
	}
}

func semDot(x, y []float64) float64 {
	var s float64
	for i := range x {
		s += x[i] * y[i]
	}
	return s
}
