package sparse_test

import (
	"cmp"
	"context"
	"flag"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/optlab/optlab/plugins/sparse"
	"github.com/optlab/optlab/sdk/optim"
	"github.com/optlab/optlab/sdk/optimtest"
)

func hp(params map[string]any) optimtest.RunOption { return optimtest.WithHParams(params) }

// mlp has 64 samples: 4 steps per epoch with batches of 16; its weight
// tensors are fc1 [6, 4] and fc2 [3, 6].
func mlp() optimtest.Problem {
	return optimtest.NewMLP(optimtest.MLPConfig{Hidden: 6, Samples: 64, Seed: 2})
}

var momentum = optimtest.BaseOptimizer{Momentum: 0.9, Nesterov: true, WeightDecay: 5e-4}

func vec(t *testing.T, h *optimtest.Host, v optim.Vec) []float64 {
	t.Helper()
	d, err := h.Vec(v)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// ref re-implements one sparse network's training in float64 from
// FreeTickets' semantics (sparselearning/core.py), fed with the gradients
// the host recorded, to check the plugin's programs: the base step with
// PyTorch's SGD semantics (optimtest's BaseStep) and its momentum buffer
// left unmasked, as Masking.apply_mask leaves it; the mask applied after
// every step; and truncate_weights with magnitude death and gradient growth
// at exact per-layer counts, by plain sorting.
type ref struct {
	theta, buf, mask []float64
	layers           []sparse.Layer
	base             optimtest.BaseOptimizer
}

// newRef starts a reference from the plugin's initial mask and the masked
// initial parameters, after checking them.
func newRef(t *testing.T, h *optimtest.Host, sp *sparse.Sparse, m int, base optimtest.BaseOptimizer) *ref {
	t.Helper()
	r := &ref{theta: h.Params(m), mask: vec(t, h, sp.Mask(m)), layers: sp.Layers(m), base: base}
	r.check(t, "after Configure")
	return r
}

// check verifies the mask's invariants: binary, exactly Active ones on
// every sparse layer, ones elsewhere, and the parameters zero where masked.
func (r *ref) check(t *testing.T, when string) {
	t.Helper()
	in := make([]bool, len(r.mask))
	for _, l := range r.layers {
		n := int64(0)
		for i := l.Offset; i < l.Offset+l.Size; i++ {
			in[i] = true
			n += int64(r.mask[i])
		}
		if n != l.Active {
			t.Errorf("%s: layer %s has %d active weights, want %d", when, l.Name, n, l.Active)
		}
	}
	for i, v := range r.mask {
		switch {
		case v != 0 && v != 1:
			t.Fatalf("%s: mask[%d] = %v", when, i, v)
		case !in[i] && v != 1:
			t.Errorf("%s: mask[%d] = 0 outside the sparse layers", when, i)
		case v == 0 && r.theta[i] != 0:
			t.Errorf("%s: masked parameter %d = %v", when, i, r.theta[i])
		}
	}
}

// step is the base step (optimtest's BaseStep, PyTorch's SGD) with
// gradient g and rate lr, then the mask.
func (r *ref) step(g []float64, lr float64) {
	b := r.base
	d := make([]float64, len(r.theta))
	for i := range d {
		d[i] = g[i] + b.WeightDecay*r.theta[i]
	}
	if b.Momentum != 0 {
		if r.buf == nil {
			r.buf = slices.Clone(d)
		} else {
			for i := range d {
				r.buf[i] = b.Momentum*r.buf[i] + (1-b.Dampening)*d[i]
			}
		}
		for i := range d {
			if b.Nesterov {
				d[i] += b.Momentum * r.buf[i]
			} else {
				d[i] = r.buf[i]
			}
		}
	}
	for i := range r.theta {
		r.theta[i] -= lr * d[i]
		r.theta[i] *= r.mask[i]
	}
}

// explore is truncate_weights at death rate rate with exact counts: in
// every layer the k = ⌈rate·active⌉ active weights of smallest |θ| are
// pruned (set to 0) and the k inactive weights of largest |g| regrown (at
// 0), ties to the lower index. It returns, per layer, the pruned and the
// regrown indices.
func (r *ref) explore(g []float64, rate float64) (pruned, regrown [][]int) {
	for _, l := range r.layers {
		k := int(math.Ceil(rate * float64(l.Active)))
		var active, inactive []int
		for i := int(l.Offset); i < int(l.Offset+l.Size); i++ {
			if r.mask[i] == 1 {
				active = append(active, i)
			}
		}
		byAbs := func(x []float64) func(a, b int) int {
			return func(a, b int) int { return cmp.Compare(math.Abs(x[b]), math.Abs(x[a])) }
		}
		slices.SortStableFunc(active, byAbs(r.theta))
		p := active[len(active)-k:]
		for _, i := range p {
			r.mask[i] = 0
			r.theta[i] *= 0
		}
		for i := int(l.Offset); i < int(l.Offset+l.Size); i++ {
			if r.mask[i] == 0 {
				inactive = append(inactive, i)
			}
		}
		slices.SortStableFunc(inactive, byAbs(g))
		for _, i := range inactive[:k] {
			r.mask[i] = 1
		}
		pruned, regrown = append(pruned, slices.Clone(p)), append(regrown, slices.Clone(inactive[:k]))
	}
	return pruned, regrown
}

// gradOf returns the gradient pass of member m in step s that the host
// recorded.
func gradOf(t *testing.T, h *optimtest.Host, s int64, m int) optimtest.GradRecord {
	t.Helper()
	var out []optimtest.GradRecord
	for _, g := range h.Grads() {
		if g.Step == s && g.Member == m {
			out = append(out, g)
		}
	}
	if len(out) != 1 {
		t.Fatalf("step %d: %d gradient passes of member %d, want 1", s, len(out), m)
	}
	return out[0]
}

// compare checks the plugin's parameters and mask of member m against r,
// bitwise.
func (r *ref) compare(t *testing.T, h *optimtest.Host, sp *sparse.Sparse, m int, when string) {
	t.Helper()
	if got := h.Params(m); !slices.Equal(got, r.theta) {
		t.Fatalf("%s: member %d's parameters differ from the reference:\n got %v\nwant %v", when, m, got, r.theta)
	}
	if got := vec(t, h, sp.Mask(m)); !slices.Equal(got, r.mask) {
		t.Fatalf("%s: member %d's mask differs from the reference:\n got %v\nwant %v", when, m, got, r.mask)
	}
	r.check(t, when)
}

// setDiff returns the indices where a is 1 and b is 0.
func setDiff(a, b []float64) []int {
	var out []int
	for i := range a {
		if a[i] == 1 && b[i] == 0 {
			out = append(out, i)
		}
	}
	return out
}

// DST: every member's run equals the reference step by step and bitwise:
// the gradient is taken at the masked parameters, the base step (momentum,
// Nesterov, weight decay) is followed by the mask, and every ΔT steps each
// layer prunes and regrows exactly ⌈p(s)·active⌉ weights with the cosine
// death rate p(s), the regrowth by the step's gradient.
func TestDSTMatchesReference(t *testing.T) {
	ctx := context.Background()
	const steps, freq, lr = 16, 2, 0.1
	h := optimtest.MustHost(t, mlp(), optimtest.WithBatchSize(16), optimtest.WithMembers(2), optimtest.WithBase(momentum))
	opt := sparse.NewDST()
	r := optimtest.NewHarness(opt, h, optimtest.WithLR(lr),
		hp(map[string]any{"density": 0.5, "update_frequency": freq, "death_rate": 0.6}))
	if err := r.Configure(ctx, steps); err != nil {
		t.Fatal(err)
	}
	sp := opt.(*sparse.Sparse)
	refs := []*ref{newRef(t, h, sp, 0, momentum), newRef(t, h, sp, 1, momentum)}
	if slices.Equal(refs[0].mask, refs[1].mask) {
		t.Error("the members' initial masks are the same")
	}
	changed := 0
	for s := range int64(steps) {
		if _, err := r.Step(ctx); err != nil {
			t.Fatal(err)
		}
		for m, rf := range refs {
			g := gradOf(t, h, s, m)
			if !slices.Equal(g.At, rf.theta) {
				t.Fatalf("step %d: member %d's gradient was not taken at the reference's (masked) parameters", s, m)
			}
			rf.step(g.Grad, lr)
			if (s+1)%freq == 0 {
				before := slices.Clone(rf.mask)
				rate := 0.005 + (0.6-0.005)*(1+math.Cos(math.Pi*float64(s+1)/steps))/2
				pruned, regrown := rf.explore(g.Grad, rate)
				for i, l := range rf.layers {
					k := int(math.Ceil(rate * float64(l.Active)))
					if len(pruned[i]) != k || len(regrown[i]) != k {
						t.Fatalf("step %d: layer %s pruned %d and regrew %d, want %d", s, l.Name, len(pruned[i]), len(regrown[i]), k)
					}
				}
				// What left the mask and what joined it balance: the pruned
				// weights that were not regrown at once.
				out, in := setDiff(before, rf.mask), setDiff(rf.mask, before)
				if len(out) != len(in) {
					t.Fatalf("step %d: %d weights left the mask, %d joined", s, len(out), len(in))
				}
				changed += len(out)
			}
			rf.compare(t, h, sp, m, fmt.Sprintf("step %d", s))
		}
	}
	if changed == 0 {
		t.Error("no topology update changed a mask")
	}
	if want := (optim.Predictive{Kind: optim.Members, Vecs: []optim.Vec{optim.ParamsOf(0), optim.ParamsOf(1)},
		Masks: []optim.Vec{sp.Mask(0), sp.Mask(1)}}); !reflect.DeepEqual(predictive(t, opt), want) {
		t.Errorf("predictive %+v, want %+v", predictive(t, opt), want)
	}
}

// The counts stay exact when magnitudes tie at zero: active weights of
// exactly 0 (kept or pruned, never replaced by inactive zeros) and
// inactive weights of zero gradient (regrown when k exceeds the nonzero
// gradients, never an active weight counted twice). The linear loss's
// gradient is nonzero on 5 of 40 coordinates and the start has zeros.
func TestCountsExactWithTies(t *testing.T) {
	ctx := context.Background()
	c, x0 := make([]float64, 40), make([]float64, 40)
	for i := range c {
		if i%8 == 3 {
			c[i] = float64(i%5) - 2.5
		}
		if i%3 == 0 {
			x0[i] = float64(i) / 40
		}
	}
	for _, rate := range []float64{0.5, 1} {
		h := optimtest.MustHost(t, &optimtest.Linear{C: c, X0: x0}, optimtest.WithBase(optimtest.BaseOptimizer{Momentum: 0.5}))
		opt := sparse.NewDST()
		r := optimtest.NewHarness(opt, h, optimtest.WithLR(0.05),
			hp(map[string]any{"density": 0.3, "update_frequency": 1, "death_rate": rate, "decay": "constant"}))
		if err := r.Configure(ctx, 12); err != nil {
			t.Fatal(err)
		}
		sp := opt.(*sparse.Sparse)
		if l := sp.Layers(0); len(l) != 1 || l[0].Active != 12 {
			t.Fatalf("layers %+v, want one of 12 active weights", l)
		}
		rf := newRef(t, h, sp, 0, optimtest.BaseOptimizer{Momentum: 0.5})
		for s := range int64(12) {
			if _, err := r.Step(ctx); err != nil {
				t.Fatal(err)
			}
			g := gradOf(t, h, s, 0)
			rf.step(g.Grad, 0.05)
			rf.explore(g.Grad, rate)
			rf.compare(t, h, sp, 0, fmt.Sprintf("rate %v, step %d", rate, s))
		}
	}
}

func predictive(t *testing.T, opt optim.Optimizer) optim.Predictive {
	t.Helper()
	p, err := opt.Predictive(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// edstParams is an EDST run of 9 epochs of 4 steps with 3 tickets: one
// epoch of exploration, then phases of 8/3 epochs, so tickets after epochs
// 4 and 7 (steps 15 and 27), when a regular update (every 4 steps) is due
// too; the rates of epochs 1…9 are edstRates.
var edstParams = map[string]any{"density": 0.5, "update_frequency": 4, "explore_epochs": 1,
	"explore_lr": 0.2, "refine_lr": 0.05, "refine_lr_final": 0.01, "large_death_rate": 0.8}

var edstRates = []float64{0.2, 0.05, 0.05, 0.01, 0.05, 0.01, 0.01, 0.05, 0.01}

// EDST: member 0 trains as the reference with FreeTickets' phase rates;
// at the end of refinement phases 0 and 1 its model (after the regular
// update due then) is copied into members 1 and 2 with its BatchNorm
// statistics, and the large exploration step (q = 0.8, the same gradient)
// follows; the predictive averages the tickets taken so far.
func TestEDSTMatchesReference(t *testing.T) {
	ctx := context.Background()
	h := optimtest.MustHost(t, mlp(), optimtest.WithBatchSize(16), optimtest.WithMembers(3), optimtest.WithBase(momentum))
	opt := sparse.NewEDST()
	r := optimtest.NewHarness(opt, h, optimtest.WithLR(0.3), hp(edstParams))
	if err := r.Configure(ctx, 36); err != nil {
		t.Fatal(err)
	}
	sp := opt.(*sparse.Sparse)
	rf := newRef(t, h, sp, 0, momentum)
	init := [][]float64{nil, h.Params(1), h.Params(2)}
	var tickets, ticketMasks [][]float64
	for s := range int64(36) {
		if _, err := r.Step(ctx); err != nil {
			t.Fatal(err)
		}
		lr := edstRates[s/4]
		if got := h.LR(0); got != lr {
			t.Fatalf("step %d: rate %v, want %v", s, got, lr)
		}
		g := gradOf(t, h, s, 0)
		if !slices.Equal(g.At, rf.theta) {
			t.Fatalf("step %d: the gradient was not taken at the reference's parameters", s)
		}
		rf.step(g.Grad, lr)
		if (s+1)%4 == 0 {
			rf.explore(g.Grad, 0.5)
		}
		if s == 15 || s == 27 {
			tickets = append(tickets, slices.Clone(rf.theta))
			ticketMasks = append(ticketMasks, slices.Clone(rf.mask))
			label, _ := h.BNStats(optim.Params)
			if got, _ := h.BNStats(optim.ParamsOf(len(tickets))); got != label {
				t.Errorf("ticket %d carries BatchNorm statistics %d, the model's are %d", len(tickets)-1, got, label)
			}
			rf.explore(g.Grad, 0.8)
		}
		rf.compare(t, h, sp, 0, fmt.Sprintf("step %d", s))
		want := []optim.Vec{optim.Params}
		for k := range tickets {
			want = slices.Insert(want, k, optim.ParamsOf(k+1))
		}
		if got := predictive(t, opt); !slices.Equal(got.Vecs, want) || got.Kind != optim.Members {
			t.Fatalf("step %d: predictive %+v, want Members over %v", s, got, want)
		}
		for m := len(tickets) + 1; m < 3; m++ {
			if !slices.Equal(h.Params(m), init[m]) {
				t.Fatalf("step %d: member %d changed before its ticket", s, m)
			}
		}
	}
	for k, tk := range tickets {
		if !slices.Equal(h.Params(k+1), tk) {
			t.Errorf("member %d is not ticket %d", k+1, k)
		}
	}
	// The masks the host saves beside the tickets: each ticket's mask when
	// it was taken, and member 0's current one.
	masks := predictive(t, opt).Masks
	if len(masks) != 3 {
		t.Fatalf("%d masks for 3 tickets", len(masks))
	}
	for k, want := range append(ticketMasks, rf.mask) {
		if got := vec(t, h, masks[k]); !slices.Equal(got, want) {
			t.Errorf("mask %d is not ticket %d's", k, k)
		}
	}
	if h.Stats(1).BaseSteps+h.Stats(2).BaseSteps != 0 || h.Stats(0).BaseSteps != 36 {
		t.Errorf("base steps %d, %d, %d: want 36 on member 0 only", h.Stats(0).BaseSteps, h.Stats(1).BaseSteps, h.Stats(2).BaseSteps)
	}
	if e, err := h.Evaluate(ctx, predictive(t, opt)); err != nil || math.IsNaN(e.NLL) {
		t.Errorf("evaluating the tickets: %+v, %v", e, err)
	}
}

// explore_epochs = -1 takes a third of the run's epochs, which Resolved
// reports; explore_lr = 0 follows the experiment's schedule.
func TestEDSTResolvedAndScheduledExploration(t *testing.T) {
	h := optimtest.MustHost(t, mlp(), optimtest.WithBatchSize(16), optimtest.WithMembers(2))
	opt := sparse.NewEDST()
	var rates []float64
	optimtest.MustRun(t, opt, h, 28, optimtest.WithSchedule(func(step int64, _ int) float64 { return 1 + float64(step) }),
		hp(map[string]any{"explore_lr": 0.0}),
		optimtest.WithAfterStep(func(optim.StepInput, optim.StepOutput) error { rates = append(rates, h.LR(0)); return nil }))
	if got := opt.Resolved(); !reflect.DeepEqual(got, map[string]any{"explore_epochs": int64(2)}) {
		t.Errorf("resolved %v, want explore_epochs 2 (7 epochs / 3)", got)
	}
	// Epochs 1–2 explore at the schedule's rate; phases of 2.5 epochs.
	want := []float64{1, 2, 3, 4, 5, 6, 7, 8, 0.01, 0.01, 0.01, 0.01, 0.01, 0.01, 0.01, 0.01, 0.001, 0.001, 0.001, 0.001,
		0.01, 0.01, 0.01, 0.01, 0.001, 0.001, 0.001, 0.001}
	if !slices.Equal(rates, want) {
		t.Errorf("rates %v, want %v", rates, want)
	}
	if got := len(predictive(t, opt).Vecs); got != 2 {
		t.Errorf("%d tickets, want 2", got)
	}
	if r := sparse.NewDST().Resolved(); r != nil {
		t.Errorf("dst resolved %v", r)
	}
}

// A run cut in two by SaveState, a fresh Configure on a fresh host, the
// host's restore of the live parameters and of the saved vectors, and
// LoadState ends bitwise where the uninterrupted run does: every member's
// parameters, the masks and the predictive (the base optimizer is plain
// SGD: optimtest's host does not checkpoint its state).
func TestResume(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name       string
		new        func() optim.Optimizer
		params     map[string]any
		members    int
		total, cut int
	}{
		{"dst", sparse.NewDST, map[string]any{"density": 0.5, "update_frequency": 3}, 2, 20, 7},
		{"edst after a ticket", sparse.NewEDST, edstParams, 3, 36, 17},
		{"edst before a ticket", sparse.NewEDST, edstParams, 3, 36, 15},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			host := func() *optimtest.Host {
				return optimtest.MustHost(t, mlp(), optimtest.WithBatchSize(16), optimtest.WithMembers(tt.members))
			}
			lr := optimtest.WithLR(0.1)
			straight := host()
			full := tt.new()
			optimtest.MustRun(t, full, straight, tt.total, lr, hp(tt.params))

			first := host()
			a := tt.new()
			optimtest.MustRun(t, a, first, tt.cut, lr, hp(tt.params), optimtest.WithTotalSteps(int64(tt.total)))
			blob, vecs, err := a.SaveState(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if len(vecs) == 0 {
				t.Fatal("no mask among the saved vectors")
			}
			h := host()
			b := tt.new()
			r := optimtest.NewHarness(b, h, lr, hp(tt.params), optimtest.WithStartStep(int64(tt.cut)))
			if err := r.Configure(ctx, int64(tt.total)); err != nil {
				t.Fatal(err)
			}
			// The host restores the checkpoint after Configure.
			for m := range tt.members {
				if err := h.SetVec(optim.ParamsOf(m), first.Params(m)); err != nil {
					t.Fatal(err)
				}
			}
			for _, v := range vecs {
				if err := h.SetVec(v, vec(t, first, v)); err != nil {
					t.Fatal(err)
				}
			}
			if err := b.LoadState(ctx, blob); err != nil {
				t.Fatal(err)
			}
			if _, err := r.Run(ctx, tt.total-tt.cut); err != nil {
				t.Fatal(err)
			}
			for m := range tt.members {
				if !slices.Equal(h.Params(m), straight.Params(m)) {
					t.Errorf("member %d: resumed parameters differ from the uninterrupted run", m)
				}
			}
			for _, v := range vecs {
				if !slices.Equal(vec(t, h, v), vec(t, straight, v)) {
					t.Errorf("vector %d differs after the resume", v)
				}
			}
			if pb, pf := predictive(t, b), predictive(t, full); !reflect.DeepEqual(pb, pf) {
				t.Errorf("resumed predictive %+v, uninterrupted %+v", pb, pf)
			}
		})
	}
}

func TestLoadStateErrors(t *testing.T) {
	ctx := context.Background()
	if err := sparse.NewDST().LoadState(ctx, nil); err == nil {
		t.Error("load state before configure")
	}
	h := optimtest.MustHost(t, mlp(), optimtest.WithBatchSize(16), optimtest.WithMembers(2))
	opt := sparse.NewEDST()
	optimtest.MustRun(t, opt, h, 36, hp(edstParams))
	blob, _, err := opt.SaveState(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := opt.LoadState(ctx, blob); err != nil {
		t.Errorf("loading its own state: %v", err)
	}
	tests := []struct{ blob, want string }{
		{`{"version":2}`, "version"},
		{`{"version":1,"kind":"dst"}`, `saved by "dst"`},
		{`{"version":1,"kind":"edst","active":[[11,9]]}`, "active counts"},
		{`{"version":1,"kind":"edst","active":[[11,10]],"taken":2}`, "2 tickets taken"},
		{`not json`, "load state"},
	}
	for _, tt := range tests {
		if err := opt.LoadState(ctx, []byte(tt.blob)); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("LoadState(%s) = %v, want containing %q", tt.blob, err, tt.want)
		}
	}
}

// layoutHost is a host with a given layout whose programs do nothing: for
// configuration errors that the real hosts' layouts cannot make.
type layoutHost struct{ l optim.Layout }

func (h layoutHost) Layout(context.Context) (optim.Layout, error) { return h.l, nil }

func (h layoutHost) Exec(context.Context, *optim.Program) (optim.Result, error) {
	return optim.Result{}, nil
}

func TestConfigErrors(t *testing.T) {
	ctx := context.Background()
	w := func(name string, offset int64, shape ...int64) optim.Tensor {
		return optim.Tensor{Name: name, Shape: shape, Offset: offset, Kind: "weight"}
	}
	small := optim.MemberLayout{Arch: "a", Numel: 12, Tensors: []optim.Tensor{w("w", 0, 3, 4)}}
	other := optim.MemberLayout{Arch: "b", Numel: 12, Tensors: []optim.Tensor{w("w", 0, 4, 3)}}
	huge := optim.MemberLayout{Arch: "big", Numel: 1<<25 + 4, Tensors: []optim.Tensor{w("w", 0, 1<<13, 1<<12), w("v", 1<<25, 2, 2)}}
	tests := []struct {
		name    string
		new     func() optim.Optimizer
		host    optim.Host
		params  map[string]any
		members int
		want    string
	}{
		{"density 0", sparse.NewDST, layoutHost{optim.Layout{Members: []optim.MemberLayout{small}}}, map[string]any{"density": 0.0}, 1, "density"},
		{"unknown decay", sparse.NewDST, layoutHost{optim.Layout{Members: []optim.MemberLayout{small}}}, map[string]any{"decay": "linear"}, 1, "decay"},
		{"edst parameter of dst", sparse.NewDST, layoutHost{optim.Layout{Members: []optim.MemberLayout{small}}}, map[string]any{"explore_epochs": 3}, 1, "explore_epochs"},
		{"edst of two archs", sparse.NewEDST, layoutHost{optim.Layout{Members: []optim.MemberLayout{small, other}}}, nil, 2, "one arch"},
		{"layer over 2^24", sparse.NewDST, layoutHost{optim.Layout{Members: []optim.MemberLayout{huge}}}, nil, 1, "2²⁴"},
		// hardening4/09: a run that refines no ticket is refused, as SWA's
		{"edst exploring the whole run", sparse.NewEDST, layoutHost{optim.Layout{Members: []optim.MemberLayout{small}}}, map[string]any{"explore_epochs": 2}, 1, "no ticket would be refined, nothing ensembled"},
		{"variational member", sparse.NewDST, optimtest.MustHost(t, mlp(), optimtest.WithVariational(0, nil, 0.1, 1, "qp")), nil, 1, "variational"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.new().Configure(ctx, tt.host, optim.Config{Params: tt.params, TotalSteps: 8, StepsPerEpoch: 4, Members: tt.members})
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Configure: %v, want an error containing %q", err, tt.want)
			}
		})
	}
	if err := sparse.NewEDST().Configure(ctx, layoutHost{optim.Layout{Members: []optim.MemberLayout{small}}},
		optim.Config{TotalSteps: 8, Members: 1}); err == nil || !strings.Contains(err.Error(), "steps per epoch") {
		t.Errorf("edst without steps per epoch: %v", err)
	}
	if _, err := sparse.NewDST().Step(ctx, optim.StepInput{}); err == nil {
		t.Error("step before configure")
	}
}

