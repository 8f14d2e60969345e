package sgvb_test

import (
	"context"
	"flag"
	"math"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/optlab/optlab/plugins/otmdr"
	"github.com/optlab/optlab/plugins/sgd"
	"github.com/optlab/optlab/plugins/sgvb"
	"github.com/optlab/optlab/sdk/optim"
	"github.com/optlab/optlab/sdk/optimtest"
)

func hp(params map[string]any) optimtest.RunOption { return optimtest.WithHParams(params) }

func mlp() optimtest.Problem {
	return optimtest.NewMLP(optimtest.MLPConfig{Hidden: 6, Samples: 64, Seed: 2})
}

// vari makes member 0 variational with prior σ 0.1 and the given ρ and β.
func vari(rho, beta float64) optimtest.HostOption {
	return optimtest.WithVariational(0, []float64{rho}, 0.1, beta, "qp")
}

// passes returns the gradient records of a step.
func passes(h *optimtest.Host, step int64) []optimtest.GradRecord {
	var out []optimtest.GradRecord
	for _, r := range h.Grads() {
		if r.Step == step {
			out = append(out, r)
		}
	}
	return out
}

func maxDiff(a, b []float64) float64 {
	var d float64
	for i := range a {
		d = max(d, math.Abs(a[i]-b[i]))
	}
	return d
}

func norm(x []float64) float64 {
	var s float64
	for _, v := range x {
		s += v * v
	}
	return math.Sqrt(s)
}

func TestInfo(t *testing.T) {
	tests := []struct {
		opt  optim.Optimizer
		name string
		want map[string]any
	}{
		{sgvb.New(), "sgvb", map[string]any{"mc_samples": int64(30), "rho_weight_decay": 0.0}},
		{sgvb.NewOTMDR(), "otmdr-sgvb", map[string]any{
			"mode": "paper", "rho1": 0.005, "rho2": -1.0, "noise_std": -1.0, "particles": int64(1),
			"particle_reduction": "", "merge_grad": false, "merge_mean": false, "split": "", "bn": "",
			"kappa": "", "norm": "", "rho_grad": "", "rho_weight_decay": -1.0, "mc_samples": int64(30),
		}},
	}
	for _, tt := range tests {
		info := tt.opt.Info()
		if info.Name != tt.name || len(info.Params) != len(tt.want) ||
			info.Features != (optim.Features{Predictive: true, State: true}) {
			t.Fatalf("info %+v", info)
		}
		for _, p := range info.Params {
			if tt.want[p.Name] != p.Default || p.Doc == "" {
				t.Errorf("%s: param %+v, want default %v and a doc", tt.name, p, tt.want[p.Name])
			}
		}
	}
}

// otmdr-sgvb's schema starts with OT-MDR's step hyperparameters, embedded
// (same names, types and constraints), documented for the BNN.
func TestOTMDRSpecs(t *testing.T) {
	var step []optim.ParamSpec
	for _, p := range otmdr.New().Info().Params {
		if p.Name != "joint" {
			step = append(step, p)
		}
	}
	got := sgvb.NewOTMDR().Info().Params
	for i, want := range step {
		p := got[i]
		if p.Name != want.Name || p.Type != want.Type || !slices.Equal(p.Enum, want.Enum) || p.Range != want.Range {
			t.Errorf("param %d: %+v, want otmdr's %+v", i, p, want)
		}
		if p.Name == "noise_std" && !strings.Contains(p.Doc, "-1: 0.01") {
			t.Errorf("noise_std doc %q is not otmdr-sgvb's", p.Doc)
		}
	}
}

func TestParseConfig(t *testing.T) {
	tests := []struct {
		params  map[string]any
		want    sgvb.Config
		wantErr string
	}{
		{nil, sgvb.Config{MCSamples: 30}, ""},
		{map[string]any{"mc_samples": 8, "rho_weight_decay": 5e-4}, sgvb.Config{MCSamples: 8, RhoWeightDecay: 5e-4}, ""},
		{map[string]any{"mc_samples": 0}, sgvb.Config{}, `"mc_samples": 0 is out of range [1,): want ≥ 1`},
		{map[string]any{"rho_weight_decay": -1}, sgvb.Config{}, `"rho_weight_decay": -1 is out of range [0,): want ≥ 0`},
		{map[string]any{"rho1": 0.1}, sgvb.Config{}, "unknown hyperparameter"},
	}
	for _, tt := range tests {
		got, err := sgvb.ParseConfig(tt.params)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("%v: err = %v, want one containing %q", tt.params, err, tt.wantErr)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("%v: got %+v, %v; want %+v", tt.params, got, err, tt.want)
		}
	}
}

