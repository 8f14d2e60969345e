package optimtest

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"

	"gonum.org/v1/gonum/mat"

	"github.com/optlab/optlab/sdk/optim"
)

// The cases of the matrix ops (protocol minor 7). The suite knows the
// values it gives a host (filled element by element with FillRange) and
// computes what the op must give in float64 on its own, through the
// singular value decomposition rather than the iteration: the
// Newton–Schulz iteration maps every singular value s of G/(‖G‖_F + ε)
// to p(s) = a·s + b·s³ + c·s⁵ and keeps the singular vectors, so its
// result is U·diag(pᵏ(σᵢ/(‖G‖_F + ε)))·Vᵀ for G = U·diag(σ)·Vᵀ, whichever
// side a host transposes to.

// maxKnown is the most parameters a member may have for the cases that
// fill a vector element by element.
const maxKnown = 4096

// known allocates a vector of member m holding vals, set with one
// FillRange per run of equal values.
func (c *conf) known(m int, name string, vals []float64) optim.Vec {
	return c.knownL(optim.VecLayout{Member: m}, name, vals)
}

// knownL allocates a vector of layout l holding vals.
func (c *conf) knownL(l optim.VecLayout, name string, vals []float64) optim.Vec {
	if n := c.l.Of(l).Numel; int64(len(vals)) != n {
		c.t.Fatalf("suite bug: %d values for a vector of %d", len(vals), n)
	}
	v := c.allocL(l, name)
	for i := 0; i < len(vals); {
		j := i + 1
		for j < len(vals) && vals[j] == vals[i] {
			j++
		}
		if vals[i] != 0 {
			c.p().FillRange(v, int64(i), int64(j-i), vals[i])
		}
		i = j
	}
	return v
}

// matrices returns member 0's matrix tensors, skipping the case when it
// has none or too many parameters to fill one by one (fillable: the case
// fills whole vectors element by element).
func (c *conf) matrices(fillable bool) []optim.Matrix {
	ml := c.l.Members[0]
	ms := ml.Matrices()
	if len(ms) == 0 {
		c.t.Skip("member 0 has no tensor of two or more dims")
	}
	if fillable && ml.Numel > maxKnown {
		c.t.Skipf("member 0 has %d parameters, more than the %d the case fills one by one", ml.Numel, maxKnown)
	}
	shapes := make([]string, len(ms))
	for i, m := range ms {
		shapes[i] = fmt.Sprintf("%d×%d", m.Rows, m.Cols)
	}
	c.t.Logf("matrices of member 0: %v", shapes)
	return ms
}

// nsPoly returns pᵏ(s), k steps of the quintic polynomial with
// coefficients a, b, c.
func nsPoly(s float64, steps int, a, b, c float64) float64 {
	for range steps {
		s2 := s * s
		s = a*s + b*s2*s + c*s2*s2*s
	}
	return s
}

// nsSVDRef is what NewtonSchulz gives for one matrix g (rows×cols, row
// major), computed from g's singular value decomposition.
func nsSVDRef(rows, cols int, g []float64, o optim.NewtonSchulz) []float64 {
	G := mat.NewDense(rows, cols, slices.Clone(g))
	var svd mat.SVD
	if !svd.Factorize(G, mat.SVDThin) {
		panic("optimtest: SVD failed")
	}
	norm := mat.Norm(G, 2) + o.Eps
	s := svd.Values(nil)
	for i := range s {
		s[i] = nsPoly(s[i]/norm, int(o.Steps), o.A, o.B, o.C)
	}
	var u, v, us, out mat.Dense
	svd.UTo(&u)
	svd.VTo(&v)
	us.Mul(&u, mat.NewDiagDense(len(s), s))
	out.Mul(&us, v.T())
	return out.RawMatrix().Data
}

// nsExpected returns x with every matrix of ms replaced by its
// NewtonSchulz result under o (nsSVDRef).
func nsExpected(ms []optim.Matrix, x []float64, o optim.NewtonSchulz) []float64 {
	out := slices.Clone(x)
	for _, m := range ms {
		n := m.Rows * m.Cols
		copy(out[m.Offset:m.Offset+n], nsSVDRef(int(m.Rows), int(m.Cols), x[m.Offset:m.Offset+n], o))
	}
	return out
}

