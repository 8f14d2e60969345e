package tensor

import (
	"context"
	"testing"
)

// TestAutocastScope: inside the scope a linear layer runs in bfloat16 and
// the cross-entropy in float32 (autocast's lists), the gradient of a
// float32 leaf is float32; restore puts back the previous state, also for
// nested scopes; outside, everything is float32 again.
func TestAutocastScope(t *testing.T) {
	api, err := AutocastAvailable()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s: %s autocast API", LibtorchDescription(), api)
	err = testWorker.Do(context.Background(), func() error {
		before, err := AutocastStatus(CPU)
		if err != nil {
			return err
		}
		if before.Enabled {
			t.Errorf("autocast enabled before any scope: %+v", before)
		}
		s := NewScope()
		defer s.Close()
		x := s.Randn([]int64{4, 3}, Float32, CPU)
		w := s.RequiresGrad(s.Randn([]int64{5, 3}, Float32, CPU))
		y := s.FromInt64([]int64{0, 1, 2, 3}, []int64{4}, CPU)

		restore, err := Autocast(CPU, BFloat16)
		if err != nil {
			return err
		}
		in, err := AutocastStatus(CPU)
		if err != nil {
			return err
		}
		if !in.Enabled || in.DType != BFloat16 {
			t.Errorf("inside: %+v, want enabled bfloat16", in)
		}
		// Nested: a second scope (float16 would not run on every CPU; the
		// state is what is checked) and its restore.
		inner, err := Autocast(CPU, BFloat16)
		if err != nil {
			return err
		}
		inner()
		if st, _ := AutocastStatus(CPU); !st.Enabled || st.DType != BFloat16 {
			t.Errorf("after the inner restore: %+v, want still enabled bfloat16", st)
		}
		logits := s.Linear(x, w, T{})
		loss := s.CrossEntropy(logits, y, 0)
		restore()
		if err := s.Err(); err != nil {
			return err
		}
		if logits.DType() != BFloat16 {
			t.Errorf("linear under autocast: %v, want bfloat16", logits.DType())
		}
		if loss.DType() != Float32 {
			t.Errorf("cross-entropy under autocast: %v, want float32", loss.DType())
		}
		g := s.Gradient(loss, w)
		if err := s.Err(); err != nil {
			return err
		}
		if g.DType() != Float32 {
			t.Errorf("gradient of a float32 leaf: %v, want float32", g.DType())
		}
		after, err := AutocastStatus(CPU)
		if err != nil {
			return err
		}
		if after != before {
			t.Errorf("after restore: %+v, want %+v", after, before)
		}
		if out := s.Linear(x, w, T{}); out.DType() != Float32 {
			t.Errorf("linear after the scope: %v, want float32", out.DType())
		}
		if _, err := Autocast(CPU, Float32); err == nil {
			t.Errorf("Autocast to float32: no error")
		}
		return s.Err()
	})
	if err != nil {
		t.Fatal(err)
	}
}
