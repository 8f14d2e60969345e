package optimtest

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/optlab/optlab/sdk/opset"
	"github.com/optlab/optlab/sdk/optim"
)

// The cases of the register and segment ops of protocol minor 5 (Arith,
// register coefficients, SegReduce, TopKMask, Read, Report), and the
// helpers that build vectors of known values and check vectors against
// values the suite computes in float64. Values are small multiples of 1/8,
// so that a float32 device holds and sums them exactly.

// span is one segment of a member's vector: the indices of its elements,
// in order (a run for PerTensor and PerRow, a stride for PerColumn).
type span []int64

// segments returns the segments of member m's vector under by, in order
// (MemberLayout.SegmentOf): one per tensor of the Layout (PerTensor), one
// per row, the first dimension of each tensor (PerRow; a 0-D tensor is
// one segment), or one per column of each tensor's 2-D view (PerColumn; a
// tensor of fewer than two dims is one segment). A member without tensors
// is one tensor of shape [Numel].
func (c *conf) segments(m int, by optim.Segmentation) []span {
	ml := c.l.Members[m]
	out := make([]span, len(ml.Segments(by)))
	for i, j := range ml.SegmentOf(by) {
		out[j] = append(out[j], int64(i))
	}
	return out
}

// spread returns the vector of member m whose elements in segment j (under
// by) are per[j].
func (c *conf) spread(m int, by optim.Segmentation, per []float64) []float64 {
	v := make([]float64, c.n(m))
	for j, s := range c.segments(m, by) {
		for _, i := range s {
			v[i] = per[j]
		}
	}
	return v
}

// pattern returns known values for a vector of member m: each row (PerRow
// segment) holds two values, one on its first half and one on the rest,
// of both signs and magnitudes in {1/8, …, 11/8} that repeat (ties), set by
// seed.
func (c *conf) pattern(m, seed int) []float64 {
	v := make([]float64, c.n(m))
	for j, s := range c.segments(m, optim.PerRow) {
		h := (int64(len(s)) + 1) / 2
		for i := range int64(len(s)) {
			half := 0
			if i >= h {
				half = 1
			}
			x := float64((3*seed+5*j+7*half)%11+1) / 8
			if (j+half+seed)%2 == 1 {
				x = -x
			}
			v[s[i]] = x
		}
	}
	return v
}

// expectVec expects vector v to hold want: ‖v − want‖ is at most
// Tol·max(1, ‖want‖).
func (c *conf) expectVec(what string, v optim.Vec, want []float64) {
	m := c.member(v)
	e, d := c.known(m, "want", want), c.alloc(m, "diff")
	c.p().LinComb(d, optim.Term{Coef: optim.K(1), X: v}, optim.Term{Coef: optim.K(-1), X: e})
	nd, ne := c.norm(d), c.norm(e)
	c.expect(what, func(get func(ref) float64) error {
		if diff, scale := get(nd), get(ne); !(diff <= c.opts.Tol*max(1, scale)) {
			return fmt.Errorf("‖got − want‖ = %.6g for ‖want‖ = %.6g; want %v", diff, scale, abbrev(want))
		}
		return nil
	})
}

// expectSeg expects segment register r (of member m's layout under by) to
// hold want, one value per segment: a vector filled with r must be want
// spread over the segments.
func (c *conf) expectSeg(what string, r optim.Reg, m int, by optim.Segmentation, want []float64) {
	if n := len(c.segments(m, by)); len(want) != n {
		c.t.Fatalf("suite bug: %d values for %d segments", len(want), n)
	}
	v := c.alloc(m, "seg")
	c.p().Fill(v, r)
	c.expectVec(what, v, c.spread(m, by, want))
}

// abbrev prints the first values of v.
func abbrev(v []float64) string {
	if len(v) <= 12 {
		return fmt.Sprint(v)
	}
	return fmt.Sprintf("%v… (%d values)", v[:12], len(v))
}

// unit returns member 0's vector with 1 at index 0 and 0 elsewhere
// (allocated on first use).
func (c *conf) unit() optim.Vec {
	if v, ok := c.units[0]; ok {
		return v
	}
	v := c.alloc(0, "unit")
	c.p().FillRange(v, 0, 1, 1)
	c.units[0] = v
	return v
}

// regOf returns a scalar register of the program being built that holds x,
// computed on the host (a Dot of a vector holding x at index 0 with the
// unit vector), not an immediate.
func (c *conf) regOf(x float64) optim.Reg {
	v := c.alloc(0, "x")
	c.p().FillRange(v, 0, 1, x)
	return c.p().Dot(v, c.unit())
}

// segReduce is SegReduceRef over the segments ss (element indices).
func segReduce(k optim.SegKind, ss []span, x, y []float64) []float64 {
	out := make([]float64, len(ss))
	for j, s := range ss {
		xs, ys := gather(x, s), gather(y, s)
		out[j] = SegReduceRef(k, []int64{int64(len(s))}, xs, ys)[0]
	}
	return out
}

// topK is TopKMaskRef over the segments ss (element indices).
func topK(ss []span, x []float64, frac func(j int) float64) []float64 {
	mask := make([]float64, len(x))
	for j, s := range ss {
		m := TopKMaskRef(gather(x, s), []int64{int64(len(s))}, func(int) float64 { return frac(j) })
		for i, e := range s {
			mask[e] = m[i]
		}
	}
	return mask
}

// gather returns the elements idx of x (nil for a nil x).
func gather(x []float64, idx span) []float64 {
	if x == nil {
		return nil
	}
	out := make([]float64, len(idx))
	for i, e := range idx {
		out[i] = x[e]
	}
	return out
}

