package otmdr_test

import (
	"context"
	"flag"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/optlab/optlab/plugins/otmdr"
	"github.com/optlab/optlab/plugins/sam"
	"github.com/optlab/optlab/plugins/sgd"
	"github.com/optlab/optlab/sdk/optim"
	"github.com/optlab/optlab/sdk/optimtest"
)

func hp(params map[string]any) optimtest.RunOption { return optimtest.WithHParams(params) }

func mlp() optimtest.Problem {
	return optimtest.NewMLP(optimtest.MLPConfig{Hidden: 6, Samples: 64, Seed: 2})
}

// passes returns member m's gradient records of a step: per particle k,
// [3k] is g¹ at θ on B¹ₖ, [3k+1] g² at θ¹ on B²ₖ, [3k+2] Gₖ at θ² on B.
func passes(h *optimtest.Host, step int64, m int) []optimtest.GradRecord {
	var out []optimtest.GradRecord
	for _, r := range h.Grads() {
		if r.Step == step && r.Member == m {
			out = append(out, r)
		}
	}
	return out
}

func norm(x []float64) float64 {
	var s float64
	for _, v := range x {
		s += v * v
	}
	return math.Sqrt(s)
}

func sub(a, b []float64) []float64 {
	d := make([]float64, len(a))
	for i := range a {
		d[i] = a[i] - b[i]
	}
	return d
}

func maxDiff(a, b []float64) float64 {
	var d float64
	for i := range a {
		d = max(d, math.Abs(a[i]-b[i]))
	}
	return d
}

func TestInfo(t *testing.T) {
	info := otmdr.New().Info()
	want := map[string]any{
		"mode": "paper", "rho1": 0.05, "rho2": -1.0, "noise_std": -1.0, "particles": int64(1),
		"particle_reduction": "", "merge_grad": false, "merge_mean": false, "split": "", "bn": "halves", "joint": false,
	}
	if info.Name != "otmdr" || len(info.Params) != len(want) || !info.Features.Members {
		t.Fatalf("info %+v", info)
	}
	for _, p := range info.Params {
		if want[p.Name] != p.Default || p.Doc == "" {
			t.Errorf("param %+v, want default %v and a doc", p, want[p.Name])
		}
	}
}

