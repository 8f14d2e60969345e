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
	"github.com/optlab/optlab/host/tensor"
	"github.com/optlab/optlab/internal/testutil"
	"github.com/optlab/optlab/sdk/optim"
	"github.com/optlab/optlab/sdk/optimtest"
)

// The engine's registers, segment ops, Read and Report and its counters.
// The conformance suite checks the op semantics against tolerances; these
// tests check what is the engine's own: bitwise equality of register and
// immediate coefficients on the CPU, float64 register arithmetic bitwise as
// Go's, segment reductions on real model layouts, and the counters.

// regCNN is a real model layout with 4-D convolution weights, biases and
// BatchNorm parameters.
func regCNN(t *testing.T) *model.Model {
	t.Helper()
	m, err := model.NewCNN(10, []int64{1, 8, 8})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// regRand writes random values of a wide range into handle h and returns
// them (as float32 values).
func regRand(t *testing.T, e *Engine, h optim.Vec, n int, seed uint64) []float64 {
	t.Helper()
	r := rand.New(rand.NewPCG(seed, 7))
	v := make([]float64, n)
	for i := range v {
		v[i] = float64(float32(math.Pow(10, 3*r.Float64()-2) * r.NormFloat64()))
	}
	semWrite(t, e, h, v)
	return v
}

// bits tells whether two vectors are bitwise equal (NaN payloads included).
func bits(a, b []float64) bool {
	return slices.EqualFunc(a, b, func(x, y float64) bool { return math.Float64bits(x) == math.Float64bits(y) })
}

// TestRegisterCoefficientsBitwise checks that on the CPU every coefficient
// op gives bitwise the same vector with an immediate K(c) as with a
// register holding c computed by Arith from immediates (c·1).
func TestRegisterCoefficientsBitwise(t *testing.T) {
	m := regCNN(t)
	e := semEngine(t, Config{Seed: 1}, m)
	n := int(m.Numel)
	semExec(t, e, optim.Prog().Alloc(1, 0).Alloc(2, 0).Alloc(3, 0).Alloc(4, 0))
	regRand(t, e, 3, n, 1)
	y := regRand(t, e, 4, n, 2)
	ops := []struct {
		name string
		op   func(p *optim.Program, dst optim.Vec, c optim.Num)
	}{
		{"Fill", func(p *optim.Program, d optim.Vec, c optim.Num) { p.Fill(d, c) }},
		{"Scale", func(p *optim.Program, d optim.Vec, c optim.Num) { p.Scale(d, c) }},
		{"AddConst", func(p *optim.Program, d optim.Vec, c optim.Num) { p.AddConst(d, c) }},
		{"Axpy", func(p *optim.Program, d optim.Vec, c optim.Num) { p.Axpy(d, c, 3) }},
		{"LinComb", func(p *optim.Program, d optim.Vec, c optim.Num) {
			p.LinComb(d, optim.Term{Coef: c, X: 3}, optim.Term{Coef: optim.K(0.5), X: 4}, optim.Term{Coef: c, X: 4})
		}},
		{"LinComb/dst first", func(p *optim.Program, d optim.Vec, c optim.Num) {
			p.LinComb(d, optim.Term{Coef: c, X: d}, optim.Term{Coef: c, X: 3})
		}},
		{"LinComb/dst later", func(p *optim.Program, d optim.Vec, c optim.Num) {
			p.LinComb(d, optim.Term{Coef: c, X: 3}, optim.Term{Coef: c, X: d}, optim.Term{Coef: optim.K(-2), X: 4})
		}},
	}
	for _, op := range ops {
		for _, c := range []float64{0.37, -1.5, 1, 1e-3 / 3, 2.5e7, math.Pi} {
			semWrite(t, e, 1, y)
			semWrite(t, e, 2, y)
			p := optim.Prog()
			op.op(p, 1, optim.K(c))
			op.op(p, 2, p.Mul(optim.K(c), optim.K(1)))
			semExec(t, e, p)
			a, b := semRead(t, e, 1), semRead(t, e, 2)
			if !bits(a, b) {
				t.Errorf("%s with %g: a register coefficient gives other bits than the immediate", op.name, c)
			}
		}
	}
}

// TestArithBitwise checks Arith on the CPU against Go's float64
// arithmetic, bitwise, on scalar registers made from immediates and
// registers.
func TestArithBitwise(t *testing.T) {
	e := semEngine(t, Config{Seed: 1}, semWide(t, 4))
	vals := []float64{0.1, 3, -2.5, 1e-300, 7e300, math.Inf(1), math.Inf(-1), math.NaN(), 0, math.Copysign(0, -1)}
	kinds := []optim.ArithKind{optim.ArithAdd, optim.ArithSub, optim.ArithMul, optim.ArithDiv,
		optim.ArithMin, optim.ArithMax, optim.ArithSqrt, optim.ArithRecip, optim.ArithClamp}
	for _, k := range kinds {
		p := optim.Prog()
		var regs []optim.Reg
		var want []float64
		for i, a := range vals {
			for j, b := range vals {
				c := vals[(i+j)%len(vals)]
				ops := []optim.Num{optim.K(a), optim.K(b), optim.K(c)}
				if (i+j)%2 == 1 { // a register operand
					ops[0] = p.Mul(optim.K(a), optim.K(1))
				}
				for n := k.Arity(); n < 3; n++ {
					ops[n] = nil
				}
				regs = append(regs, p.Arith(k, ops[0], ops[1], ops[2]))
				want = append(want, k.Apply(a, b, c))
			}
		}
		p.Read(regs...)
		r, err := e.Exec(context.Background(), p)
		if err != nil {
			t.Fatal(err)
		}
		got := make([]float64, len(regs))
		for i, x := range regs {
			got[i] = r.Get(x)
		}
		for i := range got {
			if math.Float64bits(got[i]) != math.Float64bits(want[i]) && !(math.IsNaN(got[i]) && math.IsNaN(want[i])) {
				t.Errorf("%v #%d (%v, %v): %v, want %v", k, i, vals[i/len(vals)], vals[i%len(vals)], got[i], want[i])
			}
		}
	}
}

// segRef reduces v (and w) per segment in float64.
func segRef(kind optim.SegKind, v, w []float64, sizes []int64) []float64 {
	return optimtest.SegReduceRef(kind, sizes, v, w)
}

// TestSegReduceOnModelLayouts checks every reduction and segmentation on
// the layouts of real models (an MLP and a CNN with BatchNorm) against a
// float64 reference, observing the segment register by filling a vector
// with it (Fill with a segment register) and by scaling a vector of ones.
func TestSegReduceOnModelLayouts(t *testing.T) {
	mlp, err := model.NewMLP(10, []int64{1, 8, 8})
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range []*model.Model{mlp, regCNN(t)} {
		e := semEngine(t, Config{Seed: 2}, m)
		l, _ := e.Layout(context.Background())
		semExec(t, e, optim.Prog().Alloc(1, 0).Alloc(2, 0).Alloc(3, 0).Alloc(4, 0))
		v := regRand(t, e, 1, int(m.Numel), 3)
		w := regRand(t, e, 2, int(m.Numel), 4)
		for _, by := range []optim.Segmentation{optim.PerTensor, optim.PerRow} {
			sizes := l.Members[0].Segments(by)
			for _, kind := range []optim.SegKind{optim.SegSumSq, optim.SegDot, optim.SegSumAbs, optim.SegMaxAbs} {
				p := optim.Prog()
				var y optim.Vec
				if kind == optim.SegDot {
					y = 2
				}
				r := p.SegReduce(kind, by, 1, y)
				p.Fill(3, r).Fill(4, optim.K(1)).Scale(4, r)
				semExec(t, e, p)
				want := segRef(kind, v, w, sizes)
				got, scaled := semRead(t, e, 3), semRead(t, e, 4)
				if !bits(got, scaled) {
					t.Errorf("%s %v %v: Scale of ones by a segment register differs from Fill", m.Arch, by, kind)
				}
				// Float32 sums: relative to Σ|terms| (exact for max|x|).
				scale := segRef(optim.SegSumAbs, semMulVec(v, v), nil, sizes)
				switch kind {
				case optim.SegDot:
					scale = segRef(optim.SegSumAbs, semMulVec(v, w), nil, sizes)
				case optim.SegSumAbs:
					scale = want
				case optim.SegMaxAbs:
					scale = make([]float64, len(sizes))
				}
				off := 0
				for s, n := range sizes {
					for i := off; i < off+int(n); i++ {
						if d := math.Abs(got[i] - float64(float32(want[s]))); d > 4e-5*scale[s] {
							t.Fatalf("%s %v %v: segment %d (of %d) = %v, want %v", m.Arch, by, kind, s, len(sizes), got[i], want[s])
						}
					}
					off += int(n)
				}
			}
		}
	}
}

func semMulVec(a, b []float64) []float64 {
	out := make([]float64, len(a))
	for i := range a {
		out[i] = a[i] * b[i]
	}
	return out
}

// TestSegmentCoefficients checks per-layer normalization with segment
// registers in one program: g ← g / ‖g‖_tensor (Arith on a segment
// register, then Scale by it), against the float64 reference.
func TestSegmentCoefficients(t *testing.T) {
	m := regCNN(t)
	e := semEngine(t, Config{Seed: 5}, m)
	l, _ := e.Layout(context.Background())
	semExec(t, e, optim.Prog().Alloc(1, 0).Alloc(2, 0).Alloc(3, 0))
	v := regRand(t, e, 1, int(m.Numel), 8)
	p := optim.Prog()
	inv := p.Recip(p.Add(p.SegNorm(optim.PerTensor, 1), optim.K(1e-12)))
	p.Copy(2, 1).Scale(2, inv)
	p.Copy(3, 1).Axpy(3, p.Mul(inv, optim.K(-0.5)), 1) // v − ½v/‖v‖
	semExec(t, e, p)
	got, axpy := semRead(t, e, 2), semRead(t, e, 3)
	sizes := l.Members[0].Segments(optim.PerTensor)
	norms := segRef(optim.SegSumSq, v, nil, sizes)
	off := 0
	for s, n := range sizes {
		for i := off; i < off+int(n); i++ {
			want := v[i] / (math.Sqrt(norms[s]) + 1e-12)
			if math.Abs(got[i]-want) > 1e-5*math.Abs(want)+1e-30 {
				t.Fatalf("element %d (segment %d): %v, want %v", i, s, got[i], want)
			}
			if wa := v[i] - 0.5*want; math.Abs(axpy[i]-wa) > 1e-5*(math.Abs(v[i])+math.Abs(want)) {
				t.Fatalf("element %d: v − ½v·c = %v, want %v", i, axpy[i], wa)
			}
		}
		off += int(n)
	}
}

// TestTopKMask checks TopKMask with an immediate fraction, a scalar
// register and a segment register (one fraction per segment), with ties.
func TestTopKMask(t *testing.T) {
	m := regCNN(t)
	e := semEngine(t, Config{Seed: 6}, m)
	l, _ := e.Layout(context.Background())
	semExec(t, e, optim.Prog().Alloc(1, 0).Alloc(2, 0).Alloc(3, 0))
	v := regRand(t, e, 1, int(m.Numel), 9)
	for i := 0; i < len(v); i += 5 { // ties
		v[i] = 0.25
	}
	semWrite(t, e, 1, v)
	for _, by := range []optim.Segmentation{optim.PerTensor, optim.PerRow} {
		sizes := l.Members[0].Segments(by)
		cases := []struct {
			name  string
			build func(p *optim.Program) optim.Num
			frac  func(s int) float64
		}{
			{"immediate", func(*optim.Program) optim.Num { return optim.K(0.3) }, func(int) float64 { return 0.3 }},
			{"register", func(p *optim.Program) optim.Num { return p.Mul(optim.K(0.45), optim.K(1)) }, func(int) float64 { return 0.45 }},
			{"segment register", func(p *optim.Program) optim.Num {
				// Σ|x| / (2·Σ|x|): ½ in every segment (where Σ|x| ≠ 0).
				a := p.SegReduce(optim.SegSumAbs, by, 1, 0)
				return p.Div(a, p.Mul(a, optim.K(2)))
			}, func(int) float64 { return 0.5 }},
		}
		for _, c := range cases {
			p := optim.Prog()
			p.TopKMask(2, 1, by, c.build(p))
			semExec(t, e, p)
			if got, want := semRead(t, e, 2), optimtest.TopKMaskRef(v, sizes, c.frac); !slices.Equal(got, want) {
				t.Errorf("%v %s: mask differs from the reference", by, c.name)
			}
		}
	}
}

// regSAM appends a SAM step to p: g = ∇L(θ); e = ρ·g/‖g‖; g = ∇L(θ+e);
// θ ← base step; with the metrics reported.
func regSAM(p *optim.Program, rho float64) {
	ev := p.Grad(1, optim.Params, optim.Batch{}, optim.BNUpdate)
	c := p.Div(optim.K(rho), p.Add(p.Norm(1), optim.K(1e-12)))
	p.Copy(2, optim.Params).Axpy(2, c, 1)
	p.Grad(1, 2, optim.Batch{}, optim.BNUpdate)
	p.BaseStep(optim.Params, 1)
	p.ReportMetrics(ev.Loss, ev.Acc)
}

// TestReadReportCounters checks that a SAM step written as one program
// with Report ops costs one Exec and no blocking read per step, that its
// reports come back through TakeReports with the values a Read gives, and
// that a Read costs one blocking read per Exec.
func TestReadReportCounters(t *testing.T) {
	m := semTiny(t, []int64{4}, 5, 3)
	x, y := testutil.Features(8, 4, 3, 5)
	ctx := context.Background()
	e := semEngine(t, Config{Seed: 3, Base: BaseConfig{Name: "sgd"}}, m)
	semBatch(t, e, 0, x, y)
	semExec(t, e, optim.Prog().Alloc(1, 0).Alloc(2, 0))
	// A twin engine that Reads what the other reports.
	f := semEngine(t, Config{Seed: 3, Base: BaseConfig{Name: "sgd"}}, m)
	semBatch(t, f, 0, x, y)
	semExec(t, f, optim.Prog().Alloc(1, 0).Alloc(2, 0))
	for step := range int64(4) {
		e.BeginStep(step, 0.1)
		before := e.Counters()
		p := optim.Prog()
		regSAM(p, 0.05)
		if _, err := e.Exec(ctx, p); err != nil {
			t.Fatal(err)
		}
		reps, err := e.TakeReports(ctx)
		if err != nil {
			t.Fatal(err)
		}
		vals, err := reps.Values(ctx)
		if err != nil {
			t.Fatal(err)
		}
		after := e.Counters()
		d := Counters{Execs: after.Execs - before.Execs, Ops: after.Ops - before.Ops,
			BlockingReads: after.BlockingReads - before.BlockingReads, HostToDevice: after.HostToDevice - before.HostToDevice}
		if d != (Counters{Execs: 1, Ops: int64(len(p.Ops))}) {
			t.Errorf("step %d: %+v, want 1 Exec of %d ops, no blocking read and no host→device copy", step, d, len(p.Ops))
		}
		if !slices.Equal(reps.Names, []string{"loss", "acc"}) || reps.NonFinite() {
			t.Errorf("step %d: reports %v (non-finite %v)", step, reps.Names, reps.NonFinite())
		}

		f.BeginStep(step, 0.1)
		q := optim.Prog()
		ev := q.Grad(1, optim.Params, optim.Batch{}, optim.BNUpdate)
		c := q.Div(optim.K(0.05), q.Add(q.Norm(1), optim.K(1e-12)))
		q.Copy(2, optim.Params).Axpy(2, c, 1)
		q.Grad(1, 2, optim.Batch{}, optim.BNUpdate)
		q.BaseStep(optim.Params, 1)
		q.Read(ev.Loss, ev.Acc)
		before = f.Counters()
		r, err := f.Exec(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		if d := f.Counters().BlockingReads - before.BlockingReads; d != 1 {
			t.Errorf("step %d: an Exec with Read ops made %d blocking reads, want 1", step, d)
		}
		if vals["loss"] != r.Get(ev.Loss) || vals["acc"] != r.Get(ev.Acc) {
			t.Errorf("step %d: reported %v, read loss %v acc %v", step, vals, r.Get(ev.Loss), r.Get(ev.Acc))
		}
		if !bits(semRead(t, e, optim.Params), semRead(t, f, optim.Params)) {
			t.Fatalf("step %d: the reporting and the reading engine diverged", step)
		}
	}
}

// TestReportErrors checks the per-step rules of Report: a name once per
// step (across programs), a new step after BeginStep, nothing reported by
// a failing program, and the non-finite flag.
func TestReportErrors(t *testing.T) {
	ctx := context.Background()
	e := semEngine(t, Config{Seed: 4}, semWide(t, 8))
	semExec(t, e, optim.Prog().Alloc(1, 0))
	report := func(name string, v float64) *optim.Program {
		p := optim.Prog()
		p.Report(name, p.Mul(optim.K(v), optim.K(1)))
		return p
	}
	e.BeginStep(0, 0.1)
	if _, err := e.Exec(ctx, report("a", 1)); err != nil {
		t.Fatal(err)
	}
	p := report("b", 2)
	p.Report("b", p.Mul(optim.K(3), optim.K(1)))
	_, err := e.Exec(ctx, p)
	var oe *optim.OpError
	if !errors.As(err, &oe) || oe.Index != 3 || !strings.Contains(err.Error(), `"b" reported twice in one program`) {
		t.Errorf("a name twice in one program: %v", err)
	}
	_, err = e.Exec(ctx, report("a", 4))
	if !errors.As(err, &oe) || !strings.Contains(err.Error(), `"a" already reported in this step`) {
		t.Errorf("a name twice in one step: %v", err)
	}
	if _, err := e.Exec(ctx, report("c", math.Inf(1))); err != nil {
		t.Fatal(err)
	}
	reps, err := e.TakeReports(ctx)
	if err != nil {
		t.Fatal(err)
	}
	vals, err := reps.Values(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(vals) != 2 || vals["a"] != 1 || !math.IsInf(vals["c"], 1) || !reps.NonFinite() {
		t.Errorf("reports %v (non-finite flag %v), want a=1 and c=+Inf flagged", vals, reps.NonFinite())
	}
	// Taken: "a" may be reported again; after BeginStep an untaken one is
	// dropped.
	if _, err := e.Exec(ctx, report("a", 5)); err != nil {
		t.Fatal(err)
	}
	e.BeginStep(1, 0.1)
	if _, err := e.Exec(ctx, report("b", 6)); err != nil {
		t.Fatal(err)
	}
	reps, _ = e.TakeReports(ctx)
	if vals, _ := reps.Values(ctx); len(vals) != 1 || vals["b"] != 6 || reps.NonFinite() {
		t.Errorf("reports of step 1: %v", vals)
	}
}

// TestProgramErrRefused checks that a program whose builder recorded a
// misuse fails before any op runs.
func TestProgramErrRefused(t *testing.T) {
	e := semEngine(t, Config{Seed: 4}, semWide(t, 8))
	other := optim.Prog()
	r := other.Mul(optim.K(1), optim.K(2))
	p := optim.Prog().Alloc(1, 0)
	p.Scale(1, r)
	if p.Err() == nil {
		t.Fatal("the builder recorded no misuse")
	}
	if _, err := e.Exec(context.Background(), p); err == nil || !strings.Contains(err.Error(), "another program") {
		t.Fatalf("Exec: %v", err)
	}
	if _, ok := e.allocated(1); ok {
		t.Error("the Alloc before the misuse ran")
	}
}

// TestDebugNonFinite checks that with Config.DebugNonFinite the first op
// that writes a non-finite value into a vector or a register fails,
// naming the op and the handle (by its namespaced name) or register; in a
// gradient pass, the model's first op that computes with the NaN.
func TestDebugNonFinite(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		name  string
		nan   bool // v holds a NaN before the program
		build func(hs *optim.Handles, v optim.Vec) *optim.Program
		index int
		want  string
	}{
		{"vector", false, func(hs *optim.Handles, v optim.Vec) *optim.Program {
			return hs.Prog().Fill(v, optim.K(-1)).Scale(v, optim.K(2)).Unary(v, v, optim.Log).Scale(v, optim.K(0))
		}, 2, "op 2 (Unary): handle t/v holds a non-finite value"},
		{"register", false, func(hs *optim.Handles, v optim.Vec) *optim.Program {
			p := hs.Prog().Fill(v, optim.K(0))
			p.Scale(v, p.Recip(p.Norm(v)))
			return p
		}, 2, "op 2 (Arith): this op set register #2 (value) to a non-finite value"},
		{"loss", true, func(hs *optim.Handles, v optim.Vec) *optim.Program {
			p := hs.Prog()
			p.Grad(0, v, optim.Batch{}, optim.BNUpdate)
			return p
		}, 0, "op 0 (Grad): linear: non-finite output (TrapNonFinite)"},
		{"immediate", false, func(hs *optim.Handles, v optim.Vec) *optim.Program {
			return hs.Prog().Fill(optim.Params, optim.K(math.Inf(1)))
		}, 0, "op 0 (Fill): handle params[0] holds"},
	} {
		t.Run(c.name, func(t *testing.T) {
			m := semTiny(t, []int64{4}, 5, 3)
			x, y := testutil.Features(8, 4, 3, 5)
			e := semEngine(t, Config{Seed: 3, DebugNonFinite: true}, m)
			semBatch(t, e, 0, x, y)
			hs := optim.NewHandles().Sub("t")
			v := hs.New("v")
			semExec(t, e, optim.Prog().Alloc(v, 0))
			if c.nan {
				vals := make([]float64, m.Numel)
				vals[3] = math.NaN()
				semWrite(t, e, v, vals)
			}
			_, err := e.Exec(ctx, c.build(hs, v))
			var oe *optim.OpError
			if !errors.As(err, &oe) || oe.Index != c.index || !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %v, want op %d: %q", err, c.index, c.want)
			}
		})
	}
	// Off by default: the same program runs.
	e := semEngine(t, Config{Seed: 3}, semWide(t, 8))
	semExec(t, e, optim.Prog().Alloc(1, 0).Fill(1, optim.K(-1)).Unary(1, 1, optim.Log))
}

// With Config.DebugNonFinite the engine fills every fresh CPU allocation
// with NaN (and its guard) while it is open, and Close puts the fill back
// as it was.
func TestDebugNonFiniteFillsFresh(t *testing.T) {
	was, err := tensor.FillFreshWithNaN(false)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _, _ = tensor.FillFreshWithNaN(was) }()
	e, err := New(context.Background(), semWorker(), Config{Seed: 1, DebugNonFinite: true, Device: tensor.CPU},
		[]*model.Model{semTiny(t, []int64{4}, 5, 3)})
	if err != nil {
		t.Fatal(err)
	}
	on, err := tensor.FillFreshWithNaN(true) // reads the state, leaves it on
	e.Close()
	after, _ := tensor.FillFreshWithNaN(false)
	if err != nil || !on || after {
		t.Errorf("fill while open %v (%v), after Close %v; want on, then off", on, err, after)
	}
}