// SegReduceRef is SegReduce in float64 over consecutive segments of the
// given sizes (which tile x): what the suite expects of every host, and
// a reference for a host's own tests.
func SegReduceRef(k optim.SegKind, sizes []int64, x, y []float64) []float64 {
	out := make([]float64, len(sizes))
	off := 0
	for j, n := range sizes {
		for i := off; i < off+int(n); i++ {
			switch k {
			case optim.SegSumSq:
				out[j] += x[i] * x[i]
			case optim.SegDot:
				out[j] += x[i] * y[i]
			case optim.SegSumAbs:
				out[j] += math.Abs(x[i])
			case optim.SegMaxAbs:
				out[j] = math.Max(out[j], math.Abs(x[i]))
			}
		}
		off += int(n)
	}
	return out
}

// TopKMaskRef is the mask of TopKMask over consecutive segments of the
// given sizes with fraction frac(j) for segment j: 1 on the ⌊frac·n + ½⌋
// (clamped to [0, n]) largest |x| of each segment, ties to the lower index.
func TopKMaskRef(x []float64, sizes []int64, frac func(j int) float64) []float64 {
	mask := make([]float64, len(x))
	off := 0
	for j, n := range sizes {
		k := int(math.Floor(frac(j)*float64(n) + 0.5))
		k = min(max(k, 0), int(n))
		idx := make([]int, n)
		for i := range idx {
			idx[i] = off + i
		}
		slices.SortStableFunc(idx, func(a, b int) int { return cmp.Compare(math.Abs(x[b]), math.Abs(x[a])) })
		for _, i := range idx[:k] {
			mask[i] = 1
		}
		off += int(n)
	}
	return mask
}

var (
	segmentations = []optim.Segmentation{optim.PerTensor, optim.PerRow, optim.PerColumn}
	segKinds      = []optim.SegKind{optim.SegSumSq, optim.SegDot, optim.SegSumAbs, optim.SegMaxAbs}
)

func byName(by optim.Segmentation) string {
	switch by {
	case optim.PerTensor:
		return "per tensor"
	case optim.PerRow:
		return "per row"
	case optim.PerColumn:
		return "per column"
	}
	return fmt.Sprintf("by %d", by)
}

func segKindName(k optim.SegKind) string {
	switch k {
	case optim.SegSumSq:
		return "sumsq"
	case optim.SegDot:
		return "dot"
	case optim.SegSumAbs:
		return "sumabs"
	case optim.SegMaxAbs:
		return "maxabs"
	}
	return fmt.Sprintf("kind %d", k)
}

