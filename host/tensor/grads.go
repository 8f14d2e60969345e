package tensor

// #include <stdlib.h>
import "C"

import (
	"errors"
	"fmt"
	"unsafe"

	lib "github.com/sugarme/gotch/libtch"
	"github.com/sugarme/gotch/ts"
)

// Gradients returns ∂loss/∂leaf for every leaf of a scalar loss in one
// backward pass, without touching .grad. (gotch's RunBackward passes only
// its first input correctly.)
func (s *Scope) Gradients(loss T, leaves ...T) []T {
	if !s.check(append([]T{loss}, leaves...)...) {
		return make([]T, len(leaves))
	}
	if !loss.t.MustRequiresGrad() {
		s.Fail(errors.New("backward: the loss does not depend on the parameters (is grad mode off?)"))
		return make([]T, len(leaves))
	}
	n := len(leaves)
	size := C.size_t(unsafe.Sizeof(uintptr(0)))
	roots := (*lib.Ctensor)(C.malloc(size))
	ins := (*lib.Ctensor)(C.malloc(size * C.size_t(n)))
	outs := (*lib.Ctensor)(C.malloc(size * C.size_t(n)))
	defer C.free(unsafe.Pointer(roots))
	defer C.free(unsafe.Pointer(ins))
	defer C.free(unsafe.Pointer(outs))
	rootSlice := unsafe.Slice(roots, 1)
	inSlice := unsafe.Slice(ins, n)
	outSlice := unsafe.Slice(outs, n)
	rootSlice[0] = lib.Ctensor(loss.t.Ctensor())
	for i, l := range leaves {
		inSlice[i] = lib.Ctensor(l.t.Ctensor())
		outSlice[i] = nil
	}
	lib.AtRunBackward(roots, 1, ins, n, outs, 0, 0)
	if err := ts.TorchErr(); err != nil {
		s.Fail(fmt.Errorf("backward: %w", err))
		return make([]T, len(leaves))
	}
	out := make([]T, n)
	for i := range out {
		t := ts.New(outSlice[i])
		s.owned = append(s.owned, t)
		out[i] = T{t}
	}
	return out
}