func TestParseConfig(t *testing.T) {
	paper := otmdr.Config{StepConfig: otmdr.StepConfig{Mode: "paper", Rho1: 0.05, Rho2: 0.1, NoiseStd: 0, Particles: 1,
		ParticleReduction: "mean", Split: "random", BN: "halves"}}
	ref := otmdr.Config{StepConfig: otmdr.StepConfig{Mode: "reference", Rho1: 0.05, Rho2: 0.1, NoiseStd: 0, Particles: 1,
		ParticleReduction: "sum", MergeGrad: true, Split: "loader", BN: "halves"}}
	with := func(c otmdr.Config, f func(*otmdr.Config)) otmdr.Config { f(&c); return c }
	tests := []struct {
		name    string
		params  map[string]any
		want    otmdr.Config
		wantErr string
	}{
		{"paper defaults", nil, paper, ""},
		{"reference", map[string]any{"mode": "reference"}, ref, ""},
		{"reference, K=3: random halves", map[string]any{"mode": "reference", "particles": 3},
			with(ref, func(c *otmdr.Config) { c.Particles, c.Split = 3, "random" }), ""},
		{"reference mode 1.1", map[string]any{"mode": "reference", "merge_mean": true, "particle_reduction": "mean"},
			with(ref, func(c *otmdr.Config) { c.MergeMean, c.ParticleReduction = true, "mean" }), ""},
		{"reference with noise", map[string]any{"mode": "reference", "noise_std": 0.02, "bn": "first"},
			with(ref, func(c *otmdr.Config) { c.NoiseStd, c.BN = 0.02, "first" }), ""},
		{"paper mixed with reference options", map[string]any{"merge_grad": true, "particle_reduction": "sum", "split": "loader", "rho1": 0.1, "rho2": 0.3},
			with(paper, func(c *otmdr.Config) {
				c.MergeGrad, c.ParticleReduction, c.Split, c.Rho1, c.Rho2 = true, "sum", "loader", 0.1, 0.3
			}), ""},
		{"rho2 = 2 rho1", map[string]any{"rho1": 0.1}, with(paper, func(c *otmdr.Config) { c.Rho1, c.Rho2 = 0.1, 0.2 }), ""},
		{"noise off", map[string]any{"noise_std": 0}, with(paper, func(c *otmdr.Config) { c.NoiseStd = 0 }), ""},
		{"unknown mode", map[string]any{"mode": "official"}, otmdr.Config{}, `"mode": "official" is not one of "paper", "reference"`},
		{"joint", map[string]any{"joint": true}, with(paper, func(c *otmdr.Config) { c.Joint = true }), ""},
		{"merge_mean alone", map[string]any{"merge_mean": true}, otmdr.Config{}, "needs merge_grad = true"},
		{"no particles", map[string]any{"particles": 0}, otmdr.Config{}, `"particles": 0 is out of range [1,): want ≥ 1`},
		{"negative rho1", map[string]any{"rho1": -0.1}, otmdr.Config{}, `"rho1": -0.1 is out of range [0,): want ≥ 0`},
		{"negative rho2", map[string]any{"rho2": -0.5}, otmdr.Config{}, "rho2 ≥ 0 or -1"},
		{"negative noise", map[string]any{"noise_std": -2}, otmdr.Config{}, "noise_std ≥ 0 or -1"},
		{"reduction", map[string]any{"particle_reduction": "max"}, otmdr.Config{}, `particle_reduction "max"`},
		{"split", map[string]any{"split": "odd-even"}, otmdr.Config{}, `split "odd-even"`},
		{"bn", map[string]any{"bn": "none"}, otmdr.Config{}, `bn "none"`},
		{"unknown name", map[string]any{"rho": 0.1}, otmdr.Config{}, "unknown hyperparameter"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := otmdr.ParseConfig(tt.params)
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

// Resolved reports what the mode decided in Configure (the values that
// trained, for the run's record): rho2 = 2ρ₁ and noise_std = 0 for -1,
// particle_reduction and split for "", merge_grad forced by reference mode;
// nothing when every value was given. NewFrom's optimizer reports its own.
func TestResolved(t *testing.T) {
	tests := []struct {
		name   string
		params map[string]any
		want   map[string]any
	}{
		{"paper defaults", map[string]any{"rho1": 0.1},
			map[string]any{"rho2": 0.2, "noise_std": 0.0, "particle_reduction": "mean", "split": "random"}},
		{"reference", map[string]any{"mode": "reference", "rho2": 0.3},
			map[string]any{"noise_std": 0.0, "particle_reduction": "sum", "split": "loader", "merge_grad": true}},
		{"all given", map[string]any{"rho2": 0.3, "noise_std": 0.01, "particle_reduction": "sum", "split": "loader"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			opt := otmdr.New()
			if err := optimtest.NewHarness(opt, optimtest.MustHost(t, mlp()), hp(tt.params)).Configure(context.Background(), 1); err != nil {
				t.Fatal(err)
			}
			if got := opt.Resolved(); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Resolved = %#v, want %#v", got, tt.want)
			}
		})
	}
	o, err := otmdr.NewFrom(otmdr.DefaultConfig(), otmdr.Hooks{})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"rho2": 0.1, "noise_std": 0.0, "particle_reduction": "mean", "split": "random"}
	if got := o.Resolved(); !reflect.DeepEqual(got, want) {
		t.Errorf("NewFrom: Resolved = %#v, want %#v", got, want)
	}
}

// Configure reports parse errors and a batch that cannot be halved.
func TestConfigureErrors(t *testing.T) {
	_, err := optimtest.Run(context.Background(), otmdr.New(), optimtest.MustHost(t, mlp()), 1, hp(map[string]any{"joint": true}))
	if err == nil || !strings.Contains(err.Error(), "needs at least 2 members") {
		t.Errorf("joint with one member: err = %v", err)
	}
	_, err = optimtest.Run(context.Background(), otmdr.New(), optimtest.MustHost(t, mlp(), optimtest.WithBatchSize(1)), 1)
	if err == nil || !strings.Contains(err.Error(), "cannot be split") {
		t.Errorf("batch of 1: err = %v", err)
	}
}

// §8.7: ρ₁ = ρ₂ = 0, σ = 0 is SGD on the full batch, bitwise, for every
// member and base optimizer; BatchNorm differs: per particle two
// half-batch Update passes and a frozen full pass, against SGD's one
// full-batch Update.
func TestZeroRhoIsSGD(t *testing.T) {
	configs := []map[string]any{
		{"rho1": 0, "rho2": 0, "noise_std": 0},
		{"rho1": 0, "rho2": 0, "noise_std": 0, "particles": 2}, // (G+G)/2 = G exactly
		{"rho1": 0, "rho2": 0, "mode": "reference"},
		{"rho1": 0, "rho2": 0, "mode": "reference", "merge_mean": true},
	}
	bases := []optimtest.BaseOptimizer{
		{Momentum: 0.9, WeightDecay: 5e-4},
		{Momentum: 0.9, WeightDecay: 1e-3, Nesterov: true},
		{Adam: true, WeightDecay: 1e-4},
	}
	const steps = 6
	for _, params := range configs {
		for _, base := range bases {
			opts := []optimtest.HostOption{optimtest.WithMembers(2), optimtest.WithBatchSize(16), optimtest.WithBase(base)}
			ho, hs := optimtest.MustHost(t, mlp(), opts...), optimtest.MustHost(t, mlp(), opts...)
			sched := optimtest.WithSchedule(func(s int64, _ int) float64 { return 0.1 / float64(1+s) })
			optimtest.MustRun(t, otmdr.New(), ho, steps, sched, hp(params))
			optimtest.MustRun(t, sgd.New(), hs, steps, sched)
			k := 1
			if v, ok := params["particles"]; ok {
				k = v.(int)
			}
			for m := range 2 {
				if got, want := ho.Params(m), hs.Params(m); !slices.Equal(got, want) {
					t.Errorf("%v, %+v, member %d: OT-MDR %v ≠ SGD %v", params, base, m, got[:3], want[:3])
				}
				so, ss := ho.Stats(m), hs.Stats(m)
				if so.BNUpdate != 2*k*steps || so.BNFreeze != k*steps || so.BaseSteps != steps ||
					ss.BNUpdate != steps || ss.BNFreeze != 0 {
					t.Errorf("%v member %d: BN passes OT-MDR %+v, SGD %+v", params, m, so, ss)
				}
			}
		}
	}
}

// §8.9: with L = cᵀθ every gradient is c, so θ¹ = θ + ρ₁ĉ and θ² = θ¹ +
// a·ρ₂ĉ with a = 1 (paper, no merge), 2 (merge_grad, mode 1) or 1
// (merge_mean, mode 1.1).
func TestLinearClosedForm(t *testing.T) {
	c, x0 := []float64{3, -1, 2, 0.5}, []float64{0.1, 0.2, -0.3, 0.4}
	const rho1, rho2 = 0.3, 0.5
	tests := []struct {
		name       string
		params     map[string]any
		a1, a2     float64 // θ¹ = θ + a1·ĉ, θ² = θ¹ + a2·ĉ
		wantLRMult float64 // update −lr·wantLRMult·c
	}{
		{"paper", map[string]any{"noise_std": 0}, rho1, rho2, 1},
		{"paper, rho2 = 2 rho1", map[string]any{"noise_std": 0, "rho2": -1}, rho1, 2 * rho1, 1},
		{"paper K=3", map[string]any{"noise_std": 0, "particles": 3}, rho1, rho2, 1},
		{"merge_grad", map[string]any{"noise_std": 0, "merge_grad": true}, rho1, 2 * rho2, 1},
		{"merge_mean", map[string]any{"noise_std": 0, "merge_grad": true, "merge_mean": true}, rho1, rho2, 1},
		{"reference (mode 1)", map[string]any{"mode": "reference"}, rho1, 2 * rho2, 1},
		{"reference, K=2 summed", map[string]any{"mode": "reference", "particles": 2}, rho1, 2 * rho2, 2},
		{"reference mode 1.1", map[string]any{"mode": "reference", "merge_mean": true}, rho1, rho2, 1},
	}
	chat := make([]float64, len(c))
	for i := range c {
		chat[i] = c[i] / norm(c)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			params := map[string]any{"rho1": rho1, "rho2": rho2}
			for k, v := range tt.params {
				params[k] = v
			}
			const lr = 0.1
			h := optimtest.MustHost(t, &optimtest.Linear{C: c, X0: x0})
			optimtest.MustRun(t, otmdr.New(), h, 2, optimtest.WithLR(lr), hp(params))
			for s := range int64(2) {
				recs := passes(h, s, 0)
				theta := recs[0].At
				for k := 0; k < len(recs); k += 3 {
					for i := range theta {
						w1, w2 := theta[i]+tt.a1*chat[i], theta[i]+(tt.a1+tt.a2)*chat[i]
						if math.Abs(recs[k+1].At[i]-w1) > 1e-12 || math.Abs(recs[k+2].At[i]-w2) > 1e-12 {
							t.Fatalf("step %d particle %d: θ¹[%d] = %v, θ²[%d] = %v; want %v, %v",
								s, k/3, i, recs[k+1].At[i], i, recs[k+2].At[i], w1, w2)
						}
					}
				}
				next := h.Params(0)
				if s == 0 {
					next = passes(h, 1, 0)[0].At
				}
				for i := range theta {
					if want := theta[i] - lr*tt.wantLRMult*c[i]; math.Abs(next[i]-want) > 1e-15 {
						t.Errorf("step %d: θ[%d] = %v, want %v", s, i, next[i], want)
					}
				}
			}
		})
	}
}

