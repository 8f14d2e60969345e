package tensor

import (
	"context"
	"math"
	"testing"

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
