package optimtest

import (
	"slices"

	"gonum.org/v1/gonum/mat"

	"github.com/optlab/optlab/sdk/optim"
)

// NewtonSchulzRef is the NewtonSchulz op o in float64 on x, a vector of
// layout l (o's Dst and Src are not used): a new vector whose matrix
// tensors (l.Matrices) hold the iteration of their values in x and whose
// other elements are x's. It is what the exact host computes, and a
// reference for a host's own tests; the linear algebra is gonum's.
func NewtonSchulzRef(l optim.MemberLayout, x []float64, o optim.NewtonSchulz) []float64 {
	out := slices.Clone(x)
	for _, m := range l.Matrices() {
		n := m.Rows * m.Cols
		g := mat.NewDense(int(m.Rows), int(m.Cols), slices.Clone(x[m.Offset:m.Offset+n]))
		r := NewtonSchulzMatrix(g, int(o.Steps), o.A, o.B, o.C, o.Eps)
		for i := range int(m.Rows) {
			mat.Row(out[m.Offset+int64(i)*m.Cols:m.Offset+int64(i+1)*m.Cols], i, r)
		}
	}
	return out
}

// NewtonSchulzMatrix is the quintic Newton–Schulz iteration of one matrix
// g in float64, as Keller Jordan's zeropower_via_newtonschulz5 computes it
// (github.com/KellerJordan/Muon, muon.py) in bfloat16: X = g/(‖g‖_F +
// eps), transposed when g has more rows than columns; steps times A =
// X·Xᵀ, B = (c·A)·A + b·A, X = a·X + B·X; transposed back.
func NewtonSchulzMatrix(g mat.Matrix, steps int, a, b, c, eps float64) *mat.Dense {
	rows, cols := g.Dims()
	tall := rows > cols
	var x mat.Dense
	if tall {
		x.CloneFrom(g.T())
	} else {
		x.CloneFrom(g)
	}
	norm := mat.Norm(&x, 2) + eps // the Frobenius norm
	x.Apply(func(_, _ int, v float64) float64 { return v / norm }, &x)
	var A, cA, bA, B, BX mat.Dense
	for range steps {
		A.Mul(&x, x.T())
		cA.Scale(c, &A)
		B.Mul(&cA, &A)
		bA.Scale(b, &A)
		B.Add(&bA, &B)
		BX.Mul(&B, &x)
		x.Scale(a, &x)
		x.Add(&x, &BX)
	}
	if !tall {
		return &x
	}
	var out mat.Dense
	out.CloneFrom(x.T())
	return &out
}