// §8.10: K identical particles (σ = 0 and the same halves, here a
// batch-free quadratic or loader-order halves) with mean reduction equal
// K = 1; with sum reduction the base step gets K·G, and weight decay is
// not scaled.
func TestIdenticalParticles(t *testing.T) {
	problems := []struct {
		name  string
		prob  func() optimtest.Problem
		split string
	}{
		{"quadratic", func() optimtest.Problem {
			return &optimtest.Quadratic{A: [][]float64{{3, 0.5}, {0.5, 1}}, B: []float64{1, -1}, X0: []float64{1, 2}}
		}, "random"},
		{"mlp, loader halves", mlp, "loader"},
	}
	const lr, wd = 0.1, 0.01
	base := optimtest.WithBase(optimtest.BaseOptimizer{WeightDecay: wd})
	for _, pr := range problems {
		params := func(k int, red string) optimtest.RunOption {
			return hp(map[string]any{"noise_std": 0, "split": pr.split, "particles": k, "particle_reduction": red})
		}
		one := optimtest.MustHost(t, pr.prob(), base)
		optimtest.MustRun(t, otmdr.New(), one, 3, optimtest.WithLR(lr), params(1, "mean"))
		for _, k := range []int{2, 3, 4} {
			h := optimtest.MustHost(t, pr.prob(), base)
			optimtest.MustRun(t, otmdr.New(), h, 3, optimtest.WithLR(lr), params(k, "mean"))
			tol := 1e-14
			if k != 3 { // G+G and 2G+2G are exact, (G+G+G)/3 need not be
				tol = 0
			}
			if d := maxDiff(h.Params(0), one.Params(0)); d > tol {
				t.Errorf("%s: K=%d mean differs from K=1 by %g", pr.name, k, d)
			}

			h = optimtest.MustHost(t, pr.prob(), base)
			optimtest.MustRun(t, otmdr.New(), h, 1, optimtest.WithLR(lr), params(k, "sum"))
			recs := passes(h, 0, 0)
			theta, g := recs[0].At, recs[2].Grad
			for j := 1; j < k; j++ {
				if !slices.Equal(recs[3*j+2].Grad, g) {
					t.Fatalf("%s: particle %d is not identical to particle 0", pr.name, j)
				}
			}
			got := h.Params(0)
			for i := range got {
				want := theta[i] - lr*(float64(k)*g[i]+wd*theta[i])
				if math.Abs(got[i]-want) > 1e-14 {
					t.Fatalf("%s K=%d sum: θ[%d] = %v, want θ − lr(K·G + wd·θ) = %v", pr.name, k, i, got[i], want)
				}
			}
		}
	}
}

