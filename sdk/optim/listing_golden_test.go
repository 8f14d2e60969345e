package optim_test

import (
	"flag"
	"math"
	"os"
	"testing"

	"github.com/optlab/optlab/sdk/optim"
)

var update = flag.Bool("update", false, "rewrite testdata/listing_all_ops.txt")

// allOpsProgram builds a program with every op of the table, through the
// builder where it has a method. sdk/python/tests/test_program.py builds
// the same program and compares its listing with the golden this writes:
// the Python SDK's listing must be Go's, byte for byte.
func allOpsProgram() *optim.Program {
	hs := optim.NewHandles().Sub("all")
	g, saved, t, mask := hs.New("g[0]"), hs.New("saved[0]"), hs.New("t"), hs.New("mask")
	p := hs.Prog()
	p.Alloc(g, 0).Alloc(saved, 1).Alloc(t, 0).Alloc(mask, 0)
	ev := p.Grad(g, optim.Params, optim.Batch{}, optim.BNUpdate)
	n := p.Norm(g)
	d := p.Dot(g, saved)
	c := p.Div(optim.K(0.05), p.Add(n, optim.K(1e-12)))
	p.Copy(saved, optim.Params).Axpy(optim.Params, c, g).Axpy(optim.Params, optim.K(-0.0877017), g)
	ev2 := p.Grad(g, optim.Params, optim.Batch{}, optim.BNFreeze)
	p.CopyState(optim.Params, saved).BaseStep(optim.Params, g)
	p.LinComb(saved, optim.Term{Coef: optim.K(0.5), X: g}, optim.Term{Coef: d, X: saved})
	p.Unary(t, optim.Params, optim.Abs).Binary(t, t, g, optim.Mul)
	p.FillRange(mask, 4, 6, 1).Fill(g, optim.K(0)).Fill(t, nil).Fill(t, optim.K(math.Inf(-1)))
	p.Scale(g, optim.K(2)).Scale(g, n).AddConst(g, optim.K(0.01)).RandN(g, 1e-7, 3).SetLR(1, 0.1)
	p.Grad(0, optim.Params, optim.Batch{Part: 1, Of: 2, Shuffle: 5}, optim.BNUpdate)
	p.GradOp(optim.Grad{At: optim.ParamsOf(1), Batch: optim.Batch{Part: 1, Of: 2}, BN: optim.BNFreeze, Eps: t, OutRho: saved})
	p.GradOp(optim.Grad{Out: g, At: optim.Params, Eps: t})
	p.JointGrad([]optim.Vec{g, 0}, []optim.Vec{optim.Params, optim.ParamsOf(1)}, optim.Batch{Part: 1, Of: 2}, optim.BNUpdate)
	s := p.SegReduce(optim.SegDot, optim.PerRow, g, saved)
	sn := p.SegNorm(optim.PerTensor, g)
	p.SegReduce(optim.SegMaxAbs, optim.PerTensor, optim.RhoOf(1), 0)
	p.SegReduce(optim.SegSumAbs, optim.PerRow, g, 0)
	p.Scale(g, p.Recip(sn)).Axpy(t, s, g)
	p.TopKMask(mask, g, optim.PerRow, optim.K(0.25))
	p.TopKMask(mask, g, optim.PerTensor, p.Clamp(s, optim.K(0), optim.K(1)))
	m := p.Max(p.Min(n, optim.K(3)), p.Sub(d, p.Mul(n, n)))
	p.AddConst(g, p.Sqrt(m))
	loss, acc := p.Mean([]optim.Eval{ev, ev2})
	p.ReportMetrics(loss, acc).Report("norm", n)
	p.NewtonSchulz(t, g, 5).NewtonSchulzOp(optim.NewtonSchulz{Dst: g, Src: g, Steps: 30, A: 1.5, B: -0.5, C: 0, Eps: 0})
	lf, rf, q := hs.New("L"), hs.New("R"), hs.New("Q")
	p.AllocFactor(lf, 0, optim.LeftFactor, 0).AllocFactor(rf, 0, optim.RightFactor, 256).AllocFactor(q, 0, optim.LeftFactor, 0)
	p.Gram(lf, g, 0.99, 0.01).Gram(rf, g, 1, 1).SegReduce(optim.SegSumSq, optim.PerColumn, g, 0)
	p.InvRoot(lf, lf, 4, 1e-12).MatFunc(rf, rf, optim.PinvRoot, 2, 1e-6).MatFunc(q, lf, optim.EigVecs, 0, 0)
	p.MatFunc(q, q, optim.QR, 0, 0).MatFunc(q, lf, optim.EigVals, 0, 0)
	p.MatMul(t, lf, g, rf).MatMul(t, 0, g, rf).MatMulOp(optim.MatMul{Dst: t, Src: g, Left: q, Right: q, TransLeft: true})
	p.MatMul(q, lf, q, 0).SortColumns(q, lf, t).SortColumns(rf, rf, 0)
	p.If(n, func(p *optim.Program) { p.Scale(g, optim.K(0.5)).Norm(g) })
	lb, la := hs.New("lb"), hs.New("la")
	p.BaseState(t, optim.Params, optim.MomentumBuffer).AllocSamples(lb, 0).AllocSamples(la, 0)
	p.GradOp(optim.Grad{Out: g, At: optim.Params, OutLosses: lb})
	p.GradOp(optim.Grad{At: optim.Params, BN: optim.BNFreeze, OutLosses: la})
	p.Binary(la, la, lb, optim.Sub)
	p.GradOp(optim.Grad{Out: g, At: optim.Params, Rank: la, Keep: 3})
	p.Read(n, m).UpdateBN(saved).UpdateBN(optim.Params).Free(t)
	p.Ops = append(p.Ops, optim.Unary{Dst: t, Src: g, Kind: 42})
	return p
}

func TestListingAllOps(t *testing.T) {
	p := allOpsProgram()
	has := map[string]bool{}
	for _, op := range p.Ops {
		has[optim.OpName(op)] = true
	}
	for _, s := range optim.OpSet() {
		if !has[s.Name] {
			t.Errorf("allOpsProgram has no %s op: add one (and to sdk/python/tests/test_program.py)", s.Name)
		}
	}
	const path = "testdata/listing_all_ops.txt"
	got := p.String()
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./optim -run TestListingAllOps -update)", err)
	}
	if got != string(want) {
		t.Errorf("listing:\n%s\nwant (%s):\n%s", got, path, want)
	}
}