func arithCasesMinor5() []hostCase {
	nan, inf := math.NaN(), math.Inf(1)
	rows := []struct {
		k       optim.ArithKind
		a, b, x float64
	}{
		{optim.ArithAdd, 1.5, -2, 0}, {optim.ArithSub, 1.5, -2, 0}, {optim.ArithMul, 1.5, -2, 0},
		{optim.ArithDiv, 1.5, -2, 0}, {optim.ArithDiv, 1, 3, 0}, {optim.ArithDiv, 1.5, 0, 0}, {optim.ArithDiv, 0, 0, 0},
		{optim.ArithMin, 1.5, -2, 0}, {optim.ArithMax, 1.5, -2, 0}, {optim.ArithMax, nan, 1, 0},
		{optim.ArithSqrt, 6.25, 0, 0}, {optim.ArithSqrt, 2, 0, 0}, {optim.ArithSqrt, -1, 0, 0},
		{optim.ArithRecip, -4, 0, 0}, {optim.ArithRecip, 3, 0, 0}, {optim.ArithRecip, 0, 0, 0}, {optim.ArithRecip, inf, 0, 0},
		{optim.ArithClamp, 5, 0, 2}, {optim.ArithClamp, -1, 0, 2}, {optim.ArithClamp, 1.5, 0, 2},
	}
	// operands returns the row's operands of kind k built by num (nil
	// beyond k's arity).
	operands := func(k optim.ArithKind, v [3]float64, num func(j int, x float64) optim.Num) [3]optim.Num {
		var out [3]optim.Num
		for j := range k.Arity() {
			out[j] = num(j, v[j])
		}
		return out
	}
	var cs []hostCase
	for _, r := range rows {
		v := [3]float64{r.a, r.b, r.x}
		name := fmt.Sprintf("Arith/%v%v", r.k, v[:r.k.Arity()])
		cs = append(cs, hostCase{name: name, run: func(c *conf) {
			want := r.k.Apply(r.a, r.b, r.x)
			forms := []struct {
				what string
				num  func(j int, x float64) optim.Num
			}{
				{"immediates", func(_ int, x float64) optim.Num { return optim.K(x) }},
				{"registers", func(_ int, x float64) optim.Num { return c.regOf(x) }},
				{"a register first", func(j int, x float64) optim.Num {
					if j == 0 {
						return c.regOf(x)
					}
					return optim.K(x)
				}},
			}
			for _, f := range forms {
				o := operands(r.k, v, f.num)
				c.expectScalar(f.what, c.read(c.p().Arith(r.k, o[0], o[1], o[2])), want)
			}
		}})
	}
	return append(cs,
		hostCase{name: "Arith/of a Norm", run: func(c *conf) {
			n := float64(c.n(0))
			g := c.filled(0, "g", 0.5)
			nr := c.p().Norm(g)
			c.expectScalar("‖g‖²", c.read(c.p().Mul(nr, nr)), math.Sqrt(0.25*n)*math.Sqrt(0.25*n))
			c.expectScalar("1/‖g‖", c.read(c.p().Recip(nr)), 1/math.Sqrt(0.25*n))
		}},
		hostCase{name: "Arith/chains of registers", run: func(c *conf) {
			n := float64(c.n(0))
			g := c.filled(0, "g", 0.5)
			nr := c.p().Norm(g)
			e := c.p().Add(nr, optim.K(1e-12))
			s := c.p().Div(optim.K(0.05), e)
			q := c.p().Sqrt(c.p().Mul(s, s))
			d := c.p().Clamp(c.p().Sub(q, s), optim.K(-1), optim.K(1))
			m := c.p().Max(c.p().Min(s, nr), optim.K(0))
			gn := math.Sqrt(0.25 * n)
			gs := 0.05 / (gn + 1e-12)
			c.expectScalar("ρ/(‖g‖+ε)", c.read(s), gs)
			c.expectScalar("√(s·s)", c.read(q), math.Sqrt(gs*gs))
			c.expectScalar("clamp(√(s·s) − s)", c.read(d), math.Min(math.Max(math.Sqrt(gs*gs)-gs, -1), 1))
			c.expectScalar("max(min(s, ‖g‖), 0)", c.read(m), math.Max(math.Min(gs, gn), 0))
		}},
		hostCase{name: "Arith/Mean of gradient passes is Result.Mean", run: func(c *conf) {
			var evs []optim.Eval
			var refs []evalRef
			for _, b := range []optim.Batch{firstHalf, secondHalf, whole} {
				ev := c.gradOp(0, optim.Params, b, optim.BNFreeze)
				evs, refs = append(evs, ev), append(refs, c.eval(ev))
			}
			loss, acc := c.p().Mean(evs)
			ml, ma := c.read(loss), c.read(acc)
			c.expect("device mean = plugin mean", func(get func(ref) float64) error {
				var wl, wa float64
				for _, r := range refs {
					wl += get(r.loss) / 3
					wa += get(r.acc) / 3
				}
				if !c.close(get(ml), wl) || !c.close(get(ma), wa) {
					return fmt.Errorf("device (%.17g, %.17g), plugin (%.17g, %.17g)", get(ml), get(ma), wl, wa)
				}
				return nil
			})
		}},
		hostCase{name: "Arith/kind 0", run: func(c *conf) {
			c.unsupported(func(p *optim.Program) { p.Arith(0, optim.K(1), optim.K(2), nil) })
		}},
		hostCase{name: "Arith/kind 99", run: func(c *conf) {
			c.unsupported(func(p *optim.Program) { p.Arith(99, optim.K(1), optim.K(2), nil) })
		}},
		hostCase{name: "Arith/a unary kind with two operands", run: func(c *conf) {
			c.fails("operand", func(p *optim.Program) { p.Arith(optim.ArithSqrt, optim.K(1), optim.K(2), nil) })
		}},
		hostCase{name: "Arith/a binary kind with three operands", run: func(c *conf) {
			c.fails("operand", func(p *optim.Program) { p.Arith(optim.ArithAdd, optim.K(1), optim.K(2), optim.K(3)) })
		}},
		hostCase{name: "Arith/a register no op has set", run: func(c *conf) {
			c.fails("not set", func(p *optim.Program) {
				p.Ops = append(p.Ops, optim.Arith{Kind: optim.ArithAdd, A: p.Reg(1), B: optim.K(1)})
			})
		}},
		hostCase{name: "Arith/a register beyond the program's", run: func(c *conf) {
			c.p().Norm(c.filled(0, "a", 1))
			c.fails("not set", func(p *optim.Program) {
				p.Ops = append(p.Ops, optim.Arith{Kind: optim.ArithAdd, A: p.Reg(1), B: p.Reg(3)})
			})
			c.p().Norm(optim.Params)
		}},
		hostCase{name: "Arith/a register of another program", run: func(c *conf) {
			a := c.filled(0, "a", 1)
			c.next()
			other := c.hs.Prog()
			r := other.Norm(a)
			c.p().Fill(a, optim.K(2))
			c.p().Add(r, optim.K(1))
			c.refused("another program")
			c.next()
			c.expectConst("a: no op of the refused program ran", a, 1)
		}},
	)
}

// coefOps are the ops that take a coefficient: apply appends the op on d
// (and x) with coefficient k; f is its effect on an element.
var coefOps = []struct {
	name  string
	apply func(p *optim.Program, d, x optim.Vec, k optim.Num)
	f     func(d, x, k float64) float64
}{
	{"Fill", func(p *optim.Program, d, _ optim.Vec, k optim.Num) { p.Fill(d, k) },
		func(_, _, k float64) float64 { return k }},
	{"Scale", func(p *optim.Program, d, _ optim.Vec, k optim.Num) { p.Scale(d, k) },
		func(d, _, k float64) float64 { return k * d }},
	{"AddConst", func(p *optim.Program, d, _ optim.Vec, k optim.Num) { p.AddConst(d, k) },
		func(d, _, k float64) float64 { return d + k }},
	{"Axpy", func(p *optim.Program, d, x optim.Vec, k optim.Num) { p.Axpy(d, k, x) },
		func(d, x, k float64) float64 { return d + k*x }},
	{"LinComb", func(p *optim.Program, d, x optim.Vec, k optim.Num) {
		p.LinComb(d, optim.Term{Coef: k, X: x}, optim.Term{Coef: optim.K(0.5), X: d})
	}, func(d, x, k float64) float64 { return k*x + 0.5*d }},
}

