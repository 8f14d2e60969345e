package optimtest

import (
	"cmp"
	"math"
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

// tileOf copies tile t of the flat vector x into a new matrix.
func tileOf(x []float64, t optim.Tile) *mat.Dense {
	d := mat.NewDense(int(t.Rows), int(t.Cols), nil)
	for i := range t.Rows {
		start := t.Matrix.Offset + (t.Row+i)*t.Matrix.Cols + t.Col
		d.SetRow(int(i), x[start:start+t.Cols])
	}
	return d
}

// setTile writes m into tile t of the flat vector x.
func setTile(x []float64, t optim.Tile, m mat.Matrix) {
	for i := range t.Rows {
		start := t.Matrix.Offset + (t.Row+i)*t.Matrix.Cols + t.Col
		mat.Row(x[start:start+t.Cols], int(i), m)
	}
}

// square returns the factor matrix ft of the flat vector x.
func square(x []float64, ft optim.Tensor) *mat.Dense {
	n := ft.Shape[0]
	return mat.NewDense(int(n), int(n), slices.Clone(x[ft.Offset:ft.Offset+n*n]))
}

// setSquare writes m into the factor matrix ft of x.
func setSquare(x []float64, ft optim.Tensor, m mat.Matrix) {
	n := ft.Shape[0]
	for i := range n {
		mat.Row(x[ft.Offset+i*n:ft.Offset+(i+1)*n], int(i), m)
	}
}

// GramRef is the Gram op o in float64: dst (a factor vector of layout df)
// accumulates the Gram matrices of the tiles of src (cut by df's blocks,
// tiles as Layout.TilesOf gives them): what the exact host computes.
func GramRef(dst []float64, df optim.MemberLayout, left bool, src []float64, tiles []optim.Tile, o optim.Gram) {
	for i, t := range tiles {
		g := tileOf(src, t)
		var p mat.Dense
		if left {
			p.Mul(g, g.T())
		} else {
			p.Mul(g.T(), g)
		}
		d := square(dst, df.Tensors[i])
		d.Scale(o.Beta, d)
		p.Scale(o.Alpha, &p)
		d.Add(d, &p)
		setSquare(dst, df.Tensors[i], d)
	}
}

// MatMulRef is the MatMul op o in float64 on flat vectors: every tile of
// src, multiplied by its left and right factor matrices (nil factor
// vectors: the identity; lf, rf their layouts), written into the same tile
// of dst; dst's other elements are src's.
func MatMulRef(dst, src []float64, tiles []optim.Tile, left []float64, lf optim.MemberLayout, right []float64, rf optim.MemberLayout, o optim.MatMul) {
	out := slices.Clone(src)
	for i, t := range tiles {
		x := tileOf(src, t)
		if left != nil {
			var l mat.Matrix = square(left, lf.Tensors[i])
			if o.TransLeft {
				l = l.T()
			}
			var p mat.Dense
			p.Mul(l, x)
			x = &p
		}
		if right != nil {
			var r mat.Matrix = square(right, rf.Tensors[i])
			if o.TransRight {
				r = r.T()
			}
			var p mat.Dense
			p.Mul(x, r)
			x = &p
		}
		setTile(out, t, x)
	}
	copy(dst, out)
}

// MatFuncRef is the MatFunc op o on one square matrix a, in float64 with
// gonum's symmetric eigendecomposition (mat.EigenSym) and QR (mat.QR).
func MatFuncRef(a *mat.Dense, o optim.MatFunc) *mat.Dense {
	n, _ := a.Dims()
	if o.Kind == optim.QR {
		var qr mat.QR
		qr.Factorize(a)
		var q, r mat.Dense
		qr.QTo(&q)
		qr.RTo(&r)
		for j := range n {
			if r.At(j, j) < 0 {
				for i := range n {
					q.Set(i, j, -q.At(i, j))
				}
			}
		}
		return &q
	}
	sym := mat.NewSymDense(n, nil)
	for i := range n {
		for j := i; j < n; j++ {
			sym.SetSym(i, j, (a.At(i, j)+a.At(j, i))/2)
		}
	}
	var es mat.EigenSym
	if !es.Factorize(sym, true) {
		nan := mat.NewDense(n, n, nil)
		nan.Apply(func(int, int, float64) float64 { return math.NaN() }, nan)
		return nan
	}
	lam := es.Values(nil) // ascending
	var v mat.Dense
	es.VectorsTo(&v)
	// Descending order, as the op defines it.
	desc := mat.NewDense(n, n, nil)
	vals := make([]float64, n)
	for j := range n {
		vals[j] = lam[n-1-j]
		col := mat.Col(nil, n-1-j, &v)
		big := 0
		for i := range col {
			if math.Abs(col[i]) > math.Abs(col[big]) {
				big = i
			}
		}
		if col[big] < 0 {
			for i := range col {
				col[i] = -col[i]
			}
		}
		desc.SetCol(j, col)
	}
	switch o.Kind {
	case optim.EigVecs:
		return desc
	case optim.EigVals:
		out := mat.NewDense(n, n, nil)
		for j, l := range vals {
			out.Set(j, j, l)
		}
		return out
	}
	d := make([]float64, n)
	cut := o.Eps * math.Max(vals[0], 0)
	for j, l := range vals {
		switch {
		case o.Kind == optim.InvRoot:
			d[j] = math.Pow(math.Max(l, 0)+o.Eps, -1/o.Root)
		case l > cut:
			d[j] = math.Pow(l, -1/o.Root)
		}
	}
	var vd, out mat.Dense
	vd.Apply(func(_, j int, x float64) float64 { return x * d[j] }, desc)
	out.Mul(&vd, desc.T())
	return &out
}

// SortOrder returns the order π that sorts the diagonal of the n×n matrix
// k descending: k[π(0)][π(0)] ≥ k[π(1)][π(1)] ≥ …, equal values in their
// order, NaN as the largest (as torch.sort(descending=True, stable=True)).
func SortOrder(k mat.Matrix) []int {
	n, _ := k.Dims()
	order := make([]int, n)
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int {
		x, y := k.At(a, a), k.At(b, b)
		switch nx, ny := math.IsNaN(x), math.IsNaN(y); {
		case nx && ny:
			return 0
		case nx: // NaN first
			return -1
		case ny:
			return 1
		}
		return cmp.Compare(y, x) // descending
	})
	return order
}

// SortColumnsRef is the SortColumns op in float64 on flat vectors: every
// matrix ft of dst (a factor vector of layout df; left says its shape is
// LeftFactor) has its columns reordered by SortOrder of key's matrix of the
// same index, and, when carry is not nil, the tile of carry of that index
// (tiles cut by df's blocks, as Layout.TilesOf gives them) has its rows
// (left) or columns permuted the same way. What the exact host computes.
func SortColumnsRef(dst, key []float64, df optim.MemberLayout, left bool, carry []float64, tiles []optim.Tile) {
	for i, ft := range df.Tensors {
		order := SortOrder(square(key, ft))
		q := square(dst, ft)
		n := len(order)
		sorted := mat.NewDense(n, n, nil)
		for j, from := range order {
			sorted.SetCol(j, mat.Col(nil, from, q))
		}
		setSquare(dst, ft, sorted)
		if carry == nil {
			continue
		}
		t := tileOf(carry, tiles[i])
		r, c := t.Dims()
		out := mat.NewDense(r, c, nil)
		for j, from := range order {
			if left {
				out.SetRow(j, mat.Row(nil, from, t))
			} else {
				out.SetCol(j, mat.Col(nil, from, t))
			}
		}
		setTile(carry, tiles[i], out)
	}
}
