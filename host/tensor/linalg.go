package tensor

import (
	"fmt"

	"github.com/sugarme/gotch/ts"
)

// ---- functions of symmetric matrices (the MatFunc op of protocol minor 8) ----

// op2 runs one gotch call with two results unless the scope already failed,
// and owns both.
func (s *Scope) op2(name string, f func() (*ts.Tensor, *ts.Tensor, error)) (T, T) {
	if s.err != nil {
		return T{}, T{}
	}
	a, b, err := f()
	if err != nil {
		s.Fail(fmt.Errorf("%s: %w", name, err))
		return T{}, T{}
	}
	return T{s.own(a)}, T{s.own(b)}
}

// batchOfSquares checks that x is a batch [B, n, n] of square matrices.
func (s *Scope) batchOfSquares(name string, x T) bool {
	if !s.check(x) {
		return false
	}
	if sh := x.Shape(); len(sh) != 3 || sh[1] != sh[2] {
		s.Fail(fmt.Errorf("%s: a batch of square matrices has shape [B, n, n], not %v", name, sh))
		return false
	}
	return true
}

// SymEig returns the eigenvalues ([B, n], descending) and eigenvectors
// ([B, n, n], as columns in the same order, each column's largest-magnitude
// entry positive) of the symmetric part (X + Xᵀ)/2 of every matrix of the
// batch x, in x's dtype (torch.linalg.eigh, then reordered and signed so
// that two implementations agree wherever the eigenvalues are distinct).
func (s *Scope) SymEig(x T) (vals, vecs T) {
	if !s.batchOfSquares("symmetric eigendecomposition", x) {
		return T{}, T{}
	}
	sym := s.Scale(s.Add(x, s.Transpose(x, 1, 2)), 0.5)
	if !s.check(sym) {
		return T{}, T{}
	}
	l, v := s.op2("linalg_eigh", func() (*ts.Tensor, *ts.Tensor, error) { return sym.t.LinalgEigh("L", false) })
	l, v = s.Flip(l, 1), s.Flip(v, 2)
	// Sign: the entry of largest magnitude of each column positive.
	big := s.Argmax(s.Abs(v), 1)              // [B, n]
	at := s.Gather(v, 1, s.unsqueeze(big, 1)) // [B, 1, n]
	sign := s.Where(s.LessScalar(at, 0), s.Neg(s.OnesLike(at)), s.OnesLike(at))
	return l, s.Mul(v, sign)
}

// QR returns Q of the QR decomposition X = Q·R of every matrix of the batch
// x ([B, n, n]) with R's diagonal made ≥ 0 (Q's columns negated where it is
// negative), in x's dtype (torch.linalg.qr, reduced).
func (s *Scope) QR(x T) T {
	if !s.batchOfSquares("qr", x) {
		return T{}
	}
	q, r := s.op2("linalg_qr", func() (*ts.Tensor, *ts.Tensor, error) { return ts.LinalgQr(x.t, "reduced") })
	d := s.unary("diagonal", r, func(t *ts.Tensor) (*ts.Tensor, error) { return t.Diagonal(0, 1, 2, false) }) // [B, n]
	d = s.unsqueeze(d, 1)
	sign := s.Where(s.LessScalar(d, 0), s.Neg(s.OnesLike(d)), s.OnesLike(d))
	return s.Mul(q, sign)
}

// DiagOrder returns, for every matrix of the batch k ([B, n, n]), the
// order that sorts its diagonal descending ([B, n], int64): equal values
// in their order, NaN as the largest (torch.sort, stable).
func (s *Scope) DiagOrder(k T) T {
	if !s.batchOfSquares("diag order", k) {
		return T{}
	}
	d := s.unary("diagonal", k, func(t *ts.Tensor) (*ts.Tensor, error) { return t.Diagonal(0, 1, 2, false) })
	return s.unary("argsort", d, func(t *ts.Tensor) (*ts.Tensor, error) { return t.ArgsortStable(true, 1, true, false) })
}

// DiagEmbed returns the batch of diagonal matrices [B, n, n] with the rows
// of d ([B, n]) on their diagonals.
func (s *Scope) DiagEmbed(d T) T {
	return s.unary("diag_embed", d, func(t *ts.Tensor) (*ts.Tensor, error) { return t.DiagEmbed(0, -2, -1, false) })
}

// PowScalar returns t^p elementwise.
func (s *Scope) PowScalar(t T, p float64) T {
	return s.unary("pow", t, func(t *ts.Tensor) (*ts.Tensor, error) {
		sc := ts.FloatScalar(p)
		defer sc.MustDrop()
		return t.PowTensorScalar(sc, false)
	})
}

// OnesLike returns a tensor of ones of t's shape, dtype and device.
func (s *Scope) OnesLike(t T) T {
	return s.unary("ones_like", t, func(t *ts.Tensor) (*ts.Tensor, error) { return t.OnesLike(false) })
}

// unsqueeze returns a view of t with a dim of size 1 inserted at dim.
func (s *Scope) unsqueeze(t T, dim int64) T {
	return s.unary("unsqueeze", t, func(t *ts.Tensor) (*ts.Tensor, error) { return t.Unsqueeze(dim, false) })
}