// randomValues returns n values of a seeded N(0, 1) stream.
func randomValues(n int64, seed uint64) []float64 {
	r := rand.New(rand.NewPCG(seed, 0x4e53))
	out := make([]float64, n)
	for i := range out {
		out[i] = r.NormFloat64()
	}
	return out
}

// ns5 is a NewtonSchulz op with Keller Jordan's coefficients.
func ns5(dst, src optim.Vec, steps int32) optim.NewtonSchulz {
	return optim.NewtonSchulz{Dst: dst, Src: src, Steps: steps, A: optim.NS5A, B: optim.NS5B, C: optim.NS5C, Eps: optim.NS5Eps}
}

func matrixCases() []hostCase {
	return slices.Concat(newtonSchulzCases(), factorCases(), sortCases())
}

func newtonSchulzCases() []hostCase {
	return []hostCase{
		{name: "NewtonSchulz/random matrices against their SVD", run: func(c *conf) {
			// Every matrix of member 0 (tall, wide or square: a host that
			// transposes a tall one must transpose it back), from a
			// random vector; the other tensors are copied over what Dst
			// held.
			ms := c.matrices(true)
			x := randomValues(c.n(0), 3)
			src, dst := c.known(0, "src", x), c.filled(0, "dst", 7)
			for _, steps := range []int32{1, optim.NS5Steps} {
				o := ns5(dst, src, steps)
				c.p().NewtonSchulzOp(o)
				c.expectSame(fmt.Sprintf("%d steps", steps), dst, c.known(0, "want", nsExpected(ms, x, o)))
			}
			c.expectSame("src unchanged", src, c.known(0, "x", x))
		}},
		{name: "NewtonSchulz/cubic coefficients give the polar factor", run: func(c *conf) {
			// a, b, c = 1.5, −0.5, 0 is the classic cubic iteration: its
			// fixed point 1 attracts every singular value in (0, √3), so
			// the result is U·Vᵀ.
			ms := c.matrices(true)
			x := randomValues(c.n(0), 5)
			src, dst := c.known(0, "src", x), c.alloc(0, "dst")
			o := optim.NewtonSchulz{Dst: dst, Src: src, Steps: 60, A: 1.5, B: -0.5}
			c.p().NewtonSchulzOp(o)
			want := nsExpected(ms, x, optim.NewtonSchulz{Steps: 200, A: 1.5, B: -0.5})
			c.expectSame("U·Vᵀ", dst, c.known(0, "want", want))
		}},
		{name: "NewtonSchulz/an orthogonal matrix stays orthogonal", run: func(c *conf) {
			// A signed partial permutation has k = min(rows, cols)
			// singular values 1: G/(√k + ε) has k equal ones, which the
			// iteration keeps equal: the result is pᵏ(1/(√k + ε))·G.
			ms := c.matrices(true)
			x, want := make([]float64, c.n(0)), make([]float64, c.n(0))
			for _, m := range ms {
				k := min(m.Rows, m.Cols)
				f := nsPoly(1/(math.Sqrt(float64(k))+optim.NS5Eps), optim.NS5Steps, optim.NS5A, optim.NS5B, optim.NS5C)
				for i := range k {
					j := m.Offset + (m.Rows-1-i)*m.Cols + (i+1)%m.Cols
					if m.Rows <= m.Cols {
						j = m.Offset + i*m.Cols + (m.Cols - 1 - i)
					}
					x[j] = float64(1 - 2*(i%2))
					want[j] = f * x[j]
				}
			}
			src := c.known(0, "src", x)
			c.p().NewtonSchulz(src, src, optim.NS5Steps) // in place
			c.expectSame("pᵏ(1/√k)·G", src, c.known(0, "want", want))
		}},
		{name: "NewtonSchulz/a constant matrix is rank one", run: func(c *conf) {
			// G = v·1 (rows×cols) has one singular value |v|·√(rows·cols)
			// = ‖G‖_F: every element becomes sign(v)·pᵏ(‖G‖/(‖G‖ + ε))/√(rows·cols).
			// Filled per tensor: no bound on the layout's size.
			ms := c.matrices(false)
			const v = -2.5
			src, dst, want := c.filled(0, "src", v), c.alloc(0, "dst"), c.filled(0, "want", v)
			c.p().NewtonSchulz(dst, src, optim.NS5Steps)
			for _, m := range ms {
				r := math.Sqrt(float64(m.Rows * m.Cols))
				f := nsPoly(math.Abs(v)*r/(math.Abs(v)*r+optim.NS5Eps), optim.NS5Steps, optim.NS5A, optim.NS5B, optim.NS5C)
				c.p().FillRange(want, m.Offset, m.Rows*m.Cols, -f/r)
			}
			c.expectSame("−pᵏ(1)/√(rows·cols) on matrices, v elsewhere", dst, want)
		}},
		{name: "NewtonSchulz/in place is out of place", run: func(c *conf) {
			c.matrices(false)
			a, b := c.randn(0, "a", 11), c.alloc(0, "b")
			c.p().NewtonSchulz(b, a, 3).NewtonSchulz(a, a, 3)
			c.expectSame("in place", a, b)
		}},
		{name: "NewtonSchulz/of zero is zero", run: func(c *conf) {
			z := c.filled(0, "z", 0)
			c.p().NewtonSchulz(z, z, optim.NS5Steps)
			c.expectConst("z", z, 0)
		}},
		{name: "NewtonSchulz/live parameters", run: func(c *conf) {
			c.matrices(false)
			x, y := c.randn(0, "x", 13), c.alloc(0, "y")
			c.p().Copy(optim.Params, x).NewtonSchulz(y, x, 2).NewtonSchulz(optim.Params, optim.Params, 2)
			c.expectSame("params", optim.Params, y)
		}},
		{name: "NewtonSchulz/0 steps", run: func(c *conf) {
			x := c.alloc(0, "x")
			c.fails("newton_schulz: steps = 0 is outside [1, 100]", func(p *optim.Program) { p.NewtonSchulz(x, x, 0) })
		}},
		{name: "NewtonSchulz/101 steps", run: func(c *conf) {
			x := c.alloc(0, "x")
			c.fails("newton_schulz: steps = 101", func(p *optim.Program) { p.NewtonSchulz(x, x, 101) })
		}},
		{name: "NewtonSchulz/a NaN coefficient", run: func(c *conf) {
			x := c.alloc(0, "x")
			o := ns5(x, x, 5)
			o.B = math.NaN()
			c.fails("newton_schulz: b = NaN is not finite", func(p *optim.Program) { p.NewtonSchulzOp(o) })
		}},
		{name: "NewtonSchulz/an infinite eps", run: func(c *conf) {
			x := c.alloc(0, "x")
			o := ns5(x, x, 5)
			o.Eps = math.Inf(1)
			c.fails("newton_schulz: eps = +Inf is not finite", func(p *optim.Program) { p.NewtonSchulzOp(o) })
		}},
		{name: "NewtonSchulz/a negative eps", run: func(c *conf) {
			x := c.alloc(0, "x")
			o := ns5(x, x, 5)
			o.Eps = -1e-7
			c.fails("newton_schulz: eps = -1e-07 is negative", func(p *optim.Program) { p.NewtonSchulzOp(o) })
		}},
		{name: "NewtonSchulz/Dst not allocated", run: func(c *conf) {
			x := c.alloc(0, "x")
			c.vecFails("not allocated", func(p *optim.Program) { p.NewtonSchulz(stray, x, 5) })
		}},
		{name: "NewtonSchulz/another layout", needs: needLayouts, run: func(c *conf) {
			a, b := c.alloc(c.lm[0], "a"), c.alloc(c.lm[1], "b")
			c.vecFails("has the layout of member", func(p *optim.Program) { p.NewtonSchulz(a, b, 5) })
		}},
	}
}