func coefCases() []hostCase {
	var cs []hostCase
	for _, op := range coefOps {
		cs = append(cs, hostCase{name: op.name + "/a register is its immediate", run: func(c *conf) {
			x := c.pattern(0, 1)
			d := c.pattern(0, 2)
			xv := c.known(0, "x", x)
			a, b := c.known(0, "a", d), c.known(0, "b", d)
			op.apply(c.p(), a, xv, optim.K(-0.75))
			op.apply(c.p(), b, xv, c.regOf(-0.75))
			want := make([]float64, len(d))
			for i := range d {
				want[i] = op.f(d[i], x[i], -0.75)
			}
			c.expectVec("with an immediate", a, want)
			c.expectVec("with a register", b, want)
		}})
		for _, by := range segmentations {
			cs = append(cs, hostCase{name: fmt.Sprintf("%s/a segment register %s", op.name, byName(by)), run: func(c *conf) {
				for m := range c.l.Members {
					x, d, s := c.pattern(m, 1), c.pattern(m, 2), c.pattern(m, 3)
					xv, dv := c.known(m, "x", x), c.known(m, "d", d)
					k := c.p().SegReduce(optim.SegMaxAbs, by, c.known(m, "s", s), 0)
					op.apply(c.p(), dv, xv, k)
					ks := c.spread(m, by, segReduce(optim.SegMaxAbs, c.segments(m, by), s, nil))
					want := make([]float64, len(d))
					for i := range d {
						want[i] = op.f(d[i], x[i], ks[i])
					}
					c.expectVec(fmt.Sprintf("member %d", m), dv, want)
				}
			}})
		}
		cs = append(cs, hostCase{name: op.name + "/a segment register of another layout", needs: needLayouts, run: func(c *conf) {
			a, b := c.lm[0], c.lm[1]
			k := c.p().SegReduce(optim.SegMaxAbs, optim.PerTensor, c.filled(a, "s", 1), 0)
			d, x := c.alloc(b, "d"), c.alloc(b, "x")
			c.fails("segment", func(p *optim.Program) { op.apply(p, d, x, k) })
		}})
	}
	return append(cs,
		hostCase{name: "Coef/a register no op has set", run: func(c *conf) {
			a := c.alloc(0, "a")
			c.fails("not set", func(p *optim.Program) { p.Ops = append(p.Ops, optim.Scale{Dst: a, Alpha: p.Reg(1)}) })
			c.p().Norm(a)
		}},
		hostCase{name: "Coef/a register of another program", run: func(c *conf) {
			a := c.filled(0, "a", 1)
			c.next()
			other := c.hs.Prog()
			r := other.Norm(a)
			c.p().Fill(a, optim.K(2)).Axpy(a, r, a)
			c.refused("another program")
			c.next()
			c.expectConst("a: no op of the refused program ran", a, 1)
		}},
	)
}

func segReduceCases() []hostCase {
	var cs []hostCase
	for _, by := range segmentations {
		for _, k := range segKinds {
			cs = append(cs, hostCase{name: fmt.Sprintf("SegReduce/%s %s", segKindName(k), byName(by)), run: func(c *conf) {
				for m := range c.l.Members {
					x, y := c.pattern(m, 1), c.pattern(m, 4)
					xv := c.known(m, "x", x)
					var yv optim.Vec
					if k == optim.SegDot {
						yv = c.known(m, "y", y)
					}
					r := c.p().SegReduce(k, by, xv, yv)
					c.expectSeg(fmt.Sprintf("member %d", m), r, m, by, segReduce(k, c.segments(m, by), x, y))
				}
			}})
		}
		cs = append(cs,
			hostCase{name: "SegReduce/sumabs of ones is the sizes " + byName(by), run: func(c *conf) {
				for m := range c.l.Members {
					r := c.p().SegReduce(optim.SegSumAbs, by, c.one(m), 0)
					var want []float64
					for _, s := range c.segments(m, by) {
						want = append(want, float64(len(s)))
					}
					c.expectSeg(fmt.Sprintf("member %d", m), r, m, by, want)
				}
			}},
			hostCase{name: "SegReduce/dot of x with itself is sumsq " + byName(by), run: func(c *conf) {
				x := c.randn(0, "x", 5)
				a, b := c.p().SegReduce(optim.SegDot, by, x, x), c.p().SegReduce(optim.SegSumSq, by, x, 0)
				va, vb := c.alloc(0, "a"), c.alloc(0, "b")
				c.p().Fill(va, a).Fill(vb, b)
				c.expectSame("dot and sumsq", va, vb)
			}},
			hostCase{name: "SegReduce/of live parameters " + byName(by), run: func(c *conf) {
				for m := range c.l.Members {
					x := c.pattern(m, 2)
					c.p().Copy(optim.ParamsOf(m), c.known(m, "x", x))
					r := c.p().SegReduce(optim.SegSumSq, by, optim.ParamsOf(m), 0)
					c.expectSeg(fmt.Sprintf("member %d", m), r, m, by, segReduce(optim.SegSumSq, c.segments(m, by), x, nil))
				}
			}},
			hostCase{name: "SegReduce/segments tile the vector " + byName(by), run: func(c *conf) {
				// Σ over segments of sumsq is ‖x‖², on the host.
				for m := range c.l.Members {
					x := c.randn(m, "x", 3)
					r := c.p().SegReduce(optim.SegSumSq, by, x, 0)
					v := c.alloc(m, "v")
					c.p().Fill(v, r)
					// Σ_i v_i/n_seg(i) = Σ_j sumsq_j: weight each element by
					// the reciprocal of its segment's size.
					var per []float64
					for _, s := range c.segments(m, by) {
						per = append(per, 1/float64(len(s)))
					}
					w := c.known(m, "w", c.spread(m, by, per))
					total, nx := c.dot(v, w), c.norm(x)
					c.expect(fmt.Sprintf("member %d: Σ segments = ‖x‖²", m), func(get func(ref) float64) error {
						if got, want := get(total), get(nx)*get(nx); !c.closeTo(got, want, float64(len(per))) {
							return fmt.Errorf("%.17g ≠ %.17g", got, want)
						}
						return nil
					})
				}
			}},
		)
	}
	return append(cs,
		hostCase{name: "SegReduce/kind 0", run: func(c *conf) {
			c.unsupported(func(p *optim.Program) { p.SegReduce(0, optim.PerTensor, optim.Params, 0) })
		}},
		hostCase{name: "SegReduce/kind 9", run: func(c *conf) {
			c.unsupported(func(p *optim.Program) { p.SegReduce(9, optim.PerTensor, optim.Params, 0) })
		}},
		hostCase{name: "SegReduce/segmentation 0", run: func(c *conf) {
			c.unsupported(func(p *optim.Program) { p.SegReduce(optim.SegSumSq, 0, optim.Params, 0) })
		}},
		hostCase{name: "SegReduce/segmentation 7", run: func(c *conf) {
			c.unsupported(func(p *optim.Program) { p.SegReduce(optim.SegSumSq, 7, optim.Params, 0) })
		}},
		hostCase{name: "SegReduce/dot of another layout", needs: needLayouts, run: func(c *conf) {
			a, b := c.alloc(c.lm[0], "a"), c.alloc(c.lm[1], "b")
			c.vecFails("has the layout of member", func(p *optim.Program) { p.SegReduce(optim.SegDot, optim.PerTensor, a, b) })
		}},
		hostCase{name: "SegReduce/Read of a segment register", run: func(c *conf) {
			r := c.p().SegReduce(optim.SegSumSq, optim.PerTensor, c.one(0), 0)
			c.fails("per segment", func(p *optim.Program) { p.Read(r) })
		}},
	)
}