// §8.11: with ρ₁ = ρ₂ = 0 the two ascents add ε¹, ε² ~ N(0, σ²I). On
// n = 40000 elements the sample variance has relative standard deviation
// √(2/n) ≈ 0.7%, so a 5% tolerance is 7 standard deviations; the sample
// mean and the correlation of ε¹ and ε² have standard deviation σ/√n and
// 1/√n = 0.005, checked at 5 standard deviations.
func TestNoiseVariance(t *testing.T) {
	const n, sigma = 40000, 0.05
	c := make([]float64, n)
	for i := range c {
		c[i] = float64(i%7) - 3
	}
	h := optimtest.MustHost(t, &optimtest.Linear{C: c})
	optimtest.MustRun(t, otmdr.New(), h, 2, optimtest.WithLR(0.1), hp(map[string]any{"rho1": 0, "rho2": 0, "noise_std": sigma, "particles": 2}))
	recs := passes(h, 0, 0)
	e1, e2 := sub(recs[1].At, recs[0].At), sub(recs[2].At, recs[1].At)
	stats := func(x []float64) (mean, variance float64) {
		for _, v := range x {
			mean += v / n
		}
		for _, v := range x {
			variance += (v - mean) * (v - mean) / (n - 1)
		}
		return mean, variance
	}
	for i, e := range [][]float64{e1, e2, sub(recs[2].At, recs[0].At)} {
		want := sigma * sigma
		if i == 2 {
			want *= 2 // θ² − θ = ε¹ + ε²
		}
		mean, v := stats(e)
		if math.Abs(v/want-1) > 0.05 || math.Abs(mean) > 5*math.Sqrt(want/n) {
			t.Errorf("noise %d: mean %g, variance %g, want 0, %g", i, mean, v, want)
		}
	}
	var corr float64
	for i := range e1 {
		corr += e1[i] * e2[i] / (n * sigma * sigma)
	}
	if math.Abs(corr) > 5/math.Sqrt(n) {
		t.Errorf("ε¹ and ε² correlate: %g", corr)
	}
	// Fresh draws per particle and per step.
	next := passes(h, 1, 0)
	same := func(a, b []float64) bool { return maxDiff(a, b) < 1e-9 } // up to the rounding of θ + ε − θ
	if same(e1, sub(recs[4].At, recs[3].At)) || same(e1, sub(next[1].At, next[0].At)) ||
		same(e2, sub(recs[5].At, recs[4].At)) || same(e2, sub(next[2].At, next[1].At)) {
		t.Error("the noise repeats across particles or steps")
	}
	// Reference mode: the released scripts never pass noise_var, so no noise.
	h = optimtest.MustHost(t, &optimtest.Linear{C: c})
	optimtest.MustRun(t, otmdr.New(), h, 1, hp(map[string]any{"rho1": 0, "rho2": 0, "mode": "reference"}))
	if recs := passes(h, 0, 0); !slices.Equal(recs[2].At, recs[0].At) {
		t.Error("reference mode added noise")
	}
}

// §8.8: with ρ₂ = 0 and σ = 0 the ascent is SAM's on B¹ (here the
// loader-order first half, compared bitwise with the sam plugin's m = 2
// perturbation of part 0), but the descent gradient is on the whole batch.
func TestAscentIsSAMOnFirstHalf(t *testing.T) {
	const rho = 0.3
	ho, hs := optimtest.MustHost(t, mlp(), optimtest.WithBatchSize(16)), optimtest.MustHost(t, mlp(), optimtest.WithBatchSize(16))
	optimtest.MustRun(t, otmdr.New(), ho, 1, optimtest.WithLR(0.1), hp(map[string]any{"rho1": rho, "rho2": 0, "noise_std": 0, "split": "loader"}))
	optimtest.MustRun(t, sam.New(), hs, 1, optimtest.WithLR(0.1), hp(map[string]any{"rho": rho, "m": 2}))
	o, s, batch := passes(ho, 0, 0), passes(hs, 0, 0), ho.Batch()
	if !slices.Equal(o[0].Samples, batch[:8]) || !slices.Equal(s[2].Samples, batch[:8]) {
		t.Fatalf("B¹ = %v, SAM part 0 = %v, want %v", o[0].Samples, s[2].Samples, batch[:8])
	}
	if !slices.Equal(o[2].At, s[2].At) {
		t.Errorf("θ² = %v, SAM's perturbed point on B¹ = %v", o[2].At[:3], s[2].At[:3])
	}
	if !slices.Equal(o[2].Samples, batch) {
		t.Errorf("descent gradient on %v, want the whole batch", o[2].Samples)
	}

	// Random halves: the ascent is along the gradient on the drawn B¹.
	h := optimtest.MustHost(t, mlp(), optimtest.WithBatchSize(16))
	optimtest.MustRun(t, otmdr.New(), h, 1, optimtest.WithLR(0.1), hp(map[string]any{"rho1": rho, "rho2": 0, "noise_std": 0}))
	r := passes(h, 0, 0)
	g, n := r[0].Grad, norm(r[0].Grad)
	for i := range g {
		if want := r[0].At[i] + rho/(n+1e-12)*g[i]; r[2].At[i] != want {
			t.Fatalf("θ²[%d] = %v, want θ + ρg/(‖g‖+1e-12) = %v", i, r[2].At[i], want)
		}
	}
}

