package variants_test

import (
	"context"
	"flag"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/optlab/optlab/internal/torchtwin"
	"github.com/optlab/optlab/plugins/sam"
	"github.com/optlab/optlab/plugins/sam/variants"
	"github.com/optlab/optlab/plugins/sgd"
	"github.com/optlab/optlab/sdk/optim"
	"github.com/optlab/optlab/sdk/optimtest"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden")

// all lists the variants by name.
var all = []struct {
	name string
	new  func() optim.Optimizer
}{
	{"looksam", variants.NewLookSAM},
	{"aesam", variants.NewAESAM},
	{"fsam", variants.NewFSAM},
	{"wsam", variants.NewWSAM},
	{"gsam", variants.NewGSAM},
}

func mlp() *optimtest.MLP {
	return optimtest.NewMLP(optimtest.MLPConfig{Hidden: 6, Samples: 64, Seed: 2})
}

// schedule is a cosine decay from 0.1 to 0.01 over total steps.
func schedule(total int) optimtest.RunOption {
	return optimtest.WithSchedule(func(s int64, _ int) float64 {
		return 0.01 + 0.09*(1+math.Cos(math.Pi*float64(s)/float64(total)))/2
	})
}

// refInput is what testdata/samref.py reads.
type refInput struct {
	Tensors    []torchtwin.Tensor `json:"tensors"`
	Theta0     []float64          `json:"theta0"`
	X          [][]float64        `json:"x"`
	Y          []int              `json:"y"`
	Batches    [][]int            `json:"batches"`
	LRs        []float64          `json:"lrs"`
	TotalSteps int                `json:"total_steps"`
	Base       map[string]any     `json:"base"`
	HParams    map[string]any     `json:"hparams"`
}

// TestReferences runs every variant on optimtest's exact float64 host (the
// MLP, SGD with momentum and weight decay, a cosine schedule) and its
// float64 PyTorch reference (testdata/<name>_reference.py, written from the
// official code or the paper) on the same θ0, data, batches and rates:
// every step's parameters agree to 1e-10 relative, and the steps that took
// a second gradient are the same.
func TestReferences(t *testing.T) {
	torchtwin.Script(t) // skips without Debian's python3-torch
	const steps = 12
	cases := []struct {
		name, script string
		new          func() optim.Optimizer
		params       map[string]any
	}{
		{"looksam k=3", "looksam", variants.NewLookSAM, map[string]any{"k": int64(3), "rho": 0.1}},
		{"aesam", "aesam", variants.NewAESAM, map[string]any{"rho": 0.1}},
		{"aesam δ=0.5 c 0→0", "aesam", variants.NewAESAM, map[string]any{"delta": 0.5, "c_start": 0.0, "c_end": 0.0}},
		{"fsam", "fsam", variants.NewFSAM, map[string]any{"rho": 0.1, "lambda": 0.6}},
		{"wsam decoupled", "wsam", variants.NewWSAM, map[string]any{"rho": 0.1}},
		{"wsam coupled clipped", "wsam", variants.NewWSAM, map[string]any{"rho": 0.1, "gamma": 0.8, "decouple": false, "max_norm": 0.3}},
		{"gsam", "gsam", variants.NewGSAM, map[string]any{"alpha": 0.3}},
		{"gsam ρ schedule", "gsam", variants.NewGSAM, map[string]any{"rho": 0.2, "rho_min": 0.02, "lr_max": 0.1, "lr_min": 0.01, "alpha": 0.3}},
	}
	base := optimtest.BaseOptimizer{Momentum: 0.9, WeightDecay: 5e-4}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := mlp()
			h := optimtest.MustHost(t, p, optimtest.WithBatchSize(16), optimtest.WithBase(base))
			theta0 := h.Params(0)
			var got [][]float64
			var lrs []float64
			harness := optimtest.NewHarness(c.new(), h, schedule(steps), optimtest.WithHParams(c.params),
				optimtest.WithAfterStep(func(in optim.StepInput, _ optim.StepOutput) error {
					got, lrs = append(got, h.Params(0)), append(lrs, in.LR)
					return nil
				}))
			ctx := context.Background()
			if err := harness.Configure(ctx, steps); err != nil {
				t.Fatal(err)
			}
			if _, err := harness.Run(ctx, steps); err != nil {
				t.Fatal(err)
			}
			batches, sam := make([][]int, steps), make([]bool, steps)
			for _, r := range h.Grads() {
				if batches[r.Step] == nil {
					batches[r.Step] = r.Samples
				} else {
					sam[r.Step] = true
				}
			}
			in := refInput{Theta0: theta0, Batches: batches, LRs: lrs, TotalSteps: steps, HParams: harness.Config().Params,
				Base: map[string]any{"momentum": base.Momentum, "dampening": base.Dampening, "nesterov": base.Nesterov, "weight_decay": base.WeightDecay}}
			in.X, in.Y = p.TrainSet()
			for _, ts := range p.Tensors() {
				in.Tensors = append(in.Tensors, torchtwin.Tensor{Name: ts.Name, Shape: ts.Shape})
			}
			var out struct {
				Thetas   [][]float64 `json:"thetas"`
				SAMSteps []bool      `json:"sam_steps"`
			}
			torchtwin.Call(t, filepath.Join("testdata", c.script+"_reference.py"), in, &out)
			if len(out.Thetas) != steps || !slices.Equal(out.SAMSteps, sam) {
				t.Fatalf("reference: %d steps, SAM steps %v; plugin's %v", len(out.Thetas), out.SAMSteps, sam)
			}
			worst := 0.0
			for k := range steps {
				e := torchtwin.RelErr(got[k], out.Thetas[k])
				worst = max(worst, e)
				if e > 1e-10 {
					t.Errorf("step %d: relative difference %.3g from the reference", k, e)
				}
			}
			t.Logf("%d steps (SAM steps %v): max relative difference %.3g; θ moved %.3g", steps, sam, worst, torchtwin.RelErr(h.Params(0), theta0))
		})
	}
}

