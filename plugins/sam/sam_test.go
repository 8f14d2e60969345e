package sam_test

import (
	"context"
	"flag"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/optlab/optlab/plugins/sam"
	"github.com/optlab/optlab/plugins/sgd"
	"github.com/optlab/optlab/sdk/optimtest"
)

func mlp() optimtest.Problem {
	return optimtest.NewMLP(optimtest.MLPConfig{Hidden: 6, Samples: 64, Seed: 2})
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

// §8.1: with ρ = 0 a SAM step is bitwise an SGD step (momentum, Nesterov,
// weight decay), for every member.
func TestRhoZeroIsSGD(t *testing.T) {
	for _, base := range []optimtest.BaseOptimizer{
		{Momentum: 0.9, WeightDecay: 5e-4},
		{Momentum: 0.9, WeightDecay: 1e-3, Nesterov: true},
		{Adam: true, WeightDecay: 1e-4},
	} {
		opts := []optimtest.HostOption{optimtest.WithMembers(2), optimtest.WithBatchSize(16), optimtest.WithBase(base)}
		hs, hsgd := optimtest.MustHost(t, mlp(), opts...), optimtest.MustHost(t, mlp(), opts...)
		sched := optimtest.WithSchedule(func(s int64, _ int) float64 { return 0.1 / float64(1+s) })
		outs := optimtest.MustRun(t, sam.New(), hs, 7, sched, optimtest.WithHParams(map[string]any{"rho": 0.0}))
		ref := optimtest.MustRun(t, sgd.New(), hsgd, 7, sched)
		for m := range 2 {
			if got, want := hs.Params(m), hsgd.Params(m); !slices.Equal(got, want) {
				t.Errorf("%+v member %d: SAM(ρ=0) %v ≠ SGD %v", base, m, got[:3], want[:3])
			}
		}
		if outs[6].Metrics["loss"] != ref[6].Metrics["loss"] {
			t.Errorf("metrics differ: %v vs %v", outs[6].Metrics, ref[6].Metrics)
		}
	}
}

// ascent returns, per step, the first gradient (at θ) and the points of
// the first and second gradient evaluation of member 0.
func ascent(h *optimtest.Host, step int64) (g, at, perturbed []float64) {
	var recs []optimtest.GradRecord
	for _, r := range h.Grads() {
		if r.Step == step && r.Member == 0 {
			recs = append(recs, r)
		}
	}
	return recs[0].Grad, recs[0].At, recs[1].At
}

// §8.2: ‖θ'−θ‖ = ρ‖g‖/(‖g‖+1e-12), and ε ∥ g.
func TestPerturbationNorm(t *testing.T) {
	for _, rho := range []float64{0.05, 0.5, 2} {
		h := optimtest.MustHost(t, mlp(), optimtest.WithBase(optimtest.BaseOptimizer{Momentum: 0.9}))
		optimtest.MustRun(t, sam.New(), h, 4, optimtest.WithLR(0.1), optimtest.WithHParams(map[string]any{"rho": rho}))
		for s := range int64(4) {
			g, at, pert := ascent(h, s)
			e, n := sub(pert, at), norm(g)
			want := rho * n / (n + 1e-12)
			if got := norm(e); math.Abs(got-want) > 1e-12*want {
				t.Errorf("ρ=%v step %d: ‖θ'−θ‖ = %.17g, want %.17g", rho, s, got, want)
			}
			for i := range e {
				if want := rho * g[i] / (n + 1e-12); math.Abs(e[i]-want) > 1e-14 {
					t.Fatalf("ε[%d] = %v, want ρg/(‖g‖+1e-12) = %v", i, e[i], want)
				}
			}
		}
	}
}

// §8.3: for L = ½θᵀAθ, θ ← θ − lr·A(θ + ρAθ/‖Aθ‖) with momentum 0, wd 0.
func TestQuadraticClosedForm(t *testing.T) {
	a := [][]float64{{3, 0.5, 0}, {0.5, 2, -0.3}, {0, -0.3, 1}}
	x0 := []float64{1, -2, 0.5}
	const lr, rho = 0.1, 0.05
	h := optimtest.MustHost(t, &optimtest.Quadratic{A: a, X0: x0})
	optimtest.MustRun(t, sam.New(), h, 10, optimtest.WithLR(lr), optimtest.WithHParams(map[string]any{"rho": rho}))
	mul := func(x []float64) []float64 {
		y := make([]float64, 3)
		for i := range 3 {
			for j := range 3 {
				y[i] += a[i][j] * x[j]
			}
		}
		return y
	}
	theta := slices.Clone(x0)
	for range 10 {
		g := mul(theta)
		n := norm(g)
		pert := make([]float64, 3)
		for i := range pert {
			pert[i] = theta[i] + rho*g[i]/n
		}
		gp := mul(pert)
		for i := range theta {
			theta[i] -= lr * gp[i]
		}
	}
	got := h.Params(0)
	for i := range got {
		if math.Abs(got[i]-theta[i]) > 1e-13 {
			t.Errorf("θ[%d] = %.17g, closed form %.17g", i, got[i], theta[i])
		}
	}
}

// §8.4: with lr = 0, a SAM/ASAM step leaves θ bitwise unchanged (restore by
// copy); restoring by subtraction would not.
func TestExactRestore(t *testing.T) {
	for _, adaptive := range []bool{false, true} {
		h := optimtest.MustHost(t, mlp(), optimtest.WithBase(optimtest.BaseOptimizer{Momentum: 0.9}))
		before := h.Params(0)
		optimtest.MustRun(t, sam.New(), h, 3, optimtest.WithLR(0), optimtest.WithHParams(map[string]any{"rho": 0.7, "adaptive": adaptive, "m": 2}))
		if got := h.Params(0); !slices.Equal(got, before) {
			t.Errorf("adaptive=%v: θ changed with lr = 0", adaptive)
		}
	}
	// Restoring by subtracting e (official ASAM) is not exact on the same data.
	h := optimtest.MustHost(t, mlp())
	optimtest.MustRun(t, sam.New(), h, 1, optimtest.WithLR(0), optimtest.WithHParams(map[string]any{"rho": 0.7}))
	g, at, pert := ascent(h, 0)
	s := 0.7 / (norm(g) + 1e-12)
	inexact := 0
	for i := range at {
		e := s * g[i]
		if pert[i] != at[i]+e {
			t.Fatalf("θ'[%d] = %v, want θ+s·g = %v", i, pert[i], at[i]+e)
		}
		if pert[i]-e != at[i] {
			inexact++
		}
	}
	if inexact == 0 {
		t.Error("subtractive restore was exact on every element; the negative test proves nothing")
	}
	t.Logf("subtractive restore inexact on %d of %d elements", inexact, len(at))
}

// §8.5: ASAM with η = 0: ‖(θ'−θ)/|θ|‖ = ρ over the nonzero elements, and
// zero elements do not move.
func TestASAMInvariant(t *testing.T) {
	a := [][]float64{{2, 1, 0, 0}, {1, 3, 1, 0}, {0, 1, 1, 0.5}, {0, 0, 0.5, 2}}
	h := optimtest.MustHost(t, &optimtest.Quadratic{A: a, B: []float64{1, 1, 1, 1}, X0: []float64{0.5, 0, -3, 1e-3}})
	const rho = 2.0
	optimtest.MustRun(t, sam.New(), h, 3, optimtest.WithLR(0.01), optimtest.WithHParams(map[string]any{"rho": rho, "adaptive": true, "eta": 0.0}))
	for s := range int64(3) {
		g, at, pert := ascent(h, s)
		var q float64
		for i := range at {
			d := pert[i] - at[i]
			if at[i] == 0 {
				if d != 0 || g[i] == 0 {
					t.Errorf("step %d: zero element %d moved by %v (g=%v)", s, i, d, g[i])
				}
				continue
			}
			q += (d / at[i]) * (d / at[i])
		}
		if got := math.Sqrt(q); math.Abs(got-rho) > 1e-12 {
			t.Errorf("step %d: ‖(θ'−θ)/|θ|‖ = %.17g, want ρ = %v", s, got, rho)
		}
	}
}

// ASAM with the default η = 0.01: e = ρ T²⊙g/‖T⊙g‖ on every element.
func TestASAMEta(t *testing.T) {
	h := optimtest.MustHost(t, mlp())
	const rho = 0.5
	optimtest.MustRun(t, sam.New(), h, 1, optimtest.WithLR(0.1), optimtest.WithHParams(map[string]any{"rho": rho, "adaptive": true}))
	g, at, pert := ascent(h, 0)
	tg := make([]float64, len(g))
	for i := range g {
		tg[i] = (math.Abs(at[i]) + 0.01) * g[i]
	}
	n := norm(tg)
	for i := range g {
		want := rho * (math.Abs(at[i]) + 0.01) * tg[i] / n
		if d := pert[i] - at[i]; math.Abs(d-want) > 1e-12 {
			t.Fatalf("e[%d] = %v, want %v", i, d, want)
		}
	}
}

// Official ASAM (adaptive_scope = "weights"): T = |θ|+η on the tensors
// whose name contains "weight" and T = 1 on the biases, so
// e = ρ·T²⊙g/‖T⊙g‖ there and e = ρ·g/‖T⊙g‖ on the biases; every member
// gets its own mask.
func TestASAMWeightsOnly(t *testing.T) {
	const rho, eta = 0.5, 0.01
	p := optimtest.NewMLP(optimtest.MLPConfig{Hidden: 6, Samples: 64, Seed: 2})
	h := optimtest.MustHost(t, p, optimtest.WithMembers(2))
	optimtest.MustRun(t, sam.New(), h, 2, optimtest.WithLR(0.1),
		optimtest.WithHParams(map[string]any{"rho": rho, "adaptive": true, "adaptive_scope": "weights", "eta": eta}))
	isWeight := make([]bool, p.Numel())
	biases := 0
	for _, tn := range p.Tensors() {
		n := int64(1)
		for _, d := range tn.Shape {
			n *= d
		}
		for i := tn.Offset; i < tn.Offset+n; i++ {
			isWeight[i] = strings.Contains(tn.Name, "weight")
		}
		if !strings.Contains(tn.Name, "weight") {
			biases += int(n)
		}
	}
	if biases == 0 {
		t.Fatal("the problem has no bias: the test cannot tell the scopes apart")
	}
	for m := range 2 {
		for s := range int64(2) {
			var recs []optimtest.GradRecord
			for _, r := range h.Grads() {
				if r.Step == s && r.Member == m {
					recs = append(recs, r)
				}
			}
			g, at, pert := recs[0].Grad, recs[0].At, recs[1].At
			tw := make([]float64, len(g))
			for i := range g {
				tw[i] = 1
				if isWeight[i] {
					tw[i] = math.Abs(at[i]) + eta
				}
			}
			tg := make([]float64, len(g))
			for i := range g {
				tg[i] = tw[i] * g[i]
			}
			n := norm(tg)
			for i := range g {
				want := rho * tw[i] * tg[i] / n
				if d := pert[i] - at[i]; math.Abs(d-want) > 1e-12 {
					t.Fatalf("member %d step %d: e[%d] = %v, want %v (weight %v)", m, s, i, d, want, isWeight[i])
				}
			}
		}
	}
}

// One Exec and no blocking read per step whatever the options; BatchNorm modes.
func TestExecCountAndBN(t *testing.T) {
	tests := []struct {
		name                string
		params              map[string]any
		members             int
		wantUpdate, wantFrz int // per member per step
	}{
		{"sam", nil, 1, 1, 1},
		{"bn updated twice", map[string]any{"freeze_bn_second": false}, 1, 2, 0},
		{"asam, 2 members", map[string]any{"adaptive": true}, 2, 1, 1},
		{"m=4, 3 members", map[string]any{"m": 4}, 3, 4, 4},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := optimtest.MustHost(t, mlp(), optimtest.WithMembers(tt.members))
			const steps = 3
			optimtest.MustRun(t, sam.New(), h, steps, optimtest.WithLR(0.1), optimtest.WithHParams(tt.params))
			for s := range int64(steps) {
				if n := h.ExecCount(s); n != 1 {
					t.Errorf("step %d: %d Exec calls, want 1", s, n)
				}
				if n := h.ReadCount(s); n != 0 {
					t.Errorf("step %d: %d values read back, want 0", s, n)
				}
			}
			for m := range tt.members {
				st := h.Stats(m)
				if st.BNUpdate != steps*tt.wantUpdate || st.BNFreeze != steps*tt.wantFrz || st.BaseSteps != steps {
					t.Errorf("member %d: %+v", m, st)
				}
			}
		})
	}
}

