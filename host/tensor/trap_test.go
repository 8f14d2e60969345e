package tensor

import (
	"context"
	"strings"
	"testing"
)

// TestTrapNonFinite: with the trap on, the op that makes a NaN fails the
// scope naming itself; finite results and integer tensors pass.
func TestTrapNonFinite(t *testing.T) {
	err := testWorker.Do(context.Background(), func() error {
		prev := TrapNonFinite(true)
		defer TrapNonFinite(prev)
		s := NewScope()
		defer s.Close()
		x := s.FromFloat32([]float32{4, -1, 9}, []int64{3}, CPU)
		_ = s.FromInt64([]int64{1, 2}, []int64{2}, CPU)
		a := s.Abs(x)
		_ = s.Sqrt(a)
		if err := s.Err(); err != nil {
			t.Fatalf("finite ops failed: %v", err)
		}
		_ = s.Sqrt(x)
		if err := s.Err(); err == nil || !strings.HasPrefix(err.Error(), "sqrt: non-finite output") {
			t.Errorf("sqrt of −1: %v", err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