func TestParseOTMDRConfig(t *testing.T) {
	paper := sgvb.OTMDRConfig{StepConfig: otmdr.StepConfig{Mode: "paper", Rho1: 0.005, Rho2: 0.01, NoiseStd: 0.01, Particles: 1,
		ParticleReduction: "mean", Split: "random", BN: "first"}, Kappa: "once", Norm: "mu", RhoGrad: "full", MCSamples: 30}
	ref := sgvb.OTMDRConfig{StepConfig: otmdr.StepConfig{Mode: "reference", Rho1: 0.005, Rho2: 0.01, NoiseStd: 0.01, Particles: 1,
		ParticleReduction: "sum", MergeGrad: true, Split: "loader", BN: "first"}, Kappa: "twice", Norm: "all",
		RhoGrad: "perturbed", RhoWeightDecay: 5e-4, MCSamples: 30}
	with := func(c sgvb.OTMDRConfig, f func(*sgvb.OTMDRConfig)) sgvb.OTMDRConfig { f(&c); return c }
	tests := []struct {
		name    string
		params  map[string]any
		want    sgvb.OTMDRConfig
		wantErr string
	}{
		{"paper", nil, paper, ""},
		{"reference", map[string]any{"mode": "reference"}, ref, ""},
		{"reference K=2", map[string]any{"mode": "reference", "particles": 2},
			with(ref, func(c *sgvb.OTMDRConfig) { c.Particles, c.Split = 2, "random" }), ""},
		{"paper with reference options", map[string]any{"kappa": "twice", "norm": "all", "rho_grad": "perturbed", "bn": "halves", "rho1": 0.01},
			with(paper, func(c *sgvb.OTMDRConfig) {
				c.Kappa, c.Norm, c.RhoGrad, c.BN, c.Rho1, c.Rho2 = "twice", "all", "perturbed", "halves", 0.01, 0.02
			}), ""},
		{"reference, no noise, first", map[string]any{"mode": "reference", "noise_std": 0, "rho_grad": "first", "rho_weight_decay": 0},
			with(ref, func(c *sgvb.OTMDRConfig) { c.NoiseStd, c.RhoGrad, c.RhoWeightDecay = 0, "first", 0 }), ""},
		{"mode", map[string]any{"mode": "bnn"}, sgvb.OTMDRConfig{}, `"mode": "bnn" is not one of "paper", "reference"`},
		{"kappa", map[string]any{"kappa": "thrice"}, sgvb.OTMDRConfig{}, `kappa "thrice"`},
		{"norm", map[string]any{"norm": "rho"}, sgvb.OTMDRConfig{}, `norm "rho"`},
		{"rho_grad", map[string]any{"rho_grad": "second"}, sgvb.OTMDRConfig{}, `rho_grad "second"`},
		{"rho_weight_decay", map[string]any{"rho_weight_decay": -2}, sgvb.OTMDRConfig{}, "rho_weight_decay -2"},
		{"mc_samples", map[string]any{"mc_samples": 0}, sgvb.OTMDRConfig{}, `"mc_samples": 0 is out of range [1,): want ≥ 1`},
		{"otmdr's checks", map[string]any{"particles": 0}, sgvb.OTMDRConfig{}, `"particles": 0 is out of range [1,): want ≥ 1`},
		{"otmdr's bn", map[string]any{"bn": "none"}, sgvb.OTMDRConfig{}, `bn "none"`},
		{"no joint", map[string]any{"joint": true}, sgvb.OTMDRConfig{}, "unknown hyperparameter"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := sgvb.ParseOTMDRConfig(tt.params)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Errorf("got %+v, %v\nwant %+v", got, err, tt.want)
			}
		})
	}
}

