package main

import (
	"context"
	"flag"
	"math"
	"testing"

	"github.com/optlab/optlab/sdk/optim"
	"github.com/optlab/optlab/sdk/optimtest"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden")

// TestSlowWeights checks the algorithm on a quadratic with plain SGD as the
// base step: after k fast steps the parameters are φ + α(θ_k − φ).
func TestSlowWeights(t *testing.T) {
	x0 := []float64{1, -2}
	h := optimtest.MustHost(t, &optimtest.Quadratic{A: [][]float64{{1, 0}, {0, 3}}, X0: x0})
	const lr, k, alpha = 0.1, 3, 0.5
	optimtest.MustRun(t, New(), h, k, optimtest.WithLR(lr),
		optimtest.WithHParams(map[string]any{"k": k, "alpha": alpha}))
	for i, d := range []float64{1, 3} {
		fast := x0[i] * math.Pow(1-lr*d, k) // k SGD steps on d·x²/2
		want := x0[i] + alpha*(fast-x0[i])
		if got := h.Params(0)[i]; math.Abs(got-want) > 1e-12 {
			t.Errorf("θ[%d] = %v, want %v", i, got, want)
		}
	}
}

func TestRejectsBadParams(t *testing.T) {
	h := optimtest.MustHost(t, optimtest.DiagQuadratic(1))
	for _, p := range []map[string]any{{"k": 0}, {"alpha": 1.5}, {"alpha": 0.0}} {
		if err := optimtest.NewHarness(New(), h, optimtest.WithHParams(p)).Configure(context.Background(), 1); err == nil {
			t.Errorf("params %v accepted", p)
		}
	}
}

// TestTraceGolden documents the algorithm as the ops it sends: two
// members, a slow update every second step.
func TestTraceGolden(t *testing.T) {
	optimtest.TestTraces(t, *update, optimtest.TraceCase{Golden: "testdata/trace.golden", New: New,
		Members: 2, Steps: 2, Params: map[string]any{"k": 2}})
}

var _ optim.Optimizer = (*Lookahead)(nil)
