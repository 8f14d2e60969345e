package optimtest

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/optlab/optlab/sdk/optim"
)

// The table of TestHost, one function per op (or theme). Member 0 hosts
// the vectors of a case unless the case is about members.

func hostCases() []hostCase {
	var cs []hostCase
	for _, group := range [][]hostCase{
		execCases(), layoutCases(), allocCases(), freeCases(), copyCases(), fillCases(),
		arithCases(), linCombCases(), unaryCases(), binaryCases(), randNCases(), reduceCases(),
		gradCases(), variationalCases(), jointCases(), baseStepCases(), setLRCases(), handleCases(),
		arithCasesMinor5(), coefCases(), segReduceCases(), segArithCases(), topKCases(), readCases(), reportCases(),
		matrixCases(), ifCases(), baseStateCases(), sampleCases(),
	} {
		cs = append(cs, group...)
	}
	return cs
}

// Batch selections used by the cases.
var (
	whole      = optim.Batch{}
	firstHalf  = optim.Batch{Part: 0, Of: 2}
	secondHalf = optim.Batch{Part: 1, Of: 2}
)

func execCases() []hostCase {
	return []hostCase{
		{name: "Exec/empty program", direct: func(t *testing.T, h optim.Host) {
			r, err := h.Exec(context.Background(), optim.Prog())
			if err != nil || len(r.Reads) != 0 {
				t.Fatalf("empty program: %v, %v; want no values and no error", r.Reads, err)
			}
		}},
		{name: "Exec/nil program is empty", direct: func(t *testing.T, h optim.Host) {
			r, err := h.Exec(context.Background(), nil)
			if err != nil || len(r.Reads) != 0 {
				t.Fatalf("nil program: %v, %v; want no values and no error", r.Reads, err)
			}
		}},
		{name: "Exec/canceled context", direct: func(t *testing.T, h optim.Host) {
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			if _, err := h.Exec(ctx, optim.Prog().Fill(optim.Params, optim.K(1))); !errors.Is(err, context.Canceled) {
				t.Fatalf("Exec with a canceled context: %v, want context.Canceled", err)
			}
		}},
		{name: "Exec/registers in op order", run: func(c *conf) {
			a, b := c.filled(0, "a", 2), c.filled(0, "b", -0.5)
			n := float64(c.n(0))
			na := c.norm(a)
			ev := c.grad(0, optim.Params, whole, optim.BNFreeze)
			d := c.dot(a, b)
			ev2 := c.grad(0, optim.Params, whole, optim.BNFreeze)
			nb := c.norm(b)
			c.expectScalar("‖a‖ before a Grad", na, 2*math.Sqrt(n))
			c.expectScalar("a·b between Grads", d, -n)
			c.expectScalar("‖b‖ after two Grads", nb, 0.5*math.Sqrt(n))
			c.expectEval("the two Grads", ev, ev2)
		}},
		{name: "Exec/a failing op stops its program", run: func(c *conf) {
			a := c.filled(0, "a", 1)
			c.next()
			c.p().Fill(a, optim.K(2))
			c.vecFails("v4242 is not allocated", func(p *optim.Program) { p.Fill(stray, optim.K(3)) })
			c.p().Fill(a, optim.K(5))
			c.next()
			c.expectConst("a: the op before the failure ran, the one after did not", a, 2)
		}},
		{name: "Exec/unknown op kind", run: func(c *conf) {
			a := c.filled(0, "a", 1)
			c.norm(a)
			c.unsupported(func(p *optim.Program) { p.Ops = append(p.Ops, unknownOp{}) })
			c.norm(a)
		}},
		{name: "Exec/nil op", run: func(c *conf) {
			c.norm(c.filled(0, "a", 1))
			c.fails("", func(p *optim.Program) { p.Ops = append(p.Ops, nil) })
		}},
		{name: "Exec/a pointer op", run: func(c *conf) {
			// A client may refuse the program before sending it: the
			// ops before the pointer op need not run.
			a := c.filled(0, "a", 1)
			c.next()
			c.fails("pointer", func(p *optim.Program) { p.Ops = append(p.Ops, &optim.Fill{Dst: a, Value: optim.K(2)}) })
			c.next()
			c.expectConst("a", a, 1)
		}},
		{name: "Exec/a pointer op that sets a register", run: func(c *conf) {
			a := c.filled(0, "a", 1)
			c.fails("pointer", func(p *optim.Program) { p.Ops = append(p.Ops, &optim.Norm{X: a}) })
		}},
	}
}

func layoutCases() []hostCase {
	return []hostCase{
		{name: "Layout/tensors tile each member's vector", run: func(c *conf) {
			if len(c.l.Members) == 0 {
				c.t.Fatal("layout has no members")
			}
			for m, ml := range c.l.Members {
				if ml.Numel <= 0 {
					c.t.Fatalf("member %d: Numel %d", m, ml.Numel)
				}
				ts := slices.Clone(ml.Tensors)
				slices.SortFunc(ts, func(a, b optim.Tensor) int { return int(a.Offset - b.Offset) })
				var at int64
				for _, tn := range ts {
					size := int64(1)
					for _, d := range tn.Shape {
						size *= d
					}
					if tn.Offset != at {
						c.t.Errorf("member %d: tensor %q at offset %d, want %d (tensors must tile the vector)", m, tn.Name, tn.Offset, at)
					}
					at = tn.Offset + size
				}
				if at != ml.Numel {
					c.t.Errorf("member %d: tensors end at %d, Numel is %d", m, at, ml.Numel)
				}
				// On the host: FillRange of every tensor, summed, is the
				// vector of ones.
				acc, one := c.alloc(m, "tiles"), c.alloc(m, "tile")
				for _, tn := range ts {
					size := int64(1)
					for _, d := range tn.Shape {
						size *= d
					}
					c.p().Fill(one, optim.K(0)).FillRange(one, tn.Offset, size, 1).Axpy(acc, optim.K(1), one)
				}
				c.expectConst(fmt.Sprintf("member %d: sum of the tensors' ranges", m), acc, 1)
			}
		}},
	}
}

func allocCases() []hostCase {
	return []hostCase{
		{name: "Alloc/is zero", run: func(c *conf) {
			c.expectConst("new vector", c.alloc(0, "v"), 0)
		}},
		{name: "Alloc/has its member's layout", run: func(c *conf) {
			for m := range c.l.Members {
				v := c.filled(m, "v", 1)
				c.expectScalar(fmt.Sprintf("member %d: ones·ones", m), c.dot(v, v), float64(c.n(m)))
			}
		}},
		{name: "Alloc/again after Free is zero", run: func(c *conf) {
			v := c.filled(0, "v", 3)
			c.p().Free(v).Alloc(v, 0)
			c.expectConst("re-allocated vector", v, 0)
		}},
		{name: "Alloc/handle 0 is reserved", run: func(c *conf) {
			c.fails("", func(p *optim.Program) { p.Alloc(0, 0) })
		}},
		{name: "Alloc/a parameters handle is reserved", run: func(c *conf) {
			c.fails("", func(p *optim.Program) { p.Alloc(optim.ParamsOf(1), 0) })
		}},
		{name: "Alloc/a ρ handle is reserved", run: func(c *conf) {
			c.fails("", func(p *optim.Program) { p.Alloc(optim.RhoOf(0), 0) })
		}},
		{name: "Alloc/twice in a program", run: func(c *conf) {
			c.p().Alloc(stray, 0)
			c.fails("4242", func(p *optim.Program) { p.Alloc(stray, 0) })
		}},
		{name: "Alloc/twice in two programs", run: func(c *conf) {
			c.p().Alloc(stray, 0)
			c.next()
			c.fails("4242", func(p *optim.Program) { p.Alloc(stray, 0) })
		}},
		{name: "Alloc/member out of range", run: func(c *conf) {
			c.fails("17", func(p *optim.Program) { p.Alloc(stray, noMember) })
		}},
		{name: "Alloc/negative member", run: func(c *conf) {
			c.fails("-1", func(p *optim.Program) { p.Alloc(stray, -1) })
		}},
	}
}

func freeCases() []hostCase {
	return []hostCase{
		{name: "Free/leaves other vectors", run: func(c *conf) {
			a, b := c.filled(0, "a", 2), c.filled(0, "b", 3)
			c.p().Free(a)
			c.expectConst("b", b, 3)
		}},
		{name: "Free/twice", run: func(c *conf) {
			c.p().Alloc(stray, 0).Free(stray)
			c.fails("4242", func(p *optim.Program) { p.Free(stray) })
		}},
		{name: "Free/live parameters", run: func(c *conf) {
			c.fails("", func(p *optim.Program) { p.Free(optim.Params) })
		}},
		{name: "Free/ρ", needs: needVariational, run: func(c *conf) {
			c.fails("", func(p *optim.Program) { p.Free(optim.RhoOf(c.vm)) })
		}},
	}
}

