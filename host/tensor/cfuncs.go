package tensor

// libtch exports these C functions, but gotch has no Go wrappers for them.

// #include <stdint.h>
// void at_manual_seed(int64_t);
// int at_get_num_threads();
// void at_set_num_threads(int);
// int at_grad_set_enabled(int);
// void atc_set_device(int);
// int optlab_fill_fresh(int);
// int64_t optlab_guard_writes(int64_t *, int64_t *);
import "C"

import (
	"fmt"

	"github.com/sugarme/gotch/ts"
)

func cManualSeed(seed int64) { C.at_manual_seed(C.int64_t(seed)) }

func cSetNumThreads(n int) { C.at_set_num_threads(C.int(n)) }

func cGetNumThreads() int { return int(C.at_get_num_threads()) }

// cGradSetEnabled calls libtch directly: gotch's wrapper reads the C int
// result as a Go int (8 bytes) and so returns garbage.
func cGradSetEnabled(on bool) int {
	b := 0
	if on {
		b = 1
	}
	return int(C.at_grad_set_enabled(C.int(b)))
}

// cSetDevice makes CUDA device n current on the calling thread
// (c10::cuda::set_device through libtch; gotch's AtcSetDevice never calls
// it).
func cSetDevice(n int) error {
	C.atc_set_device(C.int(n))
	return ts.TorchErr()
}

// FillFreshWithNaN makes libtorch fill every CPU allocation made from now
// on with NaN bytes (0xff: NaN in every float type, −1 in integers) before
// handing it out, when on; it returns whether it was on. Each such
// allocation also gets a guard of 1 KiB of NaN bytes past its end. For
// tests: an op whose result depends on memory it never wrote, inside its
// tensors or just past their ends, then gives NaN on every libtorch build,
// not only where the allocator happens to return memory that an earlier
// tensor left dirty (what a fresh page of 1.13 hid); and an op that writes
// past the end of its output is counted by GuardWrites once that memory is
// freed. Not for CUDA memory.
func FillFreshWithNaN(on bool) (bool, error) {
	b := 0
	if on {
		b = 1
	}
	r := int(C.optlab_fill_fresh(C.int(b)))
	if err := ts.TorchErr(); err != nil || r < 0 {
		return false, fmt.Errorf("filling fresh allocations with NaN: %v", err)
	}
	return r == 1, nil
}

// GuardWrites reports the allocations made while FillFreshWithNaN was on
// that had a byte of their guard written (past the end of the tensor) by
// the time they were freed: how many since the process began, and for the
// first, its size and the offset past its end of the first changed byte.
func GuardWrites() (n, firstSize, firstOffset int64) {
	var size, at C.int64_t
	n = int64(C.optlab_guard_writes(&size, &at))
	return n, int64(size), int64(at)
}
