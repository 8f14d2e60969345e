package muon_test

import (
	"context"
	"flag"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/optlab/optlab/internal/torchtwin"
	"github.com/optlab/optlab/plugins/builtin"
	"github.com/optlab/optlab/plugins/compose"
	"github.com/optlab/optlab/plugins/muon"
	"github.com/optlab/optlab/sdk/optim"
	"github.com/optlab/optlab/sdk/optimtest"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden")

// TestTraceGolden pins the ops that Configure and two steps send with the
// defaults and with weight decay: testdata/trace*.golden document the
// algorithm.
func TestTraceGolden(t *testing.T) {
	optimtest.TestTraces(t, *update,
		optimtest.TraceCase{Golden: "testdata/trace.golden", New: muon.New},
		optimtest.TraceCase{Golden: "testdata/trace_wd.golden", New: muon.New,
			Params: map[string]any{"weight_decay": 0.1, "adamw_weight_decay": 0.01, "nesterov": false}})
}

// mlp is optimtest's MLP with a tall (5×4) and a wide (3×5) matrix.
func mlp() *optimtest.MLP {
	return optimtest.NewMLP(optimtest.MLPConfig{Hidden: 5, Samples: 64, Seed: 3})
}

// One Exec per step for every member, no read, no base step; each member
// trains on its own.
func TestOneExecPerStepAndMembers(t *testing.T) {
	h := optimtest.MustHost(t, mlp(), optimtest.WithBatchSize(16), optimtest.WithMembers(2))
	outs := optimtest.MustRun(t, muon.New(), h, 4, optimtest.WithLR(0.02))
	for s := range int64(4) {
		if n, r := h.ExecCount(s), h.ReadCount(s); n != 1 || r != 0 {
			t.Errorf("step %d: %d Execs, %d reads; want 1 and 0", s, n, r)
		}
	}
	if st := h.Stats(0); st.BaseSteps != 0 {
		t.Errorf("stats %+v: want no base step", st)
	}
	if got := outs[0].Metrics["adamw_lr"]; got != 3e-4 {
		t.Errorf("adamw_lr at the peak = %v, want 3e-4", got)
	}
	if slices.Equal(h.Params(0), h.Params(1)) {
		t.Error("two members ended equal")
	}
}

// Muon against a PyTorch float64 reference written from Keller Jordan's
// muon.py (testdata/muon_reference.py: SingleDeviceMuonWithAuxAdam with
// Muon on the matrices, AdamW on the biases), over 24 steps of optimtest's
// MLP with a cosine schedule: fed the gradients the Go run took, it must
// give every step's parameters.
func TestMatchesPyTorch(t *testing.T) {
	torchtwin.Script(t) // skips without Debian's python3-torch
	const steps = 24
	cosine := func(step int64, _ int) float64 { return 0.02 * 0.5 * (1 + math.Cos(math.Pi*float64(step)/steps)) }
	warmup := func(step int64, _ int) float64 { return 0.05 * min(1, float64(step+1)/8) }
	for _, c := range []struct {
		name     string
		schedule func(int64, int) float64
		params   map[string]any
	}{
		{"defaults, cosine", cosine, map[string]any{}},
		{"weight decay, no Nesterov, warmup with lr_peak", warmup, map[string]any{"weight_decay": 0.1, "adamw_weight_decay": 0.05,
			"nesterov": false, "lr_peak": 0.05, "adamw_lr": 1e-2, "momentum": 0.9, "ns_steps": int64(3)}},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := optimtest.MustHost(t, mlp(), optimtest.WithBatchSize(16))
			var lrs []float64
			sched := func(step int64, epoch int) float64 {
				lr := c.schedule(step, epoch)
				lrs = append(lrs, lr)
				return lr
			}
			optimtest.MustRun(t, muon.New(), h, steps, optimtest.WithSchedule(sched), optimtest.WithHParams(c.params))
			recs := h.Grads()
			if len(recs) != steps || len(lrs) != steps {
				t.Fatalf("%d gradients, %d rates for %d steps", len(recs), len(lrs), steps)
			}
			l, _ := h.Layout(context.Background())
			hp := map[string]any{"momentum": 0.95, "nesterov": true, "ns_steps": int64(5), "weight_decay": 0.0,
				"adamw_lr": 3e-4, "lr_peak": -1.0, "adamw_beta1": 0.9, "adamw_beta2": 0.95, "adamw_eps": 1e-10,
				"adamw_weight_decay": 0.0}
			for k, v := range c.params {
				hp[k] = v
			}
			grads := make([][]float64, steps)
			for i, r := range recs {
				grads[i] = r.Grad
			}
			want := torchMuon(t, l.Members[0].Tensors, recs[0].At, grads, lrs, hp)
			worst := 0.0
			for k := range steps {
				got := h.Params(0)
				if k+1 < steps {
					got = recs[k+1].At
				}
				e := torchtwin.RelErr(got, want[k])
				worst = max(worst, e)
				if !(e <= 1e-12) {
					t.Errorf("after step %d: θ differs from PyTorch's by %.3g relative", k, e)
				}
			}
			moved := torchtwin.RelErr(h.Params(0), recs[0].At)
			t.Logf("largest relative difference from PyTorch over %d steps: %.2g (θ moved %.2g relative)", steps, worst, moved)
		})
	}
}

