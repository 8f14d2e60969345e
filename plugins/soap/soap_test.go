package soap_test

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
	"github.com/optlab/optlab/plugins/soap"
	"github.com/optlab/optlab/sdk/optim"
	"github.com/optlab/optlab/sdk/optimtest"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden")

// square is optimtest's MLP with square 4×4 matrices: a softmax layer's
// gradient has rank at most classes−1, so each factor of the first step
// has at most one zero eigenvalue and the first bases are unique up to the
// signs of their columns, which SOAP's update does not see. (With two or
// more zero eigenvalues the basis of their eigenspace is arbitrary, and two
// hosts' eigensolvers pick different ones: the trajectories then differ
// by more than rounding, as they would between two PyTorch builds.)
func square() *optimtest.MLP {
	return optimtest.NewMLP(optimtest.MLPConfig{Inputs: 4, Hidden: 4, Classes: 4, Samples: 64, Seed: 3})
}

// mlp is optimtest's MLP with a tall (5×4) and a wide (3×5) matrix.
func mlp() *optimtest.MLP {
	return optimtest.NewMLP(optimtest.MLPConfig{Hidden: 5, Samples: 64, Seed: 3})
}

// TestTraceGolden pins the ops that Configure and the first steps send:
// testdata/trace*.golden document the algorithm (the first step that only
// sets up the bases, then Adam in the eigenbasis, a refresh every 2 steps
// with the sort and the power iteration).
func TestTraceGolden(t *testing.T) {
	optimtest.TestTraces(t, *update,
		optimtest.TraceCase{Golden: "testdata/trace.golden", New: soap.New,
			Params: map[string]any{"precondition_frequency": int64(2)}},
		optimtest.TraceCase{Golden: "testdata/trace_blocks.golden", New: soap.New,
			Params: map[string]any{"precondition_frequency": int64(1), "max_precond_dim": int64(3), "weight_decay": 0.0, "correct_bias": false}})
}

// One Exec per step for every member, no read, no base step; each member
// trains on its own; the first step moves nothing.
func TestOneExecPerStepAndMembers(t *testing.T) {
	first := optimtest.MustHost(t, mlp(), optimtest.WithBatchSize(16))
	theta0 := slices.Clone(first.Params(0))
	optimtest.MustRun(t, soap.New(), first, 1, optimtest.WithLR(0.02))
	if !slices.Equal(first.Params(0), theta0) {
		t.Error("the first step moved the parameters; soap.py only sets up the bases")
	}
	h := optimtest.MustHost(t, mlp(), optimtest.WithBatchSize(16), optimtest.WithMembers(2))
	optimtest.MustRun(t, soap.New(), h, 4, optimtest.WithLR(0.02))
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
	c := soap.DefaultConfig()
	return map[string]any{"beta1": c.Beta1, "beta2": c.Beta2, "shampoo_beta": c.ShampooBeta, "eps": c.Eps,
		"weight_decay": c.WeightDecay, "precondition_frequency": int64(c.Frequency),
		"max_precond_dim": int64(c.MaxPrecondDim), "correct_bias": c.BiasCorrection}
}

// SOAP against a PyTorch float64 reference written from the paper and
// soap.py (testdata/soap_reference.py) over 24 steps of optimtest's MLP
// with square matrices: fed the gradients the Go run took on the exact
// host (float64, gonum's eigendecomposition and QR), it must give every
// step's parameters to tol relative. The softmax layer's gradient has an
// exact null direction (its columns sum to zero), where the rotated
// gradient is rounding noise of about 1e-17 that Adam divides by √v + ε ≈
// ε: with ε = 1e-8 two float64 hosts then differ by a few 1e-9, with ε =
// 1e-6 by 1e-11. A mistake in the algorithm moves θ by 1e-4 or more.
func TestMatchesPyTorch(t *testing.T) {
	torchtwin.Script(t) // skips without Debian's python3-torch
	const steps = 24
	cosine := func(step int64, _ int) float64 { return 0.01 * 0.5 * (1 + math.Cos(math.Pi*float64(step)/steps)) }
	for _, c := range []struct {
		name   string
		params map[string]any
		tol    float64
	}{
		{"defaults (refresh every 10)", map[string]any{}, 2e-8},
		{"refresh every 3, shampoo_beta 0.9, no weight decay", map[string]any{
			"precondition_frequency": int64(3), "shampoo_beta": 0.9, "weight_decay": 0.0}, 2e-8},
		{"refresh every step, no bias correction, beta1 0, eps 1e-6", map[string]any{
			"precondition_frequency": int64(1), "correct_bias": false, "beta1": 0.0, "beta2": 0.99, "eps": 1e-6}, 1e-10},
	} {
		t.Run(c.name, func(t *testing.T) {
			torchtwin.FollowsReference(t, torchtwin.Follow{Host: optimtest.MustHost(t, square(), optimtest.WithBatchSize(16)),
				New: soap.New, Steps: steps, Schedule: cosine, Params: c.params, HParams: defaults(),
				Script: filepath.Join("testdata", "soap_reference.py"), Tol: c.tol})
		})
	}
}

// Checkpoint and resume between two refreshes: with a refresh every 3
// steps, 5 steps, save, restore into a fresh optimizer and host, 4 more
// steps equal 9 uninterrupted steps bitwise (the bases sorted and refreshed
// at step 4, with v permuted, travel with the state).
func TestStateRoundTripMidInterval(t *testing.T) {
	sched := optimtest.WithSchedule(func(step int64, _ int) float64 { return 0.01 / float64(step+1) })
	hp := optimtest.WithHParams(map[string]any{"precondition_frequency": int64(3)})
	var rule *soap.Rule // the last optimizer's: handles are the same in every run
	newOpt := func() optim.Optimizer {
		o := soap.New().(*compose.Alone)
		rule = o.Rule().(*soap.Rule)
		return o
	}
	newHost := func(opts ...optimtest.HostOption) *optimtest.Host {
		return optimtest.MustHost(t, mlp(), append(opts, optimtest.WithBatchSize(16))...)
	}
	vecs := optimtest.MustResume(t, newOpt, newHost, 9, 5, sched, hp)
	l, r, ql, qr := rule.Bases(0)
	for _, f := range []optim.Vec{l, r, ql, qr} {
		if !slices.Contains(vecs, f) {
			t.Errorf("state vecs %v lack %v", vecs, f)
		}
	}
}

// SOAP trains optimtest's MLP.
func TestTrains(t *testing.T) {
	h := optimtest.MustHost(t, optimtest.NewMLP(optimtest.MLPConfig{Hidden: 8, Samples: 128}), optimtest.WithBatchSize(32))
	outs := optimtest.MustRun(t, soap.New(), h, 100, optimtest.WithLR(0.01))
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
		{"frequency 0", map[string]any{"precondition_frequency": int64(0)}, "precondition_frequency"},
		{"max_precond_dim above the largest factor", map[string]any{"max_precond_dim": int64(10000)}, "max_precond_dim"},
		{"beta2 1", map[string]any{"beta2": 1.0}, "beta2"},
		{"eps 0", map[string]any{"eps": 0.0}, "eps"},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := optimtest.MustHost(t, mlp(), optimtest.WithBatchSize(16))
			_, err := optimtest.Run(context.Background(), soap.New(), h, 1, optimtest.WithLR(0.1), optimtest.WithHParams(c.params))
			if err == nil || !strings.Contains(err.Error(), c.mention) {
				t.Errorf("err = %v, want one mentioning %q", err, c.mention)
			}
		})
	}
}
