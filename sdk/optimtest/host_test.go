package optimtest_test

import (
	"context"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/optlab/optlab/sdk/optim"
	"github.com/optlab/optlab/sdk/optimtest"
)

// exec runs p with a Read of every scalar register appended.
func exec(t *testing.T, h *optimtest.Host, p *optim.Program) optim.Result {
	t.Helper()
	r, err := h.Exec(context.Background(), p.ReadAll())
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func vec(t *testing.T, h *optimtest.Host, v optim.Vec) []float64 {
	t.Helper()
	d, err := h.Vec(v)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// TestFailedExecRecorded checks that a failing program is recorded with its
// error, here a batch cut into more parts than it has samples (the other
// errors of ops are in the conformance suite).
func TestFailedExecRecorded(t *testing.T) {
	h := optimtest.MustHost(t, optimtest.NewMLP(optimtest.MLPConfig{}), optimtest.WithMembers(2), optimtest.WithBatchSize(16))
	p := optim.Prog()
	p.Grad(0, 0, optim.Batch{Of: 17}, optim.BNUpdate)
	_, err := h.Exec(context.Background(), p)
	if want := "cannot be cut"; err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("err = %v, want containing %q", err, want)
	}
	if rec := h.Execs(); len(rec) != 1 || rec[0].Err == nil {
		t.Errorf("failed exec not recorded: %+v", rec)
	}
}

// TestHandlesAndStats checks the Handles listing and the per-member
// BatchNorm counters.
func TestHandlesAndStats(t *testing.T) {
	h := optimtest.MustHost(t, &optimtest.Linear{C: []float64{1, 1}}, optimtest.WithMembers(2))
	exec(t, h, optim.Prog().Alloc(1, 0).Alloc(2, 1).Fill(1, optim.K(3)).Free(1).Alloc(1, 0))
	if got := h.Handles(); !slices.Equal(got, []optim.Vec{1, 2}) {
		t.Errorf("handles %v", got)
	}
	// A Grad at a vector allocated for member 1 counts for member 1.
	p := optim.Prog()
	p.Grad(0, 2, optim.Batch{}, optim.BNFreeze)
	p.Grad(0, optim.ParamsOf(1), optim.Batch{}, optim.BNUpdate)
	exec(t, h, p)
	if s := h.Stats(1); s.BNFreeze != 1 || s.BNUpdate != 1 {
		t.Errorf("member 1 stats %+v", s)
	}
	if s := h.Stats(0); s != (optimtest.MemberStats{}) {
		t.Errorf("member 0 stats %+v", s)
	}
}

func TestBatchSplit(t *testing.T) {
	h := optimtest.MustHost(t, optimtest.NewMLP(optimtest.MLPConfig{Samples: 50}), optimtest.WithBatchSize(10))
	h.BeginStep(optim.StepInput{Step: 2})
	batch := h.Batch()
	if len(batch) != 10 {
		t.Fatalf("batch %v", batch)
	}
	samples := func(bs ...optim.Batch) [][]int {
		p := optim.Prog()
		for _, b := range bs {
			p.Grad(0, optim.Params, b, optim.BNUpdate)
		}
		n := len(h.Grads())
		exec(t, h, p)
		var out [][]int
		for _, g := range h.Grads()[n:] {
			out = append(out, g.Samples)
		}
		return out
	}
	s := samples(optim.Batch{}, optim.Batch{Part: 0, Of: 2}, optim.Batch{Part: 1, Of: 2},
		optim.Batch{Part: 0, Of: 2, Shuffle: 7}, optim.Batch{Part: 1, Of: 2, Shuffle: 7},
		optim.Batch{Part: 0, Of: 2, Shuffle: 8}, optim.Batch{Part: 2, Of: 3})
	if !slices.Equal(s[0], batch) {
		t.Errorf("whole batch %v, want %v", s[0], batch)
	}
	if !slices.Equal(s[1], batch[:5]) || !slices.Equal(s[2], batch[5:]) {
		t.Errorf("loader-order halves %v %v of %v", s[1], s[2], batch)
	}
	union := slices.Sorted(slices.Values(append(slices.Clone(s[3]), s[4]...)))
	if !slices.Equal(union, slices.Sorted(slices.Values(batch))) {
		t.Errorf("shuffled halves %v %v are not complementary", s[3], s[4])
	}
	if slices.Equal(s[3], s[1]) || slices.Equal(s[3], s[5]) {
		t.Errorf("shuffle did not permute: %v %v %v", s[1], s[3], s[5])
	}
	if !slices.Equal(s[6], batch[6:9]) {
		t.Errorf("uneven last part %v, want %v (remainder dropped)", s[6], batch[6:9])
	}
	// The same Shuffle gives the same permutation in a later program.
	if again := samples(optim.Batch{Part: 0, Of: 2, Shuffle: 7}); !slices.Equal(again[0], s[3]) {
		t.Errorf("same shuffle, different part: %v vs %v", again[0], s[3])
	}
	// The loss of a part is the mean over its samples.
	g := h.Grads()
	l0, l1, lw := g[1].Loss, g[2].Loss, g[0].Loss
	if math.Abs((l0+l1)/2-lw) > 1e-14 {
		t.Errorf("half losses %v %v do not average to %v", l0, l1, lw)
	}
}

func TestLoaderEpochs(t *testing.T) {
	h := optimtest.MustHost(t, optimtest.NewMLP(optimtest.MLPConfig{Samples: 25}), optimtest.WithBatchSize(10))
	if h.StepsPerEpoch() != 2 {
		t.Fatalf("steps per epoch %d, want 2 (drop last)", h.StepsPerEpoch())
	}
	var epoch0, epoch1 []int
	for s := range int64(4) {
		h.BeginStep(optim.StepInput{Step: s})
		if s < 2 {
			epoch0 = append(epoch0, h.Batch()...)
		} else {
			epoch1 = append(epoch1, h.Batch()...)
		}
	}
	seen := map[int]bool{}
	for _, i := range epoch0 {
		if seen[i] {
			t.Fatalf("sample %d twice in one epoch", i)
		}
		seen[i] = true
	}
	if slices.Equal(epoch0, epoch1) {
		t.Error("epochs share the same order")
	}
	h2 := optimtest.MustHost(t, optimtest.NewMLP(optimtest.MLPConfig{Samples: 25}), optimtest.WithBatchSize(10))
	h2.BeginStep(optim.StepInput{Step: 3})
	h.BeginStep(optim.StepInput{Step: 3})
	if !slices.Equal(h.Batch(), h2.Batch()) {
		t.Error("loader is not a function of (seed, step)")
	}
}

// TestRandNHostStream checks that seed-0 draws are reproducible from the
// host seed (their other properties are in the conformance suite).
func TestRandNHostStream(t *testing.T) {
	n := 20000
	h := optimtest.MustHost(t, &optimtest.Linear{C: make([]float64, n)})
	exec(t, h, optim.Prog().Alloc(1, 0).Alloc(3, 0).RandN(1, 3, 42).RandN(3, 3, 0))
	c := vec(t, h, 3)
	h2 := optimtest.MustHost(t, &optimtest.Linear{C: make([]float64, n)})
	exec(t, h2, optim.Prog().Alloc(3, 0).RandN(3, 3, 0))
	if !slices.Equal(vec(t, h2, 3), c) {
		t.Error("host stream not reproducible from the host seed")
	}
}

// gradStep is a program that draws the gradient into handle 1 and takes a
// base step with it.
func gradStep() *optim.Program {
	p := optim.Prog()
	p.Grad(1, optim.Params, optim.Batch{}, optim.BNUpdate)
	return p.BaseStep(optim.Params, 1)
}

// sgdRef is an independent PyTorch-SGD reference step.
func sgdRef(theta, g, buf []float64, first bool, lr, mu, wd float64, nesterov bool) {
	for i := range theta {
		d := g[i] + wd*theta[i]
		if mu != 0 {
			if first {
				buf[i] = d
			} else {
				buf[i] = mu*buf[i] + d
			}
			if nesterov {
				d += mu * buf[i]
			} else {
				d = buf[i]
			}
		}
		theta[i] -= lr * d
	}
}

func TestBaseStepSGD(t *testing.T) {
	q := &optimtest.Quadratic{A: [][]float64{{2, 0.5}, {0.5, 1}}, B: []float64{1, -1}, X0: []float64{0.3, -0.8}}
	tests := []struct {
		name     string
		mu, wd   float64
		nesterov bool
	}{
		{"plain", 0, 0, false},
		{"momentum", 0.9, 0, false},
		{"momentum wd", 0.9, 5e-4, false},
		{"nesterov wd", 0.9, 1e-2, true},
		{"wd only", 0, 0.1, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := optimtest.MustHost(t, q, optimtest.WithBase(optimtest.BaseOptimizer{Momentum: tt.mu, WeightDecay: tt.wd, Nesterov: tt.nesterov}))
			theta, buf, g := slices.Clone(q.X0), make([]float64, 2), make([]float64, 2)
			exec(t, h, optim.Prog().Alloc(1, 0))
			for s := range int64(5) {
				lr := 0.1 / float64(s+1)
				h.BeginStep(optim.StepInput{Step: s, LR: lr})
				exec(t, h, gradStep())
				q.Loss(theta, nil, g)
				sgdRef(theta, g, buf, s == 0, lr, tt.mu, tt.wd, tt.nesterov)
				if got := h.Params(0); !slices.Equal(got, theta) {
					t.Fatalf("step %d: host %v, reference %v", s, got, theta)
				}
			}
			if h.Stats(0).BaseSteps != 5 {
				t.Errorf("base steps %d", h.Stats(0).BaseSteps)
			}
		})
	}
}

