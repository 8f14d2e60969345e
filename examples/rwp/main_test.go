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

// TestFilterWiseNoise checks the perturbation of every row (filter) of the
// MLP: the gradient is taken at θ + ε with ε_r = σ·‖θ_r‖·z_r, z the
// standard-normal draw of the step's seed (drawn again here on a second
// host), and the step moves θ by −lr times that gradient.
func TestFilterWiseNoise(t *testing.T) {
	mlp := optimtest.NewMLP(optimtest.MLPConfig{Hidden: 5})
	h := optimtest.MustHost(t, mlp)
	theta := h.Params(0)
	const sigma, lr = 0.2, 0.1
	optimtest.MustRun(t, New(), h, 1, optimtest.WithLR(lr), optimtest.WithHParams(map[string]any{"sigma": sigma}))
	grads := h.Grads()
	if len(grads) != 1 {
		t.Fatalf("%d gradient passes, want 1", len(grads))
	}
	z := optimtest.MustHost(t, mlp)
	p := optim.Prog().Alloc(1, 0).RandN(1, 1, noiseSeed(1, 0, 0))
	if _, err := z.Exec(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	draw, err := z.Vec(1)
	if err != nil {
		t.Fatal(err)
	}
	l, err := h.Layout(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	i := 0
	for _, size := range l.Members[0].Segments(optim.PerRow) {
		var sq float64
		for j := range size {
			sq += theta[i+int(j)] * theta[i+int(j)]
		}
		for j := range int(size) {
			want := theta[i+j] + sigma*math.Sqrt(sq)*draw[i+j]
			if got := grads[0].At[i+j]; math.Abs(got-want) > 1e-12 {
				t.Fatalf("element %d: perturbed to %v, want %v", i+j, got, want)
			}
		}
		i += int(size)
	}
	for i, v := range h.Params(0) {
		if want := theta[i] - lr*grads[0].Grad[i]; math.Abs(v-want) > 1e-12 {
			t.Fatalf("θ[%d] = %v after the step, want %v: the step must start from θ", i, v, want)
		}
	}
}

// TestTraceGolden documents the algorithm as the ops it sends: two
// members, plain RWP and m-RWP.
func TestTraceGolden(t *testing.T) {
	optimtest.TestTraces(t, *update,
		optimtest.TraceCase{Golden: "testdata/trace.golden", New: New, Members: 2, Steps: 1},
		optimtest.TraceCase{Golden: "testdata/trace_mix.golden", New: New, Members: 1, Steps: 1, Params: map[string]any{"mix": 0.5}})
}