// Paper mode draws fresh complementary random halves per member, particle
// and step, with nonzero Shuffle seeds; reference mode with one particle
// uses the loader-order halves and with more particles random ones.
func TestSplits(t *testing.T) {
	tests := []struct {
		name    string
		params  map[string]any
		members int
		random  bool
	}{
		{"paper", nil, 2, true},
		{"paper K=3", map[string]any{"particles": 3}, 2, true},
		{"reference", map[string]any{"mode": "reference"}, 1, false},
		{"reference K=2", map[string]any{"mode": "reference", "particles": 2}, 1, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := optimtest.MustHost(t, mlp(), optimtest.WithBatchSize(16), optimtest.WithMembers(tt.members))
			optimtest.MustRun(t, otmdr.New(), h, 2, optimtest.WithLR(0.1), hp(tt.params))
			seen := map[int64]bool{}
			for _, e := range h.Execs() {
				for _, op := range e.Program.Ops {
					if g, ok := op.(optim.Grad); ok && g.Batch.Of == 2 {
						if tt.random != (g.Batch.Shuffle != 0) {
							t.Errorf("step %d: split %+v", e.Step, g.Batch)
						}
						seen[g.Batch.Shuffle] = true
					}
				}
			}
			k := 1
			if v, ok := tt.params["particles"]; ok {
				k = v.(int)
			}
			if want := 2 * tt.members * k; tt.random && len(seen) != want {
				t.Errorf("%d distinct splits in 2 steps, want %d", len(seen), want)
			}
			for s := range int64(2) {
				for m := range tt.members {
					r := passes(h, s, m)
					for j := 0; j < len(r); j += 3 {
						batch := slices.Sorted(slices.Values(r[j+2].Samples))
						b1, b2 := r[j].Samples, r[j+1].Samples
						if !tt.random && (!slices.Equal(b1, r[j+2].Samples[:8]) || !slices.Equal(b2, r[j+2].Samples[8:])) {
							t.Errorf("step %d: halves %v %v are not the loader-order halves of %v", s, b1, b2, r[j+2].Samples)
						}
						if u := slices.Sorted(slices.Values(append(slices.Clone(b1), b2...))); !slices.Equal(u, batch) {
							t.Errorf("step %d member %d: halves %v + %v do not partition the batch", s, m, b1, b2)
						}
					}
				}
			}
		})
	}
}

// One Exec and no read per step for any K and number of members, the BatchNorm
// passes per bn option, and 2–4 vectors per member.
func TestExecCountBNAndVectors(t *testing.T) {
	tests := []struct {
		name             string
		params           map[string]any
		members, k       int
		update, freeze   int // per member per particle
		vectorsPerMember int
	}{
		{"paper", nil, 1, 1, 2, 1, 2},
		{"paper K=3, 2 members", map[string]any{"particles": 3}, 2, 3, 2, 1, 3},
		{"reference", map[string]any{"mode": "reference"}, 1, 1, 2, 1, 3},
		{"reference K=4, 3 members", map[string]any{"mode": "reference", "particles": 4}, 3, 4, 2, 1, 4},
		{"bn first", map[string]any{"bn": "first", "particles": 2}, 1, 2, 1, 2, 3},
		{"bn all", map[string]any{"bn": "all"}, 2, 1, 3, 0, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := optimtest.MustHost(t, mlp(), optimtest.WithMembers(tt.members))
			const steps = 3
			optimtest.MustRun(t, otmdr.New(), h, steps, optimtest.WithLR(0.1), hp(tt.params))
			for s := range int64(steps) {
				if n := h.ExecCount(s); n != 1 {
					t.Errorf("step %d: %d Exec calls, want 1 (all K particles in one program)", s, n)
				}
				if n := h.ReadCount(s); n != 0 {
					t.Errorf("step %d: %d values read back, want 0", s, n)
				}
			}
			if n := h.ExecCount(-1); n != 1 {
				t.Errorf("configure: %d Exec calls", n)
			}
			for m := range tt.members {
				st := h.Stats(m)
				if st.BNUpdate != steps*tt.k*tt.update || st.BNFreeze != steps*tt.k*tt.freeze || st.BaseSteps != steps {
					t.Errorf("member %d: %+v", m, st)
				}
			}
			if n := len(h.Handles()); n != tt.members*tt.vectorsPerMember {
				t.Errorf("%d vectors, want %d per member", n, tt.vectorsPerMember)
			}
		})
	}
}