func copyCases() []hostCase {
	return []hostCase{
		{name: "Copy/copies", run: func(c *conf) {
			a, b := c.filled(0, "a", 2.5), c.alloc(0, "b")
			c.p().Copy(b, a)
			c.expectConst("b", b, 2.5)
			c.expectConst("a", a, 2.5)
		}},
		{name: "Copy/into and out of live parameters", run: func(c *conf) {
			r, b := c.randn(0, "r", 7), c.alloc(0, "b")
			c.p().Copy(optim.Params, r).Copy(b, optim.Params)
			c.expectSame("params = r", optim.Params, r)
			c.expectSame("b = params", b, r)
		}},
		{name: "Copy/onto itself", run: func(c *conf) {
			r, x := c.randn(0, "r", 7), c.randn(0, "x", 7)
			c.p().Copy(r, r)
			c.expectSame("r", r, x)
		}},
		{name: "Copy/another layout", needs: needLayouts, run: func(c *conf) {
			a, b := c.alloc(c.lm[0], "a"), c.alloc(c.lm[1], "b")
			c.fails("", func(p *optim.Program) { p.Copy(a, b) })
		}},
		{name: "CopyState/copies the parameters", run: func(c *conf) {
			r, s := c.randn(0, "r", 7), c.alloc(0, "snapshot")
			c.p().Copy(optim.Params, r).CopyState(s, optim.Params)
			c.expectSame("snapshot", s, r)
		}},
		{name: "CopyState/round trip", run: func(c *conf) {
			x, s := c.alloc(0, "x"), c.alloc(0, "snapshot")
			c.p().Copy(x, optim.Params).CopyState(s, optim.Params).Fill(optim.Params, optim.K(0))
			c.next()
			c.p().CopyState(optim.Params, s)
			c.expectSame("restored params", optim.Params, x)
		}},
		{name: "CopyState/of a snapshot", run: func(c *conf) {
			s1, s2 := c.alloc(0, "s1"), c.alloc(0, "s2")
			c.p().CopyState(s1, optim.Params).CopyState(s2, s1).CopyState(optim.Params, s2)
			c.expectSame("s2", s2, s1)
		}},
		{name: "CopyState/from a vector without statistics", run: func(c *conf) {
			c.p().Alloc(stray, 0)
			c.fails("4242", func(p *optim.Program) { p.CopyState(optim.Params, stray) })
		}},
		{name: "CopyState/a plain Copy clears the statistics", run: func(c *conf) {
			c.p().Alloc(stray, 0).CopyState(stray, optim.Params).Copy(stray, optim.Params)
			c.fails("4242", func(p *optim.Program) { p.CopyState(optim.Params, stray) })
		}},
		{name: "CopyState/into ρ", needs: needVariational, run: func(c *conf) {
			c.fails("", func(p *optim.Program) { p.CopyState(optim.RhoOf(c.vm), optim.ParamsOf(c.vm)) })
		}},
		{name: "CopyState/from ρ", needs: needVariational, run: func(c *conf) {
			c.fails("", func(p *optim.Program) { p.CopyState(optim.ParamsOf(c.vm), optim.RhoOf(c.vm)) })
		}},
		{name: "UpdateBN/gives a vector statistics, not new parameters", run: func(c *conf) {
			s, x := c.alloc(0, "s"), c.randn(0, "x", 7)
			c.p().Copy(s, x).UpdateBN(s).CopyState(optim.Params, s)
			c.expectSame("params", optim.Params, x)
		}},
		{name: "UpdateBN/leaves the live parameters", run: func(c *conf) {
			x := c.alloc(0, "x")
			c.p().Copy(x, optim.Params).UpdateBN(optim.Params)
			c.expectSame("params", optim.Params, x)
		}},
		{name: "UpdateBN/of ρ", needs: needVariational, run: func(c *conf) {
			c.fails("", func(p *optim.Program) { p.UpdateBN(optim.RhoOf(c.vm)) })
		}},
	}
}

func fillCases() []hostCase {
	return []hostCase{
		{name: "Fill/sets every element", run: func(c *conf) {
			v := c.filled(0, "v", 3)
			c.p().Fill(v, optim.K(0.75))
			c.expectConst("v", v, 0.75)
		}},
		{name: "Fill/live parameters", run: func(c *conf) {
			for m := range c.l.Members {
				c.p().Fill(optim.ParamsOf(m), optim.K(-2))
				c.expectConst(fmt.Sprintf("params[%d]", m), optim.ParamsOf(m), -2)
			}
		}},
		{name: "FillRange/sets its range only", run: func(c *conf) {
			n := c.n(0)
			if n < 3 {
				c.t.Skip("needs 3 parameters")
			}
			v := c.filled(0, "v", 2)
			c.p().FillRange(v, 1, n-2, 5)
			c.expectScalar("Σv", c.sum(v), 4+5*float64(n-2))
			c.expectScalar("v·v", c.dot(v, v), 8+25*float64(n-2))
		}},
		{name: "FillRange/complementary ranges", run: func(c *conf) {
			n := c.n(0)
			k := n / 2
			a, b := c.alloc(0, "a"), c.alloc(0, "b")
			c.p().FillRange(a, 0, k, 1).FillRange(b, k, n-k, 1)
			c.expectScalar("a·b", c.dot(a, b), 0)
			c.expectScalar("Σa", c.sum(a), float64(k))
			c.expectScalar("Σb", c.sum(b), float64(n-k))
		}},
		{name: "FillRange/empty ranges", run: func(c *conf) {
			v := c.filled(0, "v", 2)
			c.p().FillRange(v, 0, 0, 9).FillRange(v, c.n(0), 0, 9)
			c.expectConst("v", v, 2)
		}},
		{name: "FillRange/past the end", run: func(c *conf) {
			n := c.n(0)
			c.fails(fmt.Sprint(n), func(p *optim.Program) { p.FillRange(optim.Params, n-1, 2, 1) })
		}},
		{name: "FillRange/negative offset", run: func(c *conf) {
			c.fails("", func(p *optim.Program) { p.FillRange(optim.Params, -1, 1, 1) })
		}},
		{name: "FillRange/negative length", run: func(c *conf) {
			c.fails("", func(p *optim.Program) { p.FillRange(optim.Params, 1, -1, 1) })
		}},
		{name: "FillRange/length overflowing int64", run: func(c *conf) {
			c.fails("", func(p *optim.Program) { p.FillRange(optim.Params, 1, math.MaxInt64, 1) })
		}},
	}
}

func arithCases() []hostCase {
	return []hostCase{
		{name: "Scale/multiplies", run: func(c *conf) {
			v := c.filled(0, "v", 3)
			c.p().Scale(v, optim.K(-0.5))
			c.expectConst("v", v, -1.5)
		}},
		{name: "Scale/by zero", run: func(c *conf) {
			v := c.filled(0, "v", 3)
			c.p().Scale(v, optim.K(0))
			c.expectConst("v", v, 0)
		}},
		{name: "AddConst/adds", run: func(c *conf) {
			v := c.filled(0, "v", 1.25)
			c.p().AddConst(v, optim.K(-3))
			c.expectConst("v", v, -1.75)
		}},
		{name: "Axpy/adds a multiple", run: func(c *conf) {
			a, x := c.filled(0, "a", 2), c.filled(0, "x", 0.5)
			c.p().Axpy(a, optim.K(-3), x)
			c.expectConst("a", a, 0.5)
			c.expectConst("x", x, 0.5)
		}},
		{name: "Axpy/onto itself", run: func(c *conf) {
			a, b := c.filled(0, "a", 2), c.filled(0, "b", 2)
			c.p().Axpy(a, optim.K(1), a).Axpy(b, optim.K(-1), b)
			c.expectConst("a + a", a, 4)
			c.expectConst("b − b", b, 0)
		}},
		{name: "Axpy/into live parameters", run: func(c *conf) {
			x := c.filled(0, "x", 0.25)
			c.p().Fill(optim.Params, optim.K(1)).Axpy(optim.Params, optim.K(4), x)
			c.expectConst("params", optim.Params, 2)
		}},
		{name: "Axpy/is a LinComb", run: func(c *conf) {
			a, b, d := c.randn(0, "a", 1), c.randn(0, "b", 2), c.alloc(0, "d")
			c.p().LinComb(d, optim.Term{Coef: optim.K(1), X: a}, optim.Term{Coef: optim.K(0.75), X: b}).Axpy(a, optim.K(0.75), b)
			c.expectSame("a + 0.75·b", a, d)
		}},
		{name: "Axpy/another layout", needs: needLayouts, run: func(c *conf) {
			a, b := c.alloc(c.lm[0], "a"), c.alloc(c.lm[1], "b")
			c.vecFails("has the layout of member", func(p *optim.Program) { p.Axpy(a, optim.K(1), b) })
		}},
	}
}