func TestBaseStepAdam(t *testing.T) {
	q := &optimtest.Quadratic{A: [][]float64{{2, 0}, {0, 1}}, X0: []float64{1, -2}}
	const lr, b1, b2, eps, wd = 0.01, 0.9, 0.999, 1e-8, 0.1
	h := optimtest.MustHost(t, q, optimtest.WithBase(optimtest.BaseOptimizer{Adam: true, WeightDecay: wd}))
	theta, m, v, g := slices.Clone(q.X0), make([]float64, 2), make([]float64, 2), make([]float64, 2)
	exec(t, h, optim.Prog().Alloc(1, 0))
	for s := range 4 {
		h.BeginStep(optim.StepInput{Step: int64(s), LR: lr})
		exec(t, h, gradStep())
		q.Loss(theta, nil, g)
		for i := range theta {
			d := g[i] + wd*theta[i]
			m[i] = b1*m[i] + (1-b1)*d
			v[i] = b2*v[i] + (1-b2)*d*d
			mh := m[i] / (1 - math.Pow(b1, float64(s+1)))
			vh := v[i] / (1 - math.Pow(b2, float64(s+1)))
			theta[i] -= lr * mh / (math.Sqrt(vh) + eps)
		}
		got := h.Params(0)
		for i := range got {
			if math.Abs(got[i]-theta[i]) > 1e-12 {
				t.Fatalf("step %d: host %v, reference %v", s, got, theta)
			}
		}
	}
	// The very first Adam step moves every coordinate by ≈ lr.
	if d := math.Abs(h.Params(0)[0] - q.X0[0]); d > 4*lr+1e-9 {
		t.Errorf("moved %v in 4 steps", d)
	}
}

