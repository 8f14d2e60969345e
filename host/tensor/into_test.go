package tensor

import (
	"math/rand/v2"
	"strings"
	"testing"
)

func TestIntoOps(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	const n = 513
	a := randF32(r, n, r.NormFloat64)
	b := randF32(r, n, func() float64 { return 0.1 + r.Float64() })
	binary := []struct {
		name string
		into func(s *Scope, dst, a, b T)
		op   func(s *Scope, a, b T) T
	}{
		{"Add", (*Scope).AddInto, (*Scope).Add},
		{"Sub", (*Scope).SubInto, (*Scope).Sub},
		{"Mul", (*Scope).MulInto, (*Scope).Mul},
		{"Div", (*Scope).DivInto, (*Scope).Div},
		{"Maximum", (*Scope).MaximumInto, (*Scope).Maximum},
		{"Minimum", (*Scope).MinimumInto, (*Scope).Minimum},
	}
	unary := []struct {
		name string
		into func(s *Scope, dst, a T)
		op   func(s *Scope, a T) T
	}{
		{"Abs", (*Scope).AbsInto, (*Scope).Abs},
		{"Sign", (*Scope).SignInto, (*Scope).Sign},
		{"Sqrt", (*Scope).SqrtInto, (*Scope).Sqrt},
		{"Square", (*Scope).SquareInto, (*Scope).Square},
		{"Softplus", (*Scope).SoftplusInto, (*Scope).Softplus},
		{"Exp", (*Scope).ExpInto, (*Scope).Exp},
		{"Log", (*Scope).LogInto, (*Scope).Log},
		{"Reciprocal", (*Scope).ReciprocalInto, (*Scope).Reciprocal},
	}
	onWorker(t, func(s *Scope) error {
		check := func(name string, got, want T) {
			g, w := s.Float32s(got), s.Float32s(want)
			if s.Err() != nil {
				return
			}
			if i := firstDiff(g, w); i >= 0 {
				t.Errorf("%s [%d] = %v, want %v", name, i, g[i], w[i])
			}
		}
		A, B := vec(s, a), vec(s, b)
		reg := s.ScalarTensor(1.0/3, CPU)
		for _, op := range binary {
			want := op.op(s, A, B)
			dst := s.Zeros([]int64{n}, Float32, CPU)
			op.into(s, dst, A, B)
			check(op.name+"Into", dst, want)
			// Aliased: dst is the first, then the second operand.
			d := vec(s, a)
			op.into(s, d, d, B)
			check(op.name+"Into(a, a, b)", d, want)
			d = vec(s, b)
			op.into(s, d, A, d)
			check(op.name+"Into(b, a, b)", d, want)
			// A register operand broadcasts.
			op.into(s, dst, A, reg)
			check(op.name+"Into(dst, a, register)", dst, op.op(s, A, reg))
			// Registers into a register.
			r1 := s.ScalarTensor(0.7, CPU)
			op.into(s, r1, r1, reg)
			if v := s.Scalars(op.op(s, s.ScalarTensor(0.7, CPU), reg), r1); s.Err() == nil && !sameBits64(v[0], v[1]) {
				t.Errorf("%sInto on registers = %v, want %v", op.name, v[1], v[0])
			}
		}
		for _, op := range unary {
			x := A
			if op.name == "Sqrt" || op.name == "Log" {
				x = B
			}
			want := op.op(s, x)
			dst := s.Zeros([]int64{n}, Float32, CPU)
			op.into(s, dst, x)
			check(op.name+"Into", dst, want)
			d := s.Zeros([]int64{n}, Float32, CPU)
			s.CopyFrom(d, x)
			op.into(s, d, d)
			check(op.name+"Into(a, a)", d, want)
		}
		if err := s.Err(); err != nil {
			return err
		}
		// A destination of the wrong shape is an error, not a resize.
		small := s.Zeros([]int64{3}, Float32, CPU)
		s.MulInto(small, A, B)
		if err := s.Err(); err == nil || !strings.Contains(err.Error(), "mul_out") {
			t.Errorf("MulInto a 3-element destination: %v", err)
		}
		return nil
	})
}
