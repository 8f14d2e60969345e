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
		out[i] = T{s.own(ts.New(outSlice[i]))}
	}
	return out
}

// Split cuts t along dim 0 into consecutive views of the given sizes. Its
// backward is one concatenation, where a narrow per view would allocate a
// zero tensor of t's size for each. (gotch's SplitWithSizes never frees the
// C array it receives; this one does.)
func (s *Scope) Split(t T, sizes []int64) []T {
	out := make([]T, len(sizes))
	if !s.check(t) || len(sizes) == 0 {
		return out
	}
	arr := lib.AtgSplitWithSizes(lib.Ctensor(t.t.Ctensor()), sizes, len(sizes), 0)
	if err := ts.TorchErr(); err != nil {
		s.Fail(fmt.Errorf("split: %w", err))
		return out
	}
	defer C.free(unsafe.Pointer(arr))
	cs := unsafe.Slice(arr, len(sizes)+1)
	for i := range sizes {
		if cs[i] == nil {
			s.Fail(fmt.Errorf("split: %d pieces for %d sizes", i, len(sizes)))
			return out
		}
		out[i] = T{s.own(ts.New(cs[i]))}
	}
	return out
}