func TestSetLR(t *testing.T) {
	h := optimtest.MustHost(t, &optimtest.Linear{C: []float64{1}}, optimtest.WithMembers(2))
	h.BeginStep(optim.StepInput{Step: 0, LR: 0.5})
	exec(t, h, optim.Prog().SetLR(1, 2).Alloc(1, 0).Fill(1, optim.K(1)).BaseStep(optim.Params, 1).BaseStep(optim.ParamsOf(1), 1))
	if p0, p1 := h.Params(0)[0], h.Params(1)[0]; p0 != -0.5 || p1 != -2 {
		t.Errorf("params %v %v, want -0.5 (schedule) and -2 (override)", p0, p1)
	}
	if h.LR(1) != 2 {
		t.Errorf("LR(1) = %v", h.LR(1))
	}
	h.BeginStep(optim.StepInput{Step: 1, LR: 0.25})
	if h.LR(1) != 0.25 {
		t.Errorf("override survived the step: %v", h.LR(1))
	}
}

func TestRecords(t *testing.T) {
	h := optimtest.MustHost(t, &optimtest.Linear{C: []float64{1, 2}})
	exec(t, h, optim.Prog().Alloc(1, 0))
	h.BeginStep(optim.StepInput{Step: 0})
	terms := []optim.Term{{Coef: optim.K(1), X: 1}}
	p := optim.Prog().LinComb(1, terms...)
	p.Grad(1, optim.Params, optim.Batch{}, optim.BNUpdate)
	exec(t, h, p)
	pn := optim.Prog()
	pn.Norm(1)
	exec(t, h, pn)
	terms[0].Coef = optim.K(99) // mutating the caller's program must not change the record
	p.Ops[0] = optim.Fill{}
	if h.ExecCount(-1) != 1 || h.ExecCount(0) != 2 || h.ExecCount(1) != 0 {
		t.Errorf("exec counts %d %d %d", h.ExecCount(-1), h.ExecCount(0), h.ExecCount(1))
	}
	rec := h.Execs()
	lc, ok := rec[1].Program.Ops[0].(optim.LinComb)
	if !ok || lc.Terms[0].Coef != optim.K(1) {
		t.Errorf("recorded program was aliased: %#v", rec[1].Program.Ops[0])
	}
	if !slices.Equal(rec[2].Regs, []float64{math.Sqrt(5)}) || !slices.Equal(rec[2].Reads, []float64{math.Sqrt(5)}) {
		t.Errorf("recorded registers %v, reads %v", rec[2].Regs, rec[2].Reads)
	}
	g := h.Grads()
	if len(g) != 1 || g[0].Step != 0 || g[0].Member != 0 || !slices.Equal(g[0].Grad, []float64{1, 2}) || g[0].Loss != 0 {
		t.Errorf("grad record %+v", g)
	}
}