// TestOneExecPerStep: every variant sends one program per step, reads
// nothing back, freezes BatchNorm in its second passes and steps every
// member once.
func TestOneExecPerStep(t *testing.T) {
	for _, v := range all {
		t.Run(v.name, func(t *testing.T) {
			h := optimtest.MustHost(t, mlp(), optimtest.WithMembers(3), optimtest.WithBatchSize(16))
			const steps = 6
			optimtest.MustRun(t, v.new(), h, steps, optimtest.WithLR(0.1))
			for s := range int64(steps) {
				if n, r := h.ExecCount(s), h.ReadCount(s); n != 1 || r != 0 {
					t.Errorf("step %d: %d Execs and %d reads, want 1 and 0", s, n, r)
				}
			}
			for m := range 3 {
				if st := h.Stats(m); st.BNUpdate != steps || st.BaseSteps != steps || st.BNFreeze > steps {
					t.Errorf("member %d: %+v", m, st)
				}
			}
		})
	}
}

// samples counts the training samples of every gradient pass the host ran.
func samples(h *optimtest.Host) int {
	n := 0
	for _, r := range h.Grads() {
		n += len(r.Samples)
	}
	return n
}

// TestGradientCounts: the host counts the gradient passes a variant
// sends, in samples. Over 10 steps LookSAM with k = 5 costs (1 + 1/5)×
// SGD's; AE-SAM costs SGD's plus a batch per SAM step (δ = 0.5 and c = 0
// here, for steps of both kinds);
// the others 2×.
func TestGradientCounts(t *testing.T) {
	const steps, batch = 10, 16
	run := func(o optim.Optimizer, params map[string]any) int {
		h := optimtest.MustHost(t, mlp(), optimtest.WithBatchSize(batch))
		optimtest.MustRun(t, o, h, steps, optimtest.WithLR(0.1), optimtest.WithHParams(params))
		return samples(h)
	}
	base := run(sgd.New(), nil)
	if base != steps*batch {
		t.Fatalf("SGD: %d samples in %d steps of %d", base, steps, batch)
	}
	if got := run(variants.NewLookSAM(), map[string]any{"k": int64(5)}); got*5 != base*6 {
		t.Errorf("LookSAM k=5: %d samples, want 1.2 × SGD's %d", got, base)
	}
	h := optimtest.MustHost(t, mlp(), optimtest.WithBatchSize(batch))
	optimtest.MustRun(t, variants.NewAESAM(), h, steps, optimtest.WithLR(0.1),
		optimtest.WithHParams(map[string]any{"delta": 0.5, "c_start": 0.0, "c_end": 0.0}))
	second := h.Stats(0).BNFreeze // the SAM steps' second passes
	if got := samples(h); got != base+second*batch || second == 0 || second == steps {
		t.Errorf("AE-SAM: %d samples with %d SAM steps of %d, want SGD's %d plus a batch per SAM step, some steps of each kind", got, second, steps, base)
	}
	t.Logf("AE-SAM: SAM on %d of %d steps (%.2f× SGD's gradient samples)", second, steps, float64(samples(h))/float64(base))
	for _, v := range all[2:] {
		if got := run(v.new(), nil); got != 2*base {
			t.Errorf("%s: %d samples, want 2 × SGD's %d", v.name, got, base)
		}
	}
}

