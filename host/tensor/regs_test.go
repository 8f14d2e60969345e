package tensor

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

func TestRegistersMatchGo(t *testing.T) {
	// Variables, not constants: Go evaluates constant expressions exactly.
	var rho, n, a, b, lo, hi = 0.05, 0.3713, 1.0 / 7, -2.5e-3, 1e-3, 0.2
	want := []float64{
		rho / (n + 1e-12),
		a/3 + b/3,
		math.Sqrt(n) * a,
		1 / (math.Sqrt(n) + 1e-8),
		math.Max(a, b) - math.Min(a, b),
		-(a - n),
		math.Min(math.Max(rho/n, lo), hi),
		math.Min(math.Max(a*b, lo), hi),
	}
	onWorker(t, func(s *Scope) error {
		reg := func(v float64) T { return s.ScalarTensor(v, CPU) }
		R, N, A, B := reg(rho), reg(n), reg(a), reg(b)
		got := s.Scalars(
			s.Div(R, s.Add(N, reg(1e-12))),
			s.Add(s.Div(A, reg(3)), s.Div(B, reg(3))),
			s.Mul(s.Sqrt(N), A),
			s.Reciprocal(s.Add(s.Sqrt(N), reg(1e-8))),
			s.Sub(s.Maximum(A, B), s.Minimum(A, B)),
			s.Neg(s.Sub(A, N)),
			s.Clamp(s.Div(R, N), reg(lo), reg(hi)),
			s.Clamp(s.Mul(A, B), reg(lo), reg(hi)),
		)
		if err := s.Err(); err != nil {
			return err
		}
		for i := range want {
			if !sameBits64(got[i], want[i]) {
				t.Errorf("expression %d = %v, want %v (bitwise)", i, got[i], want[i])
			}
		}
		r := reg(1.5)
		if sh, dt := r.Shape(), r.t.DType(); len(sh) != 0 || dt != Float64 {
			t.Errorf("ScalarTensor: shape %v type %v, want 0-d float64", sh, dt)
		}
		// Clamp broadcasts register bounds over a vector.
		v := s.Float32s(s.Clamp(vec(s, []float32{-1, 0.5, 3}), reg(0), reg(1)))
		if err := s.Err(); err != nil {
			return err
		}
		if !slices.Equal(v, []float32{0, 0.5, 1}) {
			t.Errorf("clamp of a vector = %v, want [0 0.5 1]", v)
		}
		return nil
	})
}

// TestCoefficientOpsBitwise: with a register holding α, the tensor-coefficient
// ops give exactly what the float64-immediate ops give on the CPU.
func TestCoefficientOpsBitwise(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	const n = 1037
	x := randF32(r, n, func() float64 { return r.NormFloat64() * math.Exp(3*r.NormFloat64()) })
	d0 := randF32(r, n, func() float64 { return r.NormFloat64() * math.Exp(3*r.NormFloat64()) })
	alphas := []float64{0.05 / 0.3713, 1.0 / 3, -1e-7, 1, -1, 2.5e10, math.Pi, 1e-300, 3.4e38}
	onWorker(t, func(s *Scope) error {
		X := vec(s, x)
		for _, a := range alphas {
			c := s.ScalarTensor(a, CPU)
			ops := []struct {
				name     string
				imm, reg func(dst T)
			}{
				{"AxpyT", func(d T) { s.Axpy(d, a, X) }, func(d T) { s.AxpyT(d, c, X) }},
				{"ScaleT", func(d T) { s.ScaleInPlace(d, a) }, func(d T) { s.ScaleT(d, c) }},
				{"AddT", func(d T) { s.AddScalarInPlace(d, a) }, func(d T) { s.AddT(d, c) }},
				{"FillT", func(d T) { s.Fill(d, a) }, func(d T) { s.FillT(d, c) }},
			}
			for _, op := range ops {
				d1, d2 := vec(s, d0), vec(s, d0)
				op.imm(d1)
				op.reg(d2)
				v1, v2 := s.Float32s(d1), s.Float32s(d2)
				if err := s.Err(); err != nil {
					return err
				}
				if i := firstDiff(v2, v1); i >= 0 {
					t.Errorf("%s(α=%v) [%d] = %v, the immediate op gives %v", op.name, a, i, v2[i], v1[i])
				}
			}
		}
		return nil
	})
}

func TestAllFinite(t *testing.T) {
	tests := []struct {
		v    []float32
		want float64
	}{
		{[]float32{1, -2, 3}, 1},
		{nil, 1},
		{[]float32{1, float32(math.NaN())}, 0},
		{[]float32{float32(math.Inf(-1)), 2}, 0},
	}
	onWorker(t, func(s *Scope) error {
		for _, tc := range tests {
			f := s.AllFinite(vec(s, tc.v))
			v := s.Scalars(f, s.LogicalAnd(f, s.AllFinite(s.ScalarTensor(1, CPU))))
			if err := s.Err(); err != nil {
				return err
			}
			if len(f.Shape()) != 0 || v[0] != tc.want || v[1] != tc.want {
				t.Errorf("AllFinite(%v) = %v (shape %v), and-ed %v; want %v", tc.v, v[0], f.Shape(), v[1], tc.want)
			}
		}
		return nil
	})
}
