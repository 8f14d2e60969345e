package optimtest

import (
	"math"

	"github.com/optlab/optlab/sdk/optim"
)

// The cases of the If op (protocol minor 9): a block runs when its
// register is > 0 and is skipped otherwise (0, a negative value, NaN),
// its registers then NaN and the program's later registers unmoved.

func ifCases() []hostCase {
	var cs []hostCase
	for _, c := range []struct {
		name string
		cond float64
		runs bool
	}{{"1", 1, true}, {"1e-30", 1e-30, true}, {"0", 0, false}, {"-2", -2, false}, {"NaN", math.NaN(), false}} {
		cs = append(cs, hostCase{name: "If/condition " + c.name, run: func(cc *conf) {
			n := float64(cc.n(0))
			x, g := cc.filled(0, "x", 1), cc.filled(0, "g", 3)
			cond := cc.regOf(c.cond)
			var inside, seg optim.Reg
			var ev optim.Eval
			cc.p().If(cond, func(p *optim.Program) {
				p.Scale(x, optim.K(2))
				inside = p.Norm(x)
				seg = p.SegNorm(optim.PerTensor, x)
				ev = p.Grad(g, optim.Params, optim.Batch{}, optim.BNFreeze)
			})
			after := cc.p().Norm(x) // numbered after the block's registers
			v := cc.alloc(0, "v")
			cc.p().Fill(v, seg)
			if c.runs {
				cc.expectConst("x doubled", x, 2)
				cc.expectScalar("the block's Norm", cc.read(inside), 2*math.Sqrt(n))
				cc.expectScalar("after the block", cc.read(after), 2*math.Sqrt(n))
				cc.expectFinite("the block's gradient pass", cc.read(ev.Loss))
				return
			}
			cc.expectConst("x unchanged", x, 1)
			cc.expectConst("g unchanged (no gradient pass)", g, 3)
			cc.expectScalar("the block's Norm is NaN", cc.read(inside), math.NaN())
			cc.expectScalar("the block's loss is NaN", cc.read(ev.Loss), math.NaN())
			cc.expectScalar("the block's segment register is NaN in every segment", cc.norm(v), math.NaN())
			cc.expectScalar("after the block", cc.read(after), math.Sqrt(n))
		}})
	}
	return append(cs,
		hostCase{name: "If/nested blocks", run: func(c *conf) {
			x := c.filled(0, "x", 1)
			yes, no := c.regOf(1), c.regOf(-1)
			c.p().If(yes, func(p *optim.Program) {
				p.Scale(x, optim.K(2)) // runs
				p.If(no, func(p *optim.Program) { p.Scale(x, optim.K(5)) })
				p.Scale(x, optim.K(3)) // runs: after the inner block
			})
			c.p().If(no, func(p *optim.Program) {
				p.If(yes, func(p *optim.Program) { p.Scale(x, optim.K(7)) }) // inside a skipped block
			})
			c.expectConst("x = 1·2·3", x, 6)
		}},
		hostCase{name: "If/a condition computed on the host in the same program", run: func(c *conf) {
			// AE-SAM's kind of test: ‖g‖² against a threshold, the second
			// step only when it exceeds it, no Read.
			n := float64(c.n(0))
			g, x := c.filled(0, "g", 0.5), c.filled(0, "x", 0)
			sq := c.p().Dot(g, g) // n/4
			for _, th := range []float64{n/4 - 1, n/4 + 1} {
				d := c.p().Sub(sq, optim.K(th))
				c.p().If(d, func(p *optim.Program) { p.AddConst(x, optim.K(1)) })
			}
			c.expectConst("only the lower threshold's block ran", x, 1)
		}},
		hostCase{name: "If/a block of 0 ops", run: func(c *conf) {
			r := c.regOf(1)
			c.fails("if: len = 0; a block has at least one op", func(p *optim.Program) { p.Ops = append(p.Ops, optim.If{X: r}) })
		}},
		hostCase{name: "If/a block past the program's end", run: func(c *conf) {
			r := c.regOf(1)
			c.fails("runs past the program's end", func(p *optim.Program) { p.Ops = append(p.Ops, optim.If{X: r, Len: 3}) })
		}},
		hostCase{name: "If/a block that leaves its outer block", run: func(c *conf) {
			r, x := c.regOf(1), c.alloc(0, "x")
			c.fails("leaves the block that holds it", func(p *optim.Program) {
				p.Ops = append(p.Ops, optim.If{X: r, Len: 2}, optim.Scale{Dst: x, Alpha: optim.K(2)}, optim.If{X: r, Len: 2})
			})
		}},
		hostCase{name: "If/an alloc in a block", run: func(c *conf) {
			r := c.regOf(1)
			c.fails("alloc inside an If block", func(p *optim.Program) {
				p.If(r, func(p *optim.Program) { p.Alloc(c.hs.New("v"), 0) })
			})
		}},
		hostCase{name: "If/a free in a block", run: func(c *conf) {
			r, x := c.regOf(1), c.alloc(0, "x")
			c.fails("free inside an If block", func(p *optim.Program) {
				p.If(r, func(p *optim.Program) { p.Free(x) })
			})
		}},
		hostCase{name: "If/a segment register as the condition", run: func(c *conf) {
			sr := c.p().SegNorm(optim.PerTensor, c.filled(0, "x", 1))
			c.fails("holds one value per segment", func(p *optim.Program) { p.Ops = append(p.Ops, optim.If{X: sr, Len: 1}) })
		}},
	)
}
