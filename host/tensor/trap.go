package tensor

import (
	"errors"
	"sync/atomic"

	"github.com/sugarme/gotch"
	"github.com/sugarme/gotch/ts"
)

// nonFiniteTrap is TrapNonFinite's switch.
var nonFiniteTrap atomic.Bool

// TrapNonFinite makes every op of every scope check its floating-point
// result, when on: the first op whose result holds a NaN or an infinity
// fails its scope with "<op>: non-finite output", so that the op that made
// a NaN is named, not the loss it reaches. It returns whether the trap was
// on. A diagnostic for tests and bisection: each op costs a reduction and a
// read-back more. Ops that write into a tensor (…Into), autograd's
// backward ops and the ops that only view or move values (movesOnly) are
// not checked.
func TrapNonFinite(on bool) bool { return nonFiniteTrap.Swap(on) }

var errNonFinite = errors.New("non-finite output (TrapNonFinite)")

// movesOnly are the ops that only view or move values, which cannot make
// a NaN or an infinity: the trap does not check them, so that a value a
// tensor already held is named at the first op that computes with it
// (the convolution of a layer whose weight holds it, not the view of the
// weight).
var movesOnly = map[string]bool{
	"view": true, "narrow": true, "reshape": true, "flatten": true, "permute": true, "transpose": true,
	"select": true, "expand": true, "squeeze": true, "unsqueeze": true, "detach": true, "contiguous": true,
	"cat": true, "stack": true, "set_requires_grad": true,
}

// checkFinite returns errNonFinite when r is a floating-point tensor with a
// NaN or an infinity.
func checkFinite(r *ts.Tensor) error {
	switch r.DType() {
	case gotch.Float, gotch.Double, gotch.Half, gotch.BFloat16:
	default:
		return nil
	}
	fin, err := r.Isfinite(false)
	if err != nil {
		return err
	}
	all, err := fin.All(false)
	_ = fin.Drop()
	if err != nil {
		return err
	}
	v, err := all.Int64Value(nil)
	_ = all.Drop()
	if err != nil {
		return err
	}
	if v == 0 {
		return errNonFinite
	}
	return nil
}