// otmdr-sgvb's Resolved reports what the mode decided in Configure: its
// own -1 and "" values and OT-MDR's, nothing when every value was given.
func TestOTMDRResolved(t *testing.T) {
	tests := []struct {
		name   string
		params map[string]any
		want   map[string]any
	}{
		{"paper", nil, map[string]any{"rho2": 0.01, "noise_std": 0.01, "rho_weight_decay": 0.0, "kappa": "once", "norm": "mu",
			"rho_grad": "full", "bn": "first", "particle_reduction": "mean", "split": "random"}},
		{"reference", map[string]any{"mode": "reference", "rho2": 0.02, "noise_std": 0, "kappa": "once", "norm": "mu",
			"rho_grad": "full", "bn": "halves", "particle_reduction": "mean", "split": "random"},
			map[string]any{"rho_weight_decay": 5e-4, "merge_grad": true}},
		{"all given", map[string]any{"rho2": 0.02, "noise_std": 0, "rho_weight_decay": 0, "kappa": "once", "norm": "mu",
			"rho_grad": "full", "bn": "halves", "particle_reduction": "mean", "split": "random"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			opt := sgvb.NewOTMDR()
			h := optimtest.MustHost(t, mlp(), vari(-5, 0))
			if err := optimtest.NewHarness(opt, h, hp(tt.params)).Configure(context.Background(), 1); err != nil {
				t.Fatal(err)
			}
			if got := opt.Resolved(); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Resolved = %#v, want %#v", got, tt.want)
			}
		})
	}
}

// Both optimizers train one variational member and say so otherwise.
func TestRequiresVariational(t *testing.T) {
	for _, newOpt := range []func() optim.Optimizer{sgvb.New, sgvb.NewOTMDR} {
		tests := []struct {
			name string
			opts []optimtest.HostOption
			want string
		}{
			{"deterministic", nil, "not variational: set model.variational = true"},
			{"two members", []optimtest.HostOption{optimtest.WithMembers(2), vari(-5, 0),
				optimtest.WithVariational(1, nil, 0.1, 0, "")}, "got 2 members"},
		}
		for _, tt := range tests {
			opt := newOpt()
			_, err := optimtest.Run(context.Background(), opt, optimtest.MustHost(t, mlp(), tt.opts...), 1)
			if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), opt.Info().Name+":") {
				t.Errorf("%s, %s: err = %v, want one containing %q", opt.Info().Name, tt.name, err, tt.want)
			}
		}
		if _, err := newOpt().Step(context.Background(), optim.StepInput{}); err == nil {
			t.Error("step before configure accepted")
		}
	}
}

// With σ → 0 (ρ = −30) and β = 0, SGVB, and OT-MDR-SGVB with ρ₁ = ρ₂ = 0
// and no noise, step like deterministic SGD within 1e-12, in every
// variant, for SGD with momentum and weight decay and for Adam.
func TestSmallSigmaIsSGD(t *testing.T) {
	zero := map[string]any{"rho1": 0, "rho2": 0, "noise_std": 0}
	plus := func(extra map[string]any) map[string]any {
		m := map[string]any{}
		for k, v := range zero {
			m[k] = v
		}
		for k, v := range extra {
			m[k] = v
		}
		return m
	}
	opts := []struct {
		name   string
		opt    func() optim.Optimizer
		params map[string]any
	}{
		{"sgvb", sgvb.New, nil},
		{"sgvb, ρ weight decay", sgvb.New, map[string]any{"rho_weight_decay": 0.1}},
		{"otmdr-sgvb paper", sgvb.NewOTMDR, zero},
		{"otmdr-sgvb rho_grad first", sgvb.NewOTMDR, plus(map[string]any{"rho_grad": "first"})},
		{"otmdr-sgvb rho_grad perturbed K=2", sgvb.NewOTMDR, plus(map[string]any{"rho_grad": "perturbed", "particles": 2})},
		{"otmdr-sgvb kappa twice, norm all", sgvb.NewOTMDR, plus(map[string]any{"kappa": "twice", "norm": "all"})},
		{"otmdr-sgvb reference", sgvb.NewOTMDR, plus(map[string]any{"mode": "reference"})},
	}
	bases := []optimtest.BaseOptimizer{
		{Momentum: 0.9, WeightDecay: 5e-4},
		{Adam: true, WeightDecay: 1e-4},
	}
	const steps = 5
	sched := optimtest.WithSchedule(func(s int64, _ int) float64 { return 0.05 / float64(1+s) })
	for _, o := range opts {
		for _, b := range bases {
			hv := optimtest.MustHost(t, mlp(), optimtest.WithBatchSize(16), optimtest.WithBase(b), vari(-30, 0))
			hd := optimtest.MustHost(t, mlp(), optimtest.WithBatchSize(16), optimtest.WithBase(b))
			optimtest.MustRun(t, o.opt(), hv, steps, sched, hp(o.params))
			optimtest.MustRun(t, sgd.New(), hd, steps, sched)
			if d := maxDiff(hv.Params(0), hd.Params(0)); d > 1e-12 || math.IsNaN(d) {
				t.Errorf("%s, %+v: μ differs from SGD's θ by %g", o.name, b, d)
			}
			if st := hv.Stats(0); st.BaseSteps != steps || st.RhoSteps != steps {
				t.Errorf("%s: stats %+v", o.name, st)
			}
		}
	}
}

