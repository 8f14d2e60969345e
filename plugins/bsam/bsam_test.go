package bsam_test

import (
	"context"
	"flag"
	"math"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/optlab/optlab/plugins/bsam"
	"github.com/optlab/optlab/sdk/optim"
	"github.com/optlab/optlab/sdk/optimtest"
)

// newBSAM returns a bSAM optimizer as its concrete type, whose methods
// name its state vectors.
func newBSAM() *bsam.BSAM { return bsam.New().(*bsam.BSAM) }

func vec(t *testing.T, h *optimtest.Host, v optim.Vec) []float64 {
	t.Helper()
	d, err := h.Vec(v)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// signs is a linear loss whose gradient is ±1 elementwise.
func signs(n int) *optimtest.Linear {
	c := make([]float64, n)
	for i := range c {
		c[i] = 1 - 2*float64(i%2)
	}
	return &optimtest.Linear{C: c}
}

func near(a, b, tol float64) bool { return math.Abs(a-b) <= tol*max(1, math.Abs(b)) }

// §8.14: β2 = 1 freezes s at s_init.
func TestBeta2OneFreezesS(t *testing.T) {
	h := optimtest.MustHost(t, optimtest.NewMLP(optimtest.MLPConfig{Hidden: 4}), optimtest.WithBatchSize(32))
	opt := newBSAM()
	optimtest.MustRun(t, opt, h, 5, optimtest.WithLR(0.1), optimtest.WithHParams(map[string]any{"beta2": 1.0, "s_init": 3.0, "m": 4}))
	for i, s := range vec(t, h, opt.S(0)) {
		if s != 3 {
			t.Fatalf("s[%d] = %v, want 3", i, s)
		}
	}
}

// §8.15: constant |g| = 1 and γ+δ = 2 give the fixed point s* = 4.
func TestFixedPointOfS(t *testing.T) {
	tests := []struct {
		name   string
		params map[string]any
	}{
		{"damping only", map[string]any{"damping": 2.0, "prior_prec": 0.0}},
		{"damping plus prior", map[string]any{"damping": 1.5, "prior_prec": 0.5 * 1000}}, // δ = 500/1000
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := optimtest.MustHost(t, signs(6), optimtest.WithTrainSize(1000))
			tt.params["beta2"], tt.params["m"] = 0.5, 2
			opt := newBSAM()
			optimtest.MustRun(t, opt, h, 80, optimtest.WithLR(0.01), optimtest.WithHParams(tt.params))
			for i, s := range vec(t, h, opt.S(0)) {
				if !near(s, 4, 1e-12) {
					t.Errorf("s[%d] = %.17g, want 4", i, s)
				}
			}
		})
	}
}

// §8.16: ε = ρ g / s is not normalized: scaling the loss scales ε.
func TestEpsilonNotNormalized(t *testing.T) {
	const rho, sInit = 0.01, 2.0
	eps := func(scale float64) []float64 {
		c := signs(5).C
		for i := range c {
			c[i] *= scale * float64(i+1)
		}
		h := optimtest.MustHost(t, &optimtest.Linear{C: c}, optimtest.WithTrainSize(100))
		optimtest.MustRun(t, bsam.New(), h, 1, optimtest.WithLR(0.1), optimtest.WithHParams(map[string]any{"rho": rho, "s_init": sInit, "m": 1}))
		g := h.Grads()
		if len(g) != 2 {
			t.Fatalf("%d gradient evaluations, want 2", len(g))
		}
		// w = 0, so the second point is ε itself.
		for i := range c {
			if want := rho * c[i] / sInit; g[1].At[i] != want {
				t.Errorf("scale %v: ε[%d] = %v, want ρg/s = %v", scale, i, g[1].At[i], want)
			}
		}
		return g[1].At
	}
	e1, e3 := eps(1), eps(3)
	for i := range e1 {
		if !near(e3[i], 3*e1[i], 1e-15) {
			t.Errorf("ε[%d]: %v after scaling the loss by 3, want %v", i, e3[i], 3*e1[i])
		}
	}
}