// The live parameters change only in the base step: with lr = 0 they stay
// bitwise unchanged (no restore by subtraction).
func TestParamsUntouched(t *testing.T) {
	for _, mode := range []string{"paper", "reference"} {
		h := optimtest.MustHost(t, mlp(), optimtest.WithMembers(2), optimtest.WithBase(optimtest.BaseOptimizer{Momentum: 0.9}))
		before := [][]float64{h.Params(0), h.Params(1)}
		optimtest.MustRun(t, otmdr.New(), h, 3, optimtest.WithLR(0), hp(map[string]any{"mode": mode, "rho1": 0.5, "particles": 2}))
		for m := range 2 {
			if !slices.Equal(h.Params(m), before[m]) {
				t.Errorf("%s: member %d changed with lr = 0", mode, m)
			}
		}
	}
}

// §8.34: an ensemble of M identical members with the same halves and no
// noise steps like one member and predicts like it; with random halves
// each member draws its own and the members diverge.
func TestEnsemble(t *testing.T) {
	const members, steps = 3, 4
	params := map[string]any{"split": "loader", "noise_std": 0, "particles": 2}
	base := optimtest.WithBase(optimtest.BaseOptimizer{Momentum: 0.9, WeightDecay: 5e-4})
	one := optimtest.MustHost(t, mlp(), base)
	theta0 := one.Params(0)
	opts := []optimtest.HostOption{optimtest.WithMembers(members), base}
	for m := range members {
		opts = append(opts, optimtest.WithParams(m, theta0))
	}
	ens := optimtest.MustHost(t, mlp(), opts...)
	optimtest.MustRun(t, otmdr.New(), one, steps, optimtest.WithLR(0.1), hp(params))
	opt := otmdr.New()
	optimtest.MustRun(t, opt, ens, steps, optimtest.WithLR(0.1), hp(params))
	for m := range members {
		if !slices.Equal(ens.Params(m), one.Params(0)) {
			t.Errorf("member %d differs from the single model", m)
		}
	}
	pred, err := opt.Predictive(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if want := []optim.Vec{optim.ParamsOf(0), optim.ParamsOf(1), optim.ParamsOf(2)}; pred.Kind != optim.Members || !slices.Equal(pred.Vecs, want) {
		t.Fatalf("predictive %+v", pred)
	}
	got, err := ens.Evaluate(context.Background(), pred)
	if err != nil {
		t.Fatal(err)
	}
	want, err := one.Evaluate(context.Background(), optim.Predictive{Kind: optim.Point})
	if err != nil {
		t.Fatal(err)
	}
	if math.Abs(got.NLL-want.NLL) > 1e-12 || got.Acc != want.Acc {
		t.Errorf("ensemble of identical members %+v, single member %+v", got, want)
	}

	// Random halves: own splits per member, so identical inits diverge.
	ens = optimtest.MustHost(t, mlp(), opts...)
	optimtest.MustRun(t, otmdr.New(), ens, 1, optimtest.WithLR(0.1), hp(map[string]any{"noise_std": 0}))
	if slices.Equal(passes(ens, 0, 0)[0].Samples, passes(ens, 0, 1)[0].Samples) || slices.Equal(ens.Params(0), ens.Params(1)) {
		t.Error("members share their random halves")
	}
}

// A run resumed from SaveState draws the same splits and noise as an
// uninterrupted one (bitwise); without LoadState it does not.
func TestResume(t *testing.T) {
	ctx := context.Background()
	params := hp(map[string]any{"particles": 2})
	lr := optimtest.WithLR(0.1)
	straight := optimtest.MustHost(t, mlp())
	optimtest.MustRun(t, otmdr.New(), straight, 6, lr, params)

	first := optimtest.MustHost(t, mlp())
	opt := otmdr.New()
	optimtest.MustRun(t, opt, first, 3, lr, params)
	blob, vecs, err := opt.SaveState(ctx)
	if err != nil || len(vecs) != 0 {
		t.Fatalf("save: %v, vecs %v", err, vecs)
	}
	for _, load := range []bool{true, false} {
		h := optimtest.MustHost(t, mlp(), optimtest.WithParams(0, first.Params(0)))
		resumed := otmdr.New()
		r := optimtest.NewHarness(resumed, h, lr, params, optimtest.WithStartStep(3))
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
		if same := slices.Equal(h.Params(0), straight.Params(0)); same != load {
			t.Errorf("LoadState %v: resumed equals uninterrupted: %v", load, same)
		}
	}
	if err := otmdr.New().LoadState(ctx, []byte(`{"version":2}`)); err == nil {
		t.Error("loaded a version 2 state")
	}
}

// Both modes, with independent or joint members, train the MLP: the
// predictive's test NLL halves and the test accuracy passes 80%.
func TestTrainsMLP(t *testing.T) {
	ctx := context.Background()
	for _, params := range []map[string]any{nil, {"mode": "reference", "particles": 2}, {"joint": true},
		{"mode": "reference", "merge_mean": true, "joint": true, "particles": 2}} {
		h := optimtest.MustHost(t, optimtest.NewMLP(optimtest.MLPConfig{Hidden: 8, Samples: 128}), optimtest.WithMembers(2),
			optimtest.WithBatchSize(32), optimtest.WithBase(optimtest.BaseOptimizer{Momentum: 0.9}))
		before, err := h.Evaluate(ctx, optim.Predictive{Kind: optim.Members, Vecs: []optim.Vec{optim.ParamsOf(0), optim.ParamsOf(1)}})
		if err != nil {
			t.Fatal(err)
		}
		opt := otmdr.New()
		outs := optimtest.MustRun(t, opt, h, 150, optimtest.WithLR(0.1), hp(params))
		pred, err := opt.Predictive(ctx)
		if err != nil {
			t.Fatal(err)
		}
		after, err := h.Evaluate(ctx, pred)
		if err != nil {
			t.Fatal(err)
		}
		if !(after.NLL < before.NLL/2) || after.Acc < 0.8 || math.IsNaN(outs[149].Metrics["loss_perturbed"]) {
			t.Errorf("%v did not train: test %+v → %+v, last metrics %v", params, before, after, outs[149].Metrics)
		}
	}
}

// NewFrom validates and resolves its typed Config, refuses the Grad and
// Norm hooks with joint = true, and its Configure takes no params.
func TestNewFrom(t *testing.T) {
	with := func(f func(*otmdr.Config)) otmdr.Config { c := otmdr.DefaultConfig(); f(&c); return c }
	norm := otmdr.Hooks{Norm: func(otmdr.Pass) optim.Vec { return 0 }}
	tests := []struct {
		name    string
		cfg     otmdr.Config
		hooks   otmdr.Hooks
		wantErr string
	}{
		{"defaults", otmdr.DefaultConfig(), norm, ""},
		{"enum tag", with(func(c *otmdr.Config) { c.Mode = "official" }), otmdr.Hooks{}, `"mode": "official" is not one of`},
		{"range tag", with(func(c *otmdr.Config) { c.Particles = 0 }), otmdr.Hooks{}, `"particles": 0 is out of range`},
		{"hand check", with(func(c *otmdr.Config) { c.Split = "odd-even" }), otmdr.Hooks{}, `split "odd-even"`},
		{"joint without hooks", with(func(c *otmdr.Config) { c.Joint = true }), otmdr.Hooks{Begin: func(*optim.Program) {}}, ""},
		{"joint with hooks", with(func(c *otmdr.Config) { c.Joint = true }), norm, "hooks"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := otmdr.NewFrom(tt.cfg, tt.hooks)
			if tt.wantErr == "" && err != nil || tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
				t.Errorf("err = %v, want %q", err, tt.wantErr)
			}
		})
	}
	o, err := otmdr.NewFrom(otmdr.DefaultConfig(), otmdr.Hooks{})
	if err != nil {
		t.Fatal(err)
	}
	err = o.Configure(context.Background(), optimtest.MustHost(t, mlp()), optim.Config{Params: map[string]any{"rho1": 0.1}})
	if err == nil || !strings.Contains(err.Error(), "takes no params") {
		t.Errorf("Configure with params: err = %v", err)
	}
}