// Exec calls per step (1, as every built-in method, with no read) and in
// Configure (1 and 2), gradient passes per step and vectors.
func TestExecCountsAndVectors(t *testing.T) {
	tests := []struct {
		name           string
		opt            func() optim.Optimizer
		params         map[string]any
		execs, configs int
		passes         int // Grad ops per step
		vectors        int
	}{
		{"sgvb", sgvb.New, nil, 1, 1, 1, 3},
		{"otmdr-sgvb", sgvb.NewOTMDR, nil, 1, 2, 4, 2 + 2},                                           // pert, g¹; gρ, κ
		{"otmdr-sgvb first", sgvb.NewOTMDR, map[string]any{"rho_grad": "first"}, 1, 2, 3, 2 + 2},     // no extra pass
		{"otmdr-sgvb K=3", sgvb.NewOTMDR, map[string]any{"particles": 3}, 1, 2, 10, 3 + 2},           // + accumulator
		{"otmdr-sgvb reference", sgvb.NewOTMDR, map[string]any{"mode": "reference"}, 1, 2, 3, 3 + 4}, // + g²; gρ, scratch, κ¹, κ²
		{"otmdr-sgvb reference K=2", sgvb.NewOTMDR, map[string]any{"mode": "reference", "particles": 2}, 1, 2, 6, 4 + 8},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := optimtest.MustHost(t, mlp(), vari(-5, 1))
			const steps = 3
			optimtest.MustRun(t, tt.opt(), h, steps, optimtest.WithLR(0.01), hp(tt.params))
			for s := range int64(steps) {
				if n := h.ExecCount(s); n != tt.execs {
					t.Errorf("step %d: %d Exec calls, want %d", s, n, tt.execs)
				}
				if n := h.ReadCount(s); n != 0 {
					t.Errorf("step %d: %d values read back, want 0", s, n)
				}
				if n := len(passes(h, s)); n != tt.passes {
					t.Errorf("step %d: %d passes, want %d", s, n, tt.passes)
				}
			}
			if n := h.ExecCount(-1); n != tt.configs {
				t.Errorf("configure: %d Exec calls, want %d", n, tt.configs)
			}
			if n := len(h.Handles()); n != tt.vectors {
				t.Errorf("%d vectors (%v), want %d", n, h.Handles(), tt.vectors)
			}
		})
	}
}