func segArithCases() []hostCase {
	// Operands: s1, s2 segment registers (maxabs and sumabs of two
	// patterns), q a scalar register (0.5).
	rows := []struct {
		name  string
		build func(p *optim.Program, s1, s2, q optim.Reg) optim.Reg
		f     func(s1, s2, q float64) float64
	}{
		{"s + 1", func(p *optim.Program, s1, _, _ optim.Reg) optim.Reg { return p.Add(s1, optim.K(1)) },
			func(s1, _, _ float64) float64 { return s1 + 1 }},
		{"1 − s", func(p *optim.Program, s1, _, _ optim.Reg) optim.Reg { return p.Sub(optim.K(1), s1) },
			func(s1, _, _ float64) float64 { return 1 - s1 }},
		{"s·t", func(p *optim.Program, s1, s2, _ optim.Reg) optim.Reg { return p.Mul(s1, s2) },
			func(s1, s2, _ float64) float64 { return s1 * s2 }},
		{"t/q", func(p *optim.Program, _, s2, q optim.Reg) optim.Reg { return p.Div(s2, q) },
			func(_, s2, q float64) float64 { return s2 / q }},
		{"q/t", func(p *optim.Program, _, s2, q optim.Reg) optim.Reg { return p.Div(q, s2) },
			func(_, s2, q float64) float64 { return q / s2 }},
		{"min(s, 0.75)", func(p *optim.Program, s1, _, _ optim.Reg) optim.Reg { return p.Min(s1, optim.K(0.75)) },
			func(s1, _, _ float64) float64 { return math.Min(s1, 0.75) }},
		{"max(q, s)", func(p *optim.Program, s1, _, q optim.Reg) optim.Reg { return p.Max(q, s1) },
			func(s1, _, q float64) float64 { return math.Max(q, s1) }},
		{"√t", func(p *optim.Program, _, s2, _ optim.Reg) optim.Reg { return p.Sqrt(s2) },
			func(_, s2, _ float64) float64 { return math.Sqrt(s2) }},
		{"1/s", func(p *optim.Program, s1, _, _ optim.Reg) optim.Reg { return p.Recip(s1) },
			func(s1, _, _ float64) float64 { return 1 / s1 }},
		{"clamp(s, 0.25, q)", func(p *optim.Program, s1, _, q optim.Reg) optim.Reg {
			return p.Clamp(s1, optim.K(0.25), q)
		}, func(s1, _, q float64) float64 { return math.Min(math.Max(s1, 0.25), q) }},
		{"clamp(q, s, t)", func(p *optim.Program, s1, s2, q optim.Reg) optim.Reg { return p.Clamp(q, s1, s2) },
			func(s1, s2, q float64) float64 { return math.Min(math.Max(q, s1), s2) }},
		{"(s + t)·q of a chain", func(p *optim.Program, s1, s2, q optim.Reg) optim.Reg { return p.Mul(p.Add(s1, s2), q) },
			func(s1, s2, q float64) float64 { return (s1 + s2) * q }},
	}
	var cs []hostCase
	for _, by := range segmentations {
		for _, r := range rows {
			cs = append(cs, hostCase{name: fmt.Sprintf("Arith/segments %s %s", byName(by), r.name), run: func(c *conf) {
				for m := range c.l.Members {
					ss := c.segments(m, by)
					x, y := c.pattern(m, 1), c.pattern(m, 2)
					s1 := c.p().SegReduce(optim.SegMaxAbs, by, c.known(m, "x", x), 0)
					s2 := c.p().SegReduce(optim.SegSumAbs, by, c.known(m, "y", y), 0)
					q := c.regOf(0.5)
					v1, v2 := segReduce(optim.SegMaxAbs, ss, x, nil), segReduce(optim.SegSumAbs, ss, y, nil)
					want := make([]float64, len(ss))
					for j := range want {
						want[j] = r.f(v1[j], v2[j], 0.5)
					}
					c.expectSeg(fmt.Sprintf("member %d", m), r.build(c.p(), s1, s2, q), m, by, want)
				}
			}})
		}
	}
	return append(cs,
		hostCase{name: "Arith/segment registers of different segmentations", run: func(c *conf) {
			a := c.p().SegReduce(optim.SegSumSq, optim.PerTensor, c.one(0), 0)
			b := c.p().SegReduce(optim.SegSumSq, optim.PerRow, c.one(0), 0)
			c.fails("segmentation", func(p *optim.Program) { p.Add(a, b) })
		}},
		hostCase{name: "Arith/segment registers of different layouts", needs: needLayouts, run: func(c *conf) {
			a := c.p().SegReduce(optim.SegSumSq, optim.PerTensor, c.one(c.lm[0]), 0)
			b := c.p().SegReduce(optim.SegSumSq, optim.PerTensor, c.one(c.lm[1]), 0)
			c.fails("segmentation", func(p *optim.Program) { p.Mul(a, b) })
		}},
		hostCase{name: "Arith/segment registers of members of one layout", needs: needMembers, run: func(c *conf) {
			// Members whose tensors have the same shapes share
			// segmentations.
			m := -1
			for k := 1; k < len(c.l.Members) && m < 0; k++ {
				if slices.EqualFunc(c.l.Members[0].Tensors, c.l.Members[k].Tensors,
					func(x, y optim.Tensor) bool { return slices.Equal(x.Shape, y.Shape) }) {
					m = k
				}
			}
			if m < 0 {
				c.t.Skip("needs two members of one layout")
			}
			x, y := c.pattern(0, 1), c.pattern(m, 2)
			a := c.p().SegReduce(optim.SegMaxAbs, optim.PerRow, c.known(0, "x", x), 0)
			b := c.p().SegReduce(optim.SegMaxAbs, optim.PerRow, c.known(m, "y", y), 0)
			ss := c.segments(0, optim.PerRow)
			va, vb := segReduce(optim.SegMaxAbs, ss, x, nil), segReduce(optim.SegMaxAbs, ss, y, nil)
			want := make([]float64, len(ss))
			for j := range want {
				want[j] = va[j] + vb[j]
			}
			s := c.p().Add(a, b)
			c.expectSeg("member 0 + member m", s, 0, optim.PerRow, want)
			c.expectSeg("used on member m", s, m, optim.PerRow, want)
		}},
	)
}