// wrapper runs OT-MDR inside itself, as a method built on it does: it
// allocates its vector extra from its own namespace, configures OT-MDR from
// NewFrom in a sub-namespace of it, and hands hooks over extra to it.
type wrapper struct {
	optim.Defaults
	hooks func(extra optim.Vec) otmdr.Hooks
	inner *otmdr.OTMDR
	hs    *optim.Handles
	extra optim.Vec
}

func (w *wrapper) Info() optim.Info { return otmdr.New().Info() }

func (w *wrapper) Configure(ctx context.Context, h optim.Host, cfg optim.Config) error {
	c, err := otmdr.ParseConfig(cfg.Params)
	if err != nil {
		return err
	}
	w.hs = cfg.Namespace("wrapper")
	w.extra = w.hs.New("extra")
	if _, err := h.Exec(ctx, w.hs.Prog().Alloc(w.extra, 0)); err != nil {
		return err
	}
	if w.inner, err = otmdr.NewFrom(c, w.hooks(w.extra)); err != nil {
		return err
	}
	inner := cfg
	inner.Params, inner.Handles = nil, w.hs
	return w.inner.Configure(ctx, h, inner)
}

func (w *wrapper) Step(ctx context.Context, in optim.StepInput) (optim.StepOutput, error) {
	return w.inner.Step(ctx, in)
}