// §8.18: initial noise std √(1/(N s_init)) = 2.236e-3 for N = 50000·4.
func TestInitialNoiseStd(t *testing.T) {
	const n = 20000
	h := optimtest.MustHost(t, signs(n), optimtest.WithTrainSize(50000))
	opt := newBSAM()
	optimtest.MustRun(t, opt, h, 1, optimtest.WithLR(0), optimtest.WithHParams(map[string]any{"dafactor": 4.0, "m": 1, "beta2": 1.0}))
	want := math.Sqrt(1.0 / 200000)
	if math.Abs(want-2.236e-3) > 1e-6 {
		t.Fatalf("reference value %v", want)
	}
	for i, s := range vec(t, h, opt.Std(0)) {
		if !near(s, want, 1e-15) {
			t.Fatalf("std[%d] = %v, want %v", i, s, want)
		}
	}
	// The noisy point θ_0 − w has that standard deviation.
	noisy := h.Grads()[0].At
	var v float64
	for _, x := range noisy {
		v += x * x
	}
	if got := math.Sqrt(v / n); math.Abs(got-want) > 0.03*want {
		t.Errorf("empirical noise std %v, want %v", got, want)
	}
	p, err := opt.Predictive(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(p, optim.Predictive{Kind: optim.Samples, Mean: optim.Params, Std: opt.Std(0), N: 32}) {
		t.Errorf("predictive %+v", p)
	}
}

// §8.14: β1 = 0, ρ = 0, β2 = 1 (and negligible noise): w ← w − α(g + δw)/s_init.
func TestGradientDescentLimit(t *testing.T) {
	a := [][]float64{{2, 0.3}, {0.3, 1}}
	q := &optimtest.Quadratic{A: a, B: []float64{0.5, -1}, X0: []float64{1, 2}}
	const lr, sInit, prior, trainSize = 0.05, 2.0, 25.0, 1e12
	h := optimtest.MustHost(t, q, optimtest.WithTrainSize(trainSize))
	optimtest.MustRun(t, bsam.New(), h, 10, optimtest.WithLR(lr), optimtest.WithHParams(map[string]any{
		"beta1": 0.0, "rho": 0.0, "beta2": 1.0, "s_init": sInit, "prior_prec": prior, "m": 2}))
	w, g, delta := slices.Clone(q.X0), make([]float64, 2), prior/trainSize
	for range 10 {
		q.Loss(w, nil, g)
		for i := range w {
			w[i] -= lr * (g[i] + delta*w[i]) / sInit
		}
	}
	for i, got := range h.Params(0) {
		if !near(got, w[i], 1e-14) {
			t.Errorf("w[%d] = %.17g, want %.17g", i, got, w[i])
		}
	}
}

// update_order: "code" divides by the old s, "paper" by the updated one.
func TestUpdateOrder(t *testing.T) {
	const lr, b1, b2, gamma, rho = 0.5, 0.9, 0.5, 0.1, 0.05
	for _, order := range []string{"code", "paper"} {
		h := optimtest.MustHost(t, signs(4), optimtest.WithTrainSize(1000))
		opt := newBSAM()
		optimtest.MustRun(t, opt, h, 1, optimtest.WithLR(lr), optimtest.WithHParams(map[string]any{
			"update_order": order, "beta1": b1, "beta2": b2, "damping": gamma, "prior_prec": 0.0, "rho": rho}))
		sNew := b2*1 + (1-b2)*(1+gamma)
		s := 1.0
		if order == "paper" {
			s = sNew
		}
		for i, w := range h.Params(0) {
			c := signs(4).C[i]
			if want := -lr * (1 - b1) * c / s; !near(w, want, 1e-15) {
				t.Errorf("%s: w[%d] = %v, want %v", order, i, w, want)
			}
		}
		if s := vec(t, h, opt.S(0)); !near(s[0], sNew, 1e-15) {
			t.Errorf("%s: s = %v, want %v", order, s[0], sNew)
		}
	}
}

// One Exec per step, m sub-batches in loader order, BN modes.
func TestExecsAndBatches(t *testing.T) {
	for _, freeze := range []bool{false, true} {
		h := optimtest.MustHost(t, optimtest.NewMLP(optimtest.MLPConfig{}), optimtest.WithBatchSize(32))
		optimtest.MustRun(t, bsam.New(), h, 3, optimtest.WithLR(0.1), optimtest.WithHParams(map[string]any{"m": 4, "freeze_bn_second": freeze}))
		for s := range int64(3) {
			if n := h.ExecCount(s); n != 1 {
				t.Errorf("step %d: %d Exec calls", s, n)
			}
			if n := h.ReadCount(s); n != 0 {
				t.Errorf("step %d: %d values read back, want 0", s, n)
			}
		}
		st := h.Stats(0)
		if freeze && (st.BNUpdate != 12 || st.BNFreeze != 12) || !freeze && st.BNUpdate != 24 || st.BaseSteps != 0 {
			t.Errorf("freeze=%v: stats %+v", freeze, st)
		}
		batch, recs := h.Batch(), h.Grads()
		last := recs[len(recs)-8:]
		for j := range 4 {
			part := batch[8*j : 8*(j+1)]
			if !slices.Equal(last[2*j].Samples, part) || !slices.Equal(last[2*j+1].Samples, part) {
				t.Errorf("sub-batch %d uses %v/%v, want %v", j, last[2*j].Samples, last[2*j+1].Samples, part)
			}
		}
	}
}

// Checkpoint/resume: 3 steps + save + restore into a fresh optimizer and
// host + 2 steps equals 5 uninterrupted steps bitwise.
func TestStateRoundTrip(t *testing.T) {
	ctx := context.Background()
	prob := optimtest.NewMLP(optimtest.MLPConfig{Hidden: 4})
	hp := optimtest.WithHParams(map[string]any{"m": 2, "rho": 0.05, "beta2": 0.9})
	full := optimtest.MustHost(t, prob, optimtest.WithBatchSize(16))
	optFull := newBSAM()
	optimtest.MustRun(t, optFull, full, 5, optimtest.WithLR(0.1), hp)

	a := optimtest.MustHost(t, prob, optimtest.WithBatchSize(16))
	optA := newBSAM()
	optimtest.MustRun(t, optA, a, 3, optimtest.WithLR(0.1), hp, optimtest.WithTotalSteps(5))
	blob, vecs, err := optA.SaveState(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(vecs, []optim.Vec{optA.S(0), optA.Momentum(0), optA.Std(0)}) {
		t.Errorf("state vecs %v", vecs)
	}
	b := optimtest.MustHost(t, prob, optimtest.WithBatchSize(16), optimtest.WithParams(0, a.Params(0)))
	optB := newBSAM()
	r := optimtest.NewHarness(optB, b, optimtest.WithLR(0.1), hp, optimtest.WithStartStep(3))
	if err := r.Configure(ctx, 5); err != nil {
		t.Fatal(err)
	}
	for _, v := range vecs {
		if err := b.SetVec(v, vec(t, a, v)); err != nil {
			t.Fatal(err)
		}
	}
	if err := optB.LoadState(ctx, blob); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Run(ctx, 2); err != nil {
		t.Fatal(err)
	}
	if got, want := b.Params(0), full.Params(0); !slices.Equal(got, want) {
		t.Errorf("resumed w differs from uninterrupted run")
	}
	if !slices.Equal(vec(t, b, optB.S(0)), vec(t, full, optFull.S(0))) {
		t.Errorf("resumed s differs")
	}
	if err := optB.LoadState(ctx, []byte(`{"version":2}`)); err == nil {
		t.Error("unknown state version accepted")
	}
}

func TestTrainsAndPredicts(t *testing.T) {
	ctx := context.Background()
	h := optimtest.MustHost(t, optimtest.NewMLP(optimtest.MLPConfig{Hidden: 8, Samples: 128}), optimtest.WithBatchSize(32))
	opt := bsam.New()
	outs := optimtest.MustRun(t, opt, h, 200, optimtest.WithLR(0.5), optimtest.WithHParams(map[string]any{"m": 2, "rho": 0.01, "dafactor": 4.0}))
	first, last := outs[0].Metrics, outs[len(outs)-1].Metrics
	if !(last["loss"] < 0.7*first["loss"]) {
		t.Errorf("did not train: first %v, last %v", first, last)
	}
	pred, err := opt.Predictive(ctx)
	if err != nil {
		t.Fatal(err)
	}
	e, err := h.Evaluate(ctx, pred)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("train loss %.3f → %.3f; predictive %+v", first["loss"], last["loss"], e)
	if e.Acc < 0.8 || e.NLL > 0.6 {
		t.Errorf("predictive %+v", e)
	}
}

func TestConfigErrors(t *testing.T) {
	tests := []struct {
		name   string
		params map[string]any
		opts   []optimtest.HostOption
		want   string
	}{
		{"unknown", map[string]any{"lr": 0.1}, nil, "unknown"},
		{"order", map[string]any{"update_order": "alg1"}, nil, `"update_order": "alg1" is not one of "code", "paper"`},
		{"s_init", map[string]any{"s_init": 0.0}, nil, `"s_init": 0 is out of range (0,): want > 0`},
		{"m", map[string]any{"m": 0}, nil, `"m": 0 is out of range [1,batch]: want ≥ 1`},
		{"m larger than the batch", map[string]any{"m": 9223372036854775807}, []optimtest.HostOption{optimtest.WithBatchSize(16)}, `"m": 9223372036854775807 is out of range [1,batch]: want ≥ 1 and ≤ 16, the batch size`},
		{"test_mc", map[string]any{"test_mc": 0}, nil, `"test_mc": 0 is out of range [1,): want ≥ 1`},
		{"dafactor", map[string]any{"dafactor": 0.0}, nil, `"dafactor": 0 is out of range (0,): want > 0`},
		{"lr_scale", map[string]any{"lr_scale": -5.0}, nil, `"lr_scale": -5 is out of range (0,): want > 0`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := optimtest.MustHost(t, optimtest.NewMLP(optimtest.MLPConfig{}), tt.opts...)
			_, err := optimtest.Run(context.Background(), bsam.New(), h, 1, optimtest.WithHParams(tt.params))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %v, want containing %q", err, tt.want)
			}
		})
	}
	// Data-free problem with no train size.
	h := optimtest.MustHost(t, signs(2))
	if _, err := optimtest.Run(context.Background(), bsam.New(), h, 1); err == nil || !strings.Contains(err.Error(), "train size") {
		t.Errorf("err = %v", err)
	}
}