func topKCases() []hostCase {
	type fracForm struct {
		name string
		// num returns the fraction operand and the fraction of segment j.
		num func(c *conf, m int, by optim.Segmentation) (optim.Num, func(j int) float64)
	}
	imm := func(f float64) fracForm {
		return fracForm{fmt.Sprintf("fraction %g", f), func(*conf, int, optim.Segmentation) (optim.Num, func(int) float64) {
			return optim.K(f), func(int) float64 { return f }
		}}
	}
	forms := []fracForm{
		imm(0), imm(1), imm(0.5), imm(0.25), imm(0.75),
		{"a register fraction", func(c *conf, _ int, _ optim.Segmentation) (optim.Num, func(int) float64) {
			return c.regOf(0.75), func(int) float64 { return 0.75 }
		}},
		{"per-segment fractions", func(c *conf, m int, by optim.Segmentation) (optim.Num, func(int) float64) {
			ss := c.segments(m, by)
			per := make([]float64, len(ss))
			for j := range per {
				per[j] = float64(j%5) / 4
			}
			fv := c.known(m, "fractions", c.spread(m, by, per))
			return c.p().SegReduce(optim.SegMaxAbs, by, fv, 0), func(j int) float64 { return per[j] }
		}},
	}
	var cs []hostCase
	for _, by := range segmentations {
		for _, f := range forms {
			cs = append(cs, hostCase{name: fmt.Sprintf("TopKMask/%s %s", f.name, byName(by)), run: func(c *conf) {
				for m := range c.l.Members {
					x := c.pattern(m, 1)
					xv, d := c.known(m, "x", x), c.filled(m, "mask", 7)
					frac, per := f.num(c, m, by)
					c.p().TopKMask(d, xv, by, frac)
					c.expectVec(fmt.Sprintf("member %d: mask", m), d, topK(c.segments(m, by), x, per))
					c.expectVec(fmt.Sprintf("member %d: x", m), xv, x)
				}
			}})
		}
		cs = append(cs,
			hostCase{name: "TopKMask/ties go to the lower index " + byName(by), run: func(c *conf) {
				for m := range c.l.Members {
					x := make([]float64, c.n(m))
					for i := range x {
						x[i] = 0.5 - float64(i%2) // ±0.5: |x| ties everywhere
					}
					xv, d := c.known(m, "x", x), c.alloc(m, "mask")
					c.p().TopKMask(d, xv, by, optim.K(0.5))
					c.expectVec(fmt.Sprintf("member %d", m), d, topK(c.segments(m, by), x, func(int) float64 { return 0.5 }))
				}
			}},
			hostCase{name: "TopKMask/in place " + byName(by), run: func(c *conf) {
				x := c.pattern(0, 3)
				xv := c.known(0, "x", x)
				c.p().TopKMask(xv, xv, by, optim.K(0.5))
				c.expectVec("mask", xv, topK(c.segments(0, by), x, func(int) float64 { return 0.5 }))
			}},
		)
	}
	for _, f := range []float64{-0.25, 1.5, math.NaN(), math.Inf(1)} {
		cs = append(cs, hostCase{name: fmt.Sprintf("TopKMask/fraction %g", f), run: func(c *conf) {
			d := c.alloc(0, "mask")
			c.fails("outside [0, 1]", func(p *optim.Program) { p.TopKMask(d, optim.Params, optim.PerTensor, optim.K(f)) })
		}})
	}
	return append(cs,
		hostCase{name: "TopKMask/segmentation 0", run: func(c *conf) {
			d := c.alloc(0, "mask")
			c.unsupported(func(p *optim.Program) { p.TopKMask(d, optim.Params, 0, optim.K(0.5)) })
		}},
		hostCase{name: "TopKMask/segmentation 7", run: func(c *conf) {
			d := c.alloc(0, "mask")
			c.unsupported(func(p *optim.Program) { p.TopKMask(d, optim.Params, 7, optim.K(0.5)) })
		}},
		hostCase{name: "TopKMask/another layout", needs: needLayouts, run: func(c *conf) {
			d := c.alloc(c.lm[0], "mask")
			c.vecFails("has the layout of member", func(p *optim.Program) {
				p.TopKMask(d, optim.ParamsOf(c.lm[1]), optim.PerTensor, optim.K(0.5))
			})
		}},
		hostCase{name: "TopKMask/fractions of another segmentation", run: func(c *conf) {
			d := c.alloc(0, "mask")
			f := c.p().SegReduce(optim.SegMaxAbs, optim.PerRow, c.filled(0, "f", 0.5), 0)
			c.fails("segment", func(p *optim.Program) { p.TopKMask(d, optim.Params, optim.PerTensor, f) })
		}},
		hostCase{name: "TopKMask/fractions of another layout", needs: needLayouts, run: func(c *conf) {
			d := c.alloc(c.lm[1], "mask")
			f := c.p().SegReduce(optim.SegMaxAbs, optim.PerTensor, c.filled(c.lm[0], "f", 0.5), 0)
			c.fails("segment", func(p *optim.Program) { p.TopKMask(d, optim.ParamsOf(c.lm[1]), optim.PerTensor, f) })
		}},
		hostCase{name: "TopKMask/a fraction no op has set", run: func(c *conf) {
			d := c.alloc(0, "mask")
			c.fails("not set", func(p *optim.Program) {
				p.Ops = append(p.Ops, optim.TopKMask{Dst: d, X: optim.Params, By: optim.PerTensor, Frac: p.Reg(1)})
			})
			c.p().Norm(d)
		}},
	)
}