func linCombCases() []hostCase {
	term := func(coef float64, x optim.Vec) optim.Term { return optim.Term{Coef: optim.K(coef), X: x} }
	return []hostCase{
		{name: "LinComb/sums its terms", run: func(c *conf) {
			a, b, d := c.filled(0, "a", 2), c.filled(0, "b", -1.5), c.filled(0, "d", 9)
			c.p().LinComb(d, term(0.5, a), term(2, b))
			c.expectConst("d", d, -2)
		}},
		{name: "LinComb/Dst among the terms", run: func(c *conf) {
			a, d := c.filled(0, "a", 2), c.filled(0, "d", 4)
			c.p().LinComb(d, term(3, a), term(0.5, d), term(-1, a))
			c.expectConst("d", d, 6)
		}},
		{name: "LinComb/Dst first among the terms", run: func(c *conf) {
			a, d := c.filled(0, "a", 2), c.filled(0, "d", 4)
			c.p().LinComb(d, term(0.5, d), term(3, a))
			c.expectConst("d", d, 8)
		}},
		{name: "LinComb/Dst twice", run: func(c *conf) {
			d := c.filled(0, "d", 4)
			c.p().LinComb(d, term(1, d), term(1, d))
			c.expectConst("d", d, 8)
		}},
		{name: "LinComb/no terms is zero", run: func(c *conf) {
			d := c.filled(0, "d", 4)
			c.p().LinComb(d)
			c.expectConst("d", d, 0)
		}},
		{name: "LinComb/live parameters among the terms", run: func(c *conf) {
			a := c.filled(0, "a", -1)
			c.p().Fill(optim.Params, optim.K(1.5)).LinComb(optim.Params, term(2, optim.Params), term(1, a))
			c.expectConst("params", optim.Params, 2)
		}},
		{name: "LinComb/is Scale and Axpy", run: func(c *conf) {
			a, b, d, e := c.randn(0, "a", 1), c.randn(0, "b", 2), c.alloc(0, "d"), c.alloc(0, "e")
			c.p().LinComb(d, term(2, a), term(-1, b)).Copy(e, a).Scale(e, optim.K(2)).Axpy(e, optim.K(-1), b)
			c.expectSame("2a − b", d, e)
		}},
		{name: "LinComb/a term of another layout", needs: needLayouts, run: func(c *conf) {
			a, b := c.alloc(c.lm[0], "a"), c.alloc(c.lm[1], "b")
			c.vecFails("has the layout of member", func(p *optim.Program) { p.LinComb(a, term(1, a), term(1, b)) })
		}},
	}
}

func unaryCases() []hostCase {
	rows := []struct {
		k       optim.UnaryKind
		x, want float64
	}{
		{optim.Abs, -2.5, 2.5}, {optim.Abs, 0, 0},
		{optim.Sign, -2.5, -1}, {optim.Sign, 3, 1}, {optim.Sign, 0, 0},
		{optim.Sqrt, 6.25, 2.5}, {optim.Sqrt, -1, math.NaN()},
		{optim.Square, -1.5, 2.25},
		{optim.Softplus, 0, math.Ln2}, {optim.Softplus, 1.5, math.Log1p(math.Exp(1.5))},
		{optim.Softplus, -30, math.Exp(-30)}, {optim.Softplus, 30, 30},
		{optim.Exp, 0.5, math.Exp(0.5)}, {optim.Exp, 0, 1},
		{optim.Log, 2.5, math.Log(2.5)}, {optim.Log, 0, math.Inf(-1)},
		{optim.Reciprocal, -4, -0.25}, {optim.Reciprocal, 0, math.Inf(1)},
	}
	var cs []hostCase
	for _, r := range rows {
		cs = append(cs, hostCase{name: fmt.Sprintf("Unary/%v(%g)", r.k, r.x), run: func(c *conf) {
			x, d := c.filled(0, "x", r.x), c.filled(0, "d", 7)
			c.p().Unary(d, x, r.k)
			c.expectConst("d", d, r.want)
			c.expectConst("x", x, r.x)
		}})
	}
	// Identities on random vectors: one function computed in two ways.
	ids := []struct {
		name string
		f    func(p *optim.Program, d, x, t optim.Vec) // d = f(x) by other ops (t: scratch)
		k    optim.UnaryKind
	}{
		{"square is x·x", func(p *optim.Program, d, x, _ optim.Vec) { p.Binary(d, x, x, optim.Mul) }, optim.Square},
		{"abs is max(x, −x)", func(p *optim.Program, d, x, t optim.Vec) {
			p.Copy(t, x).Scale(t, optim.K(-1)).Binary(d, x, t, optim.Max)
		}, optim.Abs},
		{"sqrt is |x| of x²", func(p *optim.Program, d, x, t optim.Vec) {
			p.Unary(t, x, optim.Square).Unary(t, t, optim.Sqrt).Copy(d, t).Unary(x, x, optim.Abs)
		}, -1},
		{"sign·abs is x", func(p *optim.Program, d, x, t optim.Vec) {
			p.Unary(d, x, optim.Sign).Unary(t, x, optim.Abs).Binary(d, d, t, optim.Mul)
		}, -1},
		{"exp of log is x", func(p *optim.Program, d, x, _ optim.Vec) {
			p.Unary(x, x, optim.Abs).Unary(d, x, optim.Log).Unary(d, d, optim.Exp)
		}, -1},
		{"softplus is log(1 + exp x)", func(p *optim.Program, d, x, _ optim.Vec) {
			p.Unary(d, x, optim.Exp).AddConst(d, optim.K(1)).Unary(d, d, optim.Log)
		}, optim.Softplus},
		{"reciprocal is 1/x", func(p *optim.Program, d, x, t optim.Vec) {
			p.Fill(t, optim.K(1)).Binary(d, t, x, optim.Div)
		}, optim.Reciprocal},
	}
	for _, id := range ids {
		cs = append(cs, hostCase{name: "Unary/" + id.name, run: func(c *conf) {
			x, d, t := c.randn(0, "x", 3), c.alloc(0, "d"), c.alloc(0, "t")
			id.f(c.p(), d, x, t)
			if id.k < 0 { // f compares with x itself
				c.expectSame("f(x) and x", d, x)
				return
			}
			e := c.alloc(0, "e")
			c.p().Unary(e, x, id.k)
			c.expectSame(fmt.Sprintf("%v(x) and its identity", id.k), e, d)
		}})
	}
	return append(cs,
		hostCase{name: "Unary/in place", run: func(c *conf) {
			v := c.filled(0, "v", -1.5)
			c.p().Unary(v, v, optim.Square)
			c.expectConst("v", v, 2.25)
		}},
		hostCase{name: "Unary/kind 0", run: func(c *conf) {
			c.unsupported(func(p *optim.Program) { p.Unary(optim.Params, optim.Params, 0) })
		}},
		hostCase{name: "Unary/kind 99", run: func(c *conf) {
			c.unsupported(func(p *optim.Program) { p.Unary(optim.Params, optim.Params, 99) })
		}},
		hostCase{name: "Unary/another layout", needs: needLayouts, run: func(c *conf) {
			a, b := c.alloc(c.lm[0], "a"), c.alloc(c.lm[1], "b")
			c.vecFails("has the layout of member", func(p *optim.Program) { p.Unary(a, b, optim.Abs) })
		}},
	)
}

func binaryCases() []hostCase {
	rows := []struct {
		k          optim.BinaryKind
		a, b, want float64
	}{
		{optim.Mul, 1.5, -2, -3}, {optim.Div, 1.5, -2, -0.75}, {optim.Div, 1.5, 0, math.Inf(1)},
		{optim.Add, 1.5, -2, -0.5}, {optim.Sub, 1.5, -2, 3.5},
		{optim.Max, 1.5, -2, 1.5}, {optim.Min, 1.5, -2, -2},
	}
	var cs []hostCase
	for _, r := range rows {
		cs = append(cs, hostCase{name: fmt.Sprintf("Binary/%v(%g, %g)", r.k, r.a, r.b), run: func(c *conf) {
			a, b, d := c.filled(0, "a", r.a), c.filled(0, "b", r.b), c.filled(0, "d", 7)
			c.p().Binary(d, a, b, r.k)
			c.expectConst("d", d, r.want)
			c.expectConst("a", a, r.a)
			c.expectConst("b", b, r.b)
		}})
	}
	return append(cs,
		hostCase{name: "Binary/Dst is A", run: func(c *conf) {
			a, b := c.filled(0, "a", 1.5), c.filled(0, "b", -2)
			c.p().Binary(a, a, b, optim.Sub)
			c.expectConst("a", a, 3.5)
		}},
		hostCase{name: "Binary/Dst is B", run: func(c *conf) {
			a, b := c.filled(0, "a", 1.5), c.filled(0, "b", -2)
			c.p().Binary(b, a, b, optim.Sub)
			c.expectConst("b", b, 3.5)
		}},
		hostCase{name: "Binary/A is B", run: func(c *conf) {
			a, d := c.filled(0, "a", 1.5), c.alloc(0, "d")
			c.p().Binary(d, a, a, optim.Mul)
			c.expectConst("d", d, 2.25)
		}},
		hostCase{name: "Binary/add and sub are LinCombs", run: func(c *conf) {
			a, b := c.randn(0, "a", 1), c.randn(0, "b", 2)
			s, d, ls, ld := c.alloc(0, "sum"), c.alloc(0, "diff"), c.alloc(0, "lsum"), c.alloc(0, "ldiff")
			c.p().Binary(s, a, b, optim.Add).Binary(d, a, b, optim.Sub).
				LinComb(ls, optim.Term{Coef: optim.K(1), X: a}, optim.Term{Coef: optim.K(1), X: b}).
				LinComb(ld, optim.Term{Coef: optim.K(1), X: a}, optim.Term{Coef: optim.K(-1), X: b})
			c.expectSame("a + b", s, ls)
			c.expectSame("a − b", d, ld)
		}},
		hostCase{name: "Binary/max + min is a + b", run: func(c *conf) {
			a, b := c.randn(0, "a", 1), c.randn(0, "b", 2)
			mx, mn, s := c.alloc(0, "max"), c.alloc(0, "min"), c.alloc(0, "sum")
			c.p().Binary(mx, a, b, optim.Max).Binary(mn, a, b, optim.Min).Binary(mx, mx, mn, optim.Add).
				Binary(s, a, b, optim.Add)
			c.expectSame("max + min", mx, s)
		}},
		hostCase{name: "Binary/min is −max(−a, −b)", run: func(c *conf) {
			a, b := c.randn(0, "a", 1), c.randn(0, "b", 2)
			mn, na, nb := c.alloc(0, "min"), c.alloc(0, "-a"), c.alloc(0, "-b")
			c.p().Binary(mn, a, b, optim.Min).Copy(na, a).Scale(na, optim.K(-1)).Copy(nb, b).Scale(nb, optim.K(-1)).
				Binary(na, na, nb, optim.Max).Scale(na, optim.K(-1))
			c.expectSame("min", mn, na)
		}},
		hostCase{name: "Binary/(a / b)·b is a", run: func(c *conf) {
			a, b, d := c.randn(0, "a", 1), c.randn(0, "b", 2), c.alloc(0, "d")
			c.p().Binary(d, a, b, optim.Div).Binary(d, d, b, optim.Mul)
			c.expectSame("(a / b)·b", d, a)
		}},
		hostCase{name: "Binary/kind 0", run: func(c *conf) {
			c.unsupported(func(p *optim.Program) { p.Binary(optim.Params, optim.Params, optim.Params, 0) })
		}},
		hostCase{name: "Binary/kind 42", run: func(c *conf) {
			c.unsupported(func(p *optim.Program) { p.Binary(optim.Params, optim.Params, optim.Params, 42) })
		}},
		hostCase{name: "Binary/another layout", needs: needLayouts, run: func(c *conf) {
			a, b := c.alloc(c.lm[0], "a"), c.alloc(c.lm[1], "b")
			c.vecFails("has the layout of member", func(p *optim.Program) { p.Binary(a, a, b, optim.Add) })
		}},
	)
}

