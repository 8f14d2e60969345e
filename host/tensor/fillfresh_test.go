package tensor

import (
	"context"
	"math"
	"testing"
	"unsafe"

	"github.com/sugarme/gotch"
	"github.com/sugarme/gotch/ts"
)

// TestFillFreshWithNaN: with the fill on, a tensor that no op wrote (empty)
// reads NaN throughout, and ops that write their whole output are not
// affected; off again, the allocations are left alone.
func TestFillFreshWithNaN(t *testing.T) {
	err := testWorker.Do(context.Background(), func() error {
		prev, err := FillFreshWithNaN(true)
		if err != nil {
			return err
		}
		defer func() { _, _ = FillFreshWithNaN(prev) }()
		s := NewScope()
		defer s.Close()
		e := T{s.own(ts.MustEmpty([]int64{1000}, gotch.Float, gotch.CPU))}
		for i, v := range s.Float32s(e) {
			if !math.IsNaN(float64(v)) {
				t.Fatalf("empty()[%d] = %v with the fill on, want NaN", i, v)
			}
		}
		d := T{s.own(ts.MustEmpty([]int64{10}, gotch.Double, gotch.CPU))}
		if v := s.Float64s(d); !math.IsNaN(v[3]) {
			t.Errorf("float64 empty() = %v, want NaN", v)
		}
		z := s.Add(s.Zeros([]int64{1000}, Float32, CPU), s.Ones([]int64{1000}, Float32, CPU))
		for i, v := range s.Float32s(z) {
			if v != 1 {
				t.Fatalf("zeros+ones [%d] = %v", i, v)
			}
		}
		if on, err := FillFreshWithNaN(false); err != nil || !on {
			t.Errorf("turning off: was on %v, %v", on, err)
		}
		return s.Err()
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestFillFreshGuard: with the fill on, the 1 KiB past a tensor's end reads
// NaN (so an op that reads past its input's end gives NaN), and a write
// there is counted by GuardWrites when the tensor is freed, naming its size
// and the offset.
func TestFillFreshGuard(t *testing.T) {
	err := testWorker.Do(context.Background(), func() error {
		prev, err := FillFreshWithNaN(true)
		if err != nil {
			return err
		}
		defer func() { _, _ = FillFreshWithNaN(prev) }()
		before, _, _ := GuardWrites()

		s := NewScope()
		e := T{s.own(ts.MustOnes([]int64{10}, gotch.Float, gotch.CPU))}
		p, err := e.t.DataPtr()
		if err != nil {
			s.Close()
			return err
		}
		past := unsafe.Slice((*float32)(p), 10+256)
		for i := 10; i < len(past); i++ {
			if !math.IsNaN(float64(past[i])) {
				s.Close()
				t.Fatalf("float32 %d past the end = %v, want NaN", i-10, past[i])
			}
		}
		// A deliberate write 2 floats past the end (bytes 4..7 of the guard).
		past[11] = 1
		s.Close()
		n, size, at := GuardWrites()
		if n != before+1 {
			t.Errorf("GuardWrites after one write past the end: %d, want %d", n, before+1)
		}
		if before == 0 && (size != 40 || at != 4) {
			t.Errorf("first guard write: size %d offset %d, want 40 and 4", size, at)
		}

		// Ops that write within their outputs leave the guards alone.
		s2 := NewScope()
		x := s2.Add(s2.Ones([]int64{1000}, Float32, CPU), s2.Ones([]int64{1000}, Float32, CPU))
		_ = s2.Float32s(x)
		err = s2.Err()
		s2.Close()
		if n2, _, _ := GuardWrites(); n2 != n {
			t.Errorf("in-bounds ops counted %d guard writes", n2-n)
		}

		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}