// Members: member 0 of an ensemble trains bitwise like a single model (same
// batches, same draws), every member has its own s, g_m and noise, one Exec
// serves all members, and the predictive averages the members' means.
func TestMembers(t *testing.T) {
	ctx := context.Background()
	prob := optimtest.NewMLP(optimtest.MLPConfig{Hidden: 4, Samples: 64})
	hp := optimtest.WithHParams(map[string]any{"m": 2, "rho": 0.05, "beta2": 0.9})
	one := optimtest.MustHost(t, prob, optimtest.WithBatchSize(16))
	optOne := newBSAM()
	optimtest.MustRun(t, optOne, one, 4, optimtest.WithLR(0.1), hp)

	// Every member starts where the single model did, so that only the
	// noise can tell them apart.
	const members = 3
	x0 := optimtest.MustHost(t, prob, optimtest.WithBatchSize(16)).Params(0)
	opts := []optimtest.HostOption{optimtest.WithBatchSize(16), optimtest.WithMembers(members)}
	for m := range members {
		opts = append(opts, optimtest.WithParams(m, x0))
	}
	ens := optimtest.MustHost(t, prob, opts...)
	opt := newBSAM()
	optimtest.MustRun(t, opt, ens, 4, optimtest.WithLR(0.1), hp)
	if !slices.Equal(ens.Params(0), one.Params(0)) {
		t.Error("member 0 of the ensemble differs from the single model")
	}
	if !slices.Equal(vec(t, ens, opt.S(0)), vec(t, one, optOne.S(0))) {
		t.Error("member 0's s differs from the single model's")
	}
	for m := 1; m < members; m++ {
		if slices.Equal(ens.Params(m), ens.Params(0)) {
			t.Errorf("member %d equals member 0: the members share their noise", m)
		}
		if slices.Equal(vec(t, ens, opt.S(m)), vec(t, ens, opt.S(0))) {
			t.Errorf("member %d shares s with member 0", m)
		}
		if st := ens.Stats(m); st.BNUpdate != 4*2*2 {
			t.Errorf("member %d: stats %+v", m, st)
		}
	}
	for s := range int64(4) {
		if n := ens.ExecCount(s); n != 1 {
			t.Errorf("step %d: %d Exec calls", s, n)
		}
	}
	pred, err := opt.Predictive(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := optim.Predictive{Kind: optim.Members, Vecs: []optim.Vec{optim.ParamsOf(0), optim.ParamsOf(1), optim.ParamsOf(2)}}
	if !reflect.DeepEqual(pred, want) {
		t.Errorf("predictive %+v, want %+v", pred, want)
	}
	_, vecs, err := opt.SaveState(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(vecs) != 3*members || vecs[3] != opt.S(1) {
		t.Errorf("state vecs %v", vecs)
	}
}

// lr_scale multiplies the scheduled learning rate: lr 0.1 × 5 steps like
// lr 0.5 (bSAM's recipe on a shared schedule).
func TestLRScale(t *testing.T) {
	run := func(lr, scale float64) []float64 {
		h := optimtest.MustHost(t, optimtest.NewMLP(optimtest.MLPConfig{Hidden: 4}), optimtest.WithBatchSize(32))
		optimtest.MustRun(t, bsam.New(), h, 3, optimtest.WithLR(lr), optimtest.WithHParams(map[string]any{"lr_scale": scale}))
		return h.Params(0)
	}
	a, b, c := run(0.1, 5), run(0.5, 1), run(0.1, 1)
	for i := range a {
		if a[i] != b[i] {
			t.Fatalf("lr 0.1 × lr_scale 5 differs from lr 0.5 at %d: %v vs %v", i, a[i], b[i])
		}
	}
	same := true
	for i := range a {
		same = same && a[i] == c[i]
	}
	if same {
		t.Error("lr_scale had no effect")
	}
}

var update = flag.Bool("update", false, "rewrite testdata/*.golden")

// TestTraceGolden pins the ops that Configure and two steps with m = 2
// send: testdata/trace.golden documents the algorithm.
func TestTraceGolden(t *testing.T) {
	optimtest.TestTraces(t, *update,
		optimtest.TraceCase{Golden: "testdata/trace.golden", New: bsam.New, Params: map[string]any{"m": 2}})
}