func randNCases() []hostCase {
	// stats draws vectors of N(0, std²) with seeds until about 20,000
	// values and checks their pooled mean and standard deviation.
	stats := func(c *conf, std float64, seed func(k int) int64) {
		n := c.n(0)
		k := int(min(max(20000/n, 1), 64))
		v := c.alloc(0, "v")
		var sums, norms []ref
		for i := range k {
			c.p().RandN(v, std, seed(i))
			sums, norms = append(sums, c.sum(v)), append(norms, c.norm(v))
		}
		c.expect("pooled statistics", func(get func(ref) float64) error {
			var s, q float64
			for i := range sums {
				s += get(sums[i])
				q += get(norms[i]) * get(norms[i])
			}
			total := float64(k) * float64(n)
			mean, sd := s/total, math.Sqrt(q/total)
			if math.Abs(mean) > 5*std/math.Sqrt(total) || math.Abs(sd/std-1) > 5/math.Sqrt(2*total) {
				return fmt.Errorf("%v draws: mean %.4g, rms %.4g; want N(0, %g²)", total, mean, sd, std)
			}
			return nil
		})
	}
	return []hostCase{
		{name: "RandN/a seed repeats its draw", run: func(c *conf) {
			a, b := c.randn(0, "a", 7), c.randn(0, "b", 7)
			c.expectSame("two draws with seed 7", a, b)
		}},
		{name: "RandN/seeds give different draws", run: func(c *conf) {
			a, b := c.randn(0, "a", 7), c.randn(0, "b", 8)
			c.expectDiffer("draws with seeds 7 and 8", a, b)
		}},
		{name: "RandN/seed 0 draws afresh", run: func(c *conf) {
			a, b := c.randn(0, "a", 0), c.randn(0, "b", 0)
			c.expectDiffer("two draws with seed 0", a, b)
		}},
		{name: "RandN/a seeded draw ignores earlier draws", run: func(c *conf) {
			a := c.randn(0, "a", 7)
			c.next()
			c.randn(0, "x", 0)
			c.randn(0, "y", 3)
			b := c.randn(0, "b", 7)
			c.expectSame("draws with seed 7", a, b)
		}},
		{name: "RandN/Std scales the draw", run: func(c *conf) {
			a, b := c.randn(0, "a", 7), c.alloc(0, "b")
			c.p().RandN(b, 2.5, 7).Scale(a, optim.K(2.5))
			c.expectSame("2.5·N(0, 1) and N(0, 2.5²)", a, b)
		}},
		{name: "RandN/Std 0 is zero", run: func(c *conf) {
			v := c.filled(0, "v", 3)
			c.p().RandN(v, 0, 5)
			c.expectConst("v", v, 0)
		}},
		{name: "RandN/live parameters", run: func(c *conf) {
			a := c.randn(0, "a", 7)
			c.p().RandN(optim.Params, 1, 7)
			c.expectSame("params", optim.Params, a)
		}},
		{name: "RandN/seeded statistics", run: func(c *conf) {
			stats(c, 3, func(k int) int64 { return int64(k + 1) })
		}},
		{name: "RandN/seed 0 statistics", run: func(c *conf) {
			stats(c, 0.5, func(int) int64 { return 0 })
		}},
	}
}

func reduceCases() []hostCase {
	return []hostCase{
		{name: "Dot/of constant vectors", run: func(c *conf) {
			a, b := c.filled(0, "a", 1.5), c.filled(0, "b", -2)
			n := float64(c.n(0))
			c.expectScalar("a·b", c.dot(a, b), -3*n)
			c.expectScalar("a·a", c.dot(a, a), 2.25*n)
		}},
		{name: "Dot/is symmetric", run: func(c *conf) {
			a, b := c.randn(0, "a", 1), c.randn(0, "b", 2)
			c.expectEqual("a·b and b·a", c.dot(a, b), c.dot(b, a))
		}},
		{name: "Dot/is linear", run: func(c *conf) {
			a, b, x, s := c.randn(0, "a", 1), c.randn(0, "b", 2), c.randn(0, "x", 3), c.alloc(0, "s")
			c.p().LinComb(s, optim.Term{Coef: optim.K(1), X: a}, optim.Term{Coef: optim.K(2), X: b})
			ds, da, db := c.dot(s, x), c.dot(a, x), c.dot(b, x)
			c.expect("(a + 2b)·x = a·x + 2 b·x", func(get func(ref) float64) error {
				if got, want := get(ds), get(da)+2*get(db); !c.closeTo(got, want, math.Sqrt(float64(c.n(0)))) {
					return fmt.Errorf("%.17g ≠ %.17g", got, want)
				}
				return nil
			})
		}},
		{name: "Dot/of a vector with itself is its squared norm", run: func(c *conf) {
			a := c.randn(0, "a", 1)
			d, q := c.dot(a, a), c.norm(a)
			c.expect("a·a = ‖a‖²", func(get func(ref) float64) error {
				if got, want := get(d), get(q)*get(q); !c.close(got, want) {
					return fmt.Errorf("%.17g ≠ %.17g", got, want)
				}
				return nil
			})
		}},
		{name: "Dot/another layout", needs: needLayouts, run: func(c *conf) {
			a, b := c.alloc(c.lm[0], "a"), c.alloc(c.lm[1], "b")
			c.vecFails("has the layout of member", func(p *optim.Program) { p.Dot(a, b) })
		}},
		{name: "Norm/of constant vectors", run: func(c *conf) {
			n := math.Sqrt(float64(c.n(0)))
			c.expectScalar("‖1.5‖", c.norm(c.filled(0, "a", 1.5)), 1.5*n)
			c.expectScalar("‖−3‖", c.norm(c.filled(0, "b", -3)), 3*n)
			c.expectScalar("‖0‖", c.norm(c.alloc(0, "z")), 0)
		}},
		{name: "Norm/is absolutely homogeneous", run: func(c *conf) {
			a, b := c.randn(0, "a", 1), c.alloc(0, "b")
			c.p().Copy(b, a).Scale(b, optim.K(-2))
			na, nb := c.norm(a), c.norm(b)
			c.expect("‖−2a‖ = 2‖a‖", func(get func(ref) float64) error {
				if got, want := get(nb), 2*get(na); !c.close(got, want) {
					return fmt.Errorf("%.17g ≠ %.17g", got, want)
				}
				return nil
			})
		}},
		{name: "Norm/of live parameters", run: func(c *conf) {
			for m := range c.l.Members {
				c.p().Fill(optim.ParamsOf(m), optim.K(0.5))
				c.expectScalar(fmt.Sprintf("‖params[%d]‖", m), c.norm(optim.ParamsOf(m)), 0.5*math.Sqrt(float64(c.n(m))))
			}
		}},
	}
}

// closeTo is close for a result whose rounding grows with scale.
func (c *conf) closeTo(got, want, scale float64) bool {
	return math.Abs(got-want) <= c.opts.Tol*max(1, math.Abs(want), scale)
}

