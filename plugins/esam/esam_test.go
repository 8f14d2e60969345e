package esam_test

import (
	"context"
	"flag"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/optlab/optlab/internal/torchtwin"
	"github.com/optlab/optlab/plugins/esam"
	"github.com/optlab/optlab/plugins/sam"
	"github.com/optlab/optlab/sdk/optim"
	"github.com/optlab/optlab/sdk/optimtest"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden")

func mlp() *optimtest.MLP {
	return optimtest.NewMLP(optimtest.MLPConfig{Hidden: 5, Samples: 64, Seed: 3})
}

// base is train.py's base optimizer: SGD with momentum 0.9 and weight decay.
func base(wd float64) optimtest.HostOption {
	return optimtest.WithBase(optimtest.BaseOptimizer{Momentum: 0.9, WeightDecay: wd})
}

// TestTraceGolden pins the ops of Configure and the first steps: with SWP
// and SDS (run.sh's β = γ = 0.5; the second step draws the tensors), and
// with the defaults (plain SAM with ε = 1e-7).
func TestTraceGolden(t *testing.T) {
	optimtest.TestTraces(t, *update,
		optimtest.TraceCase{Golden: "testdata/trace.golden", New: esam.New, Host: []optimtest.HostOption{base(0)},
			Params: map[string]any{"beta": 0.5, "gamma": 0.5}},
		optimtest.TraceCase{Golden: "testdata/trace_defaults.golden", New: esam.New, Steps: 1, Host: []optimtest.HostOption{base(0)}})
}

// tensorsMoved says, per tensor, whether a and b differ in it.
func tensorsMoved(ts []optim.Tensor, a, b []float64) []int {
	out := make([]int, len(ts))
	for k, t := range ts {
		for i := t.Offset; i < t.Offset+t.Numel(); i++ {
			if a[i] != b[i] {
				out[k] = 1
				break
			}
		}
	}
	return out
}

// ESAM against a PyTorch float64 reimplementation of Esam.py's step with
// train.py's torch.optim.SGD (testdata/esam_reference.py) on optimtest's
// MLP and the batches of the Go run, 12 steps with a cosine rate: θ after
// every step to 1e-10. SWP's random tensor choice is the Go run's (read
// off where the perturbed point differs from θ); the rest is recomputed.
func TestMatchesPyTorch(t *testing.T) {
	torchtwin.Script(t) // skips without Debian's python3-torch
	const steps = 12
	for _, c := range []struct {
		name              string
		rho, beta, gamma  float64
		wd                float64
		passes, forwardOK int
	}{
		{"SWP and SDS as run.sh (β = γ = 0.5)", 0.1, 0.5, 0.5, 0.001, 3, 1},
		{"SDS only, γ = 0.7", 0.05, 1, 0.7, 0, 3, 1},
		{"defaults (SAM, ε = 1e-7)", 0.05, 1, 1, 0.0005, 2, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			prob := mlp()
			h := optimtest.MustHost(t, prob, optimtest.WithBatchSize(16), base(c.wd))
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
			optimtest.MustRun(t, esam.New(), h, steps, optimtest.WithSchedule(sched), optimtest.WithAfterStep(after),
				optimtest.WithHParams(map[string]any{"rho": c.rho, "beta": c.beta, "gamma": c.gamma}))
			recs := h.Grads()
			if len(recs) != c.passes*steps {
				t.Fatalf("%d passes for %d steps, want %d per step", len(recs), steps, c.passes)
			}
			l, _ := h.Layout(context.Background())
			ts := l.Members[0].Tensors
			x, y := prob.TrainSet()
			type step struct {
				X    [][]float64 `json:"x"`
				Y    []int       `json:"y"`
				LR   float64     `json:"lr"`
				Kept []int       `json:"kept"`
			}
			in := struct {
				Tensors []torchtwin.Tensor `json:"tensors"`
				Theta0  []float64          `json:"theta0"`
				Steps   []step             `json:"steps"`
				HParams map[string]any     `json:"hparams"`
			}{Theta0: theta0, HParams: map[string]any{"rho": c.rho, "beta": c.beta, "gamma": c.gamma, "momentum": 0.9, "weight_decay": c.wd}}
			for _, t := range ts {
				in.Tensors = append(in.Tensors, torchtwin.Tensor{Name: t.Name, Shape: t.Shape})
			}
			kept := 0
			for k := range steps {
				first, last := recs[c.passes*k], recs[c.passes*k+c.passes-1]
				if c.forwardOK == 1 && !recs[c.passes*k+1].ForwardOnly {
					t.Fatalf("step %d: the middle pass is not forward-only", k)
				}
				s := step{LR: lrs[k], Kept: tensorsMoved(ts, first.At, last.At)}
				for _, v := range s.Kept {
					kept += v
				}
				for _, i := range first.Samples {
					s.X, s.Y = append(s.X, x[i]), append(s.Y, y[i])
				}
				in.Steps = append(in.Steps, s)
			}
			if c.beta < 1 && (kept == steps*len(ts) || kept == 0) {
				t.Fatalf("SWP kept %d of %d tensors in %d steps", kept, steps*len(ts), steps)
			}
			want := torchtwin.Thetas(t, filepath.Join("testdata", "esam_reference.py"), in, steps)
			worst := 0.0
			for k := range steps {
				e := torchtwin.RelErr(thetas[k], want[k])
				worst = max(worst, e)
				if !(e <= 1e-10) {
					t.Errorf("after step %d: θ differs from PyTorch's by %.3g relative", k, e)
				}
			}
			t.Logf("largest relative difference from PyTorch over %d steps: %.2g (θ moved %.2g relative; %d of %d tensor draws kept)",
				steps, worst, torchtwin.RelErr(h.Params(0), theta0), kept, steps*len(ts))
		})
	}
}