// One SGVB step: a fresh κ per step from the run seed, one full-batch pass
// at μ + σ⊙κ (BatchNorm updated), μ −= lr·gμ and ρ −= lr·(gρ + c·ρ) with
// plain SGD.
func TestSGVBStep(t *testing.T) {
	const lr, wd = 0.1, 0.01
	h := optimtest.MustHost(t, mlp(), optimtest.WithBatchSize(16), vari(-3, 1))
	mu0, rho0 := h.Params(0), h.Rho(0)
	outs := optimtest.MustRun(t, sgvb.New(), h, 2, optimtest.WithLR(lr), hp(map[string]any{"rho_weight_decay": wd}))
	r := passes(h, 0)[0]
	if !slices.Equal(r.At, mu0) || !slices.Equal(r.Rho, rho0) || len(r.Samples) != 16 || r.BN != optim.BNUpdate {
		t.Fatalf("pass %+v", r)
	}
	for i, w := range r.Weights {
		if want := mu0[i] + optimtest.Softplus(rho0[i])*r.Eps[i]; w != want {
			t.Fatalf("W[%d] = %v, want %v", i, w, want)
		}
	}
	if outs[0].Metrics["loss"] != r.Loss || outs[0].Metrics["acc"] != r.Acc {
		t.Errorf("metrics %v, pass %v %v", outs[0].Metrics, r.Loss, r.Acc)
	}
	next := passes(h, 1)[0]
	for i := range mu0 {
		if want := mu0[i] - lr*r.Grad[i]; math.Abs(next.At[i]-want) > 1e-15 {
			t.Fatalf("μ[%d] = %v, want %v", i, next.At[i], want)
		}
		if want := rho0[i] - lr*(r.GradRho[i]+wd*rho0[i]); math.Abs(next.Rho[i]-want) > 1e-15 {
			t.Fatalf("ρ[%d] = %v, want %v", i, next.Rho[i], want)
		}
	}
	if slices.Equal(r.Eps, next.Eps) {
		t.Error("κ repeats across steps")
	}
	// κ comes from the run seed: the same seed draws the same κ, another
	// seed another one.
	for _, seed := range []int64{1, 2} {
		h2 := optimtest.MustHost(t, mlp(), optimtest.WithBatchSize(16), vari(-3, 1))
		optimtest.MustRun(t, sgvb.New(), h2, 1, optimtest.WithLR(lr), optimtest.WithRunSeed(seed))
		if same := slices.Equal(passes(h2, 0)[0].Eps, r.Eps); same != (seed == 1) {
			t.Errorf("run seed %d: same κ as run seed 1: %v", seed, same)
		}
	}
}

// OT-MDR-SGVB holds κ fixed: with kappa = "once" every pass of a step
// (particles included) sees the same κ, and W = μ̃ + σ⊙κ with σ unchanged
// during the step; with "twice" the B¹ pass has its own κ and the B² and
// full passes share another, per particle. κ is fresh every step.
func TestOTMDRKappa(t *testing.T) {
	tests := []struct {
		name   string
		params map[string]any
		// group[i] is the κ group of pass i of the step; equal groups share κ.
		group []int
	}{
		{"once", nil, []int{0, 0, 0, 0}},
		{"once K=2", map[string]any{"particles": 2}, []int{0, 0, 0, 0, 0, 0, 0}},
		{"twice", map[string]any{"kappa": "twice"}, []int{0, 1, 1, 0}},
		{"twice K=2, perturbed", map[string]any{"kappa": "twice", "particles": 2, "rho_grad": "perturbed"}, []int{0, 1, 1, 2, 3, 3}},
		{"reference", map[string]any{"mode": "reference"}, []int{0, 1, 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := optimtest.MustHost(t, mlp(), optimtest.WithBatchSize(16), vari(-2, 1))
			optimtest.MustRun(t, sgvb.NewOTMDR(), h, 2, optimtest.WithLR(0.01), hp(tt.params))
			for s := range int64(2) {
				r := passes(h, s)
				if len(r) != len(tt.group) {
					t.Fatalf("step %d: %d passes, want %d", s, len(r), len(tt.group))
				}
				for i := range r {
					for j := range r {
						if same := slices.Equal(r[i].Eps, r[j].Eps); same != (tt.group[i] == tt.group[j]) {
							t.Errorf("step %d: passes %d and %d share κ: %v", s, i, j, same)
						}
					}
					if !slices.Equal(r[i].Rho, r[0].Rho) {
						t.Errorf("step %d: ρ changed before pass %d", s, i)
					}
					for e, w := range r[i].Weights {
						if want := r[i].At[e] + optimtest.Softplus(r[i].Rho[e])*r[i].Eps[e]; w != want {
							t.Fatalf("step %d pass %d: W[%d] = %v, want μ̃ + σκ = %v", s, i, e, w, want)
						}
					}
				}
			}
			if slices.Equal(passes(h, 0)[0].Eps, passes(h, 1)[0].Eps) {
				t.Error("κ repeats across steps")
			}
		})
	}
}

