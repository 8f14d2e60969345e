package engine

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/optlab/optlab/internal/testutil"

	"github.com/optlab/optlab/host/tensor"
	"github.com/optlab/optlab/sdk/optim"
)

// Spilled vectors live on tensor.FakeDevice in these tests: CPU memory that
// counts as another device, so that an op mixing a spilled vector with the
// device's tensors fails here as it would on a GPU (spilling from the CPU
// to the CPU would hide it). TestConformance runs the whole op suite on
// spilled vectors too.

// spillCfg is cfg with a device budget of budget bytes, spilling on, and
// the log lines collected into log.
func spillCfg(cfg Config, budget int64, log *[]string) Config {
	var mu sync.Mutex
	cfg.DeviceBudget, cfg.Spill, cfg.spillTo = budget, true, tensor.FakeDevice()
	cfg.Log = func(l string) {
		mu.Lock()
		defer mu.Unlock()
		*log = append(*log, l)
	}
	return cfg
}

// With a device budget of one vector, further vectors (ensemble snapshots,
// say) are kept in host memory, each with a log line, and ops and
// predictions on them give the same results as on the device.
func TestSpillToHostMemory(t *testing.T) {
	const n, f, c = 10, 4, 3
	set := testutil.FeatureSet(n, f, c)
	x := testutil.Inputs(set)
	m := semTiny(t, []int64{f}, 5, c)
	var log []string
	e := semEngine(t, spillCfg(Config{Seed: 3}, 4*m.Numel, &log), m)
	ds := semUpload(t, e, set, true)
	p := semRead(t, e, optim.Params)
	semExec(t, e, optim.Prog().Alloc(1, 0).Alloc(2, 0).Alloc(3, 0).
		Copy(2, optim.Params).Copy(3, optim.Params).Scale(3, optim.K(0.5)).Axpy(1, optim.K(2), 3))
	if got := e.Spilled(); got != 2 {
		t.Fatalf("%d vectors spilled to host memory, want 2", got)
	}
	if len(log) != 2 || !strings.Contains(log[0], "vector 2 (") || !strings.Contains(log[0], "spilled to host memory") ||
		!strings.Contains(log[0], "device budget") || !strings.Contains(log[1], "vector 3 (") {
		t.Errorf("log lines %q, want one per spilled vector (2 and 3), naming the budget", log)
	}
	semDo(t, e, func(*tensor.Scope) error {
		if d := e.vecs[2].t.Device(); d != tensor.FakeDevice() {
			t.Errorf("a spilled vector is on %v", d)
		}
		return nil
	})
	half := make([]float64, len(p))
	for i := range p {
		half[i] = 0.5 * p[i]
	}
	testutil.CheckVec(t, "axpy of spilled vectors", semRead(t, e, 1), semF32(scaled(half, 2)), 1e-6, 1e-6)
	got := semPredict(t, e, optim.Predictive{Kind: optim.Members, Vecs: []optim.Vec{2, 3}}, ds, 0, 1)
	want := semProbs(m, p, x)
	wantHalf := semProbs(m, semF32(half), x)
	for i := range want {
		want[i] = 0.5*want[i] + 0.5*wantHalf[i]
	}
	testutil.CheckVec(t, "prediction from spilled snapshots", got, want, 1e-6, 1e-5)
	semExec(t, e, optim.Prog().Free(2).Free(3))
	if got := e.Spilled(); got != 0 {
		t.Errorf("%d spilled vectors after freeing them", got)
	}
}

// Without train.spill, a vector beyond the budget fails its Alloc, saying
// why and what to do.
func TestAllocBeyondBudgetFails(t *testing.T) {
	m := semTiny(t, []int64{4}, 5, 3)
	var log []string
	cfg := spillCfg(Config{Seed: 3}, 4*m.Numel, &log)
	cfg.Spill = false
	e := semEngine(t, cfg, m)
	semExec(t, e, optim.Prog().Alloc(1, 0))
	_, err := e.Exec(context.Background(), optim.Prog().Alloc(2, 0))
	if err == nil {
		t.Fatal("an Alloc beyond the device budget succeeded without train.spill")
	}
	for _, w := range []string{"vector 2", "does not fit", "device budget", "train.spill = true"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q does not say %q", err, w)
		}
	}
	if e.Spilled() != 0 || len(log) != 0 {
		t.Errorf("%d spilled, log %q", e.Spilled(), log)
	}
}