// TestLayoutCanceled: Layout fails with a canceled context (Exec's is in
// the conformance suite).
func TestLayoutCanceled(t *testing.T) {
	h := optimtest.MustHost(t, &optimtest.Linear{C: []float64{1}})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := h.Layout(ctx); err == nil {
		t.Error("canceled context accepted by Layout")
	}
}

func TestNewHostErrors(t *testing.T) {
	lin := &optimtest.Linear{C: []float64{1, 2}}
	tests := []struct {
		name string
		p    optimtest.Problem
		opts []optimtest.HostOption
	}{
		{"no params", &optimtest.Linear{}, nil},
		{"zero members", lin, []optimtest.HostOption{optimtest.WithMembers(0)}},
		{"params length", lin, []optimtest.HostOption{optimtest.WithParams(0, []float64{1})}},
		{"params member", lin, []optimtest.HostOption{optimtest.WithParams(3, []float64{1, 2})}},
		{"batch too big", optimtest.NewMLP(optimtest.MLPConfig{Samples: 10}), []optimtest.HostOption{optimtest.WithBatchSize(11)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := optimtest.NewHost(tt.p, tt.opts...); err == nil {
				t.Error("accepted")
			}
		})
	}
}

func TestLayout(t *testing.T) {
	m := optimtest.NewMLP(optimtest.MLPConfig{Hidden: 3, Samples: 40})
	h := optimtest.MustHost(t, m, optimtest.WithMembers(3), optimtest.WithBatchSize(8), optimtest.WithTrainSize(1000))
	l, err := h.Layout(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Members) != 3 || l.TrainSize != 1000 || l.BatchSize != 8 || l.Members[2].Numel != int64(m.Numel()) {
		t.Errorf("layout %+v", l)
	}
	// Members start from different seeded initialisations.
	if slices.Equal(h.Params(0), h.Params(1)) {
		t.Error("members share their initialisation")
	}
}