// fdCheck expects the slope of the loss along d, (l⁺ − l⁻)/(2ε), to be
// gd = ∇L·d.
func (c *conf) fdCheck(what string, plus, minus, gd ref, eps float64) {
	c.expect(what, func(get func(ref) float64) error {
		lp, lm, want := get(plus), get(minus), get(gd)
		fd := (lp - lm) / (2 * eps)
		if want == 0 {
			return errors.New("zero gradient: nothing to check")
		}
		if math.Abs(fd-want) > 0.02*math.Abs(want)+1e-3*(1+math.Abs(lp)) {
			return fmt.Errorf("finite difference %.9g, gradient·d %.9g", fd, want)
		}
		return nil
	})
}

// gradFD appends what fdCheck needs for the gradient g of the pass of
// grad at x, along d = sign(g): passes at x ± ε·d.
func (c *conf) gradFD(what string, x, g optim.Vec, eps float64, pass func(at optim.Vec) ref) {
	m := c.member(x)
	d, xp, xm := c.alloc(m, "d"), c.alloc(m, "x+"), c.alloc(m, "x-")
	c.p().Unary(d, g, optim.Sign).Copy(xp, x).Axpy(xp, optim.K(eps), d).Copy(xm, x).Axpy(xm, optim.K(-eps), d)
	gd := c.dot(g, d)
	c.fdCheck(what, pass(xp), pass(xm), gd, eps)
}

func gradCases() []hostCase {
	return []hostCase{
		{name: "Grad/emits a loss and an accuracy", run: func(c *conf) {
			ev := c.grad(0, optim.Params, whole, optim.BNUpdate)
			c.expectFinite("loss", ev.loss)
			c.expect("accuracy in [0, 1] (NaN without one)", func(get func(ref) float64) error {
				if a := get(ev.acc); a < 0 || a > 1 {
					return fmt.Errorf("accuracy %v", a)
				}
				return nil
			})
		}},
		{name: "Grad/writes every element of Out", run: func(c *conf) {
			g := c.filled(0, "g", math.NaN())
			c.grad(g, optim.Params, whole, optim.BNUpdate)
			c.expectFinite("‖g‖", c.norm(g))
		}},
		{name: "Grad/Out 0 is the same pass", run: func(c *conf) {
			g := c.alloc(0, "g")
			c.expectEval("Out = g and Out = 0", c.grad(g, optim.Params, whole, optim.BNFreeze), c.grad(0, optim.Params, whole, optim.BNFreeze))
		}},
		{name: "Grad/at a copy of the live parameters", run: func(c *conf) {
			x, g1, g2 := c.alloc(0, "x"), c.alloc(0, "g1"), c.alloc(0, "g2")
			c.p().Copy(x, optim.Params)
			e1 := c.grad(g1, optim.Params, whole, optim.BNFreeze)
			e2 := c.grad(g2, x, whole, optim.BNFreeze)
			c.expectEval("at params and at x", e1, e2)
			c.expectSame("gradients", g1, g2)
		}},
		{name: "Grad/at another member's vectors", needs: needMembers, run: func(c *conf) {
			m := len(c.l.Members) - 1
			x, g1, g2 := c.alloc(m, "x"), c.alloc(m, "g1"), c.alloc(m, "g2")
			c.p().Copy(x, optim.ParamsOf(m))
			e1 := c.grad(g1, optim.ParamsOf(m), whole, optim.BNFreeze)
			e2 := c.grad(g2, x, whole, optim.BNFreeze)
			c.expectEval("at params and at x", e1, e2)
			c.expectSame("gradients", g1, g2)
		}},
		{name: "Grad/leaves At", run: func(c *conf) {
			x, y, g := c.alloc(0, "x"), c.alloc(0, "y"), c.alloc(0, "g")
			c.p().Copy(x, optim.Params).Copy(y, optim.Params)
			c.grad(g, optim.Params, whole, optim.BNUpdate)
			c.grad(g, y, whole, optim.BNUpdate)
			c.expectSame("params", optim.Params, x)
			c.expectSame("y", y, x)
		}},
		{name: "Grad/BatchNorm modes are the same pass", run: func(c *conf) {
			g1, g2 := c.alloc(0, "g1"), c.alloc(0, "g2")
			c.expectEval("BNUpdate and BNFreeze", c.grad(g1, optim.Params, whole, optim.BNUpdate), c.grad(g2, optim.Params, whole, optim.BNFreeze))
			c.expectSame("gradients", g1, g2)
		}},
		{name: "Grad/repeats itself", run: func(c *conf) {
			g1, g2 := c.alloc(0, "g1"), c.alloc(0, "g2")
			e1 := c.grad(g1, optim.Params, whole, optim.BNFreeze)
			c.next()
			e2 := c.grad(g2, optim.Params, whole, optim.BNFreeze)
			c.expectEval("two programs", e1, e2)
			c.expectSame("gradients", g1, g2)
		}},
		{name: "Grad/one part is the whole batch", run: func(c *conf) {
			g, g1, g2 := c.alloc(0, "g"), c.alloc(0, "g1"), c.alloc(0, "g2")
			e := c.grad(g, optim.Params, whole, optim.BNFreeze)
			e1 := c.grad(g1, optim.Params, optim.Batch{Part: 0, Of: 1}, optim.BNFreeze)
			e2 := c.grad(g2, optim.Params, optim.Batch{Part: 0, Of: 1, Shuffle: 5}, optim.BNFreeze)
			c.expectEval("Of 1", e, e1)
			c.expectEval("Of 1, shuffled", e, e2)
			c.expectSame("gradient of Of 1", g, g1)
			c.expectSame("gradient of Of 1, shuffled", g, g2)
		}},
		{name: "Grad/halves average to the whole batch", needs: needBatchMeans, run: func(c *conf) {
			halves(c, 0, 0, func(out optim.Vec, b optim.Batch) evalRef {
				return c.grad(out, optim.Params, b, optim.BNFreeze)
			})
		}},
		{name: "Grad/shuffled halves average to the whole batch", needs: needBatchMeans, run: func(c *conf) {
			halves(c, 0, 5, func(out optim.Vec, b optim.Batch) evalRef {
				return c.grad(out, optim.Params, b, optim.BNFreeze)
			})
		}},
		{name: "Grad/a shuffle is the same in every program", run: func(c *conf) {
			g1, g2 := c.alloc(0, "g1"), c.alloc(0, "g2")
			b := optim.Batch{Part: 1, Of: 2, Shuffle: 9}
			e1 := c.grad(g1, optim.Params, b, optim.BNFreeze)
			c.next()
			e2 := c.grad(g2, optim.Params, b, optim.BNFreeze)
			c.expectEval("two programs", e1, e2)
			c.expectSame("gradients", g1, g2)
		}},
		{name: "Grad/the gradient of the loss", run: func(c *conf) {
			g := c.alloc(0, "g")
			c.grad(g, optim.Params, whole, optim.BNFreeze)
			c.gradFD("slope of the loss along sign(g)", optim.Params, g, 1e-3, func(at optim.Vec) ref {
				return c.grad(0, at, whole, optim.BNFreeze).loss
			})
		}},
		{name: "Grad/part out of range", run: func(c *conf) {
			c.fails("", func(p *optim.Program) { p.Grad(0, optim.Params, optim.Batch{Part: 2, Of: 2}, optim.BNUpdate) })
		}},
		{name: "Grad/negative part", run: func(c *conf) {
			c.fails("", func(p *optim.Program) { p.Grad(0, optim.Params, optim.Batch{Part: -1, Of: 2}, optim.BNUpdate) })
		}},
		{name: "Grad/negative Of", run: func(c *conf) {
			c.fails("", func(p *optim.Program) { p.Grad(0, optim.Params, optim.Batch{Of: -1}, optim.BNUpdate) })
		}},
		{name: "Grad/part 1 of the whole batch", run: func(c *conf) {
			c.fails("", func(p *optim.Program) { p.Grad(0, optim.Params, optim.Batch{Part: 1}, optim.BNUpdate) })
		}},
		{name: "Grad/part 1 of 1", run: func(c *conf) {
			c.fails("", func(p *optim.Program) { p.Grad(0, optim.Params, optim.Batch{Part: 1, Of: 1}, optim.BNUpdate) })
		}},
		{name: "Grad/unknown BatchNorm mode", run: func(c *conf) {
			c.unsupported(func(p *optim.Program) { p.Grad(0, optim.Params, whole, 7) })
		}},
		{name: "Grad/Out is live parameters", needs: needMembers, run: func(c *conf) {
			// Params is 0, "no gradient": member 1's live parameters are
			// the first reserved handle that can be tried.
			c.fails("", func(p *optim.Program) { p.Grad(optim.ParamsOf(1), optim.ParamsOf(1), whole, optim.BNUpdate) })
		}},
		{name: "Grad/Out of another layout", needs: needLayouts, run: func(c *conf) {
			g := c.alloc(c.lm[1], "g")
			c.fails("", func(p *optim.Program) { p.Grad(g, optim.ParamsOf(c.lm[0]), whole, optim.BNUpdate) })
		}},
		{name: "Grad/Eps at a deterministic member", needs: needDeterministic, run: func(c *conf) {
			e := c.randn(c.dm, "eps", 1)
			c.fails("", func(p *optim.Program) { p.GradOp(optim.Grad{At: optim.ParamsOf(c.dm), Eps: e}) })
		}},
		{name: "Grad/OutRho at a deterministic member", needs: needDeterministic, run: func(c *conf) {
			r := c.alloc(c.dm, "rho-grad")
			c.fails("", func(p *optim.Program) { p.GradOp(optim.Grad{At: optim.ParamsOf(c.dm), OutRho: r}) })
		}},
	}
}

