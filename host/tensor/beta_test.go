package tensor

import (
	"os"
	"strings"
	"syscall"
	"testing"
)

// A segment maximum (SegMaxAbs: DST's and EDST's magnitudes) runs no op
// that libtorch calls beta: index_reduce and scatter_reduce print "… is in
// beta and the API may change at any time" on stderr at their first use in
// every process, which DST and EDST printed on every run (#41, also
// seen). This file sorts before segments_test.go, so no earlier test of
// the package has used such an op (libtorch warns once per process).
func TestSegMaxAbsNoBetaWarning(t *testing.T) {
	f, err := os.CreateTemp(t.TempDir(), "stderr")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	saved, err := syscall.Dup(2)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Dup2(int(f.Fd()), 2); err != nil {
		t.Fatal(err)
	}
	onWorker(t, func(s *Scope) error {
		// Rows of 4096 in one segment and elements across them.
		sizes := []int64{20000, 1, 70000, 3, 9000}
		g := s.Segments(sizes, CPU)
		x := make([]float32, g.N)
		want := make([]float64, len(sizes))
		i := 0
		for j, n := range sizes {
			for range n {
				x[i] = float32(i%11) - 5
				want[j] = max(want[j], float64(max(x[i], -x[i])))
				i++
			}
		}
		v := s.Float64s(s.SegReduce(vec(s, x), T{}, g, SegMaxAbs))
		if err := s.Err(); err != nil {
			return err
		}
		for j, got := range v {
			if got != want[j] {
				t.Errorf("segment %d: max |x| = %v, want %v", j, got, want[j])
			}
		}
		return nil
	})
	if err := syscall.Dup2(saved, 2); err != nil {
		t.Fatal(err)
	}
	_ = syscall.Close(saved)
	out, err := os.ReadFile(f.Name())
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(out), "beta") {
		t.Errorf("a segment maximum printed libtorch's warning:\n%s", out)
	}
}
