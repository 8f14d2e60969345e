package optimtest

import (
	"fmt"
	"math"
	"slices"

	"gonum.org/v1/gonum/mat"

	"github.com/optlab/optlab/sdk/optim"
)

// The cases of the factor vectors and their ops (protocol minor 8): Gram,
// MatMul and MatFunc. What an op must give is computed here in float64:
// the products with gonum (GramRef, MatMulRef), the functions of
// symmetric matrices from a spectrum the case chooses (A = Q·diag(λ)·Qᵀ
// with a known orthogonal Q), so that the eigendecomposition the hosts run
// is checked against its definition, not against another
// eigendecomposition.

// factorBlock is the small block side the cases cut matrices with, so
// that a matrix of the suite's layouts has several tiles, some of them
// partial.
const factorBlock = 3

// factorLayout returns member 0's factor layout of shape s in blocks of
// side block, skipping the case when member 0 has no matrices or its
// factor vector is too large to fill element by element.
func (c *conf) factorLayout(s optim.VecShape, block int64) (optim.VecLayout, optim.MemberLayout) {
	c.matrices(true)
	l := optim.VecLayout{Member: 0, Shape: s, Block: block}
	fl := c.l.Of(l)
	if fl.Numel > 4*maxKnown {
		c.t.Skipf("member 0's %s factors have %d elements, more than the %d the case fills one by one", s, fl.Numel, 4*maxKnown)
	}
	return l, fl
}

// orthogonal returns a deterministic n×n orthogonal matrix (Q of a QR
// decomposition of seeded Gaussian values).
func orthogonal(n int, seed uint64) *mat.Dense {
	var qr mat.QR
	qr.Factorize(mat.NewDense(n, n, randomValues(int64(n*n), seed)))
	var q mat.Dense
	qr.QTo(&q)
	return &q
}

// spectral returns Q·diag(f(λ))·Qᵀ row major.
func spectral(q *mat.Dense, lam []float64, f func(float64) float64) []float64 {
	n := len(lam)
	d := make([]float64, n)
	for i, l := range lam {
		d[i] = f(l)
	}
	var qd, out mat.Dense
	qd.Apply(func(_, j int, x float64) float64 { return x * d[j] }, q)
	out.Mul(&qd, q.T())
	return out.RawMatrix().Data
}

// spectrum returns n distinct eigenvalues ≥ lo, well separated, shuffled
// by seed (so no host can rely on the order it is given them in).
func spectrum(n int, lo float64, seed uint64) []float64 {
	lam := make([]float64, n)
	for i := range lam {
		lam[i] = lo + float64(i)*0.5 + 0.1*float64(i*i)
	}
	r := randomValues(int64(n), seed)
	idx := make([]int, n)
	for i := range idx {
		idx[i] = i
	}
	slices.SortFunc(idx, func(a, b int) int { return compareFloat(r[a], r[b]) })
	out := make([]float64, n)
	for i, j := range idx {
		out[i] = lam[j]
	}
	return out
}

