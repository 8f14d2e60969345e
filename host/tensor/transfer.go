package tensor

// #include <stdlib.h>
import "C"

import (
	"sync/atomic"
	"unsafe"

	lib "github.com/sugarme/gotch/libtch"
	"github.com/sugarme/gotch/ts"
)

// ---- host→device copies ----
//
// Every copy of host memory into a tensor for the device is counted, so
// that tests and benchmarks can assert that a training step makes none (on
// a GPU each is a transfer the step has to wait for: a copy from pageable
// memory synchronizes with the device's queue). Counted are: a tensor made
// from Go memory (FromFloat32, FromInt64, FromUint8, UploadInt64: on the
// CPU too, where it is the same copy of Go memory that a GPU run makes
// across the bus), and a CPU tensor copied to a GPU (To, CopyFrom). The
// counter is the process's: every worker and engine together.

var hostToDevice atomic.Int64

// cudaSeen is set once a CUDA device has been parsed; until then no tensor
// can be on a GPU and CopyFrom skips the device check.
var cudaSeen atomic.Bool

// HostToDevice returns the number of host→device copies the process has
// made so far.
func HostToDevice() int64 { return hostToDevice.Load() }

// countCopy counts a CPU→GPU copy of src into a tensor on dst's device.
func countCopy(dst, src T) {
	if cudaSeen.Load() && dst.Device().IsCUDA() && !src.Device().IsCUDA() {
		hostToDevice.Add(1)
	}
}

// UploadInt64 copies data (with the given shape) to device d as FromInt64
// does, but on a GPU without making the device or the host wait: the
// values go through pinned (page-locked) host memory and the copy to the
// device is queued on the current stream (non-blocking), so the host goes
// on at once and the device copies when it gets there. libtorch's pinned
// allocator keeps the staging buffer until the copy is done, so the
// result is usable at once, by kernels queued after it. On the CPU it is
// FromInt64. One counted copy either way.
func (s *Scope) UploadInt64(data []int64, shape []int64, d Device) T {
	if !d.IsCUDA() {
		return s.FromInt64(data, shape, d)
	}
	if s.err != nil {
		return T{}
	}
	host := s.op("from int64", func() (*ts.Tensor, error) { return ts.NewTensorFromData(data, shape) })
	if !s.check(host) {
		return T{}
	}
	// _pin_memory, not pin_memory: the latter warns on every call in
	// libtorch ≥ 2.4 when given a device, and given none (gotch passes the
	// CPU for "none") it has no pinned allocator to use.
	pinned := s.op("_pin_memory", func() (*ts.Tensor, error) {
		out := (*lib.Ctensor)(C.malloc(C.size_t(16 * 8))) // as gotch's wrappers: room for the results
		defer C.free(unsafe.Pointer(out))
		lib.Atg_PinMemory(out, lib.Ctensor(host.t.Ctensor()), d.d.CInt())
		if err := ts.TorchErr(); err != nil {
			return nil, err
		}
		return ts.New(*out), nil
	})
	if !s.check(pinned) {
		return T{}
	}
	hostToDevice.Add(1)
	return s.op("to (non-blocking)", func() (*ts.Tensor, error) { return pinned.t.ToDevice(d.d, Int64, true, false, false) })
}