// halves checks that the passes of the two halves of the batch (split in
// loader order, or shuffled with shuffle) average to the pass of the whole
// batch, in loss, accuracy and the gradient of member m.
func halves(c *conf, m int, shuffle int64, pass func(out optim.Vec, b optim.Batch) evalRef) {
	g, g0, g1, avg := c.alloc(m, "g"), c.alloc(m, "g0"), c.alloc(m, "g1"), c.alloc(m, "avg")
	h0, h1 := firstHalf, secondHalf
	h0.Shuffle, h1.Shuffle = shuffle, shuffle
	e, e0, e1 := pass(g, whole), pass(g0, h0), pass(g1, h1)
	c.p().LinComb(avg, optim.Term{Coef: optim.K(0.5), X: g0}, optim.Term{Coef: optim.K(0.5), X: g1})
	for _, s := range []struct {
		what      string
		w, h0, h1 ref
	}{{"loss", e.loss, e0.loss, e1.loss}, {"accuracy", e.acc, e0.acc, e1.acc}} {
		c.expect("mean "+s.what+" of the halves", func(get func(ref) float64) error {
			if got, want := (get(s.h0)+get(s.h1))/2, get(s.w); !c.close(got, want) {
				return fmt.Errorf("(%.17g + %.17g)/2 ≠ %.17g", get(s.h0), get(s.h1), want)
			}
			return nil
		})
	}
	c.expectSame("mean gradient of the halves", avg, g)
}

func variationalCases() []hostCase {
	// pass is a variational Grad with every field set.
	pass := func(c *conf, out, at, eps, outRho optim.Vec) evalRef {
		return c.eval(c.p().GradOp(optim.Grad{Out: out, At: at, Batch: whole, BN: optim.BNFreeze, Eps: eps, OutRho: outRho}))
	}
	return []hostCase{
		{name: "ρ/is a vector of the member", needs: needVariational, run: func(c *conf) {
			rho, x := optim.RhoOf(c.vm), c.alloc(c.vm, "x")
			c.p().Fill(rho, optim.K(-3)).Copy(x, rho)
			c.expectConst("ρ", rho, -3)
			c.expectConst("copy of ρ", x, -3)
		}},
		{name: "ρ/of a deterministic member", needs: needDeterministic, run: func(c *conf) {
			c.vecFails("not variational", func(p *optim.Program) { p.Fill(optim.RhoOf(c.dm), optim.K(1)) })
		}},
		{name: "ρ/of a missing member", run: func(c *conf) {
			c.vecFails("names the ρ of member 17", func(p *optim.Program) { p.Fill(optim.RhoOf(noMember), optim.K(1)) })
		}},
		{name: "Grad/variational: a shared Eps repeats the pass", needs: needVariational, run: func(c *conf) {
			m := c.vm
			eps, g1, g2, r1, r2 := c.randn(m, "eps", 4), c.alloc(m, "g1"), c.alloc(m, "g2"), c.alloc(m, "r1"), c.alloc(m, "r2")
			c.p().Fill(optim.RhoOf(m), optim.K(0))
			e1 := pass(c, g1, optim.ParamsOf(m), eps, r1)
			e2 := pass(c, g2, optim.ParamsOf(m), eps, r2)
			c.expectEval("two passes", e1, e2)
			c.expectSame("gradients of μ", g1, g2)
			c.expectSame("gradients of ρ", r1, r2)
		}},
		{name: "Grad/variational: Eps 0 draws afresh", needs: needVariational, run: func(c *conf) {
			m := c.vm
			g1, g2 := c.alloc(m, "g1"), c.alloc(m, "g2")
			c.p().Fill(optim.RhoOf(m), optim.K(0))
			pass(c, g1, optim.ParamsOf(m), 0, 0)
			pass(c, g2, optim.ParamsOf(m), 0, 0)
			c.expectDiffer("gradients of two passes", g1, g2)
		}},
		{name: "Grad/variational: writes every element of OutRho", needs: needVariational, run: func(c *conf) {
			m := c.vm
			eps, r := c.randn(m, "eps", 4), c.filled(m, "r", math.NaN())
			pass(c, 0, optim.ParamsOf(m), eps, r)
			c.expectFinite("‖r‖", c.norm(r))
		}},
		{name: "Grad/variational: at a copy of μ", needs: needVariational, run: func(c *conf) {
			m := c.vm
			eps, x := c.randn(m, "eps", 4), c.alloc(m, "x")
			g1, g2, r1, r2 := c.alloc(m, "g1"), c.alloc(m, "g2"), c.alloc(m, "r1"), c.alloc(m, "r2")
			c.p().Copy(x, optim.ParamsOf(m))
			c.expectEval("at μ and at x", pass(c, g1, optim.ParamsOf(m), eps, r1), pass(c, g2, x, eps, r2))
			c.expectSame("gradients of μ", g1, g2)
			c.expectSame("gradients of ρ", r1, r2)
		}},
		{name: "Grad/variational: the gradient of ρ", needs: needVariational, run: func(c *conf) {
			m := c.vm
			rho := optim.RhoOf(m)
			eps, r, d, save := c.randn(m, "eps", 4), c.alloc(m, "r"), c.alloc(m, "d"), c.alloc(m, "saved")
			c.p().Fill(rho, optim.K(-1))
			pass(c, 0, optim.ParamsOf(m), eps, r)
			const h = 1e-3
			c.p().Unary(d, r, optim.Sign).Copy(save, rho).Axpy(rho, optim.K(h), d)
			plus := pass(c, 0, optim.ParamsOf(m), eps, 0).loss
			c.p().Copy(rho, save).Axpy(rho, optim.K(-h), d)
			minus := pass(c, 0, optim.ParamsOf(m), eps, 0).loss
			c.fdCheck("slope of the loss along sign(∂L/∂ρ)", plus, minus, c.dot(r, d), h)
		}},
		{name: "Grad/variational: At is ρ", needs: needVariational, run: func(c *conf) {
			c.fails("", func(p *optim.Program) { p.Grad(0, optim.RhoOf(c.vm), whole, optim.BNUpdate) })
		}},
		{name: "Grad/variational: Eps is live parameters", needs: needVariational | needMembers, run: func(c *conf) {
			c.fails("", func(p *optim.Program) {
				p.GradOp(optim.Grad{At: optim.ParamsOf(c.vm), Eps: optim.ParamsOf(1)})
			})
		}},
		{name: "Grad/variational: OutRho is live parameters", needs: needVariational | needMembers, run: func(c *conf) {
			c.fails("", func(p *optim.Program) {
				p.GradOp(optim.Grad{At: optim.ParamsOf(c.vm), OutRho: optim.ParamsOf(1)})
			})
		}},
		{name: "BaseStep/ρ", needs: needVariational, run: func(c *conf) {
			m := c.vm
			rho := optim.RhoOf(m)
			g, x := c.filled(m, "g", 1), c.alloc(m, "x")
			c.p().Fill(rho, optim.K(-2)).Copy(x, rho).SetLR(m, 0).BaseStep(rho, g)
			c.expectSame("ρ after a step at lr 0", rho, x)
			c.p().SetLR(m, 0.125).BaseStep(rho, g)
			if c.opts.BaseSGD {
				c.p().AddConst(x, optim.K(-0.125))
				c.expectSame("ρ − lr·g", rho, x)
			} else {
				s := c.sum(rho)
				c.expect("Σρ decreased", func(get func(ref) float64) error {
					if got := get(s); !(got < -2*float64(c.n(m))) {
						return fmt.Errorf("Σρ = %v", got)
					}
					return nil
				})
			}
		}},
		{name: "JointGrad/a ρ handle", needs: needVariational, run: func(c *conf) {
			c.fails("", func(p *optim.Program) {
				p.JointGrad(nil, []optim.Vec{optim.RhoOf(c.vm)}, whole, optim.BNUpdate)
			})
		}},
		{name: "JointGrad/a variational member", needs: needVariational, run: func(c *conf) {
			c.fails("", func(p *optim.Program) {
				p.JointGrad(nil, []optim.Vec{optim.ParamsOf(c.vm)}, whole, optim.BNUpdate)
			})
		}},
	}
}

