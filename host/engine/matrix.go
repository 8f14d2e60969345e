package engine

import (
	"github.com/optlab/optlab/host/tensor"
	"github.com/optlab/optlab/sdk/optim"
)

// newtonSchulz runs a NewtonSchulz op: Dst = Src, then every matrix tensor
// of the member's layout (optim.MemberLayout.Matrices) replaced by its
// Newton–Schulz iteration, computed from Src. The matrices of one shape
// go through the kernel together, stacked into a batch [B, rows, cols]
// (transposed to [B, cols, rows] when rows > cols, so that X·Xᵀ is the
// smaller product), a constant number of kernels per step however many
// tensors share the shape; each group's temporaries are freed before the
// next.
func (e *Engine) newtonSchulz(s *tensor.Scope, o optim.NewtonSchulz) error {
	d, src, err := e.same(s, o.Dst, o.Src)
	if err != nil {
		return err
	}
	if o.Dst != o.Src {
		s.CopyFrom(d, src) // the tensors that are not matrices; the others are overwritten
	}
	type shape struct{ rows, cols int64 }
	var order []shape
	groups := map[shape][]optim.Matrix{}
	for _, mx := range e.layout.Of(e.vecLayout(o.Src)).Matrices() {
		k := shape{mx.Rows, mx.Cols}
		if _, ok := groups[k]; !ok {
			order = append(order, k)
		}
		groups[k] = append(groups[k], mx)
	}
	view := func(s *tensor.Scope, t tensor.T, mx optim.Matrix) tensor.T {
		return s.View(s.Narrow(t, 0, mx.Offset, mx.Rows*mx.Cols), mx.Rows, mx.Cols)
	}
	for _, k := range order {
		gs := tensor.NewScope()
		ms := groups[k]
		views := make([]tensor.T, len(ms))
		for i, mx := range ms {
			views[i] = view(gs, src, mx)
		}
		x := gs.Stack(0, views...)
		tall := k.rows > k.cols
		if tall {
			x = gs.Transpose(x, 1, 2)
		}
		y := gs.NewtonSchulz(x, int(o.Steps), o.A, o.B, o.C, o.Eps)
		if tall {
			y = gs.Transpose(y, 1, 2)
		}
		for i, mx := range ms {
			gs.CopyFrom(view(gs, d, mx), gs.Select(y, 0, int64(i)))
		}
		err := gs.Err()
		gs.Close()
		if err != nil {
			return err
		}
	}
	return nil
}

// tileGroup is the tiles of one shape of a matrix op, with their indices
// in the op's tile list (the factor matrices of the same index go with
// them).
type tileGroup struct {
	rows, cols int64
	idx        []int
}

// groupTiles groups tiles by shape, in order of first appearance: each
// group goes through the kernels as one batch.
func groupTiles(tiles []optim.Tile) []tileGroup {
	var out []tileGroup
	at := map[[2]int64]int{}
	for i, t := range tiles {
		k := [2]int64{t.Rows, t.Cols}
		j, ok := at[k]
		if !ok {
			j = len(out)
			at[k] = j
			out = append(out, tileGroup{rows: t.Rows, cols: t.Cols})
		}
		out[j].idx = append(out[j].idx, i)
	}
	return out
}

// tileView returns the view of tile t in the flat vector x (strided when
// the tile is narrower than its matrix).
func tileView(s *tensor.Scope, x tensor.T, t optim.Tile) tensor.T {
	m := s.View(s.Narrow(x, 0, t.Matrix.Offset, t.Matrix.Rows*t.Matrix.Cols), t.Matrix.Rows, t.Matrix.Cols)
	if t.Rows == t.Matrix.Rows && t.Cols == t.Matrix.Cols {
		return m
	}
	return s.Narrow(s.Narrow(m, 0, t.Row, t.Rows), 1, t.Col, t.Cols)
}

// squareView returns the view of factor matrix ft of the flat vector x.
func squareView(s *tensor.Scope, x tensor.T, ft optim.Tensor) tensor.T {
	n := ft.Shape[0]
	return s.View(s.Narrow(x, 0, ft.Offset, n*n), n, n)
}

// stack stacks the views f(i) of the indices idx into one batch.
func stack(s *tensor.Scope, idx []int, f func(i int) tensor.T) tensor.T {
	vs := make([]tensor.T, len(idx))
	for j, i := range idx {
		vs[j] = f(i)
	}
	return s.Stack(0, vs...)
}

// scatter copies the matrices of batch y back into the views f(i).
func scatter(s *tensor.Scope, y tensor.T, idx []int, f func(i int) tensor.T) {
	for j, i := range idx {
		s.CopyFrom(f(i), s.Select(y, 0, int64(j)))
	}
}

// eachGroup runs f on every group in a scope of its own, so that one
// group's temporaries are freed before the next.
func eachGroup(gs []tileGroup, f func(s *tensor.Scope, g tileGroup)) error {
	for _, g := range gs {
		s := tensor.NewScope()
		f(s, g)
		err := s.Err()
		s.Close()
		if err != nil {
			return err
		}
	}
	return nil
}