// m-sharpness: part j is perturbed along its own gradient, evaluated on the
// same part, and the base step uses the mean of the m perturbed gradients.
func TestMSharpness(t *testing.T) {
	const rho, lr, m = 0.3, 0.2, 2
	h := optimtest.MustHost(t, mlp(), optimtest.WithBatchSize(16))
	before := h.Params(0)
	optimtest.MustRun(t, sam.New(), h, 1, optimtest.WithLR(lr), optimtest.WithHParams(map[string]any{"rho": rho, "m": m}))
	recs, batch := h.Grads(), h.Batch()
	if len(recs) != 2*m {
		t.Fatalf("%d gradient evaluations", len(recs))
	}
	mean := make([]float64, len(before))
	for j := range m {
		first, second := recs[j], recs[m+j]
		part := batch[j*8 : (j+1)*8]
		if !slices.Equal(first.Samples, part) || !slices.Equal(second.Samples, part) {
			t.Errorf("part %d: samples %v / %v, want %v", j, first.Samples, second.Samples, part)
		}
		n := norm(first.Grad)
		if got := norm(sub(second.At, before)); math.Abs(got-rho) > 1e-12 {
			t.Errorf("part %d: ‖e‖ = %v (‖g‖=%v)", j, got, n)
		}
		for i := range mean {
			mean[i] += second.Grad[i] / m
		}
	}
	got := h.Params(0)
	for i := range got {
		if want := before[i] - lr*mean[i]; math.Abs(got[i]-want) > 1e-15 {
			t.Fatalf("θ[%d] = %v, want %v", i, got[i], want)
		}
	}
}

