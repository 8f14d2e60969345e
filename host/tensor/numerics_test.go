package tensor

import (
	"os"
	"testing"
)

// The switches are set in libtorch's global context and read back from it
// (on a CPU build too), whatever they were before; the defaults restore
// optlab's numerics.
func TestSetNumerics(t *testing.T) {
	if _, ok := os.LookupEnv("CUBLAS_WORKSPACE_CONFIG"); !ok {
		t.Cleanup(func() { os.Unsetenv("CUBLAS_WORKSPACE_CONFIG") })
	}
	t.Cleanup(func() { _ = SetNumerics(Numerics{}) })
	for _, n := range []Numerics{
		{Deterministic: true, CudnnBenchmark: true, TF32: true},
		{TF32: true},
		{Deterministic: true},
		{CudnnBenchmark: true},
		{},
	} {
		if err := SetNumerics(n); err != nil {
			t.Fatal(err)
		}
		got, err := CurrentNumerics()
		if err != nil {
			t.Fatal(err)
		}
		if got != n {
			t.Errorf("SetNumerics(%v) reads back %v", n, got)
		}
		if n.Deterministic && os.Getenv("CUBLAS_WORKSPACE_CONFIG") == "" {
			t.Errorf("deterministic without CUBLAS_WORKSPACE_CONFIG")
		}
	}
	// Deterministic algorithms must leave the ops optlab uses on the CPU
	// working (a nondeterministic one would now fail).
	if err := SetNumerics(Numerics{Deterministic: true}); err != nil {
		t.Fatal(err)
	}
	onWorker(t, func(s *Scope) error {
		x := s.Randn([]int64{4, 3, 8, 8}, Float32, CPU)
		w := s.Randn([]int64{5, 3, 3, 3}, Float32, CPU)
		y := s.Conv2d(x, w, T{}, 1, 1, 1)
		s.Float32s(s.IndexSelect(y, 0, s.FromInt64([]int64{2, 0}, []int64{2}, CPU)))
		return s.Err()
	})
}
