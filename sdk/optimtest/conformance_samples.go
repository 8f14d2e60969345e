package optimtest

import (
	"fmt"

	"github.com/optlab/optlab/sdk/optim"
)

// The cases of protocol minor 10: BaseState (the base optimizer's state
// read into a plugin vector) and sample vectors (Grad's per-sample losses,
// OutLosses, and the pass on the Keep samples of largest Rank).

func baseStateCases() []hostCase {
	return []hostCase{
		{name: "BaseState/momentum buffer: zeros before the first step, then μ·buf + g", needs: needMomentum, run: func(c *conf) {
			mu := c.opts.Momentum
			b, g, x := c.filled(0, "b", 7), c.filled(0, "g", 1), c.alloc(0, "x")
			c.p().BaseState(b, optim.Params, optim.MomentumBuffer)
			c.expectConst("before the first step", b, 0)
			c.next()
			c.p().Copy(x, optim.Params).SetLR(0, 0.125).BaseStep(optim.Params, g).BaseState(b, optim.Params, optim.MomentumBuffer)
			c.expectConst("after one step: buf = g", b, 1)
			c.next()
			c.p().Scale(b, optim.K(3)) // a copy: the host's buffer is not changed
			c.p().Copy(x, optim.Params).SetLR(0, 0.125).BaseStep(optim.Params, g).BaseState(b, optim.Params, optim.MomentumBuffer)
			c.expectConst("after two steps: buf = μ·g + g", b, mu+1)
			c.p().Axpy(x, optim.K(-0.125), b) // the step used that buffer
			c.expectSame("θ − lr·buf", optim.Params, x)
		}},
		{name: "BaseState/SGD without momentum keeps no buffer", needs: needBaseSGD, run: func(c *conf) {
			b := c.alloc(0, "b")
			c.fails("momentum 0, which keeps no momentum_buffer", func(p *optim.Program) { p.BaseState(b, optim.Params, optim.MomentumBuffer) })
		}},
		{name: "BaseState/SGD has no exp_avg", needs: needBaseSGD, run: func(c *conf) {
			b := c.alloc(0, "b")
			c.fails("keeps momentum_buffer (with momentum ≠ 0), not exp_avg", func(p *optim.Program) { p.BaseState(b, optim.Params, optim.ExpAvg) })
		}},
		{name: "BaseState/an unknown name", run: func(c *conf) {
			b := c.alloc(0, "b")
			c.unsupported(func(p *optim.Program) { p.BaseState(b, optim.Params, "velocity") })
		}},
		{name: "BaseState/into the live parameters", run: func(c *conf) {
			c.vecFails("is reserved", func(p *optim.Program) { p.BaseState(optim.Params, optim.Params, optim.MomentumBuffer) })
		}},
		{name: "BaseState/of an allocated vector", run: func(c *conf) {
			b, v := c.alloc(0, "b"), c.alloc(0, "v")
			c.vecFails("not a member's live parameters", func(p *optim.Program) { p.BaseState(b, v, optim.MomentumBuffer) })
		}},
		{name: "BaseState/of another layout", needs: needLayouts, run: func(c *conf) {
			b := c.alloc(c.lm[1], "b")
			c.vecFails("", func(p *optim.Program) { p.BaseState(b, optim.ParamsOf(c.lm[0]), optim.MomentumBuffer) })
		}},
		{name: "BaseState/into a sample vector", needs: needSamples, run: func(c *conf) {
			b := c.allocL(optim.VecLayout{Shape: optim.SampleShape}, "b")
			c.vecFails("is a sample vector", func(p *optim.Program) { p.BaseState(b, optim.Params, optim.MomentumBuffer) })
		}},
	}
}