// Every op that touches a spilled vector gives the bits it gives on the
// device: the same program on an engine that spills every plugin vector
// and on one that spills none. Covers Norm and Dot (both orders), Axpy with
// a register, RandN, Grad with its output spilled, the variational Grad
// with Eps spilled, SegReduce and TopKMask, the debug check for non-finite
// values, and the sampled predictive with a spilled Std or a spilled Mean.
func TestSpilledOpsMatchTheDevice(t *testing.T) {
	const n, f, c = 10, 4, 3
	set := testutil.FeatureSet(n, f, c)
	x := testutil.Inputs(set)
	y := set.Y
	labels := make([]int64, len(y))
	for i, v := range y {
		labels[i] = int64(v)
	}
	for _, variational := range []bool{false, true} {
		name := "deterministic"
		base := Config{Seed: 5, TrainSize: n, BatchSize: n, DebugNonFinite: true}
		if variational {
			name = "variational"
			base.Variational = &Variational{PriorSigma: 0.1, RhoInit: -3, RhoInitStd: 0.1, KL: "qp", KLReduction: "sum", Beta: 1}
		}
		t.Run(name, func(t *testing.T) {
			type out struct {
				regs  []float64
				vecs  [][]float64
				preds [][]float64
			}
			run := func(cfg Config) out {
				e := semEngine(t, cfg, semTiny(t, []int64{f}, 5, c))
				semBatch(t, e, 0, x, labels)
				ds := semUpload(t, e, set, true)
				p := optim.Prog().Alloc(1, 0).Alloc(2, 0).Alloc(3, 0).Alloc(4, 0).
					Copy(1, optim.Params).RandN(2, 0.1, 7).RandN(3, 0.02, 8)
				nrm := p.Norm(2)
				d1, d2 := p.Dot(2, optim.Params), p.Dot(optim.Params, 2)
				p.Axpy(1, nrm, 2).Axpy(optim.Params, optim.K(0.5), 3)
				g := optim.Grad{Out: 4, At: 1}
				if variational {
					g.Eps = 3
				}
				ev := p.GradOp(g)
				seg := p.SegNorm(optim.PerTensor, 4)
				p.Scale(2, seg).TopKMask(3, 4, optim.PerTensor, optim.K(0.5)).
					AddConst(3, d1).BaseStep(optim.Params, 4)
				r := semExec(t, e, p)
				o := out{regs: []float64{r.Get(nrm), r.Get(d1), r.Get(d2), r.Get(ev.Loss), r.Get(ev.Acc)}}
				for _, h := range []optim.Vec{1, 2, 3, 4, optim.Params} {
					o.vecs = append(o.vecs, semRead(t, e, h))
				}
				semExec(t, e, optim.Prog().Scale(3, optim.K(0.01)).Unary(3, 3, optim.Abs))
				for _, pred := range []optim.Predictive{
					{Kind: optim.Samples, Mean: optim.Params, Std: 3, N: 3}, // a spilled Std
					{Kind: optim.Samples, Mean: 1, Std: 3, N: 3},            // a spilled Mean
					{Kind: optim.Members, Vecs: []optim.Vec{1, optim.Params}},
				} {
					o.preds = append(o.preds, semPredict(t, e, pred, ds, 4, 11))
				}
				if variational {
					o.preds = append(o.preds, semPredict(t, e, optim.Predictive{Kind: optim.Samples, N: 2}, ds, 0, 3))
				}
				if cfg.Spill && e.Spilled() != 4 {
					t.Errorf("%d vectors spilled, want 4", e.Spilled())
				}
				return o
			}
			var log []string
			want := run(base)
			got := run(spillCfg(base, 1, &log))
			if len(log) != 4 {
				t.Errorf("%d log lines for 4 spilled vectors: %q", len(log), log)
			}
			testutil.CheckVec(t, "registers", got.regs, want.regs, 0, 0)
			for i := range want.vecs {
				testutil.CheckVec(t, "vector "+[]string{"1", "2", "3", "4", "params"}[i], got.vecs[i], want.vecs[i], 0, 0)
			}
			for i := range want.preds {
				testutil.CheckVec(t, "predictive "+string(rune('A'+i)), got.preds[i], want.preds[i], 0, 0)
			}
		})
	}
}

func scaled(v []float64, a float64) []float64 {
	out := make([]float64, len(v))
	for i := range v {
		out[i] = a * v[i]
	}
	return out
}
