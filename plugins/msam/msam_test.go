package msam_test

import (
	"context"
	"flag"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/optlab/optlab/internal/torchtwin"
	"github.com/optlab/optlab/plugins/msam"
	"github.com/optlab/optlab/plugins/sgd"
	"github.com/optlab/optlab/sdk/optim"
	"github.com/optlab/optlab/sdk/optimtest"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden")

func mlp() *optimtest.MLP {
	return optimtest.NewMLP(optimtest.MLPConfig{Hidden: 5, Samples: 64, Seed: 3})
}

// momentum is the base optimizer of the tests: SGD with momentum 0.9 and
// weight decay, as MSAM's official configs (no Nesterov, no dampening).
func momentum(wd float64) optimtest.HostOption {
	return optimtest.WithBase(optimtest.BaseOptimizer{Momentum: 0.9, WeightDecay: wd})
}

// TestTraceGolden pins the ops of Configure and the first steps.
func TestTraceGolden(t *testing.T) {
	optimtest.TestTraces(t, *update, optimtest.TraceCase{Golden: "testdata/trace.golden", New: msam.New,
		Members: 2, Host: []optimtest.HostOption{momentum(0)}})
}

// MSAM against a PyTorch float64 reimplementation of the official
// optimizer/msam.py and main.py's loop (testdata/msam_reference.py) on
// optimtest's MLP and the batches the Go run drew, over 3 epochs of 4
// steps with a cosine rate: θ (unperturbed) after every step to 1e-10.
func TestMatchesPyTorch(t *testing.T) {
	torchtwin.Script(t) // skips without Debian's python3-torch
	const steps = 12
	for _, c := range []struct {
		name     string
		rho, wd  float64
		perEpoch int64
	}{
		{"rho 0.3, weight decay 0.01", 0.3, 0.01, 4},
		{"rho 3, no weight decay", 3, 0, 4},
	} {
		t.Run(c.name, func(t *testing.T) {
			prob := mlp()
			h := optimtest.MustHost(t, prob, optimtest.WithBatchSize(16), momentum(c.wd))
			var lrs []float64
			var thetas [][]float64
			sched := func(step int64, _ int) float64 {
				lr := 0.05 * 0.5 * (1 + math.Cos(math.Pi*float64(step)/steps))
				lrs = append(lrs, lr)
				return lr
			}
			after := func(optim.StepInput, optim.StepOutput) error {
				thetas = append(thetas, slices.Clone(h.Params(0)))
				return nil
			}
			theta0 := slices.Clone(h.Params(0))
			optimtest.MustRun(t, msam.New(), h, steps, optimtest.WithSchedule(sched), optimtest.WithAfterStep(after),
				optimtest.WithHParams(map[string]any{"rho": c.rho}))
			recs := h.Grads()
			if len(recs) != steps {
				t.Fatalf("%d gradients for %d steps", len(recs), steps)
			}
			x, y := prob.TrainSet()
			type step struct {
				X  [][]float64 `json:"x"`
				Y  []int       `json:"y"`
				LR float64     `json:"lr"`
			}
			in := struct {
				Tensors       []torchtwin.Tensor `json:"tensors"`
				Theta0        []float64          `json:"theta0"`
				StepsPerEpoch int64              `json:"steps_per_epoch"`
				Steps         []step             `json:"steps"`
				HParams       map[string]any     `json:"hparams"`
			}{Theta0: theta0, StepsPerEpoch: h.StepsPerEpoch(),
				HParams: map[string]any{"rho": c.rho, "momentum": 0.9, "weight_decay": c.wd}}
			if in.StepsPerEpoch != c.perEpoch {
				t.Fatalf("%d steps per epoch, want %d", in.StepsPerEpoch, c.perEpoch)
			}
			l, _ := h.Layout(context.Background())
			for _, ts := range l.Members[0].Tensors {
				in.Tensors = append(in.Tensors, torchtwin.Tensor{Name: ts.Name, Shape: ts.Shape})
			}
			for k, r := range recs {
				s := step{LR: lrs[k]}
				for _, i := range r.Samples {
					s.X, s.Y = append(s.X, x[i]), append(s.Y, y[i])
				}
				in.Steps = append(in.Steps, s)
			}
			want := torchtwin.Thetas(t, filepath.Join("testdata", "msam_reference.py"), in, steps)
			worst := 0.0
			for k := range steps {
				e := torchtwin.RelErr(thetas[k], want[k])
				worst = max(worst, e)
				if !(e <= 1e-10) {
					t.Errorf("after step %d: θ differs from PyTorch's by %.3g relative", k, e)
				}
			}
			t.Logf("largest relative difference from PyTorch over %d steps: %.2g (θ moved %.2g relative)",
				steps, worst, torchtwin.RelErr(h.Params(0), theta0))
		})
	}
}

// One Exec and no read per step, one gradient per step and member (SGD's
// cost), and every member trains on its own.
func TestOneGradientPerStep(t *testing.T) {
	h := optimtest.MustHost(t, mlp(), optimtest.WithBatchSize(16), optimtest.WithMembers(2), momentum(0))
	optimtest.MustRun(t, msam.New(), h, 4, optimtest.WithLR(0.05))
	for s := range int64(4) {
		if n, r := h.ExecCount(s), h.ReadCount(s); n != 1 || r != 0 {
			t.Errorf("step %d: %d Execs, %d reads; want 1 and 0", s, n, r)
		}
	}
	if n := len(h.Grads()); n != 8 {
		t.Errorf("%d gradient passes in 4 steps of 2 members, want 8", n)
	}
	if st := h.Stats(0); st.BaseSteps != 4 {
		t.Errorf("stats %+v: want 4 base steps", st)
	}
	if slices.Equal(h.Params(0), h.Params(1)) {
		t.Error("two members ended equal")
	}
}

// The first step is SGD's (the buffer is zero: no perturbation), and with
// ρ = 0 every step is: bitwise the sgd plugin's trajectory.
func TestRhoZeroIsSGD(t *testing.T) {
	run := func(o optim.Optimizer, steps int, hp map[string]any) []float64 {
		h := optimtest.MustHost(t, mlp(), optimtest.WithBatchSize(16), momentum(0.01))
		optimtest.MustRun(t, o, h, steps, optimtest.WithLR(0.05), optimtest.WithHParams(hp))
		return h.Params(0)
	}
	if a, b := run(msam.New(), 1, nil), run(sgd.New(), 1, nil); !slices.Equal(a, b) {
		t.Error("first step differs from SGD's")
	}
	if a, b := run(msam.New(), 6, map[string]any{"rho": 0.0}), run(sgd.New(), 6, nil); !slices.Equal(a, b) {
		t.Error("ρ = 0 differs from SGD")
	}
	if a, b := run(msam.New(), 6, nil), run(sgd.New(), 6, nil); slices.Equal(a, b) {
		t.Error("ρ = 0.3 gives SGD's trajectory")
	}
}

// The gradient of step 2 is taken at θ − ρ·v/‖v‖, v the momentum buffer
// after step 1 (the first gradient plus weight decay).
func TestPerturbationAlongMomentum(t *testing.T) {
	const rho, wd, lr = 0.3, 0.01, 0.05
	h := optimtest.MustHost(t, mlp(), optimtest.WithBatchSize(16), momentum(wd))
	theta0 := slices.Clone(h.Params(0))
	var theta1 []float64
	optimtest.MustRun(t, msam.New(), h, 2, optimtest.WithLR(lr), optimtest.WithAfterStep(func(in optim.StepInput, _ optim.StepOutput) error {
		if in.Step == 0 {
			theta1 = slices.Clone(h.Params(0))
		}
		return nil
	}))
	g := h.Grads()
	v := make([]float64, len(theta0))
	var n float64
	for i := range v {
		v[i] = g[0].Grad[i] + wd*theta0[i]
		n += v[i] * v[i]
	}
	c := rho / (math.Sqrt(n) + 1e-12)
	for i := range v {
		if want := theta1[i] - c*v[i]; math.Abs(g[1].At[i]-want) > 1e-12 {
			t.Fatalf("step 2's gradient at [%d] = %v, want θ₁ − ρ·v/‖v‖ = %v", i, g[1].At[i], want)
		}
	}
}

// Without momentum the base optimizer keeps no buffer: the host refuses,
// and says so.
func TestRefusedWithoutMomentum(t *testing.T) {
	h := optimtest.MustHost(t, mlp(), optimtest.WithBatchSize(16))
	_, err := optimtest.Run(context.Background(), msam.New(), h, 1, optimtest.WithLR(0.05))
	if err == nil || !strings.Contains(err.Error(), "momentum 0") {
		t.Errorf("err = %v, want one about momentum 0", err)
	}
}

// MSAM trains the MLP.
func TestTrains(t *testing.T) {
	h := optimtest.MustHost(t, optimtest.NewMLP(optimtest.MLPConfig{Hidden: 8, Samples: 128}), optimtest.WithBatchSize(32), momentum(5e-4))
	outs := optimtest.MustRun(t, msam.New(), h, 100, optimtest.WithLR(0.05))
	first, last := outs[0].Metrics["loss"], outs[len(outs)-1].Metrics["loss"]
	t.Logf("loss %.3f → %.3f", first, last)
	if !(last < 0.6*first) {
		t.Errorf("did not train: loss %.3f → %.3f", first, last)
	}
}