// Hooks: Begin's ops open the step's first program, Grad sees every pass
// in order (and its edits reach the host), Norm's vector joins the ascent
// norm as √(‖g‖² + ‖v‖²), and End's ops come after the last full passes
// and before the base steps, their scalar read through its slot without
// disturbing OT-MDR's. The wrapper's and OT-MDR's vectors do not collide.
func TestHooks(t *testing.T) {
	c, x0 := []float64{3, -1, 2, 0.5}, []float64{0.1, 0.2, -0.3, 0.4}
	const rho1, rho2, members, k = 0.3, 0.5, 2, 2
	var calls []otmdr.Pass
	opt := &wrapper{hooks: func(extra optim.Vec) otmdr.Hooks { // extra: all 2s during the step
		return otmdr.Hooks{
			Begin: func(p *optim.Program) { p.Fill(extra, optim.K(2)) },
			Grad: func(at otmdr.Pass, g *optim.Grad) {
				calls = append(calls, at)
				g.BN = optim.BNFreeze
			},
			Norm: func(at otmdr.Pass) optim.Vec {
				if at.Phase == otmdr.PhaseB1 {
					return extra
				}
				return 0
			},
			End: func(p *optim.Program) {
				d := p.Dot(extra, extra)
				p.Scale(extra, optim.K(0.5))
				p.Report("extra_dot", d)
			},
		}
	}}
	h := optimtest.MustHost(t, &optimtest.Linear{C: c, X0: x0}, optimtest.WithMembers(members))
	outs := optimtest.MustRun(t, opt, h, 1, optimtest.WithLR(0.1),
		hp(map[string]any{"rho1": rho1, "rho2": rho2, "noise_std": 0, "particles": k}))
	if n := len(h.Handles()); n != 1+3*members {
		t.Errorf("%d vectors, want the wrapper's one and OT-MDR's three per member (K > 1)", n)
	}
	if name := opt.hs.Name(opt.extra); name != "wrapper/extra" {
		t.Errorf("the wrapper's vector is named %q", name)
	}
	var want []otmdr.Pass
	for kk := range k {
		for _, ph := range []otmdr.Phase{otmdr.PhaseB1, otmdr.PhaseB2, otmdr.PhaseFull} {
			for m := range members {
				want = append(want, otmdr.Pass{Member: m, Particle: kk, Phase: ph})
			}
		}
	}
	if !slices.Equal(calls, want) {
		t.Errorf("Grad hook calls %v, want %v", calls, want)
	}
	if st := h.Stats(0); st.BNUpdate != 0 || st.BNFreeze != 3*k {
		t.Errorf("the Grad hook's BN edit did not reach the host: %+v", st)
	}
	n1 := math.Hypot(norm(c), 2*math.Sqrt(float64(len(c))))
	r := passes(h, 0, 0)
	for i := range c {
		w1 := x0[i] + rho1*c[i]/(n1+1e-12)
		if w2 := w1 + rho2*c[i]/(norm(c)+1e-12); math.Abs(r[1].At[i]-w1) > 1e-15 || math.Abs(r[2].At[i]-w2) > 1e-15 {
			t.Fatalf("θ¹[%d] = %v, θ²[%d] = %v; want %v, %v", i, r[1].At[i], i, r[2].At[i], w1, w2)
		}
	}
	var step []optimtest.ExecRecord
	for _, e := range h.Execs() {
		if e.Step == 0 {
			step = append(step, e)
		}
	}
	if len(step) != 1 {
		t.Fatalf("%d Exec calls, want 1", len(step))
	}
	if _, ok := step[0].Program.Ops[0].(optim.Fill); !ok {
		t.Errorf("first op of the step: %T", step[0].Program.Ops[0])
	}
	// End's ops (Dot, Scale, its Report) come after the last full-batch
	// pass and before the base steps (K = 2: each after the mean's Scale).
	last := step[0].Program.Ops
	kinds := make([]string, len(last))
	for i, op := range last {
		kinds[i] = fmt.Sprintf("%T", op)
	}
	got := strings.Join(kinds, " ")
	end := strings.Index(got, "optim.Dot optim.Scale optim.Report optim.Scale optim.BaseStep optim.Scale optim.BaseStep optim.Report")
	if end < 0 || strings.LastIndex(got, "optim.Grad") > end {
		t.Errorf("the step's program: %s", got)
	}
	if v, err := h.Vec(opt.extra); err != nil || v[0] != 1 {
		t.Errorf("End's ops did not run: %v, %v", v, err)
	}
	var lossP float64 // the mean loss of the full passes
	for m := range members {
		for j, rec := range passes(h, 0, m) {
			if j%3 == 2 {
				lossP += rec.Loss / (members * k)
			}
		}
	}
	if l := outs[0].Metrics["loss_perturbed"]; math.Abs(l-lossP) > 1e-15 {
		t.Errorf("loss_perturbed %v, want %v: End's scalar disturbed OT-MDR's metrics", l, lossP)
	}
	if d := outs[0].Metrics["extra_dot"]; d != 4*float64(len(c)) {
		t.Errorf("End reported %v, want ‖2·1‖² = %v", d, 4*len(c))
	}
}

var update = flag.Bool("update", false, "rewrite testdata/*.golden")

// TestTraceGolden pins the ops that Configure and two steps send in the
// paper, reference and joint modes: the golden files document the
// algorithm.
func TestTraceGolden(t *testing.T) {
	optimtest.TestTraces(t, *update,
		optimtest.TraceCase{Golden: "testdata/trace.golden", New: otmdr.New, Params: map[string]any{"particles": 2}},
		optimtest.TraceCase{Golden: "testdata/trace_reference.golden", New: otmdr.New, Params: map[string]any{"mode": "reference"}},
		optimtest.TraceCase{Golden: "testdata/trace_joint.golden", New: otmdr.New, Members: 2, Params: map[string]any{"joint": true}})
}
