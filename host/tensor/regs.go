package tensor

import (
	"github.com/sugarme/gotch/ts"
)

// ---- device-resident scalar registers ----
//
// A register is a 0-d float64 tensor on the vectors' device, so a program
// can compute with scalars (norms, dots, step sizes) without reading them
// back to the host. Add, Sub, Mul, Div, Maximum, Minimum, Sqrt, Reciprocal,
// Neg and Clamp work on registers as on any tensor; on the CPU they round
// exactly as Go's float64 arithmetic does. A float32 vector combined with a
// register stays float32: the register is rounded to float32 first, as a
// float64 immediate (Scale, Axpy) is.

// ScalarTensor makes a 0-d float64 tensor holding v on device d (made there,
// not uploaded).
func (s *Scope) ScalarTensor(v float64, d Device) T {
	s.onFake = d.fake
	return s.op("scalar_tensor", func() (*ts.Tensor, error) {
		sc := ts.FloatScalar(v)
		defer sc.MustDrop()
		return ts.ScalarTensor(sc, Float64, d.d)
	})
}

// Neg returns −t.
func (s *Scope) Neg(t T) T {
	return s.unary("neg", t, func(t *ts.Tensor) (*ts.Tensor, error) { return t.Neg(false) })
}

// Floor returns ⌊t⌋.
func (s *Scope) Floor(t T) T {
	return s.unary("floor", t, func(t *ts.Tensor) (*ts.Tensor, error) { return t.Floor(false) })
}

// Clamp returns min(max(t, lo), hi) elementwise, lo and hi tensors
// broadcastable to t (registers, say). Where lo > hi the result is hi.
func (s *Scope) Clamp(t, lo, hi T) T {
	if !s.check(t, lo, hi) {
		return T{}
	}
	return s.op("clamp", func() (*ts.Tensor, error) { return t.t.ClampTensor(lo.t, hi.t, false) })
}

// AllFinite returns a 0-d bool tensor, true when no element of t is NaN or
// ±Inf (true for an empty t), computed on t's device without a read-back.
func (s *Scope) AllFinite(t T) T {
	return s.unary("all", s.unary("isfinite", t, func(t *ts.Tensor) (*ts.Tensor, error) { return t.Isfinite(false) }),
		func(t *ts.Tensor) (*ts.Tensor, error) { return t.All(false) })
}

// LogicalAnd returns a ∧ b elementwise as bool (nonzero is true), e.g. to
// fold AllFinite flags together.
func (s *Scope) LogicalAnd(a, b T) T {
	return s.binary("logical_and", a, b, func(a, b *ts.Tensor) (*ts.Tensor, error) { return a.LogicalAnd(b, false) })
}

// ---- in place with tensor coefficients, on caller-owned tensors ----
//
// A coefficient c is a register (0-d float64 on dst's device) or a float32
// tensor of dst's size (per-element coefficients, from ExpandSegs). On the
// CPU, with a register holding α, each op is bitwise the float64-immediate
// op it mirrors: AxpyT ↔ Axpy (for α ≠ 0: Axpy skips α = 0, AxpyT adds
// 0·x), ScaleT ↔ ScaleInPlace, AddT ↔ AddScalarInPlace, FillT ↔ Fill.

// AxpyT sets dst = dst + c·x, as dst.add_(x·c): the product is a temporary
// of x's size, added in place (Axpy's order of operations).
func (s *Scope) AxpyT(dst, c, x T) {
	s.AddInPlace(dst, s.Mul(x, c))
}

// ScaleT sets dst = c·dst.
func (s *Scope) ScaleT(dst, c T) {
	s.MulInPlace(dst, c)
}

// AddT sets dst = dst + c.
func (s *Scope) AddT(dst, c T) {
	s.AddInPlace(dst, c)
}

// FillT sets dst = c (broadcast, converted to dst's type).
func (s *Scope) FillT(dst, c T) {
	s.CopyFrom(dst, c)
}
