package shampoo_test

import (
	"context"
	"flag"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/optlab/optlab/internal/torchtwin"
	"github.com/optlab/optlab/plugins/compose"
	"github.com/optlab/optlab/plugins/shampoo"
	"github.com/optlab/optlab/sdk/optim"
	"github.com/optlab/optlab/sdk/optimtest"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden")

// mlp is optimtest's MLP with a tall (5×4) and a wide (3×5) matrix.
func mlp() *optimtest.MLP {
	return optimtest.NewMLP(optimtest.MLPConfig{Hidden: 5, Samples: 64, Seed: 3})
}

// TestTraceGolden pins the ops that Configure and the first steps send:
// testdata/trace*.golden document the algorithm (the warm start, then a
// preconditioner every 2 steps, SGD grafting and weight decay).
func TestTraceGolden(t *testing.T) {
	optimtest.TestTraces(t, *update,
		optimtest.TraceCase{Golden: "testdata/trace.golden", New: shampoo.New},
		optimtest.TraceCase{Golden: "testdata/trace_sgd_graft.golden", New: shampoo.New,
			Params: map[string]any{"grafting": "sgd", "precondition_frequency": int64(2), "weight_decay": 0.01, "block": int64(3)}})
}

// One Exec per step for every member, no read, no base step; each member
// trains on its own.
func TestOneExecPerStepAndMembers(t *testing.T) {
	h := optimtest.MustHost(t, mlp(), optimtest.WithBatchSize(16), optimtest.WithMembers(2))
	optimtest.MustRun(t, shampoo.New(), h, 4, optimtest.WithLR(0.02))
	for s := range int64(4) {
		if n, r := h.ExecCount(s), h.ReadCount(s); n != 1 || r != 0 {
			t.Errorf("step %d: %d Execs, %d reads; want 1 and 0", s, n, r)
		}
	}
	if st := h.Stats(0); st.BaseSteps != 0 {
		t.Errorf("stats %+v: want no base step", st)
	}
	if slices.Equal(h.Params(0), h.Params(1)) {
		t.Error("two members ended equal")
	}
}

// defaults are the rule's hyperparameters as the reference reads them.
func defaults() map[string]any {
	c := shampoo.DefaultConfig()
	return map[string]any{"beta1": c.Beta1, "beta2": c.Beta2, "epsilon": c.Epsilon, "root": c.Root,
		"precondition_frequency": int64(c.Frequency), "start_preconditioning_step": int64(c.Start), "block": int64(c.Block),
		"grafting": c.Grafting, "graft_beta2": c.GraftBeta2, "graft_eps": c.GraftEps, "weight_decay": c.WeightDecay,
		"bias_correction": c.BiasCorrection}
}

// Shampoo against a PyTorch float64 reference written from Gupta et al.
// and Distributed Shampoo (testdata/shampoo_reference.py) over 24 steps of
// optimtest's MLP: fed the gradients the Go run took on the exact host
// (float64, gonum's eigendecomposition), it must give every step's
// parameters to 1e-10 (two eigendecompositions of the same matrices
// agree to about that, not to the last bit).
func TestMatchesPyTorch(t *testing.T) {
	torchtwin.Script(t) // skips without Debian's python3-torch
	const steps = 24
	cosine := func(step int64, _ int) float64 { return 0.02 * 0.5 * (1 + math.Cos(math.Pi*float64(step)/steps)) }
	for _, c := range []struct {
		name   string
		params map[string]any
	}{
		{"defaults", map[string]any{}},
		{"every 3 steps, warm start 5, blocks of 3, sums, SGD grafting, weight decay", map[string]any{
			"precondition_frequency": int64(3), "start_preconditioning_step": int64(5), "block": int64(3),
			"beta2": 1.0, "grafting": "sgd", "weight_decay": 0.05, "epsilon": 1e-6}},
		{"no bias correction, root 2, beta1 0", map[string]any{"bias_correction": false, "root": 2.0, "beta1": 0.0,
			"precondition_frequency": int64(2), "epsilon": 1e-4}},
	} {
		t.Run(c.name, func(t *testing.T) {
			torchtwin.FollowsReference(t, torchtwin.Follow{Host: optimtest.MustHost(t, mlp(), optimtest.WithBatchSize(16)),
				New: shampoo.New, Steps: steps, Schedule: cosine, Params: c.params, HParams: defaults(),
				Script: filepath.Join("testdata", "shampoo_reference.py"), Tol: 1e-10})
		})
	}
}

// Checkpoint and resume between two preconditioner updates: with a
// preconditioner every 3 steps, 4 steps, save, restore into a fresh
// optimizer and host, 3 more steps equal 7 uninterrupted steps bitwise
// (the preconditioners computed at step 3 travel with the state and are
// used at steps 5 and 6 before the next one).
func TestStateRoundTripMidInterval(t *testing.T) {
	sched := optimtest.WithSchedule(func(step int64, _ int) float64 { return 0.02 / float64(step+1) })
	hp := optimtest.WithHParams(map[string]any{"precondition_frequency": int64(3), "weight_decay": 0.01})
	var rule *shampoo.Rule // the last optimizer's: handles are the same in every run
	newOpt := func() optim.Optimizer {
		o := shampoo.New().(*compose.Alone)
		rule = o.Rule().(*shampoo.Rule)
		return o
	}
	newHost := func(opts ...optimtest.HostOption) *optimtest.Host {
		return optimtest.MustHost(t, mlp(), append(opts, optimtest.WithBatchSize(16))...)
	}
	vecs := optimtest.MustResume(t, newOpt, newHost, 7, 4, sched, hp)
	l, r, pl, pr := rule.Factors(0)
	for _, f := range []optim.Vec{l, r, pl, pr} {
		if !slices.Contains(vecs, f) {
			t.Errorf("state vecs %v lack factor %v", vecs, f)
		}
	}
}

// Shampoo trains optimtest's MLP.
func TestTrains(t *testing.T) {
	h := optimtest.MustHost(t, optimtest.NewMLP(optimtest.MLPConfig{Hidden: 8, Samples: 128}), optimtest.WithBatchSize(32))
	outs := optimtest.MustRun(t, shampoo.New(), h, 100, optimtest.WithLR(0.01))
	first, last := outs[0].Metrics["loss"], outs[len(outs)-1].Metrics["loss"]
	t.Logf("loss %.3f → %.3f", first, last)
	if !(last < 0.6*first) {
		t.Errorf("did not train: loss %.3f → %.3f", first, last)
	}
}

func TestConfigErrors(t *testing.T) {
	for _, c := range []struct {
		name    string
		params  map[string]any
		mention string
	}{
		{"start before the first preconditioner", map[string]any{"precondition_frequency": int64(5), "start_preconditioning_step": int64(2)},
			"start_preconditioning_step = 2 comes before"},
		{"block 0", map[string]any{"block": int64(0)}, "block"},
		{"unknown grafting", map[string]any{"grafting": "adagrad"}, "grafting"},
		{"beta2 0", map[string]any{"beta2": 0.0}, "beta2"},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := optimtest.MustHost(t, mlp(), optimtest.WithBatchSize(16))
			_, err := optimtest.Run(context.Background(), shampoo.New(), h, 1, optimtest.WithLR(0.1), optimtest.WithHParams(c.params))
			if err == nil || !strings.Contains(err.Error(), c.mention) {
				t.Errorf("err = %v, want one mentioning %q", err, c.mention)
			}
		})
	}
}

// The factor vectors of a block too large for the host are refused with a
// message that names the tensor and the block to set.
func TestHugeBlockRefused(t *testing.T) {
	h := optimtest.MustHost(t, mlp(), optimtest.WithBatchSize(16))
	_, err := optimtest.Run(context.Background(), shampoo.New(), h, 1, optimtest.WithLR(0.1),
		optimtest.WithHParams(map[string]any{"block": int64(8193)}))
	if err == nil || !strings.Contains(err.Error(), "block") {
		t.Errorf("err = %v, want one about the block", err)
	}
}