func sampleCases() []hostCase {
	samples := func(c *conf, m int, name string) optim.Vec {
		return c.allocL(optim.VecLayout{Member: m, Shape: optim.SampleShape}, name)
	}
	// firstHalf is a sample vector of 1 on the batch's first half, 0 after.
	firstHalf := func(c *conf, m int) optim.Vec {
		r := samples(c, m, "rank")
		c.p().FillRange(r, 0, c.l.BatchSize/2, 1)
		return r
	}
	return []hostCase{
		{name: "Grad/per-sample losses: their mean is the loss, the gradient unchanged", needs: needSamples | needDeterministic, run: func(c *conf) {
			m := c.dm
			at := optim.ParamsOf(m)
			lb, g, g2 := samples(c, m, "losses"), c.alloc(m, "g"), c.alloc(m, "g2")
			ev := c.eval(c.p().GradOp(optim.Grad{Out: g, At: at, BN: optim.BNFreeze, OutLosses: lb}))
			ev2 := c.grad(g2, at, optim.Batch{}, optim.BNFreeze)
			c.expectSame("the gradient", g, g2)
			c.expectEval("the registers", ev, ev2)
			s := c.sum(lb)
			n := float64(c.l.BatchSize)
			c.expect("Σ losses / batch = loss", func(get func(ref) float64) error {
				return closeOr(c, get(s)/n, get(ev2.loss))
			})
		}},
		{name: "Grad/a forward-only pass gives the same losses", needs: needSamples | needDeterministic, run: func(c *conf) {
			m := c.dm
			at := optim.ParamsOf(m)
			l1, l2, g := samples(c, m, "l1"), samples(c, m, "l2"), c.alloc(m, "g")
			ev := c.eval(c.p().GradOp(optim.Grad{Out: g, At: at, BN: optim.BNFreeze, OutLosses: l1}))
			ev2 := c.eval(c.p().GradOp(optim.Grad{At: at, BN: optim.BNFreeze, OutLosses: l2}))
			c.expectSame("the losses", l1, l2)
			c.expectEval("the registers", ev, ev2)
		}},
		{name: "Grad/the top half by rank is the first half of the batch", needs: needSamples | needBatchMeans | needDeterministic, run: func(c *conf) {
			m := c.dm
			at := optim.ParamsOf(m)
			half := c.l.BatchSize / 2
			g, g2, g3 := c.alloc(m, "g"), c.alloc(m, "g2"), c.alloc(m, "g3")
			ev := c.eval(c.p().GradOp(optim.Grad{Out: g, At: at, BN: optim.BNFreeze, Rank: firstHalf(c, m), Keep: half}))
			ev2 := c.grad(g2, at, optim.Batch{Part: 0, Of: 2}, optim.BNFreeze)
			c.expectSame("the gradient", g, g2)
			c.expectEval("the registers", ev, ev2)
			// Equal ranks: the lower positions win.
			flat := samples(c, m, "flat")
			ev3 := c.eval(c.p().GradOp(optim.Grad{Out: g3, At: at, BN: optim.BNFreeze, Rank: flat, Keep: half}))
			c.expectSame("ties to the lower position", g3, g2)
			c.expectEval("ties: the registers", ev3, ev2)
		}},
		{name: "Grad/a ranked pass's losses: the selected samples', 0 elsewhere", needs: needSamples | needDeterministic, run: func(c *conf) {
			m := c.dm
			at := optim.ParamsOf(m)
			rank := firstHalf(c, m)
			all, sel, want := samples(c, m, "all"), samples(c, m, "sel"), samples(c, m, "want")
			c.p().GradOp(optim.Grad{At: at, BN: optim.BNFreeze, OutLosses: all})
			c.p().GradOp(optim.Grad{At: at, BN: optim.BNFreeze, OutLosses: sel, Rank: rank, Keep: c.l.BatchSize / 2})
			c.p().Binary(want, all, rank, optim.Mul)
			c.expectSame("losses", sel, want)
		}},
		{name: "Grad/rank by the per-sample losses: the largest ones", needs: needSamples | needDeterministic, run: func(c *conf) {
			// Ranked by the losses themselves, the Keep = 1 pass's loss is the largest loss.
			m := c.dm
			at := optim.ParamsOf(m)
			l := samples(c, m, "losses")
			c.p().GradOp(optim.Grad{At: at, BN: optim.BNFreeze, OutLosses: l})
			top := c.eval(c.p().GradOp(optim.Grad{At: at, BN: optim.BNFreeze, Rank: l, Keep: 1}))
			z := samples(c, m, "max")
			c.p().Fill(z, c.p().SegReduce(optim.SegMaxAbs, optim.PerTensor, l, 0))
			s := c.sum(z)
			n := float64(c.l.BatchSize)
			c.expect("loss of the top sample = max loss", func(get func(ref) float64) error {
				return closeOr(c, get(top.loss), get(s)/n)
			})
		}},
		{name: "Grad/a rank vector of parameters", needs: needSamples | needDeterministic, run: func(c *conf) {
			v := c.alloc(c.dm, "v")
			c.vecFails("is not a sample vector", func(p *optim.Program) {
				p.GradOp(optim.Grad{At: optim.ParamsOf(c.dm), Rank: v, Keep: 1})
			})
		}},
		{name: "Grad/keep 0 with a rank", needs: needSamples | needDeterministic, run: func(c *conf) {
			r := samples(c, c.dm, "r")
			c.fails("keep = 0 is outside", func(p *optim.Program) { p.GradOp(optim.Grad{At: optim.ParamsOf(c.dm), Rank: r}) })
		}},
		{name: "Grad/keep above the batch", needs: needSamples | needDeterministic, run: func(c *conf) {
			r := samples(c, c.dm, "r")
			c.fails("the batch size", func(p *optim.Program) {
				p.GradOp(optim.Grad{At: optim.ParamsOf(c.dm), Rank: r, Keep: c.l.BatchSize + 1})
			})
		}},
		{name: "Grad/keep without a rank", needs: needDeterministic, run: func(c *conf) {
			c.fails("without a rank vector", func(p *optim.Program) { p.GradOp(optim.Grad{At: optim.ParamsOf(c.dm), Keep: 2}) })
		}},
		{name: "Grad/per-sample losses of a part of the batch", needs: needSamples | needDeterministic, run: func(c *conf) {
			l := samples(c, c.dm, "l")
			c.fails("take the whole batch", func(p *optim.Program) {
				p.GradOp(optim.Grad{At: optim.ParamsOf(c.dm), OutLosses: l, Batch: optim.Batch{Part: 1, Of: 2}})
			})
		}},
		{name: "Grad/at a sample vector", needs: needSamples, run: func(c *conf) {
			l := samples(c, 0, "l")
			c.vecFails("is a sample vector", func(p *optim.Program) { p.Grad(0, l, optim.Batch{}, optim.BNFreeze) })
		}},
		{name: "Alloc/a sample vector meets no parameter vector", needs: needSamples, run: func(c *conf) {
			l, v := samples(c, 0, "l"), c.alloc(0, "v")
			c.vecFails("", func(p *optim.Program) { p.Binary(l, l, v, optim.Add) })
		}},
	}
}

// closeOr returns nil when got and want agree to the suite's tolerance.
func closeOr(c *conf, got, want float64) error {
	if !c.close(got, want) {
		return fmt.Errorf("got %.17g, want %.17g", got, want)
	}
	return nil
}
