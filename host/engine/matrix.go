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
	_, m, _ := e.get(o.Src)
	if o.Dst != o.Src {
		s.CopyFrom(d, src) // the tensors that are not matrices; the others are overwritten
	}
	type shape struct{ rows, cols int64 }
	var order []shape
	groups := map[shape][]optim.Matrix{}
	for _, mx := range e.layout.Members[m].Matrices() {
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