func readCases() []hostCase {
	return []hostCase{
		{name: "Read/values in Read order", run: func(c *conf) {
			n := float64(c.n(0))
			a, b := c.filled(0, "a", 2), c.filled(0, "b", -0.5)
			na := c.p().Norm(a)
			ev := c.gradOp(0, optim.Params, whole, optim.BNFreeze)
			d := c.p().Dot(a, b)
			c.p().Read(d, ev.Loss, na, ev.Acc)
			i := c.cur()
			loss := c.grad(0, optim.Params, whole, optim.BNFreeze) // the same pass again
			c.expect("Reads", func(get func(ref) float64) error {
				r := c.progs[i].res
				if len(r.Reads) < 4 {
					return fmt.Errorf("%d values read", len(r.Reads))
				}
				want := []float64{-n, get(loss.loss), 2 * math.Sqrt(n), get(loss.acc)}
				for j, w := range want {
					if !c.close(r.Reads[j], w) {
						return fmt.Errorf("Reads[%d] = %.17g, want %.17g (Reads %v)", j, r.Reads[j], w, r.Reads)
					}
				}
				if got := r.Get(d); !c.close(got, -n) {
					return fmt.Errorf("Get(a·b) = %.17g", got)
				}
				return nil
			})
		}},
		{name: "Read/a register twice", run: func(c *conf) {
			na := c.p().Norm(c.filled(0, "a", 3))
			c.p().Read(na, na)
			i := c.cur()
			c.expect("two Reads of ‖a‖", func(func(ref) float64) error {
				r := c.progs[i].res
				want := 3 * math.Sqrt(float64(c.n(0)))
				if len(r.Reads) != 2 || !c.close(r.Reads[0], want) || !c.close(r.Reads[1], want) {
					return fmt.Errorf("Reads %v, want [%.17g %.17g]", r.Reads, want, want)
				}
				return nil
			})
		}},
		{name: "Read/nothing is read without a Read op", run: func(c *conf) {
			a := c.filled(0, "a", 1)
			na := c.p().Norm(a)
			c.gradOp(0, optim.Params, whole, optim.BNFreeze)
			i := c.cur()
			c.expect("Result", func(func(ref) float64) error {
				r := c.progs[i].res
				if len(r.Reads) != 0 {
					return fmt.Errorf("Reads %v, want none", r.Reads)
				}
				_, err := r.Lookup(na)
				var re *optim.ReadError
				if !errors.As(err, &re) {
					return fmt.Errorf("Lookup of an unread register: %v, want an *optim.ReadError", err)
				}
				return getPanics(r, na)
			})
		}},
		{name: "Read/Get of another program's register", run: func(c *conf) {
			a := c.filled(0, "a", 1)
			n1 := c.p().Norm(a)
			c.p().Read(n1)
			i := c.cur()
			c.next()
			n2 := c.p().Norm(a)
			c.p().Read(n2)
			j := c.cur()
			c.expect("Get across programs", func(func(ref) float64) error {
				r1, r2 := c.progs[i].res, c.progs[j].res
				if err := getPanics(r1, n2); err != nil {
					return err
				}
				return getPanics(r2, n1)
			})
		}},
		{name: "Read/NewResult needs one value per Read", direct: func(t *testing.T, _ optim.Host) {
			p := optim.Prog()
			r := p.Norm(optim.Params)
			p.Read(r, r)
			if _, err := opset.NewResult(p, []float64{1}); err == nil {
				t.Error("NewResult with 1 value for 2 Read ops: no error")
			}
			res, err := opset.NewResult(p, []float64{1, 1})
			if err != nil || res.Get(r) != 1 {
				t.Errorf("NewResult: %v, %v", res, err)
			}
		}},
		{name: "Read/registers do not outlive their program", run: func(c *conf) {
			a := c.filled(0, "a", 2)
			c.expectScalar("‖a‖", c.norm(a), 2*math.Sqrt(float64(c.n(0))))
			c.next()
			c.fails("not set", func(p *optim.Program) { p.Ops = append(p.Ops, optim.Read{X: p.Reg(1)}) })
		}},
		{name: "Read/registers are numbered per program", run: func(c *conf) {
			a, b := c.filled(0, "a", 2), c.filled(0, "b", -3)
			n := float64(c.n(0))
			c.expectScalar("a·b", c.dot(a, b), -6*n)
			c.expectScalar("‖a‖", c.norm(a), 2*math.Sqrt(n))
			c.next()
			c.expectScalar("‖b‖ in the next program", c.norm(b), 3*math.Sqrt(n))
			c.expectScalar("a·a in the next program", c.dot(a, a), 4*n)
		}},
		{name: "Read/a register beyond the program's", run: func(c *conf) {
			c.p().Norm(optim.Params)
			c.fails("not set", func(p *optim.Program) { p.Ops = append(p.Ops, optim.Read{X: p.Reg(2)}) })
		}},
		{name: "Read/a register before its op", run: func(c *conf) {
			c.fails("not set", func(p *optim.Program) { p.Ops = append(p.Ops, optim.Read{X: p.Reg(1)}) })
			c.p().Norm(optim.Params)
		}},
		{name: "Read/a register of another program", run: func(c *conf) {
			a := c.filled(0, "a", 1)
			c.next()
			other := c.hs.Prog()
			r := other.Norm(a)
			c.p().Fill(a, optim.K(2)).Read(r)
			c.refused("another program")
			c.next()
			c.expectConst("a: no op of the refused program ran", a, 1)
		}},
	}
}

