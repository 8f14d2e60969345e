package tensor

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

func randF32(r *rand.Rand, n int, gen func() float64) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(gen())
	}
	return v
}

func vec(s *Scope, v []float32) T { return s.FromFloat32(v, []int64{int64(len(v))}, CPU) }

func sameBits64(a, b float64) bool { return math.Float64bits(a) == math.Float64bits(b) }

// firstDiff returns the first index where got and want differ bitwise as
// float32, or -1.
func firstDiff(got []float32, want []float32) int {
	if len(got) != len(want) {
		return 0
	}
	for i := range got {
		if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
			return i
		}
	}
	return -1
}

// TestDotNorm checks Dot and Norm, with small chunks so that every case
// crosses chunk boundaries, against float64 sums: exact on integer-valued
// vectors, and within float64 rounding on random ones.
func TestDotNorm(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	const c = 4096
	sizes := []int{0, 1, 7, c - 1, c, c + 1, 3 * c, 3*c + 1, 5*c + 17}
	onWorker(t, func(s *Scope) error {
		// Integer-valued vectors: every partial sum is exact in float32,
		// so the result is exact.
		for _, n := range sizes {
			ints := func() float64 { return float64(r.IntN(17) - 8) }
			a, b := randF32(r, n, ints), randF32(r, n, ints)
			var dot, sq float64
			for i := range a {
				dot += float64(a[i]) * float64(b[i])
				sq += float64(a[i]) * float64(a[i])
			}
			ta, tb := vec(s, a), vec(s, b)
			v := s.Scalars(s.dotChunks(ta, tb, c), s.Sqrt(s.dotChunks(ta, ta, c)), s.dotChunks(s.Reshape(ta, 1, -1), tb, c))
			if err := s.Err(); err != nil {
				return err
			}
			if v[0] != dot || v[2] != dot || v[1] != math.Sqrt(sq) {
				t.Errorf("n=%d: dot %v (2-D %v), norm %v; want %v, %v", n, v[0], v[2], v[1], dot, math.Sqrt(sq))
			}
			// A float64 operand: dotted in float64, as by Dot.
			a64 := s.Cast(ta, Float64)
			v = s.Scalars(s.dotChunks(a64, tb, c), s.Sqrt(s.dotChunks(a64, a64, c)), s.Dot(a64, tb))
			if err := s.Err(); err != nil {
				return err
			}
			if v[0] != v[2] || v[1] != math.Sqrt(sq) {
				t.Errorf("n=%d, float64 operand: dot %v (Dot %v), norm %v", n, v[0], v[2], v[1])
			}
		}
		// Random vectors of 10⁶ elements: within 1e-10 of a sequential float64 sum (itself that far off),
		// chunked or not.
		const n = 1_000_000
		for _, gen := range []struct {
			name string
			f    func() float64
		}{
			{"normal", r.NormFloat64},
			{"uniform", r.Float64},
			{"wide", func() float64 { return r.NormFloat64() * math.Exp(4*r.NormFloat64()) }},
		} {
			a, b := randF32(r, n, gen.f), randF32(r, n, gen.f)
			var dot, abs, sq float64
			for i := range a {
				p := float64(a[i]) * float64(b[i])
				dot += p
				abs += math.Abs(p)
				sq += float64(a[i]) * float64(a[i])
			}
			ta, tb := vec(s, a), vec(s, b)
			v := s.Scalars(s.dotChunks(ta, tb, c), s.Sqrt(s.dotChunks(ta, ta, c)), s.Dot(ta, tb))
			if err := s.Err(); err != nil {
				return err
			}
			// The dot's error is relative to Σ|aᵢbᵢ| (the sum itself may
			// cancel); for all-positive terms that is the sum.
			if e := math.Abs(v[0]-dot) / abs; e > 1e-10 || math.Abs(v[2]-dot)/abs > 1e-10 {
				t.Errorf("%s: dot %v, want %v (error %.2g of Σ|ab|)", gen.name, v[0], dot, e)
			}
			if e := math.Abs(v[1]-math.Sqrt(sq)) / math.Sqrt(sq); e > 1e-10 {
				t.Errorf("%s: norm %v, want %v (relative error %.2g)", gen.name, v[1], math.Sqrt(sq), e)
			}
		}
		return nil
	})
}

func TestDotSizeMismatch(t *testing.T) {
	onWorker(t, func(s *Scope) error {
		s.Dot(s.Ones([]int64{3}, Float32, CPU), s.Ones([]int64{4}, Float32, CPU))
		if err := s.Err(); err == nil || !strings.Contains(err.Error(), "dot") {
			t.Errorf("dot of 3 and 4 elements: %v", err)
		}
		return nil
	})
}
