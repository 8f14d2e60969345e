package tensor

import (
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/sugarme/gotch"
	"github.com/sugarme/gotch/ts"
)

// fake is the bookkeeping of FakeDevice: the tensors that live on it.
var fake struct {
	on  atomic.Bool
	mu  sync.Mutex
	set map[*ts.Tensor]struct{}
}

// FakeDevice returns a second device made of CPU memory, for testing on a
// machine without a GPU the code that moves tensors between devices (an
// engine's vectors spilled to host memory when the GPU is full). Its
// tensors are ordinary CPU tensors, but this package keeps them apart as
// libtorch keeps CUDA and CPU tensors apart: an op that mixes them with
// tensors of another device fails with "expected all tensors to be on the
// same device", except the copies that cross devices on CUDA too
// (CopyFrom, To); an op's result is on its inputs' device; Device reports
// it. The first call turns the bookkeeping on for the rest of the process
// (a map look-up per op input); a program that never calls it pays one
// atomic load per op.
func FakeDevice() Device {
	fake.on.Store(true)
	return Device{d: gotch.CPU, fake: true}
}

func isFake(t *ts.Tensor) bool {
	if t == nil || !fake.on.Load() {
		return false
	}
	fake.mu.Lock()
	defer fake.mu.Unlock()
	_, ok := fake.set[t]
	return ok
}

// markFake records that t lives on the fake device (when on).
func markFake(t *ts.Tensor, on bool) {
	if !on || t == nil || !fake.on.Load() {
		return
	}
	fake.mu.Lock()
	defer fake.mu.Unlock()
	if fake.set == nil {
		fake.set = map[*ts.Tensor]struct{}{}
	}
	fake.set[t] = struct{}{}
}

// free drops a tensor and forgets its device.
func free(t *ts.Tensor) {
	if t == nil {
		return
	}
	if fake.on.Load() {
		fake.mu.Lock()
		delete(fake.set, t)
		fake.mu.Unlock()
	}
	_ = t.Drop()
}

// sameDevice fails s unless every tensor of ts is on the same device (the
// fake one or not), and makes that device the one of the next results.
func (s *Scope) sameDevice(ts []T) bool {
	if !fake.on.Load() {
		return true
	}
	on := false
	for i, t := range ts {
		f := isFake(t.t)
		if i > 0 && f != on {
			s.Fail(fmt.Errorf("expected all tensors to be on the same device, but found at least two devices, %s and %s (tensors %d and %d of the op)",
				Device{d: gotch.CPU, fake: on}, Device{d: gotch.CPU, fake: f}, i, i+1))
			return false
		}
		on = f
	}
	s.onFake = on
	return true
}