// TestResume: a run interrupted and resumed from the saved state (the
// persistent vectors and the count of steps) ends bitwise where the
// uninterrupted run ends, the cut falling between LookSAM's SAM steps and
// after F-SAM's first.
func TestResume(t *testing.T) {
	for _, v := range all {
		t.Run(v.name, func(t *testing.T) {
			newHost := func(opts ...optimtest.HostOption) *optimtest.Host {
				return optimtest.MustHost(t, mlp(), append([]optimtest.HostOption{optimtest.WithBatchSize(16)}, opts...)...)
			}
			optimtest.MustResume(t, v.new, newHost, 9, 4, schedule(9), optimtest.WithHParams(map[string]any{"rho": 0.1}))
		})
	}
}

// GSAM with α = 0 is SAM bitwise (two members, momentum), and with α > 0
// it is not.
func TestGSAMAtZeroIsSAM(t *testing.T) {
	newHost := func() *optimtest.Host {
		return optimtest.MustHost(t, mlp(), optimtest.WithMembers(2), optimtest.WithBatchSize(16),
			optimtest.WithBase(optimtest.BaseOptimizer{Momentum: 0.9}))
	}
	const steps = 8
	ref := newHost()
	optimtest.MustRun(t, sam.New(), ref, steps, optimtest.WithLR(0.1), optimtest.WithHParams(map[string]any{"rho": 0.05}))
	for _, alpha := range []float64{0, 0.5} {
		h := newHost()
		optimtest.MustRun(t, variants.NewGSAM(), h, steps, optimtest.WithLR(0.1),
			optimtest.WithHParams(map[string]any{"rho": 0.05, "alpha": alpha}))
		for m := range 2 {
			if same := slices.Equal(h.Params(m), ref.Params(m)); same != (alpha == 0) {
				t.Errorf("α = %v, member %d: equal to SAM %v", alpha, m, same)
			}
		}
	}
}

// LookSAM with k = 1 is SAM bitwise: every step is a SAM step.
func TestLookSAMEveryStepIsSAM(t *testing.T) {
	a, b := optimtest.MustHost(t, mlp(), optimtest.WithBatchSize(16)), optimtest.MustHost(t, mlp(), optimtest.WithBatchSize(16))
	optimtest.MustRun(t, variants.NewLookSAM(), a, 5, optimtest.WithLR(0.1), optimtest.WithHParams(map[string]any{"k": int64(1)}))
	optimtest.MustRun(t, sam.New(), b, 5, optimtest.WithLR(0.1))
	if !slices.Equal(a.Params(0), b.Params(0)) {
		t.Error("LookSAM(k=1) differs from SAM")
	}
}

func TestConfigErrors(t *testing.T) {
	tests := []struct {
		new    func() optim.Optimizer
		params map[string]any
		want   string
	}{
		{variants.NewLookSAM, map[string]any{"k": int64(0)}, `"k": 0 is out of range`},
		{variants.NewAESAM, map[string]any{"delta": 1.0}, `"delta": 1 is out of range`},
		{variants.NewFSAM, map[string]any{"lambda": 1.5}, `"lambda": 1.5 is out of range`},
		{variants.NewWSAM, map[string]any{"gamma": 1.0}, `"gamma": 1 is out of range`},
		{variants.NewGSAM, map[string]any{"rho_min": 0.01}, "set lr_max too"},
		{variants.NewGSAM, map[string]any{"lr_max": 0.1, "lr_min": 0.1}, "lr_max must exceed lr_min"},
		{variants.NewGSAM, map[string]any{"lr_max": 0.1, "rho_min": 0.1}, "rho_min must not exceed rho"},
	}
	for _, tt := range tests {
		h := optimtest.MustHost(t, mlp())
		_, err := optimtest.Run(context.Background(), tt.new(), h, 1, optimtest.WithHParams(tt.params))
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s %v: err = %v, want containing %q", tt.new().Info().Name, tt.params, err, tt.want)
		}
	}
}

// TestTraceGolden pins the ops of Configure and two steps of every
// variant (two members): LookSAM's SAM step then a reusing step (k = 5),
// AE-SAM's If block, F-SAM's first and later perturbations.
func TestTraceGolden(t *testing.T) {
	var cases []optimtest.TraceCase
	for _, v := range all {
		cases = append(cases, optimtest.TraceCase{Golden: "testdata/trace_" + v.name + ".golden", New: v.new, Members: 2})
	}
	cases = append(cases, optimtest.TraceCase{Golden: "testdata/trace_wsam_coupled.golden", New: variants.NewWSAM,
		Params: map[string]any{"decouple": false, "max_norm": 1.0}})
	optimtest.TestTraces(t, *update, cases...)
}