// The plugins' names, capabilities and defaults: FreeTickets' CIFAR
// settings (density 0.2, p = 0.5, ΔT = 1000, q = 0.8, ERK), the death
// rate decaying for DST and constant for EDST (its README command).
func TestInfo(t *testing.T) {
	tests := []struct {
		new      func() optim.Optimizer
		name     string
		features optim.Features
		defaults map[string]any
	}{
		{sparse.NewDST, "dst", optim.Features{Members: true, MemberDataOrder: true, Predictive: true, State: true},
			map[string]any{"density": 0.2, "death_rate": 0.5, "update_frequency": int64(1000), "decay": "cosine", "erk_power_scale": 1.0}},
		{sparse.NewEDST, "edst", optim.Features{Members: true, Predictive: true, State: true},
			map[string]any{"density": 0.2, "death_rate": 0.5, "update_frequency": int64(1000), "decay": "constant", "erk_power_scale": 1.0,
				"explore_epochs": int64(-1), "large_death_rate": 0.8, "explore_lr": 0.1, "refine_lr": 0.01, "refine_lr_final": 0.001}},
	}
	for _, tt := range tests {
		info := tt.new().Info()
		if info.Name != tt.name || info.Features != tt.features {
			t.Errorf("%s: info %+v", tt.name, info)
		}
		got := map[string]any{}
		for _, p := range info.Params {
			got[p.Name] = p.Default
			if p.Doc == "" {
				t.Errorf("%s: %s has no doc", tt.name, p.Name)
			}
		}
		if !reflect.DeepEqual(got, tt.defaults) {
			t.Errorf("%s: defaults %v, want %v", tt.name, got, tt.defaults)
		}
	}
}

