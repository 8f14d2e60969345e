package train

import (
	"context"
	"testing"

	"github.com/optlab/optlab/host/checkpoint"
	"github.com/optlab/optlab/host/checkpoint/statedict"
	"github.com/optlab/optlab/host/engine"
	"github.com/optlab/optlab/host/experiment"
	"github.com/optlab/optlab/host/model"
	"github.com/optlab/optlab/host/results"
	"github.com/optlab/optlab/host/tensor"
	"github.com/optlab/optlab/plugins/sgd"
	"github.com/optlab/optlab/sdk/optim"
)

// averager is SGD whose predictive is the running average of the live
// parameters taken at every epoch end (SWA's shape, without its schedule),
// and whose Finalize recomputes the average's BatchNorm statistics.
type averager struct {
	optim.Optimizer
	h         optim.Host
	hs        *optim.Handles
	avg       optim.Vec
	spe       int64
	n         int
	finalized int
}

func (a *averager) Configure(ctx context.Context, h optim.Host, cfg optim.Config) error {
	a.h, a.hs, a.spe = h, cfg.Namespace("avg"), cfg.StepsPerEpoch
	cfg.Handles = a.hs // the inner optimizer allocates from the same counter
	if err := a.Optimizer.Configure(ctx, h, cfg); err != nil {
		return err
	}
	a.avg = a.hs.New("avg")
	_, err := h.Exec(ctx, a.hs.Prog().Alloc(a.avg, 0))
	return err
}

func (a *averager) Info() optim.Info {
	i := a.Optimizer.Info()
	i.Features.Predictive, i.Features.Finalize = true, true
	return i
}

func (a *averager) Step(ctx context.Context, in optim.StepInput) (optim.StepOutput, error) {
	out, err := a.Optimizer.Step(ctx, in)
	if err != nil || (in.Step+1)%a.spe != 0 {
		return out, err
	}
	p := a.hs.Prog()
	if a.n == 0 {
		p.CopyState(a.avg, optim.Params)
	} else {
		k := float64(a.n)
		p.LinComb(a.avg, optim.Term{Coef: optim.K(k / (k + 1)), X: a.avg}, optim.Term{Coef: optim.K(1 / (k + 1)), X: optim.Params})
	}
	a.n++
	_, err = a.h.Exec(ctx, p)
	return out, err
}

func (a *averager) Finalize(ctx context.Context) error {
	a.finalized++
	_, err := a.h.Exec(ctx, a.hs.Prog().UpdateBN(a.avg))
	return err
}

func (a *averager) Predictive(context.Context) (optim.Predictive, error) {
	return optim.Predictive{Kind: optim.Members, Vecs: []optim.Vec{a.avg}}, nil
}

// What is evaluated is what is saved: a run whose predictive is an average
// with statistics recomputed in Finalize (called once) writes that average
// and those statistics as its final model. Loaded into a fresh engine, the
// file scores the run's record exactly, and its statistics are the exact
// ones for its parameters: a fresh UpdateBN over the training set at them
// changes nothing. Negative control: the live statistics would differ.
func TestSavedModelIsEvaluated(t *testing.T) {
	w := tensor.NewWorker(2)
	defer w.Close()
	ctx := context.Background()
	r, exp := newRunner(t, w, digitsTOML)
	run := experiment.Grid(exp)[0]
	r.Checkpoints = &results.Layout{Dir: t.TempDir()}
	opt := &averager{Optimizer: sgd.New()}
	rec, err := r.Run(ctx, run, method(t, opt, nil))
	if err != nil {
		t.Fatal(err)
	}
	if opt.finalized != 1 || opt.n != exp.Train.Epochs {
		t.Fatalf("Finalize called %d times after %d averages, want 1 after %d", opt.finalized, opt.n, exp.Train.Epochs)
	}
	path := r.Checkpoints.Model(run.Key)
	if _, meta, err := checkpoint.Read(path); err != nil || meta[statedict.MetaPredictive] != "members" {
		t.Fatalf("final model: %v, metadata %v", err, meta)
	}

	fresh := freshEngine(t, r, run)
	if err := statedict.Load(ctx, fresh, path); err != nil {
		t.Fatal(err)
	}
	tr := &training{run: run, m: method(t, sgd.New(), nil), eng: fresh}
	rep, err := r.evaluate(ctx, tr, r.Data.Test, r.calibration())
	if err != nil {
		t.Fatal(err)
	}
	got := rep.Map()
	for _, k := range []string{"acc", "nll", "ece", "brier"} {
		if got[k] != rec.Metrics[k] {
			t.Errorf("%s: the saved model scores %v, the run's record says %v", k, got[k], rec.Metrics[k])
		}
	}

	before := liveStats(t, fresh)
	if _, err := fresh.Exec(ctx, optim.NewHandles().Prog().UpdateBN(optim.Params)); err != nil {
		t.Fatal(err)
	}
	if d := maxAbsDiff(liveStats(t, fresh), before); d != 0 {
		t.Errorf("the saved statistics are not UpdateBN's at the saved parameters: a fresh pass moves them by %g", d)
	}
	// Negative control: the same parameters with other statistics (the
	// initial ones) do not score the record.
	err = fresh.Worker().Do(ctx, func() error {
		s := tensor.NewScope()
		defer s.Close()
		mem := fresh.Members()[0]
		mem.Model.InitBuffers(s, mem.Buf)
		return s.Err()
	})
	if err != nil {
		t.Fatal(err)
	}
	if rep, err = r.evaluate(ctx, tr, r.Data.Test, r.calibration()); err != nil {
		t.Fatal(err)
	}
	if rep.Map()["nll"] == rec.Metrics["nll"] {
		t.Error("the saved parameters score the record with other BatchNorm statistics too: the check is blind")
	}
}

// freshEngine builds an engine for run's models with the runner's training
// set for UpdateBN, as a run would.
func freshEngine(t *testing.T, r *Runner, run experiment.Run) *engine.Engine {
	t.Helper()
	m, err := r.Zoo.Make(context.Background(), r.W, r.Dev, run.Members[0], r.Data.Classes, r.Data.Shape)
	if err != nil {
		t.Fatal(err)
	}
	e, err := engine.New(context.Background(), r.W, engine.Config{Device: r.Dev, Seed: 123}, []*model.Model{m})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	train := r.Data.Train
	e.SetBNData(engine.BNData{N: train.N, Batch: int64(r.Exp.Train.BatchSize), Inputs: func(s *tensor.Scope, start, n int64) tensor.T {
		x, _ := train.Range(s, start, n)
		return x
	}})
	return e
}

// liveStats returns member 0's BatchNorm statistics.
func liveStats(t *testing.T, e *engine.Engine) []float32 {
	t.Helper()
	var out []float32
	err := e.Worker().Do(context.Background(), func() error {
		s := tensor.NewScope()
		defer s.Close()
		out = s.Float32s(e.Members()[0].Buf)
		return s.Err()
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func maxAbsDiff(a, b []float32) float64 {
	d := 0.0
	for i := range a {
		d = max(d, float64(abs32(a[i]-b[i])))
	}
	return d
}

func abs32(x float32) float32 {
	if x < 0 {
		return -x
	}
	return x
}
