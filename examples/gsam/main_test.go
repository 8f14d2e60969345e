package main

import (
	"flag"
	"math"
	"testing"

	"github.com/optlab/optlab/sdk/optimtest"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden")

// TestStep checks one step on a quadratic with plain SGD as the base step
// against the update computed here in float64: d = gp − α·g⊥.
func TestStep(t *testing.T) {
	a := [][]float64{{2, 0.5}, {0.5, 1}}
	x := []float64{1, -2}
	h := optimtest.MustHost(t, &optimtest.Quadratic{A: a, X0: x})
	const lr, rho, alpha = 0.1, 0.05, 0.3
	optimtest.MustRun(t, New(), h, 1, optimtest.WithLR(lr),
		optimtest.WithHParams(map[string]any{"rho": rho, "alpha": alpha}))
	grad := func(x []float64) []float64 { // ∇ of xᵀAx/2 for a symmetric A
		return []float64{a[0][0]*x[0] + a[0][1]*x[1], a[1][0]*x[0] + a[1][1]*x[1]}
	}
	norm := func(v []float64) float64 { return math.Hypot(v[0], v[1]) }
	g := grad(x)
	n := norm(g)
	gp := grad([]float64{x[0] + rho/(n+eps)*g[0], x[1] + rho/(n+eps)*g[1]})
	np := norm(gp)
	cos := (g[0]*gp[0] + g[1]*gp[1]) / (n*np + eps)
	along := cos * n / (np + eps)
	for i := range x {
		d := (1+alpha*along)*gp[i] - alpha*g[i]
		if got, want := h.Params(0)[i], x[i]-lr*d; math.Abs(got-want) > 1e-12 {
			t.Errorf("θ[%d] = %v, want %v", i, got, want)
		}
	}
	if n := h.ExecCount(0); n != 1 || h.ReadCount(0) != 0 {
		t.Errorf("%d Execs and %d reads in a step, want 1 and 0", n, h.ReadCount(0))
	}
}

// TestTraceGolden documents the algorithm as the ops it sends (two members).
func TestTraceGolden(t *testing.T) {
	optimtest.TestTraces(t, *update, optimtest.TraceCase{Golden: "testdata/trace.golden", New: New,
		Members: 2, Steps: 1, Params: map[string]any{"alpha": 0.1}})
}