func TestTrainsMLP(t *testing.T) {
	h := optimtest.MustHost(t, optimtest.NewMLP(optimtest.MLPConfig{Hidden: 8, Samples: 128}),
		optimtest.WithBatchSize(32), optimtest.WithBase(optimtest.BaseOptimizer{Momentum: 0.9}))
	outs := optimtest.MustRun(t, sam.New(), h, 80, optimtest.WithLR(0.1))
	first, last := outs[0].Metrics, outs[len(outs)-1].Metrics
	if !(last["loss"] < first["loss"]/2) || last["acc"] < 0.8 {
		t.Errorf("did not train: first %v, last %v", first, last)
	}
}

func TestConfigErrors(t *testing.T) {
	tests := []struct {
		params map[string]any
		want   string
	}{
		{map[string]any{"rh0": 0.1}, "unknown"},
		{map[string]any{"m": 0}, `"m": 0 is out of range [1,batch]: want ≥ 1`},
		{map[string]any{"m": 9223372036854775807}, `"m": 9223372036854775807 is out of range [1,batch]: want ≥ 1 and ≤ 32, the batch size`},
		{map[string]any{"rho": -1.0}, `"rho": -1 is out of range [0,): want ≥ 0`},
		{map[string]any{"eta": -0.5}, `"eta": -0.5 is out of range [0,): want ≥ 0`},
		{map[string]any{"adaptive": 1}, "not a valid bool"},
		{map[string]any{"adaptive": true, "adaptive_scope": "biases"}, `"adaptive_scope": "biases" is not one of "all", "weights"`},
		{map[string]any{"adaptive_scope": "weights"}, "set adaptive = true"},
	}
	for _, tt := range tests {
		h := optimtest.MustHost(t, mlp())
		_, err := optimtest.Run(context.Background(), sam.New(), h, 1, optimtest.WithHParams(tt.params))
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%v: err = %v, want containing %q", tt.params, err, tt.want)
		}
	}
}

func TestInfo(t *testing.T) {
	info := sam.New().Info()
	want := map[string]any{"rho": 0.05, "adaptive": false, "eta": 0.01, "adaptive_scope": "all", "freeze_bn_second": true, "m": int64(1)}
	if info.Name != "sam" || len(info.Params) != len(want) {
		t.Fatalf("info %+v", info)
	}
	for _, p := range info.Params {
		if want[p.Name] != p.Default || p.Doc == "" {
			t.Errorf("param %+v, want default %v and a doc", p, want[p.Name])
		}
	}
}

var update = flag.Bool("update", false, "rewrite testdata/*.golden")

// TestTraceGolden pins the ops that Configure and two steps send in the
// main modes: the golden files document the algorithm.
func TestTraceGolden(t *testing.T) {
	optimtest.TestTraces(t, *update,
		optimtest.TraceCase{Golden: "testdata/trace.golden", New: sam.New, Members: 2},
		optimtest.TraceCase{Golden: "testdata/trace_asam_weights.golden", New: sam.New,
			Params: map[string]any{"rho": 2.0, "adaptive": true, "adaptive_scope": "weights"}},
		optimtest.TraceCase{Golden: "testdata/trace_m2.golden", New: sam.New, Params: map[string]any{"m": 2}})
}