var update = flag.Bool("update", false, "rewrite testdata/*.golden")

// TestTraceGolden pins the ops that Configure and the steps send: the
// golden files document the algorithm. trace_dst.golden: two members, a
// topology update after every step. trace_edst.golden: one step per
// epoch, so that five steps show the exploration epoch, both refinement
// phases with their two rates, and at the end of epoch 3 the regular
// update, the ticket and the large exploration step in one program.
func TestTraceGolden(t *testing.T) {
	optimtest.TestTraces(t, *update, optimtest.TraceCase{Golden: "testdata/trace_dst.golden", New: sparse.NewDST,
		Members: 2, Params: map[string]any{"density": 0.5, "update_frequency": 1}})
	t.Run("testdata/trace_edst.golden", func(t *testing.T) {
		h := optimtest.MustHost(t, optimtest.NewMLP(optimtest.MLPConfig{Hidden: 4, Samples: 64}),
			optimtest.WithBatchSize(16), optimtest.WithMembers(2))
		var trace strings.Builder
		optimtest.MustRun(t, sparse.NewEDST(), h, 5, optimtest.WithLR(0.1), optimtest.WithStepsPerEpoch(1), optimtest.WithTrace(&trace),
			hp(map[string]any{"density": 0.5, "update_frequency": 3, "explore_epochs": 1}))
		optimtest.Golden(t, "testdata/trace_edst.golden", []byte(trace.String()), *update)
	})
}