// gram runs a Gram op: for every tile G of Src (cut by Dst's blocks),
// Dst's matrix = β·Dst + α·G·Gᵀ (left) or α·Gᵀ·G (right), tiles of one
// shape batched through one baddbmm.
func (e *Engine) gram(s *tensor.Scope, o optim.Gram) error {
	dst, _, err := e.get(o.Dst)
	if err != nil {
		return err
	}
	src, _, err := e.get(o.Src)
	if err != nil {
		return err
	}
	src = e.align(s, src, dst)
	dl := e.vecLayout(o.Dst)
	factors := e.layout.Of(dl).Tensors
	tiles := e.layout.TilesOf(e.vecLayout(o.Src), dl.Block)
	left := dl.Shape == optim.LeftFactor
	return eachGroup(groupTiles(tiles), func(gs *tensor.Scope, g tileGroup) {
		x := stack(gs, g.idx, func(i int) tensor.T { return tileView(gs, src, tiles[i]) })
		xt := gs.Transpose(x, 1, 2)
		a, b := x, xt
		if !left {
			a, b = xt, x
		}
		d := stack(gs, g.idx, func(i int) tensor.T { return squareView(gs, dst, factors[i]) })
		y := gs.Baddbmm(d, a, b, o.Beta, o.Alpha)
		scatter(gs, y, g.idx, func(i int) tensor.T { return squareView(gs, dst, factors[i]) })
	})
}

// matMul runs a MatMul op: every tile X of Src becomes op(L)·X·op(R) in
// Dst (Dst's other elements are Src's), tiles of one shape batched.
func (e *Engine) matMul(s *tensor.Scope, o optim.MatMul) error {
	d, src, err := e.same(s, o.Dst, o.Src)
	if err != nil {
		return err
	}
	type factor struct {
		t     tensor.T
		ms    []optim.Tensor
		trans bool
	}
	var block int64
	var fs [2]*factor // left, right
	for i, f := range []struct {
		v     optim.Vec
		trans bool
	}{{o.Right, o.TransRight}, {o.Left, o.TransLeft}} { // the left factor's block wins
		if f.v == 0 {
			continue
		}
		t, _, err := e.get(f.v)
		if err != nil {
			return err
		}
		l := e.vecLayout(f.v)
		block = l.Block
		fs[1-i] = &factor{t: e.align(s, t, d), ms: e.layout.Of(l).Tensors, trans: f.trans}
	}
	tiles := e.layout.TilesOf(e.vecLayout(o.Src), block)
	if o.Dst != o.Src {
		s.CopyFrom(d, src) // the elements outside the tiles
	}
	// Every group reads its tiles of src before it writes them: with Dst =
	// Src, a tile is read once, into the batch, and then overwritten.
	return eachGroup(groupTiles(tiles), func(gs *tensor.Scope, g tileGroup) {
		y := stack(gs, g.idx, func(i int) tensor.T { return tileView(gs, src, tiles[i]) })
		for side, f := range fs {
			if f == nil {
				continue
			}
			m := stack(gs, g.idx, func(i int) tensor.T { return squareView(gs, f.t, f.ms[i]) })
			if f.trans {
				m = gs.Transpose(m, 1, 2)
			}
			if side == 0 {
				y = gs.Bmm(m, y)
			} else {
				y = gs.Bmm(y, m)
			}
		}
		scatter(gs, y, g.idx, func(i int) tensor.T { return tileView(gs, d, tiles[i]) })
	})
}

// matFunc runs a MatFunc op: every matrix of the factor vector Src, in
// float64, through an eigendecomposition or a QR decomposition (matrices
// of one size batched), into the same matrix of Dst.
func (e *Engine) matFunc(s *tensor.Scope, o optim.MatFunc) error {
	d, src, err := e.same(s, o.Dst, o.Src)
	if err != nil {
		return err
	}
	ms := e.layout.Of(e.vecLayout(o.Src)).Tensors
	tiles := make([]optim.Tile, len(ms)) // square tiles: only their sizes group them
	for i, m := range ms {
		tiles[i] = optim.Tile{Rows: m.Shape[0], Cols: m.Shape[1]}
	}
	return eachGroup(groupTiles(tiles), func(gs *tensor.Scope, g tileGroup) {
		a := gs.Cast(stack(gs, g.idx, func(i int) tensor.T { return squareView(gs, src, ms[i]) }), tensor.Float64)
		y := matFunc(gs, a, o)
		scatter(gs, gs.Cast(y, tensor.Float32), g.idx, func(i int) tensor.T { return squareView(gs, d, ms[i]) })
	})
}