// On L = cᵀW (β = 0, no noise) the μ-gradient is c everywhere and the
// ρ-gradient c⊙κ⊙sigmoid(ρ): the perturbed means have closed forms, with
// the ascent norms over the μ-gradient (paper) or over both gradients
// (reference: √(‖c‖² + ‖c⊙κ⊙sigmoid(ρ)‖²), with merge_grad).
func TestOTMDRLinearClosedForm(t *testing.T) {
	c := []float64{3, -1, 2, 0.5}
	mu0, rho0 := []float64{0.1, 0.2, -0.3, 0.4}, []float64{-1, -0.5, 0, 0.5}
	const rho1, rho2 = 0.3, 0.5
	tests := []struct {
		name   string
		params map[string]any
		merge  float64 // the second ascent's direction is merge·c
		normMu bool
	}{
		{"paper", map[string]any{"noise_std": 0}, 1, true},
		{"paper, norm all", map[string]any{"noise_std": 0, "norm": "all"}, 1, false},
		{"reference", map[string]any{"mode": "reference", "noise_std": 0}, 2, false},
	}
	sig := make([]float64, len(c))
	for i := range sig {
		sig[i] = 1 / (1 + math.Exp(-rho0[i]))
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			params := map[string]any{"rho1": rho1, "rho2": rho2}
			for k, v := range tt.params {
				params[k] = v
			}
			h := optimtest.MustHost(t, &optimtest.Linear{C: c, X0: mu0}, optimtest.WithVariational(0, rho0, 0.1, 0, ""))
			optimtest.MustRun(t, sgvb.NewOTMDR(), h, 1, optimtest.WithLR(0), hp(params))
			r := passes(h, 0)
			// n is the norm of pass i's ascent.
			n := func(i int) float64 {
				if tt.normMu {
					return norm(c)
				}
				gr := make([]float64, len(c))
				for e := range gr {
					gr[e] = c[e] * r[i].Eps[e] * sig[e]
				}
				if d := maxDiff(gr, r[i].GradRho); d > 1e-15 {
					t.Fatalf("pass %d: gρ = %v, want c⊙κ⊙sigmoid(ρ) = %v", i, r[i].GradRho, gr)
				}
				return math.Hypot(norm(c), norm(gr))
			}
			n1, n2 := n(0), n(1)
			for i := range c {
				w1 := mu0[i] + rho1*c[i]/(n1+1e-12)
				w2 := w1 + rho2*tt.merge*c[i]/(n2+1e-12)
				if math.Abs(r[1].At[i]-w1) > 1e-15 || math.Abs(r[2].At[i]-w2) > 1e-15 {
					t.Fatalf("μ̃¹[%d] = %v, μ̃²[%d] = %v; want %v, %v", i, r[1].At[i], i, r[2].At[i], w1, w2)
				}
			}
			if !slices.Equal(h.Params(0), mu0) || !slices.Equal(h.Rho(0), rho0) {
				t.Error("lr = 0 changed μ or ρ")
			}
		})
	}
}