func compareFloat(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// perFactor fills a factor vector of layout fl with f(i, n) for its i-th
// matrix (n×n, row major).
func perFactor(fl optim.MemberLayout, f func(i, n int) []float64) []float64 {
	out := make([]float64, fl.Numel)
	for i, t := range fl.Tensors {
		copy(out[t.Offset:], f(i, int(t.Shape[0])))
	}
	return out
}

func factorCases() []hostCase {
	var cs []hostCase
	for _, block := range []int64{0, factorBlock} {
		for _, s := range []optim.VecShape{optim.LeftFactor, optim.RightFactor} {
			cs = append(cs, hostCase{name: fmt.Sprintf("Gram/%s factors, block %d", s, block), run: func(c *conf) {
				l, fl := c.factorLayout(s, block)
				x := randomValues(c.n(0), 21)
				src := c.known(0, "g", x)
				init := perFactor(fl, func(i, n int) []float64 { return randomValues(int64(n*n), uint64(30+i)) })
				d := c.knownL(l, "L", init)
				o := optim.Gram{Dst: d, Src: src, Beta: 0.9, Alpha: 0.25}
				c.p().Gram(d, src, o.Beta, o.Alpha)
				want := slices.Clone(init)
				GramRef(want, fl, s == optim.LeftFactor, x, c.l.TilesOf(optim.VecLayout{}, block), o)
				c.expectSame("β·D + α·gram", d, c.knownL(l, "want", want))
				c.expectSame("src unchanged", src, c.known(0, "x", x))
			}})
		}
		cs = append(cs, hostCase{name: fmt.Sprintf("MatMul/left and right factors, block %d", block), run: func(c *conf) {
			ll, lf := c.factorLayout(optim.LeftFactor, block)
			rl, rf := c.factorLayout(optim.RightFactor, block)
			x := randomValues(c.n(0), 41)
			lv := perFactor(lf, func(i, n int) []float64 { return randomValues(int64(n*n), uint64(50+i)) })
			rv := perFactor(rf, func(i, n int) []float64 { return randomValues(int64(n*n), uint64(70+i)) })
			src, lh, rh := c.known(0, "x", x), c.knownL(ll, "L", lv), c.knownL(rl, "R", rv)
			tiles := c.l.TilesOf(optim.VecLayout{}, block)
			for _, o := range []optim.MatMul{
				{Left: lh, Right: rh},
				{Left: lh},
				{Right: rh, TransRight: true},
				{Left: lh, Right: rh, TransLeft: true, TransRight: true},
			} {
				dst := c.filled(0, "dst", 7)
				o.Dst, o.Src = dst, src
				c.p().MatMulOp(o)
				want := make([]float64, len(x))
				var l, r []float64
				if o.Left != 0 {
					l = lv
				}
				if o.Right != 0 {
					r = rv
				}
				MatMulRef(want, x, tiles, l, lf, r, rf, o)
				c.expectSame(fmt.Sprintf("left=%v right=%v transposes %v %v", o.Left != 0, o.Right != 0, o.TransLeft, o.TransRight), dst, c.known(0, "want", want))
			}
			// In place, and the live parameters.
			c.p().Copy(optim.Params, src).MatMul(src, lh, src, rh).MatMul(optim.Params, lh, optim.Params, rh)
			want := make([]float64, len(x))
			MatMulRef(want, x, tiles, lv, lf, rv, rf, optim.MatMul{})
			c.expectSame("in place", src, c.known(0, "want", want))
			c.expectSame("params", optim.Params, src)
		}})
	}
	cs = append(cs,
		hostCase{name: "MatMul/of a factor vector (a power iteration's L·Q)", run: func(c *conf) {
			l, fl := c.factorLayout(optim.LeftFactor, factorBlock)
			a := perFactor(fl, func(i, n int) []float64 { return randomValues(int64(n*n), uint64(90+i)) })
			b := perFactor(fl, func(i, n int) []float64 { return randomValues(int64(n*n), uint64(110+i)) })
			av, bv, dst := c.knownL(l, "A", a), c.knownL(l, "B", b), c.allocL(l, "AB")
			c.p().MatMulOp(optim.MatMul{Dst: dst, Src: bv, Left: av, TransLeft: true})
			want := make([]float64, len(b))
			MatMulRef(want, b, c.l.TilesOf(l, 0), a, fl, nil, fl, optim.MatMul{TransLeft: true})
			c.expectSame("Aᵀ·B", dst, c.knownL(l, "want", want))
		}},
	)
	for _, k := range []struct {
		name string
		o    optim.MatFunc
		f    func(lam float64, max float64) float64
	}{
		{"inv_root p=4", optim.MatFunc{Kind: optim.InvRoot, Root: 4, Eps: 1e-3}, func(l, _ float64) float64 { return math.Pow(l+1e-3, -0.25) }},
		{"inv_root p=2", optim.MatFunc{Kind: optim.InvRoot, Root: 2, Eps: 0.5}, func(l, _ float64) float64 { return math.Pow(l+0.5, -0.5) }},
		{"pinv_root p=2", optim.MatFunc{Kind: optim.PinvRoot, Root: 2, Eps: 1e-6}, func(l, _ float64) float64 {
			if l == 0 {
				return 0
			}
			return math.Pow(l, -0.5)
		}},
		{"pinv_root drops the small eigenvalues", optim.MatFunc{Kind: optim.PinvRoot, Root: 1, Eps: 0.2}, func(l, max float64) float64 {
			if l <= 0.2*max {
				return 0
			}
			return 1 / l
		}},
	} {
		cs = append(cs, hostCase{name: "MatFunc/" + k.name + " of a known spectrum", run: func(c *conf) {
			// Each matrix has distinct eigenvalues, the smallest 0 for
			// the pseudo-inverse (a rank-deficient factor, as Shampoo's
			// early statistics are).
			l, fl := c.factorLayout(optim.LeftFactor, factorBlock)
			lo := 0.25
			if k.o.Kind == optim.PinvRoot {
				lo = 0
			}
			var a, want []float64
			a = perFactor(fl, func(i, n int) []float64 {
				return spectral(orthogonal(n, uint64(130+i)), spectrum(n, lo, uint64(i)), func(x float64) float64 { return x })
			})
			want = perFactor(fl, func(i, n int) []float64 {
				lam := spectrum(n, lo, uint64(i))
				return spectral(orthogonal(n, uint64(130+i)), lam, func(x float64) float64 { return k.f(x, slices.Max(lam)) })
			})
			src, dst := c.knownL(l, "A", a), c.allocL(l, "F")
			o := k.o
			o.Dst, o.Src = dst, src
			c.p().MatFunc(dst, src, o.Kind, o.Root, o.Eps)
			c.expectSame("f(A)", dst, c.knownL(l, "want", want))
			c.p().MatFunc(src, src, o.Kind, o.Root, o.Eps)
			c.expectSame("in place", src, dst)
		}})
	}
	cs = append(cs,
		hostCase{name: "MatFunc/eigvecs and eigvals of a known spectrum", run: func(c *conf) {
			l, fl := c.factorLayout(optim.RightFactor, factorBlock)
			var a, vecs, vals []float64
			a = perFactor(fl, func(i, n int) []float64 {
				return spectral(orthogonal(n, uint64(150+i)), spectrum(n, 0.5, uint64(i)), func(x float64) float64 { return x })
			})
			vecs = perFactor(fl, func(i, n int) []float64 {
				// Q's columns by descending eigenvalue, each column's
				// largest-magnitude entry positive.
				q, lam := orthogonal(n, uint64(150+i)), spectrum(n, 0.5, uint64(i))
				order := make([]int, n)
				for j := range order {
					order[j] = j
				}
				slices.SortFunc(order, func(x, y int) int { return compareFloat(lam[y], lam[x]) })
				out := mat.NewDense(n, n, nil)
				for j, k := range order {
					col := mat.Col(nil, k, q)
					big := 0
					for r := range col {
						if math.Abs(col[r]) > math.Abs(col[big]) {
							big = r
						}
					}
					if col[big] < 0 {
						for r := range col {
							col[r] = -col[r]
						}
					}
					out.SetCol(j, col)
				}
				return out.RawMatrix().Data
			})
			vals = perFactor(fl, func(i, n int) []float64 {
				lam := spectrum(n, 0.5, uint64(i))
				slices.SortFunc(lam, func(x, y float64) int { return compareFloat(y, x) })
				out := make([]float64, n*n)
				for j, v := range lam {
					out[j*n+j] = v
				}
				return out
			})
			src, v, d := c.knownL(l, "A", a), c.allocL(l, "V"), c.allocL(l, "D")
			c.p().MatFunc(v, src, optim.EigVecs, 0, 0).MatFunc(d, src, optim.EigVals, 0, 0)
			c.expectSame("eigenvectors", v, c.knownL(l, "want V", vecs))
			c.expectSame("eigenvalues", d, c.knownL(l, "want D", vals))
		}},
		hostCase{name: "MatFunc/qr of random matrices", run: func(c *conf) {
			l, fl := c.factorLayout(optim.LeftFactor, 0)
			a := perFactor(fl, func(i, n int) []float64 { return randomValues(int64(n*n), uint64(170+i)) })
			want := perFactor(fl, func(i, n int) []float64 {
				return MatFuncRef(mat.NewDense(n, n, a[fl.Tensors[i].Offset:fl.Tensors[i].Offset+int64(n*n)]), optim.MatFunc{Kind: optim.QR}).RawMatrix().Data
			})
			src, q := c.knownL(l, "A", a), c.allocL(l, "Q")
			c.p().MatFunc(q, src, optim.QR, 0, 0)
			c.expectSame("Q with R's diagonal ≥ 0", q, c.knownL(l, "want", want))
			// Q of an orthogonal matrix with a positive-diagonal R is itself.
			c.p().MatFunc(src, q, optim.QR, 0, 0)
			c.expectSame("qr(Q) = Q", src, q)
		}},
		hostCase{name: "MatFunc/inv_root of zero is eps^(-1/p)·I = 10·I", run: func(c *conf) {
			l, fl := c.factorLayout(optim.LeftFactor, factorBlock)
			z, f := c.allocL(l, "Z"), c.allocL(l, "F")
			c.p().InvRoot(f, z, 4, 1e-4)
			want := perFactor(fl, func(_, n int) []float64 {
				out := make([]float64, n*n)
				for j := range n {
					out[j*n+j] = 10
				}
				return out
			})
			c.expectSame("10·I", f, c.knownL(l, "want", want))
			c.p().MatFunc(f, z, optim.PinvRoot, 4, 0)
			c.expectConst("pinv_root(0) = 0", f, 0)
		}},
		hostCase{name: "Factor vectors/elementwise ops and segments apply", run: func(c *conf) {
			l, fl := c.factorLayout(optim.RightFactor, factorBlock)
			a := perFactor(fl, func(i, n int) []float64 { return randomValues(int64(n*n), uint64(190+i)) })
			av, bv := c.knownL(l, "A", a), c.allocL(l, "B")
			c.p().Copy(bv, av).Scale(bv, optim.K(2)).Axpy(bv, optim.K(-1), av)
			c.expectSame("2A − A = A", bv, av)
			var sq float64
			for _, x := range a {
				sq += x * x
			}
			c.expectScalar("‖A‖", c.norm(av), math.Sqrt(sq))
			r := c.p().SegReduce(optim.SegSumSq, optim.PerTensor, av, 0)
			c.p().Fill(bv, r)
			want := perFactor(fl, func(i, n int) []float64 {
				t := fl.Tensors[i]
				var s float64
				for _, x := range a[t.Offset : t.Offset+int64(n*n)] {
					s += x * x
				}
				out := make([]float64, n*n)
				for j := range out {
					out[j] = s
				}
				return out
			})
			c.expectSame("Σx² per matrix", bv, c.knownL(l, "want", want))
		}},
		hostCase{name: "Alloc/a block above MaxBlock", run: func(c *conf) {
			c.fails("block 8193 is outside [0, 8192]", func(p *optim.Program) { p.AllocFactor(c.hs.New("L"), 0, optim.LeftFactor, optim.MaxBlock+1) })
		}},
		hostCase{name: "Alloc/a block with a parameter shape", run: func(c *conf) {
			c.fails("blocks apply to factor shapes", func(p *optim.Program) { p.AllocFactor(c.hs.New("v"), 0, optim.ParamShape, 4) })
		}},
		hostCase{name: "Alloc/an unknown shape", run: func(c *conf) {
			c.unsupported(func(p *optim.Program) { p.AllocFactor(c.hs.New("v"), 0, optim.VecShape(7), 0) })
		}},
		hostCase{name: "Gram/into a parameter vector", run: func(c *conf) {
			c.matrices(false)
			a, b := c.alloc(0, "a"), c.alloc(0, "b")
			c.vecFails("holds parameters; gram's dst is a factor vector", func(p *optim.Program) { p.Gram(a, b, 1, 1) })
		}},
		hostCase{name: "MatMul/factors of different blocks", run: func(c *conf) {
			c.matrices(false)
			x := c.alloc(0, "x")
			l := c.allocL(optim.VecLayout{Shape: optim.LeftFactor, Block: 1}, "L")
			r := c.allocL(optim.VecLayout{Shape: optim.RightFactor}, "R")
			// The left factor's block (1) cuts x into 1×1 tiles; R has one
			// matrix per tensor.
			c.vecFails("mat_mul's right factor needs one per block", func(p *optim.Program) { p.MatMul(x, l, x, r) })
		}},
		hostCase{name: "MatMul/a left factor as the right one", run: func(c *conf) {
			ms := c.matrices(false)
			square := true
			for _, m := range ms {
				square = square && m.Rows == m.Cols
			}
			if square {
				c.t.Skip("every matrix is square: left and right factors have the same shapes")
			}
			x := c.alloc(0, "x")
			l := c.allocL(optim.VecLayout{Shape: optim.LeftFactor}, "L")
			c.vecFails("(its columns)", func(p *optim.Program) { p.MatMul(x, 0, x, l) })
		}},
		hostCase{name: "Gram/a NaN beta", run: func(c *conf) {
			l, _ := c.factorLayout(optim.LeftFactor, 0)
			d, x := c.allocL(l, "L"), c.alloc(0, "x")
			c.fails("gram: beta = NaN is not finite", func(p *optim.Program) { p.Gram(d, x, math.NaN(), 1) })
		}},
		hostCase{name: "MatMul/no factor", run: func(c *conf) {
			x := c.alloc(0, "x")
			c.fails("mat_mul needs a left or a right factor", func(p *optim.Program) { p.MatMul(x, 0, x, 0) })
		}},
		hostCase{name: "MatMul/dst is a factor", run: func(c *conf) {
			l, _ := c.factorLayout(optim.LeftFactor, 0)
			q := c.allocL(l, "Q")
			c.vecFails("is both mat_mul's dst and its left factor", func(p *optim.Program) { p.MatMul(q, q, q, 0) })
		}},
		hostCase{name: "MatFunc/of a parameter vector", run: func(c *conf) {
			x := c.alloc(0, "x")
			c.vecFails("holds parameters; mat_func's src is a factor vector", func(p *optim.Program) { p.InvRoot(x, x, 4, 1e-6) })
		}},
		hostCase{name: "MatFunc/inv_root without eps", run: func(c *conf) {
			l, _ := c.factorLayout(optim.LeftFactor, 0)
			q := c.allocL(l, "Q")
			c.fails("mat_func inv_root: eps = 0 must be > 0", func(p *optim.Program) { p.InvRoot(q, q, 4, 0) })
		}},
		hostCase{name: "MatFunc/a root of 0", run: func(c *conf) {
			l, _ := c.factorLayout(optim.LeftFactor, 0)
			q := c.allocL(l, "Q")
			c.fails("root = 0 must be > 0", func(p *optim.Program) { p.MatFunc(q, q, optim.PinvRoot, 0, 0) })
		}},
		hostCase{name: "MatFunc/an unknown kind", run: func(c *conf) {
			l, _ := c.factorLayout(optim.LeftFactor, 0)
			q := c.allocL(l, "Q")
			c.unsupported(func(p *optim.Program) { p.MatFunc(q, q, optim.MatFuncKind(9), 1, 1) })
		}},
		hostCase{name: "Grad/into a factor vector", run: func(c *conf) {
			l, _ := c.factorLayout(optim.LeftFactor, 0)
			q := c.allocL(l, "Q")
			c.vecFails("is a left factor vector; grad takes parameter-shaped vectors", func(p *optim.Program) {
				p.Grad(q, optim.Params, optim.Batch{}, optim.BNFreeze)
			})
		}},
		hostCase{name: "Copy/a factor vector into parameters", run: func(c *conf) {
			l, _ := c.factorLayout(optim.LeftFactor, 0)
			q := c.allocL(l, "Q")
			c.vecFails("", func(p *optim.Program) { p.Copy(optim.Params, q) })
		}},
	)
	return cs
}