// One Exec and no read per step; with γ the second pass back-propagates
// ⌊B·γ⌋ − 1 samples, those whose loss rose most.
func TestOneExecAndSubset(t *testing.T) {
	h := optimtest.MustHost(t, mlp(), optimtest.WithBatchSize(16), optimtest.WithMembers(2), base(0))
	optimtest.MustRun(t, esam.New(), h, 3, optimtest.WithLR(0.05), optimtest.WithHParams(map[string]any{"beta": 0.5, "gamma": 0.5}))
	for s := range int64(3) {
		if n, r := h.ExecCount(s), h.ReadCount(s); n != 1 || r != 0 {
			t.Errorf("step %d: %d Execs, %d reads; want 1 and 0", s, n, r)
		}
	}
	recs := h.Grads()
	if len(recs) != 3*2*3 {
		t.Fatalf("%d passes, want 18", len(recs))
	}
	for k := 0; k < len(recs); k += 3 {
		before, rise, second := recs[k], recs[k+1], recs[k+2]
		if len(before.Samples) != 16 || !rise.ForwardOnly || len(second.Samples) != 7 {
			t.Fatalf("passes of %d, %d (forward only: %v) and %d samples; want 16, 16 (true) and 7",
				len(before.Samples), len(rise.Samples), rise.ForwardOnly, len(second.Samples))
		}
		// The 7 samples are those of largest rise ℓ_after − ℓ_before.
		type pair struct {
			s    int
			rise float64
		}
		var all []pair
		for i, s := range before.Samples {
			all = append(all, pair{s, rise.Losses[i] - before.Losses[i]})
		}
		slices.SortStableFunc(all, func(a, b pair) int {
			if a.rise > b.rise {
				return -1
			}
			if a.rise < b.rise {
				return 1
			}
			return 0
		})
		for _, p := range all[:7] {
			if !slices.Contains(second.Samples, p.s) {
				t.Fatalf("pass %d: sample %d (rise %v, among the 7 largest) not in the second pass %v", k, p.s, p.rise, second.Samples)
			}
		}
	}
}

// β = 1, γ = 1 is SAM with ε = 1e-7 and the undo by subtraction: close to
// the sam plugin (ε = 1e-12, restore by copy), apart by ε's share.
func TestDefaultsAreSAM(t *testing.T) {
	run := func(o optim.Optimizer) []float64 {
		h := optimtest.MustHost(t, mlp(), optimtest.WithBatchSize(16), base(0.01))
		optimtest.MustRun(t, o, h, 6, optimtest.WithLR(0.05), optimtest.WithHParams(map[string]any{"rho": 0.05}))
		return h.Params(0)
	}
	a, b := run(esam.New()), run(sam.New())
	if e := torchtwin.RelErr(a, b); !(e < 1e-7) {
		t.Errorf("ESAM with β = γ = 1 differs from SAM by %.3g relative", e)
	}
}

// SWP keeps each tensor with probability β: over many draws the kept
// fraction is near β, and the draws follow the host's seed.
func TestSWPFrequency(t *testing.T) {
	kept := func(seed int64) (int, int) {
		h := optimtest.MustHost(t, mlp(), optimtest.WithBatchSize(16), base(0), optimtest.WithSeed(seed))
		optimtest.MustRun(t, esam.New(), h, 101, optimtest.WithLR(0.01), optimtest.WithHParams(map[string]any{"beta": 0.3}))
		l, _ := h.Layout(context.Background())
		recs, n, k := h.Grads(), 0, 0
		for i := 2; i < len(recs); i += 2 { // from step 1 on; two passes a step
			for _, v := range tensorsMoved(l.Members[0].Tensors, recs[i].At, recs[i+1].At) {
				n++
				k += v
			}
		}
		return k, n
	}
	k, n := kept(1)
	if f := float64(k) / float64(n); math.Abs(f-0.3) > 0.07 {
		t.Errorf("kept %d of %d tensors (%.3f), want about 0.3", k, n, f)
	}
	if k2, _ := kept(1); k2 != k {
		t.Errorf("same seed, %d then %d kept", k, k2)
	}
}

// A γ that selects fewer than one sample is refused at Configure.
func TestConfigErrors(t *testing.T) {
	h := optimtest.MustHost(t, mlp(), optimtest.WithBatchSize(16), base(0))
	_, err := optimtest.Run(context.Background(), esam.New(), h, 1, optimtest.WithLR(0.05), optimtest.WithHParams(map[string]any{"gamma": 0.1}))
	if err == nil || !strings.Contains(err.Error(), "selects 0 samples") {
		t.Errorf("err = %v, want one about selecting 0 samples", err)
	}
}

// ESAM trains the MLP.
func TestTrains(t *testing.T) {
	h := optimtest.MustHost(t, optimtest.NewMLP(optimtest.MLPConfig{Hidden: 8, Samples: 128}), optimtest.WithBatchSize(32), base(5e-4))
	outs := optimtest.MustRun(t, esam.New(), h, 100, optimtest.WithLR(0.05), optimtest.WithHParams(map[string]any{"beta": 0.5, "gamma": 0.5}))
	first, last := outs[0].Metrics["loss"], outs[len(outs)-1].Metrics["loss"]
	t.Logf("loss %.3f → %.3f", first, last)
	if !(last < 0.6*first) {
		t.Errorf("did not train: loss %.3f → %.3f", first, last)
	}
}