// torchMuon runs testdata/muon_reference.py and returns θ after every step.
func torchMuon(t *testing.T, tensors []optim.Tensor, theta0 []float64, grads [][]float64, lrs []float64, hp map[string]any) [][]float64 {
	in := torchtwin.Steps{Theta0: theta0, Grads: grads, LRs: lrs, HParams: hp}
	for _, ts := range tensors {
		in.Tensors = append(in.Tensors, torchtwin.Tensor{Name: ts.Name, Shape: ts.Shape})
	}
	return torchtwin.Trajectory(t, filepath.Join("testdata", "muon_reference.py"), in)
}

// Checkpoint and resume: 3 steps, save, restore into a fresh optimizer
// and host, 2 more steps equal 5 uninterrupted steps bitwise (the peak
// learning rate of lr_peak = −1 travels in the blob).
func TestStateRoundTrip(t *testing.T) {
	sched := optimtest.WithSchedule(func(step int64, _ int) float64 { return 0.02 / float64(step+1) })
	hp := optimtest.WithHParams(map[string]any{"weight_decay": 0.1, "adamw_weight_decay": 0.01})
	var rule *muon.Rule // the last optimizer's: handles are the same in every run
	newOpt := func() optim.Optimizer {
		o := muon.New().(*compose.Alone)
		rule = o.Rule().(*muon.Rule)
		return o
	}
	newHost := func(opts ...optimtest.HostOption) *optimtest.Host {
		return optimtest.MustHost(t, mlp(), append(opts, optimtest.WithBatchSize(16))...)
	}
	vecs := optimtest.MustResume(t, newOpt, newHost, 5, 3, sched, hp)
	m1, m2 := rule.Moments(0)
	if !slices.Equal(vecs, []optim.Vec{rule.Momentum(0), m1, m2}) {
		t.Errorf("state vecs %v", vecs)
	}
}

// Muon trains optimtest's MLP.
func TestTrains(t *testing.T) {
	h := optimtest.MustHost(t, optimtest.NewMLP(optimtest.MLPConfig{Hidden: 8, Samples: 128}), optimtest.WithBatchSize(32))
	outs := optimtest.MustRun(t, muon.New(), h, 100, optimtest.WithLR(0.05), optimtest.WithHParams(map[string]any{"adamw_lr": 0.01}))
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
		lr      float64
		mention string
	}{
		{"lr_peak 0", map[string]any{"lr_peak": 0.0}, 0.1, "lr_peak = 0"},
		{"ns_steps 0", map[string]any{"ns_steps": int64(0)}, 0.1, "ns_steps"},
		{"momentum 1", map[string]any{"momentum": 1.0}, 0.1, "momentum"},
		{"first lr 0 with lr_peak -1", nil, 0, "set lr_peak"},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := optimtest.MustHost(t, mlp(), optimtest.WithBatchSize(16))
			_, err := optimtest.Run(context.Background(), muon.New(), h, 1, optimtest.WithLR(c.lr), optimtest.WithHParams(c.params))
			if err == nil || !strings.Contains(err.Error(), c.mention) {
				t.Errorf("err = %v, want one mentioning %q", err, c.mention)
			}
		})
	}
}

// SAM-Muon's ops are a golden trace (that SAM over every rule steps as the
// rule's plugin is plugins/builtin's TestSAMOverEveryRule).
func TestSAMMuonTrace(t *testing.T) {
	sam := func() optim.Optimizer {
		opt, err := builtin.Registry().New("sam")
		if err != nil {
			t.Fatal(err)
		}
		return opt
	}
	optimtest.TestTraces(t, *update, optimtest.TraceCase{Golden: "testdata/trace_sam_muon.golden", New: sam,
		Params: map[string]any{"update": "muon"}})
}