func jointCases() []hostCase {
	params := func(c *conf) []optim.Vec { return []optim.Vec{optim.ParamsOf(c.jm[0]), optim.ParamsOf(c.jm[1])} }
	outs := func(c *conf, name string) []optim.Vec {
		return []optim.Vec{c.alloc(c.jm[0], name+"0"), c.alloc(c.jm[1], name+"1")}
	}
	return []hostCase{
		{name: "JointGrad/one member is Grad", needs: needJoint, run: func(c *conf) {
			p := params(c)
			for _, b := range []optim.Batch{whole, {Part: 1, Of: 2, Shuffle: 3}} {
				g1, g2 := c.alloc(c.jm[0], "g1"), c.alloc(c.jm[0], "g2")
				e1 := c.grad(g1, p[0], b, optim.BNFreeze)
				e2 := c.joint([]optim.Vec{g2}, []optim.Vec{p[0]}, b, optim.BNFreeze)
				c.expectEval(fmt.Sprintf("batch %v", b), e1, e2)
				c.expectSame(fmt.Sprintf("batch %v: gradients", b), g1, g2)
			}
		}},
		{name: "JointGrad/emits a loss and an accuracy", needs: needJoint, run: func(c *conf) {
			p := params(c)
			ev := c.joint(nil, p, whole, optim.BNUpdate)
			c.expectFinite("loss", ev.loss)
			c.expect("accuracy in [0, 1]", func(get func(ref) float64) error {
				if a := get(ev.acc); !(a >= 0 && a <= 1) {
					return fmt.Errorf("accuracy %v", a)
				}
				return nil
			})
		}},
		{name: "JointGrad/writes every element of its Outs", needs: needJoint, run: func(c *conf) {
			g := outs(c, "g")
			c.p().Fill(g[0], optim.K(math.NaN())).Fill(g[1], optim.K(math.NaN()))
			c.joint(g, params(c), whole, optim.BNUpdate)
			c.expectFinite("‖g0‖", c.norm(g[0]))
			c.expectFinite("‖g1‖", c.norm(g[1]))
		}},
		{name: "JointGrad/no Outs is the same pass", needs: needJoint, run: func(c *conf) {
			p, g := params(c), outs(c, "g")
			c.expectEval("with and without Outs", c.joint(g, p, whole, optim.BNFreeze), c.joint(nil, p, whole, optim.BNFreeze))
		}},
		{name: "JointGrad/at copies of the live parameters", needs: needJoint, run: func(c *conf) {
			p, x, g, h := params(c), outs(c, "x"), outs(c, "g"), outs(c, "h")
			c.p().Copy(x[0], p[0]).Copy(x[1], p[1])
			c.expectEval("at params and at copies", c.joint(g, p, whole, optim.BNFreeze), c.joint(h, x, whole, optim.BNFreeze))
			c.expectSame("gradients of member 0", g[0], h[0])
			c.expectSame("gradients of member 1", g[1], h[1])
		}},
		{name: "JointGrad/Ats in either order", needs: needJoint, run: func(c *conf) {
			p, g, h := params(c), outs(c, "g"), outs(c, "h")
			e1 := c.joint(g, p, whole, optim.BNFreeze)
			e2 := c.joint([]optim.Vec{h[1], h[0]}, []optim.Vec{p[1], p[0]}, whole, optim.BNFreeze)
			c.expectEval("both orders", e1, e2)
			c.expectSame("gradients of member 0", g[0], h[0])
			c.expectSame("gradients of member 1", g[1], h[1])
		}},
		{name: "JointGrad/halves average to the whole batch", needs: needJoint | needBatchMeans, run: func(c *conf) {
			p := params(c)
			halves(c, c.jm[0], 7, func(out optim.Vec, b optim.Batch) evalRef {
				return c.joint([]optim.Vec{out, 0}, p, b, optim.BNFreeze)
			})
		}},
		{name: "JointGrad/the gradient of the loss", needs: needJoint, run: func(c *conf) {
			p, g := params(c), outs(c, "g")
			c.joint(g, p, whole, optim.BNFreeze)
			c.gradFD("slope of the joint loss along sign(g0)", p[0], g[0], 1e-3, func(at optim.Vec) ref {
				return c.joint(nil, []optim.Vec{at, p[1]}, whole, optim.BNFreeze).loss
			})
		}},
		{name: "JointGrad/no Ats", needs: needJoint, run: func(c *conf) {
			c.fails("", func(p *optim.Program) { p.JointGrad(nil, nil, whole, optim.BNUpdate) })
		}},
		{name: "JointGrad/Outs not matching Ats", needs: needJoint, run: func(c *conf) {
			g := c.alloc(c.jm[0], "g")
			c.fails("", func(p *optim.Program) { p.JointGrad([]optim.Vec{g}, params(c), whole, optim.BNUpdate) })
		}},
		{name: "JointGrad/a member twice", needs: needJoint, run: func(c *conf) {
			x := c.alloc(c.jm[0], "x")
			c.fails("", func(p *optim.Program) {
				p.JointGrad(nil, []optim.Vec{optim.ParamsOf(c.jm[0]), x}, whole, optim.BNUpdate)
			})
		}},
		{name: "JointGrad/an Out twice", needs: needJoint, run: func(c *conf) {
			g := c.alloc(c.jm[0], "g")
			c.fails("", func(p *optim.Program) { p.JointGrad([]optim.Vec{g, g}, params(c), whole, optim.BNUpdate) })
		}},
		{name: "JointGrad/an Out is live parameters", needs: needJoint, run: func(c *conf) {
			p := params(c)
			c.fails("", func(q *optim.Program) { q.JointGrad([]optim.Vec{0, p[1]}, p, whole, optim.BNUpdate) })
		}},
		{name: "JointGrad/part out of range", needs: needJoint, run: func(c *conf) {
			c.fails("", func(p *optim.Program) {
				p.JointGrad(nil, params(c), optim.Batch{Part: 2, Of: 2}, optim.BNUpdate)
			})
		}},
		{name: "JointGrad/unknown BatchNorm mode", needs: needJoint, run: func(c *conf) {
			c.unsupported(func(p *optim.Program) { p.JointGrad(nil, params(c), whole, 7) })
		}},
	}
}

func baseStepCases() []hostCase {
	return []hostCase{
		{name: "BaseStep/at lr 0 leaves the parameters", run: func(c *conf) {
			x, g := c.alloc(0, "x"), c.randn(0, "g", 1)
			c.p().Copy(x, optim.Params).SetLR(0, 0).BaseStep(optim.Params, g)
			c.expectSame("params", optim.Params, x)
		}},
		{name: "BaseStep/moves against the gradient", run: func(c *conf) {
			g := c.filled(0, "g", 1)
			c.p().Fill(optim.Params, optim.K(0)).SetLR(0, 0.125).BaseStep(optim.Params, g)
			s, q := c.sum(optim.Params), c.norm(optim.Params)
			n := float64(c.n(0))
			c.expect("params all equal and negative", func(get func(ref) float64) error {
				if mean, rms := get(s)/n, get(q)/math.Sqrt(n); !(mean < 0) || !c.close(rms, -mean) {
					return fmt.Errorf("mean %v, rms %v", mean, rms)
				}
				return nil
			})
		}},
		{name: "BaseStep/is θ − lr·g", needs: needBaseSGD, run: func(c *conf) {
			x, g := c.alloc(0, "x"), c.randn(0, "g", 1)
			c.p().Copy(x, optim.Params).SetLR(0, 0.125).BaseStep(optim.Params, g).Axpy(x, optim.K(-0.125), g)
			c.expectSame("params", optim.Params, x)
		}},
		{name: "BaseStep/of one member", needs: needMembers, run: func(c *conf) {
			m := len(c.l.Members) - 1
			x, g := c.alloc(0, "x"), c.filled(m, "g", 1)
			c.p().Copy(x, optim.Params).SetLR(0, 0.125).SetLR(m, 0.125).Fill(optim.ParamsOf(m), optim.K(0)).BaseStep(optim.ParamsOf(m), g)
			c.expectSame("params of member 0", optim.Params, x)
			s := c.sum(optim.ParamsOf(m))
			c.expect(fmt.Sprintf("Σparams[%d] < 0", m), func(get func(ref) float64) error {
				if v := get(s); !(v < 0) {
					return fmt.Errorf("Σ = %v", v)
				}
				return nil
			})
		}},
		{name: "BaseStep/on an allocated vector", run: func(c *conf) {
			v, g := c.alloc(0, "v"), c.alloc(0, "g")
			c.fails("", func(p *optim.Program) { p.BaseStep(v, g) })
		}},
		{name: "BaseStep/of a missing member", run: func(c *conf) {
			g := c.alloc(0, "g")
			c.fails("17", func(p *optim.Program) { p.BaseStep(optim.ParamsOf(noMember), g) })
		}},
		{name: "BaseStep/ρ of a deterministic member", needs: needDeterministic, run: func(c *conf) {
			g := c.alloc(c.dm, "g")
			c.fails("", func(p *optim.Program) { p.BaseStep(optim.RhoOf(c.dm), g) })
		}},
		{name: "BaseStep/gradient of another layout", needs: needLayouts, run: func(c *conf) {
			g := c.alloc(c.lm[1], "g")
			c.fails("", func(p *optim.Program) { p.BaseStep(optim.ParamsOf(c.lm[0]), g) })
		}},
	}
}