// ρ's base step uses the ρ-gradient that rho_grad names: the extra
// full-batch pass at the unperturbed means (full; BatchNorm frozen), the
// first B¹ pass (first) or the full passes at the perturbed means
// (perturbed; mean or sum over particles), plus rho_weight_decay·ρ.
func TestOTMDRRhoGradient(t *testing.T) {
	const lr = 0.1
	tests := []struct {
		name   string
		params map[string]any
		from   []int   // passes whose GradRho make up the gradient
		coef   float64 // their coefficient
	}{
		{"full", nil, []int{3}, 1},
		{"full K=2", map[string]any{"particles": 2}, []int{6}, 1},
		{"first", map[string]any{"rho_grad": "first"}, []int{0}, 1},
		{"first K=2", map[string]any{"rho_grad": "first", "particles": 2}, []int{0}, 1},
		{"first, norm all", map[string]any{"rho_grad": "first", "norm": "all"}, []int{0}, 1},
		{"perturbed", map[string]any{"rho_grad": "perturbed"}, []int{2}, 1},
		{"perturbed K=2 mean", map[string]any{"rho_grad": "perturbed", "particles": 2}, []int{2, 5}, 0.5},
		{"reference", map[string]any{"mode": "reference", "rho_weight_decay": 0}, []int{2}, 1},
		{"reference K=2 sum", map[string]any{"mode": "reference", "particles": 2, "rho_weight_decay": 0}, []int{2, 5}, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := optimtest.MustHost(t, mlp(), optimtest.WithBatchSize(16), vari(-2, 1))
			mu0, rho0 := h.Params(0), h.Rho(0)
			outs := optimtest.MustRun(t, sgvb.NewOTMDR(), h, 1, optimtest.WithLR(lr), hp(tt.params))
			r := passes(h, 0)
			g := make([]float64, len(rho0))
			for _, k := range tt.from {
				for i := range g {
					g[i] += tt.coef * r[k].GradRho[i]
				}
			}
			got := h.Rho(0)
			for i := range g {
				if want := rho0[i] - lr*g[i]; math.Abs(got[i]-want) > 1e-15 {
					t.Fatalf("ρ[%d] = %v, want %v", i, got[i], want)
				}
			}
			if tt.name == "full" || tt.name == "full K=2" {
				last := r[len(r)-1]
				if !slices.Equal(last.At, mu0) || !slices.Equal(last.Eps, r[0].Eps) || last.BN != optim.BNFreeze ||
					!slices.Equal(last.Samples, h.Batch()) {
					t.Errorf("extra pass at %v (μ %v), BN %v, samples %v", last.At[:2], mu0[:2], last.BN, last.Samples)
				}
				if outs[0].Metrics["loss_unperturbed"] != last.Loss || outs[0].Metrics["acc_unperturbed"] != last.Acc {
					t.Errorf("metrics %v, extra pass %v %v", outs[0].Metrics, last.Loss, last.Acc)
				}
			} else if _, ok := outs[0].Metrics["loss_unperturbed"]; ok {
				t.Error("loss_unperturbed without the extra pass")
			}
		})
	}
	// Reference mode's ρ weight decay, 5e-4, is coupled L2 on ρ.
	h := optimtest.MustHost(t, mlp(), optimtest.WithBatchSize(16), vari(-2, 1))
	rho0 := h.Rho(0)
	optimtest.MustRun(t, sgvb.NewOTMDR(), h, 1, optimtest.WithLR(lr), hp(map[string]any{"mode": "reference"}))
	g := passes(h, 0)[2].GradRho
	for i, got := range h.Rho(0) {
		if want := rho0[i] - lr*(g[i]+5e-4*rho0[i]); math.Abs(got-want) > 1e-15 {
			t.Fatalf("reference: ρ[%d] = %v, want %v", i, got, want)
		}
	}
}

// BatchNorm passes per step: SGVB one Update; OT-MDR-SGVB per particle
// an Update at θ and two Freezes (bn = "first"), plus the frozen extra
// pass.
func TestBN(t *testing.T) {
	tests := []struct {
		name           string
		opt            func() optim.Optimizer
		params         map[string]any
		update, freeze int
	}{
		{"sgvb", sgvb.New, nil, 1, 0},
		{"otmdr-sgvb", sgvb.NewOTMDR, nil, 1, 3},
		{"otmdr-sgvb K=2 halves", sgvb.NewOTMDR, map[string]any{"particles": 2, "bn": "halves"}, 4, 3},
		{"otmdr-sgvb reference", sgvb.NewOTMDR, map[string]any{"mode": "reference"}, 1, 2},
	}
	for _, tt := range tests {
		h := optimtest.MustHost(t, mlp(), vari(-5, 1))
		optimtest.MustRun(t, tt.opt(), h, 2, optimtest.WithLR(0.01), hp(tt.params))
		if st := h.Stats(0); st.BNUpdate != 2*tt.update || st.BNFreeze != 2*tt.freeze {
			t.Errorf("%s: %+v, want %d updates and %d freezes per step", tt.name, st, tt.update, tt.freeze)
		}
	}
}