// sortColumns runs a SortColumns op: the matrices of Dst of one size are
// batched; each batch's orders come from Key's diagonals (one stable
// argsort), and Dst's columns and Carry's tiles (rows for a left factor,
// columns for a right one) are gathered by them, all on the device.
func (e *Engine) sortColumns(s *tensor.Scope, o optim.SortColumns) error {
	q, k, err := e.same(s, o.Dst, o.Key)
	if err != nil {
		return err
	}
	dl := e.vecLayout(o.Dst)
	ms := e.layout.Of(dl).Tensors
	left := dl.Shape == optim.LeftFactor
	var carry, carryHere tensor.T
	var tiles []optim.Tile
	if o.Carry != 0 {
		if carry, _, err = e.get(o.Carry); err != nil {
			return err
		}
		carryHere = e.align(s, carry, q)
		tiles = e.layout.TilesOf(e.vecLayout(o.Carry), dl.Block)
	}
	sizes := make([]optim.Tile, len(ms)) // square: only their sizes group them
	for i, m := range ms {
		sizes[i] = optim.Tile{Rows: m.Shape[0], Cols: m.Shape[1]}
	}
	return eachGroup(groupTiles(sizes), func(gs *tensor.Scope, g tileGroup) {
		n := g.rows
		b := int64(len(g.idx))
		order := gs.DiagOrder(stack(gs, g.idx, func(i int) tensor.T { return squareView(gs, k, ms[i]) })) // [B, n]
		cols := gs.Expand(gs.View(order, b, 1, n), b, n, n)
		y := gs.Gather(stack(gs, g.idx, func(i int) tensor.T { return squareView(gs, q, ms[i]) }), 2, cols)
		scatter(gs, y, g.idx, func(i int) tensor.T { return squareView(gs, q, ms[i]) })
		if !carry.Valid() {
			return
		}
		// The carry's tiles of this group share their shape (the factor
		// side n and the other side), so each shape is one gather.
		for _, cg := range groupTiles(pick(tiles, g.idx)) {
			idx := make([]int, len(cg.idx))
			for j, at := range cg.idx {
				idx[j] = g.idx[at]
			}
			nb := int64(len(idx))
			ord := rowsOf(gs, order, cg.idx)
			var at tensor.T
			dim := int64(2)
			if left {
				at, dim = gs.Expand(gs.View(ord, nb, n, 1), nb, cg.rows, cg.cols), 1
			} else {
				at = gs.Expand(gs.View(ord, nb, 1, n), nb, cg.rows, cg.cols)
			}
			w := gs.Gather(stack(gs, idx, func(i int) tensor.T { return tileView(gs, carryHere, tiles[i]) }), dim, at)
			scatter(gs, w, idx, func(i int) tensor.T { return tileView(gs, carry, tiles[i]) })
		}
	})
}

// pick returns the tiles at the indices idx, in that order.
func pick(tiles []optim.Tile, idx []int) []optim.Tile {
	out := make([]optim.Tile, len(idx))
	for j, i := range idx {
		out[j] = tiles[i]
	}
	return out
}

// rowsOf returns the rows idx (ascending) of t: a view when they are a
// contiguous run (every row, in the usual case of one tile shape per
// factor size), else a gather by indices uploaded to t's device.
func rowsOf(s *tensor.Scope, t tensor.T, idx []int) tensor.T {
	first, n := idx[0], len(idx)
	if idx[n-1]-first+1 == n {
		return s.Narrow(t, 0, int64(first), int64(n))
	}
	at := make([]int64, n)
	for i, x := range idx {
		at[i] = int64(x)
	}
	return s.IndexSelect(t, 0, s.FromInt64(at, []int64{int64(n)}, t.Device()))
}

// matFunc computes MatFunc o of every matrix of the float64 batch a
// [B, n, n].
func matFunc(s *tensor.Scope, a tensor.T, o optim.MatFunc) tensor.T {
	if o.Kind == optim.QR {
		return s.QR(a)
	}
	l, v := s.SymEig(a) // descending, [B, n] and [B, n, n]
	if !l.Valid() {
		return tensor.T{} // the scope has failed
	}
	var w tensor.T // the function of each eigenvalue
	switch o.Kind {
	case optim.EigVecs:
		return v
	case optim.EigVals:
		return s.DiagEmbed(l)
	case optim.InvRoot:
		w = s.PowScalar(s.AddScalar(s.ClampMin(l, 0), o.Eps), -1/o.Root)
	default: // PinvRoot: eigenvalues above Eps·λ_max (λ_max ≥ 0), the others 0
		cut := s.Scale(s.ClampMin(s.Narrow(l, 1, 0, 1), 0), o.Eps)
		keep := s.Less(cut, l)
		w = s.Where(keep, s.PowScalar(s.Where(keep, l, s.OnesLike(l)), -1/o.Root), s.Zeros(l.Shape(), tensor.Float64, l.Device()))
	}
	// V·diag(w)·Vᵀ: the columns of V scaled by w.
	vw := s.Mul(v, s.View(w, l.Shape()[0], 1, l.Shape()[1]))
	return s.Bmm(vw, s.Transpose(v, 1, 2))
}