func setLRCases() []hostCase {
	// moved expects Σ params[m] < 0 after a step from 0 (or = 0 if not moved).
	moved := func(c *conf, m int, want bool) {
		s := c.sum(optim.ParamsOf(m))
		c.expect(fmt.Sprintf("member %d moved: %v", m, want), func(get func(ref) float64) error {
			if v := get(s); (v < 0) != want || (!want && v != 0) {
				return fmt.Errorf("Σparams[%d] = %v", m, v)
			}
			return nil
		})
	}
	step := func(c *conf, m int) {
		g := c.filled(m, "g", 1)
		c.p().Fill(optim.ParamsOf(m), optim.K(0)).BaseStep(optim.ParamsOf(m), g)
	}
	return []hostCase{
		{name: "SetLR/lasts across programs", run: func(c *conf) {
			c.p().SetLR(0, 0)
			c.next()
			step(c, 0)
			moved(c, 0, false)
		}},
		{name: "SetLR/the last one wins", run: func(c *conf) {
			c.p().SetLR(0, 0.5).SetLR(0, 0)
			step(c, 0)
			moved(c, 0, false)
			c.next()
			c.p().SetLR(0, 0).SetLR(0, 0.125)
			step(c, 0)
			moved(c, 0, true)
		}},
		{name: "SetLR/is per member", needs: needMembers, run: func(c *conf) {
			m := len(c.l.Members) - 1
			c.p().SetLR(0, 0.125).SetLR(m, 0)
			step(c, 0)
			step(c, m)
			moved(c, 0, true)
			moved(c, m, false)
		}},
		{name: "SetLR/member out of range", run: func(c *conf) {
			c.fails("17", func(p *optim.Program) { p.SetLR(noMember, 0.1) })
		}},
		{name: "SetLR/negative member", run: func(c *conf) {
			c.fails("-1", func(p *optim.Program) { p.SetLR(-1, 0.1) })
		}},
		{name: "SetLR/negative rate", run: func(c *conf) {
			c.fails("", func(p *optim.Program) { p.SetLR(0, -0.1) })
		}},
		{name: "SetLR/NaN rate", run: func(c *conf) {
			c.fails("", func(p *optim.Program) { p.SetLR(0, math.NaN()) })
		}},
	}
}

// handleCases: every operand of every op, given a handle that names no
// vector, fails its op.
func handleCases() []hostCase {
	uses := []struct {
		name  string
		needs needs
		op    func(c *conf, p *optim.Program, x optim.Vec) // setup, then the op using x last
	}{
		{"Free", 0, func(_ *conf, p *optim.Program, x optim.Vec) { p.Free(x) }},
		{"Copy.Dst", 0, func(c *conf, p *optim.Program, x optim.Vec) { p.Copy(x, c.alloc(0, "a")) }},
		{"Copy.Src", 0, func(c *conf, p *optim.Program, x optim.Vec) { p.Copy(c.alloc(0, "a"), x) }},
		{"CopyState.Src", 0, func(c *conf, p *optim.Program, x optim.Vec) { p.CopyState(c.alloc(0, "a"), x) }},
		{"UpdateBN", 0, func(_ *conf, p *optim.Program, x optim.Vec) { p.UpdateBN(x) }},
		{"Fill", 0, func(_ *conf, p *optim.Program, x optim.Vec) { p.Fill(x, optim.K(1)) }},
		{"FillRange", 0, func(_ *conf, p *optim.Program, x optim.Vec) { p.FillRange(x, 0, 1, 1) }},
		{"Scale", 0, func(_ *conf, p *optim.Program, x optim.Vec) { p.Scale(x, optim.K(2)) }},
		{"AddConst", 0, func(_ *conf, p *optim.Program, x optim.Vec) { p.AddConst(x, optim.K(2)) }},
		{"Axpy.Dst", 0, func(c *conf, p *optim.Program, x optim.Vec) { p.Axpy(x, optim.K(1), c.alloc(0, "a")) }},
		{"Axpy.X", 0, func(c *conf, p *optim.Program, x optim.Vec) { p.Axpy(c.alloc(0, "a"), optim.K(1), x) }},
		{"LinComb.Dst", 0, func(c *conf, p *optim.Program, x optim.Vec) {
			p.LinComb(x, optim.Term{Coef: optim.K(1), X: c.alloc(0, "a")})
		}},
		{"LinComb.Terms", 0, func(c *conf, p *optim.Program, x optim.Vec) {
			a := c.alloc(0, "a")
			p.LinComb(a, optim.Term{Coef: optim.K(1), X: a}, optim.Term{Coef: optim.K(1), X: x})
		}},
		{"Unary.Dst", 0, func(c *conf, p *optim.Program, x optim.Vec) { p.Unary(x, c.alloc(0, "a"), optim.Abs) }},
		{"Unary.Src", 0, func(c *conf, p *optim.Program, x optim.Vec) { p.Unary(c.alloc(0, "a"), x, optim.Abs) }},
		{"Binary.Dst", 0, func(c *conf, p *optim.Program, x optim.Vec) {
			a := c.alloc(0, "a")
			p.Binary(x, a, a, optim.Add)
		}},
		{"Binary.A", 0, func(c *conf, p *optim.Program, x optim.Vec) {
			a := c.alloc(0, "a")
			p.Binary(a, x, a, optim.Add)
		}},
		{"Binary.B", 0, func(c *conf, p *optim.Program, x optim.Vec) {
			a := c.alloc(0, "a")
			p.Binary(a, a, x, optim.Add)
		}},
		{"RandN", 0, func(_ *conf, p *optim.Program, x optim.Vec) { p.RandN(x, 1, 1) }},
		{"Dot.A", 0, func(c *conf, p *optim.Program, x optim.Vec) { p.Dot(x, c.alloc(0, "a")) }},
		{"Dot.B", 0, func(c *conf, p *optim.Program, x optim.Vec) { p.Dot(c.alloc(0, "a"), x) }},
		{"Norm", 0, func(_ *conf, p *optim.Program, x optim.Vec) { p.Norm(x) }},
		{"Grad.Out", 0, func(_ *conf, p *optim.Program, x optim.Vec) { p.Grad(x, optim.Params, whole, optim.BNUpdate) }},
		{"Grad.At", 0, func(_ *conf, p *optim.Program, x optim.Vec) { p.Grad(0, x, whole, optim.BNUpdate) }},
		{"Grad.Eps", needVariational, func(c *conf, p *optim.Program, x optim.Vec) {
			p.GradOp(optim.Grad{At: optim.ParamsOf(c.vm), Eps: x})
		}},
		{"Grad.OutRho", needVariational, func(c *conf, p *optim.Program, x optim.Vec) {
			p.GradOp(optim.Grad{At: optim.ParamsOf(c.vm), OutRho: x})
		}},
		{"JointGrad.Ats", needJoint, func(c *conf, p *optim.Program, x optim.Vec) {
			p.JointGrad(nil, []optim.Vec{optim.ParamsOf(c.jm[0]), x}, whole, optim.BNUpdate)
		}},
		{"JointGrad.Outs", needJoint, func(c *conf, p *optim.Program, x optim.Vec) {
			p.JointGrad([]optim.Vec{0, x}, []optim.Vec{optim.ParamsOf(c.jm[0]), optim.ParamsOf(c.jm[1])}, whole, optim.BNUpdate)
		}},
		{"BaseStep.Params", 0, func(c *conf, p *optim.Program, x optim.Vec) { p.BaseStep(x, c.alloc(0, "g")) }},
		{"BaseStep.Grad", 0, func(_ *conf, p *optim.Program, x optim.Vec) { p.BaseStep(optim.Params, x) }},
		{"SegReduce.X", 0, func(_ *conf, p *optim.Program, x optim.Vec) { p.SegReduce(optim.SegSumSq, optim.PerTensor, x, 0) }},
		{"SegReduce.Y", 0, func(c *conf, p *optim.Program, x optim.Vec) {
			p.SegReduce(optim.SegDot, optim.PerRow, c.alloc(0, "a"), x)
		}},
		{"TopKMask.Dst", 0, func(_ *conf, p *optim.Program, x optim.Vec) {
			p.TopKMask(x, optim.Params, optim.PerTensor, optim.K(0.5))
		}},
		{"TopKMask.X", 0, func(c *conf, p *optim.Program, x optim.Vec) {
			p.TopKMask(c.alloc(0, "a"), x, optim.PerRow, optim.K(0.5))
		}},
		{"Fill with a segment register", 0, func(c *conf, p *optim.Program, x optim.Vec) {
			p.Fill(x, p.SegReduce(optim.SegSumSq, optim.PerTensor, optim.Params, 0))
		}},
	}
	var cs []hostCase
	for _, u := range uses {
		cs = append(cs,
			hostCase{name: "Handle/unknown in " + u.name, needs: u.needs, run: func(c *conf) {
				c.vecFails("v4242 is not allocated", func(p *optim.Program) { u.op(c, p, stray) })
			}},
			hostCase{name: "Handle/freed in " + u.name, needs: u.needs, run: func(c *conf) {
				x := c.alloc(0, "freed")
				c.p().Free(x)
				c.next()
				c.vecFails("handle freed is not allocated", func(p *optim.Program) { u.op(c, p, x) })
			}},
			hostCase{name: "Handle/a missing member's in " + u.name, needs: u.needs, run: func(c *conf) {
				c.vecFails("names member 17; the run has", func(p *optim.Program) { u.op(c, p, optim.ParamsOf(noMember)) })
			}},
		)
	}
	return cs
}