func TestEvaluate(t *testing.T) {
	ctx := context.Background()
	m := optimtest.NewMLP(optimtest.MLPConfig{})
	h := optimtest.MustHost(t, m, optimtest.WithMembers(2), optimtest.WithParams(0, make([]float64, m.Numel())))
	e, err := h.Evaluate(ctx, optim.Predictive{Kind: optim.Point})
	if err != nil {
		t.Fatal(err)
	}
	if math.Abs(e.NLL-math.Log(3)) > 1e-14 {
		t.Errorf("uniform NLL %v, want log 3", e.NLL)
	}
	// Two identical members equal one member.
	one, err := h.Evaluate(ctx, optim.Predictive{Kind: optim.Members, Vecs: []optim.Vec{optim.ParamsOf(1)}})
	if err != nil {
		t.Fatal(err)
	}
	two, err := h.Evaluate(ctx, optim.Predictive{Kind: optim.Members, Vecs: []optim.Vec{optim.ParamsOf(1), optim.ParamsOf(1)}})
	if err != nil {
		t.Fatal(err)
	}
	if math.Abs(one.NLL-two.NLL) > 1e-14 || one.Acc != two.Acc {
		t.Errorf("ensemble of identical members %+v ≠ single %+v", two, one)
	}
	// Zero std samples equal the mean.
	exec(t, h, optim.Prog().Alloc(1, 0))
	s, err := h.Evaluate(ctx, optim.Predictive{Kind: optim.Samples, Mean: optim.ParamsOf(1), Std: 1, N: 4})
	if err != nil {
		t.Fatal(err)
	}
	if math.Abs(s.NLL-one.NLL) > 1e-14 {
		t.Errorf("zero-std samples %+v ≠ mean %+v", s, one)
	}
	if _, err := h.Evaluate(ctx, optim.Predictive{Kind: optim.Samples, Mean: 0, Std: 0, N: 4}); err == nil {
		t.Error("variational predictive accepted")
	}
}

// BatchNorm statistics are labels that Copy with BN carries (protocol
// minor 3): a snapshot keeps the label of its moment, BNUpdate passes give
// the member a new one and BNFreeze passes do not, a plain Copy clears a
// vector's, and copying a state into live parameters restores it.
func TestCopyStateLabels(t *testing.T) {
	h := optimtest.MustHost(t, &optimtest.Linear{C: []float64{1, 1}}, optimtest.WithMembers(2))
	label := func(v optim.Vec) (int, bool) { return h.BNStats(v) }
	m0, _ := label(optim.Params)
	m1, _ := label(optim.ParamsOf(1))
	if m0 == m1 {
		t.Fatalf("members start with the same statistics %d", m0)
	}
	p := optim.Prog().Alloc(1, 0).CopyState(1, optim.Params)
	p.Grad(0, optim.Params, optim.Batch{}, optim.BNFreeze)
	exec(t, h, p)
	if got, _ := label(optim.Params); got != m0 {
		t.Errorf("a BNFreeze pass changed the statistics: %d, want %d", got, m0)
	}
	p = optim.Prog()
	p.Grad(0, optim.Params, optim.Batch{}, optim.BNUpdate)
	exec(t, h, p)
	now, _ := label(optim.Params)
	if snap, ok := label(1); !ok || snap != m0 || now == m0 {
		t.Errorf("snapshot %d (ok %v), live %d; want the snapshot at %d and the live ones new", snap, ok, now, m0)
	}
	exec(t, h, optim.Prog().CopyState(optim.Params, 1))
	if got, _ := label(optim.Params); got != m0 {
		t.Errorf("restored statistics %d, want %d", got, m0)
	}
	exec(t, h, optim.Prog().Copy(1, optim.Params))
	if _, ok := label(1); ok {
		t.Error("a plain Copy left the vector's statistics")
	}
	if _, err := h.Exec(context.Background(), optim.Prog().CopyState(optim.Params, 1)); err == nil || !strings.Contains(err.Error(), "holds no statistics") {
		t.Errorf("copy with BN from a vector without statistics: %v", err)
	}
	if got, _ := label(optim.Params); got != m0 {
		t.Errorf("a failed copy changed the statistics to %d", got)
	}
}