// Both predict with the host's variational predictive, and both train
// the MLP: the predictive's test NLL halves and the accuracy passes 80%.
// β = 0.01 tempers the KL: with N = 128 samples and the prior N(0, 0.1²)
// the full-β posterior stays near the prior, which underfits the MLP.
// (The test prints the scores with -v.)
func TestPredictiveAndTraining(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		opt    func() optim.Optimizer
		params map[string]any
	}{
		{sgvb.New, map[string]any{"mc_samples": 10}},
		{sgvb.NewOTMDR, map[string]any{"mc_samples": 10}},
		{sgvb.NewOTMDR, map[string]any{"mc_samples": 10, "mode": "reference"}},
	}
	for _, tt := range tests {
		p := optimtest.NewMLP(optimtest.MLPConfig{Hidden: 8, Samples: 128})
		h := optimtest.MustHost(t, p, optimtest.WithBatchSize(32), optimtest.WithBase(optimtest.BaseOptimizer{Adam: true}), vari(-5, 0.01))
		opt := tt.opt()
		pred0 := optim.Predictive{Kind: optim.Samples, Mean: optim.Params, N: 10}
		before, err := h.Evaluate(ctx, pred0)
		if err != nil {
			t.Fatal(err)
		}
		outs := optimtest.MustRun(t, opt, h, 200, optimtest.WithLR(0.01), hp(tt.params))
		pred, err := opt.Predictive(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if pred.Kind != pred0.Kind || pred.Mean != pred0.Mean || pred.Std != 0 || pred.N != pred0.N || pred.Vecs != nil {
			t.Errorf("predictive %+v, want %+v", pred, pred0)
		}
		after, err := h.Evaluate(ctx, pred)
		if err != nil {
			t.Fatal(err)
		}
		name := opt.Info().Name
		t.Logf("%s %v: test %+v → %+v", name, tt.params, before, after)
		if !(after.NLL < before.NLL/2) || after.Acc < 0.8 || math.IsNaN(outs[199].Metrics["loss"]) {
			t.Errorf("%s %v did not train: test %+v → %+v, last metrics %v", name, tt.params, before, after, outs[199].Metrics)
		}
	}
}

// A run resumed from SaveState draws the same κ, splits and noise as an
// uninterrupted one (bitwise); without LoadState it does not.
func TestResume(t *testing.T) {
	ctx := context.Background()
	for _, newOpt := range []func() optim.Optimizer{sgvb.New, sgvb.NewOTMDR} {
		lr := optimtest.WithLR(0.05)
		straight := optimtest.MustHost(t, mlp(), vari(-3, 1))
		optimtest.MustRun(t, newOpt(), straight, 6, lr)

		first := optimtest.MustHost(t, mlp(), vari(-3, 1))
		opt := newOpt()
		optimtest.MustRun(t, opt, first, 3, lr)
		blob, vecs, err := opt.SaveState(ctx)
		if err != nil || len(vecs) != 0 {
			t.Fatalf("save: %v, vecs %v", err, vecs)
		}
		for _, load := range []bool{true, false} {
			h := optimtest.MustHost(t, mlp(), optimtest.WithParams(0, first.Params(0)),
				optimtest.WithVariational(0, first.Rho(0), 0.1, 1, "qp"))
			resumed := newOpt()
			r := optimtest.NewHarness(resumed, h, lr, optimtest.WithStartStep(3))
			if err := r.Configure(ctx, 6); err != nil {
				t.Fatal(err)
			}
			if load {
				if err := resumed.LoadState(ctx, blob); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := r.Run(ctx, 3); err != nil {
				t.Fatal(err)
			}
			same := slices.Equal(h.Params(0), straight.Params(0)) && slices.Equal(h.Rho(0), straight.Rho(0))
			if same != load {
				t.Errorf("%s: LoadState %v: resumed equals uninterrupted: %v", opt.Info().Name, load, same)
			}
		}
		if err := newOpt().LoadState(ctx, []byte(`{"version":2}`)); err == nil {
			t.Error("loaded a version 2 state")
		}
	}
}

var update = flag.Bool("update", false, "rewrite testdata/*.golden")

// TestTraceGolden pins the ops that Configure and two steps send, for sgvb
// and for otmdr-sgvb in both modes: the golden files document the
// algorithms.
func TestTraceGolden(t *testing.T) {
	variational := []optimtest.HostOption{vari(-3, 1)}
	optimtest.TestTraces(t, *update,
		optimtest.TraceCase{Golden: "testdata/trace.golden", New: sgvb.New, LR: 0.01, Host: variational},
		optimtest.TraceCase{Golden: "testdata/trace_otmdr.golden", New: sgvb.NewOTMDR, LR: 0.01, Host: variational,
			Params: map[string]any{"particles": 2}},
		optimtest.TraceCase{Golden: "testdata/trace_otmdr_reference.golden", New: sgvb.NewOTMDR, LR: 0.01, Host: variational,
			Params: map[string]any{"mode": "reference"}})
}
