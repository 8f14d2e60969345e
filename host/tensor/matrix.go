package tensor

import (
	"fmt"

	"github.com/sugarme/gotch/ts"
)

// ---- matrices (the matrix ops of protocol minor 7) ----

// Transpose returns a view of t with dims d0 and d1 swapped.
func (s *Scope) Transpose(t T, d0, d1 int64) T {
	return s.unary("transpose", t, func(t *ts.Tensor) (*ts.Tensor, error) { return t.Transpose(d0, d1, false) })
}

// Select returns the view of t at index i of dim (one dim fewer).
func (s *Scope) Select(t T, dim, i int64) T {
	return s.unary("select", t, func(t *ts.Tensor) (*ts.Tensor, error) { return t.Select(dim, i, false) })
}

// Bmm returns the batched matrix product a·b of a [B, n, k] and b [B, k, m].
func (s *Scope) Bmm(a, b T) T {
	return s.binary("bmm", a, b, func(a, b *ts.Tensor) (*ts.Tensor, error) { return a.Bmm(b, false) })
}

// Baddbmm returns beta·in + alpha·(a·b), batched: in [B, n, m] (or
// broadcastable to it), a [B, n, k], b [B, k, m].
func (s *Scope) Baddbmm(in, a, b T, beta, alpha float64) T {
	if !s.check(in, a, b) {
		return T{}
	}
	sb, sa := ts.FloatScalar(beta), ts.FloatScalar(alpha)
	defer sb.MustDrop()
	defer sa.MustDrop()
	return s.op("baddbmm", func() (*ts.Tensor, error) { return in.t.Baddbmm(a.t, b.t, sb, sa, false) })
}

// SumDims returns the sums of t over dims, kept as dims of size 1 when
// keep, accumulated and returned in t's dtype.
func (s *Scope) SumDims(t T, keep bool, dims ...int64) T {
	return s.unary("sum_dim", t, func(t *ts.Tensor) (*ts.Tensor, error) { return t.SumDimIntlist(dims, keep, t.DType(), false) })
}

// NewtonSchulz returns the quintic Newton–Schulz iteration of every matrix
// of x, a batch [B, r, c] (any strides; r ≤ c is the cheap orientation), in
// x's dtype: each matrix X is divided by its Frobenius norm plus eps, then
// steps times A = X·Xᵀ, B = b·A + c·A·A, X = a·X + B·X (Keller Jordan's
// zeropower_via_newtonschulz5, with two baddbmm and one bmm per step). The
// temporaries of a step are freed when the next begins; the result belongs
// to s.
func (s *Scope) NewtonSchulz(x T, steps int, a, b, c, eps float64) T {
	if !s.check(x) {
		return T{}
	}
	if sh := x.Shape(); len(sh) != 3 {
		return s.Fail(fmt.Errorf("newton-schulz: a batch of matrices has 3 dims, not shape %v", sh))
	}
	ns := NewScope()
	norm := ns.AddScalar(ns.Sqrt(ns.SumDims(ns.Square(x), true, 1, 2)), eps)
	X := ns.Div(x, norm)
	if err := ns.Err(); err != nil {
		ns.Close()
		return s.Fail(err)
	}
	X = s.Adopt(ns.Keep(X))
	ns.Close()
	for range steps {
		ss := NewScope()
		A := ss.Bmm(X, ss.Transpose(X, 1, 2))
		B := ss.Baddbmm(A, A, A, b, c)
		next := ss.Baddbmm(X, B, X, a, 1)
		if err := ss.Err(); err != nil {
			ss.Close()
			return s.Fail(err)
		}
		s.Release(X)
		X = s.Adopt(ss.Keep(next))
		ss.Close()
	}
	return X
}
