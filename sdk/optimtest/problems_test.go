package optimtest_test

import (
	"math"
	"testing"

	"github.com/optlab/optlab/sdk/optimtest"
)

// checkGrad compares p's gradient with central finite differences.
func checkGrad(t *testing.T, p optimtest.Problem, theta []float64, samples []int) {
	t.Helper()
	g := make([]float64, p.Numel())
	p.Loss(theta, samples, g)
	const h = 1e-6
	for i := range theta {
		x := theta[i]
		theta[i] = x + h
		lp, _ := p.Loss(theta, samples, nil)
		theta[i] = x - h
		lm, _ := p.Loss(theta, samples, nil)
		theta[i] = x
		fd := (lp - lm) / (2 * h)
		if math.Abs(fd-g[i]) > 1e-6*max(1, math.Abs(fd)) {
			t.Errorf("%s: d/dθ[%d]: backprop %.10g, finite difference %.10g", p.Name(), i, g[i], fd)
		}
	}
}

func TestGradientsFiniteDifference(t *testing.T) {
	tests := []struct {
		name    string
		p       optimtest.Problem
		samples []int
	}{
		{"quadratic nonsymmetric", &optimtest.Quadratic{A: [][]float64{{2, 1, 0}, {0.5, 3, -1}, {0, 0.2, 1}}, B: []float64{1, -2, 0.5}}, nil},
		{"linear", &optimtest.Linear{C: []float64{1, -2, 3}}, nil},
		{"softmax regression", optimtest.NewMLP(optimtest.MLPConfig{Seed: 3}), []int{0, 5, 7, 11, 40}},
		{"mlp", optimtest.NewMLP(optimtest.MLPConfig{Hidden: 5, Classes: 4, Inputs: 3, Seed: 4}), []int{1, 2, 3, 30, 31, 60, 95}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			theta := make([]float64, tt.p.Numel())
			tt.p.Init(7, theta)
			for i := range theta { // move off the init (zero biases etc.)
				theta[i] += 0.1 * math.Sin(float64(i+1))
			}
			checkGrad(t, tt.p, theta, tt.samples)
		})
	}
}

func TestMLPLayoutAndLoss(t *testing.T) {
	m := optimtest.NewMLP(optimtest.MLPConfig{Inputs: 3, Hidden: 5, Classes: 4, Samples: 40, TestSamples: 20})
	ts := m.Tensors()
	var n int64
	for _, tn := range ts {
		if tn.Offset != n {
			t.Errorf("%s at offset %d, want %d", tn.Name, tn.Offset, n)
		}
		size := int64(1)
		for _, s := range tn.Shape {
			size *= s
		}
		n += size
	}
	if n != int64(m.Numel()) || m.Numel() != 5*3+5+4*5+4 {
		t.Fatalf("numel %d, tensors cover %d", m.Numel(), n)
	}
	// All-zero parameters give uniform predictions: loss log C.
	zero := make([]float64, m.Numel())
	loss, _ := m.Loss(zero, []int{0, 1, 2, 3}, nil)
	if math.Abs(loss-math.Log(4)) > 1e-15 {
		t.Errorf("loss at 0 = %v, want log 4", loss)
	}
	if m.Samples() != 40 || len(m.TestLabels()) != 20 || m.Classes() != 4 {
		t.Errorf("sizes %d %d %d", m.Samples(), len(m.TestLabels()), m.Classes())
	}
}

func TestQuadraticSymmetricGradientExact(t *testing.T) {
	q := &optimtest.Quadratic{A: [][]float64{{3, 0.1}, {0.1, 2}}, B: []float64{0.3, -0.7}}
	theta := []float64{0.37, -1.91}
	g := make([]float64, 2)
	loss, acc := q.Loss(theta, nil, g)
	for i := range 2 {
		want := q.A[i][0]*theta[0] + q.A[i][1]*theta[1] - q.B[i]
		if g[i] != want {
			t.Errorf("g[%d] = %v, want Aθ−b = %v bitwise", i, g[i], want)
		}
	}
	wantLoss := 0.5*(theta[0]*(3*theta[0]+0.1*theta[1])+theta[1]*(0.1*theta[0]+2*theta[1])) - (0.3*theta[0] - 0.7*theta[1])
	if math.Abs(loss-wantLoss) > 1e-15 || !math.IsNaN(acc) {
		t.Errorf("loss %v acc %v, want %v NaN", loss, acc, wantLoss)
	}
}
