package tensor

import (
	"fmt"
	"slices"

	"github.com/sugarme/gotch/ts"
)

// ---- elementwise ops into a caller-owned destination ----
//
// Each XInto(dst, …) writes X(…) into dst (a kept tensor or a view of one)
// with libtorch's out= variant: no result tensor is allocated and copied.
// dst may be one of the operands (elementwise out= ops may alias their
// inputs). The result's shape (the operands' broadcast shape) must be dst's:
// libtorch would otherwise resize dst. The result is converted to dst's
// type where the type-promotion rules allow (float64 into float32 does, so
// a register operand is fine).

// into runs an out= op whose result handle aliases dst, and frees the handle.
func (s *Scope) into(name string, dst T, shape []int64, f func() (*ts.Tensor, error)) {
	if s.err != nil {
		return
	}
	if want := dst.Shape(); !slices.Equal(shape, want) {
		s.Fail(fmt.Errorf("%s: result shape %v into a destination of shape %v", name, shape, want))
		return
	}
	s.inplace(name, func() error {
		r, err := f()
		if err != nil {
			return err
		}
		return r.Drop()
	})
}

// broadcastShape is the shape of an elementwise result of a and b, nil when
// they do not broadcast.
func broadcastShape(a, b []int64) []int64 {
	if len(a) < len(b) {
		a, b = b, a
	}
	out := slices.Clone(a)
	off := len(a) - len(b)
	for i, d := range b {
		switch o := out[off+i]; {
		case o == d || d == 1:
		case o == 1:
			out[off+i] = d
		default:
			return nil
		}
	}
	return out
}

func (s *Scope) binaryInto(name string, dst, a, b T, f func(out, a, b *ts.Tensor) (*ts.Tensor, error)) {
	if !s.check(dst, a, b) {
		return
	}
	shape := broadcastShape(a.Shape(), b.Shape())
	if shape == nil {
		s.Fail(fmt.Errorf("%s: shapes %v and %v do not broadcast", name, a.Shape(), b.Shape()))
		return
	}
	s.into(name, dst, shape, func() (*ts.Tensor, error) { return f(dst.t, a.t, b.t) })
}

func (s *Scope) unaryInto(name string, dst, a T, f func(out, a *ts.Tensor) (*ts.Tensor, error)) {
	if !s.check(dst, a) {
		return
	}
	s.into(name, dst, a.Shape(), func() (*ts.Tensor, error) { return f(dst.t, a.t) })
}

// AddInto sets dst = a + b.
func (s *Scope) AddInto(dst, a, b T) {
	s.binaryInto("add_out", dst, a, b, func(o, a, b *ts.Tensor) (*ts.Tensor, error) { return a.AddOut(o, b, false) })
}

// SubInto sets dst = a − b.
func (s *Scope) SubInto(dst, a, b T) {
	s.binaryInto("sub_out", dst, a, b, func(o, a, b *ts.Tensor) (*ts.Tensor, error) { return a.SubOut(o, b, false) })
}

// MulInto sets dst = a ⊙ b.
func (s *Scope) MulInto(dst, a, b T) {
	s.binaryInto("mul_out", dst, a, b, func(o, a, b *ts.Tensor) (*ts.Tensor, error) { return a.MulOut(o, b, false) })
}

// DivInto sets dst = a ⊘ b.
func (s *Scope) DivInto(dst, a, b T) {
	s.binaryInto("div_out", dst, a, b, func(o, a, b *ts.Tensor) (*ts.Tensor, error) { return a.DivOut(o, b, false) })
}

// MaximumInto sets dst = max(a, b) elementwise.
func (s *Scope) MaximumInto(dst, a, b T) {
	s.binaryInto("maximum_out", dst, a, b, func(o, a, b *ts.Tensor) (*ts.Tensor, error) { return a.MaximumOut(o, b, false) })
}

// MinimumInto sets dst = min(a, b) elementwise.
func (s *Scope) MinimumInto(dst, a, b T) {
	s.binaryInto("minimum_out", dst, a, b, func(o, a, b *ts.Tensor) (*ts.Tensor, error) { return a.MinimumOut(o, b, false) })
}

// AbsInto sets dst = |a|.
func (s *Scope) AbsInto(dst, a T) {
	s.unaryInto("abs_out", dst, a, func(o, a *ts.Tensor) (*ts.Tensor, error) { return a.AbsOut(o, false) })
}

// SignInto sets dst = sign(a).
func (s *Scope) SignInto(dst, a T) {
	s.unaryInto("sign_out", dst, a, func(o, a *ts.Tensor) (*ts.Tensor, error) { return a.SignOut(o, false) })
}

// SqrtInto sets dst = √a.
func (s *Scope) SqrtInto(dst, a T) {
	s.unaryInto("sqrt_out", dst, a, func(o, a *ts.Tensor) (*ts.Tensor, error) { return a.SqrtOut(o, false) })
}

// SquareInto sets dst = a².
func (s *Scope) SquareInto(dst, a T) {
	s.unaryInto("square_out", dst, a, func(o, a *ts.Tensor) (*ts.Tensor, error) { return a.SquareOut(o, false) })
}

// SoftplusInto sets dst = log(1+eᵃ).
func (s *Scope) SoftplusInto(dst, a T) {
	s.unaryInto("softplus_out", dst, a, func(o, a *ts.Tensor) (*ts.Tensor, error) { return a.SoftplusOut(o, false) })
}

// ExpInto sets dst = eᵃ.
func (s *Scope) ExpInto(dst, a T) {
	s.unaryInto("exp_out", dst, a, func(o, a *ts.Tensor) (*ts.Tensor, error) { return a.ExpOut(o, false) })
}

// LogInto sets dst = ln a.
func (s *Scope) LogInto(dst, a T) {
	s.unaryInto("log_out", dst, a, func(o, a *ts.Tensor) (*ts.Tensor, error) { return a.LogOut(o, false) })
}

// ReciprocalInto sets dst = 1/a.
func (s *Scope) ReciprocalInto(dst, a T) {
	s.unaryInto("reciprocal_out", dst, a, func(o, a *ts.Tensor) (*ts.Tensor, error) { return a.ReciprocalOut(o, false) })
}