// getPanics expects r.Get(x) to panic with an *optim.ReadError.
func getPanics(r optim.Result, x optim.Reg) (err error) {
	defer func() {
		v := recover()
		if re, ok := v.(*optim.ReadError); !ok || re == nil {
			err = fmt.Errorf("Get(%v) panicked with %v (%T), want an *optim.ReadError", x, v, v)
		}
	}()
	v := r.Get(x)
	return fmt.Errorf("Get(%v) = %v, want a panic", x, v)
}

func reportCases() []hostCase {
	return []hostCase{
		{name: "Report/leaves the Result", run: func(c *conf) {
			a := c.filled(0, "a", 2)
			na := c.p().Norm(a)
			ev := c.gradOp(0, optim.Params, whole, optim.BNFreeze)
			c.p().Report("conformance/norm", na).ReportMetrics(ev.Loss, ev.Acc)
			c.expectScalar("‖a‖", c.read(na), 2*math.Sqrt(float64(c.n(0))))
			i := c.cur()
			c.expect("Reads", func(func(ref) float64) error {
				if r := c.progs[i].res; len(r.Reads) != 1 {
					return fmt.Errorf("Reads %v, want only ‖a‖", r.Reads)
				}
				return nil
			})
		}},
		{name: "Report/an Arith register", run: func(c *conf) {
			c.p().Report("conformance/ratio", c.p().Div(c.p().Norm(c.filled(0, "a", 2)), optim.K(3)))
		}},
		{name: "Report/a name twice in one program", run: func(c *conf) {
			r := c.p().Norm(c.filled(0, "a", 2))
			c.p().Report("conformance/twice", r)
			c.fails("conformance/twice", func(p *optim.Program) { p.Report("conformance/twice", r) })
		}},
		{name: "Report/no name", run: func(c *conf) {
			r := c.p().Norm(c.filled(0, "a", 2))
			c.fails("name", func(p *optim.Program) { p.Report("", r) })
		}},
		{name: "Report/a segment register", run: func(c *conf) {
			r := c.p().SegReduce(optim.SegSumSq, optim.PerTensor, c.one(0), 0)
			c.fails("per segment", func(p *optim.Program) { p.Report("conformance/seg", r) })
		}},
		{name: "Report/a register no op has set", run: func(c *conf) {
			c.fails("not set", func(p *optim.Program) { p.Ops = append(p.Ops, optim.Report{Name: "x", X: p.Reg(1)}) })
		}},
		{name: "Report/a register of another program", run: func(c *conf) {
			a := c.filled(0, "a", 1)
			c.next()
			other := c.hs.Prog()
			r := other.Norm(a)
			c.p().Fill(a, optim.K(2)).Report("conformance/foreign", r)
			c.refused("another program")
			c.next()
			c.expectConst("a: no op of the refused program ran", a, 1)
		}},
	}
}
