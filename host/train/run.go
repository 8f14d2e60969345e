// Package train runs one training run of an experiment's grid in four
// steps: build (build.go) makes the members and the engine and configures
// the optimizer (in-process or plugin); resume (resume.go) sets up the
// random streams, schedule and curve, or restores them and the training
// state (state.go) of an interrupted run; the loop (loop.go) feeds
// minibatches with the schedule's learning rate to the optimizer's steps;
// evaluate (evaluate.go) scores the optimizer's predictive with the metrics
// suite and completes the result record.
package train

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/optlab/optlab/host/data/devset"
	"github.com/optlab/optlab/host/engine"
	"github.com/optlab/optlab/host/experiment"
	"github.com/optlab/optlab/host/identity"
	"github.com/optlab/optlab/host/model"
	"github.com/optlab/optlab/host/observe"
	"github.com/optlab/optlab/host/results"
	"github.com/optlab/optlab/host/tensor"
	"github.com/optlab/optlab/sdk/optim"
)

// Runner runs the runs of one experiment on one device.
type Runner struct {
	W    *tensor.Worker
	Dev  tensor.Device
	Exp  *experiment.Experiment
	Data *devset.Data
	Zoo  model.Zoo
	// Observers follow every run: its curve, TensorBoard events and
	// progress lines (observe.Standard), or any other logger.
	Observers []observe.Opener
	// Log receives notices that must reach the user even without
	// progress output (a saved state not resumed, …); nil discards them.
	Log io.Writer
	// Meta fills the provenance fields of every record.
	Meta Meta
	// Smoke, when set (host run --smoke), caps every run at a few short
	// epochs, keeping the run's epoch structure: the optimizer sees
	// Smoke.Epochs epochs of Smoke.StepsPerEpoch steps (Config.TotalSteps
	// and StepsPerEpoch, StepInput.Epoch), the curves a row per epoch, and
	// the schedule the learning rates of the run's first epochs.
	Smoke *Smoke
	// Checkpoints, when set (train.checkpoint), is the results folder
	// whose state/ receives each run's training state at every epoch end
	// (removed when the run finishes), so that an interrupted run resumes
	// from its last finished epoch, and whose checkpoints/ receives the
	// final model of every run (PyTorch names).
	Checkpoints *results.Layout
	// Dumps, when set, is the results folder whose params/ receives each
	// run's parameter dumps when train.dump_params_every asks for them
	// (results.Layout.ParamsStep): every member's live parameters and
	// BatchNorm statistics before the first step and after every N-th.
	Dumps *results.Layout
	// StepHook, when set (benchmarks), is called on the loop's goroutine
	// after every step, once the step was issued (batch fed, BeginStep, the
	// optimizer's Step, TakeReports) and the step before it processed
	// (its reports read back, one step late): the time between two calls
	// is what a step costs in training. step is the step's 0-based index.
	StepHook func(step int64, eng *engine.Engine)
	// afterEpoch, when set (tests), runs after each epoch's state is saved;
	// an error aborts the run as a crash would.
	afterEpoch func(epoch int) error
}

// Meta is provenance recorded with every result.
type Meta struct {
	GitCommit, Host string
}

// Optimizer is the optimizer of a run with what the record says about it
// (its plugin, version and hyperparameters).
type Optimizer struct {
	Optimizer optim.Optimizer
	Plugin    string
	Version   string
	// Params are the validated hyperparameters, defaults filled in.
	Params map[string]any
	// OwnsUpdate says that the optimizer applies its own update
	// (optim.Info.OwnsUpdateWith its Params): the run has no base
	// optimizer, and its record says so. grid.Plan.Method sets it from the
	// plugin's Info and the run's hyperparameters, which a run's Optimizer
	// declaring the feature implies too.
	OwnsUpdate bool
	// Info is the plugin's Info when Optimizer is nil (grid.Plan.Method,
	// before the plugin is launched for the run), so that the run's
	// configuration leaves out the update rules it does not use
	// (optim.Info.Applied) as the record made with the Optimizer does.
	Info *optim.Info
}

// ownsUpdate reports whether the optimizer applies its own update: it
// says so in OwnsUpdate, or its Info does for its Params.
func (m Optimizer) ownsUpdate() bool {
	return m.OwnsUpdate || (m.Optimizer != nil && m.Optimizer.Info().OwnsUpdateWith(m.Params))
}

// ErrNaN reports a diverged run.
var ErrNaN = errors.New("loss is not finite")

// Steps returns the number of optimizer steps per epoch and in total.
// With train.budget the total is a bound, the steps of a method that
// takes one gradient a step: the loop stops when the budget is spent
// (Budget).
func (r *Runner) Steps() (perEpoch, total int64) {
	tr := r.Exp.Train
	perEpoch = int64(r.Data.TrainSize / tr.BatchSize)
	epochs := int64(tr.Horizon())
	if sm := r.Smoke; sm != nil {
		perEpoch = min(perEpoch, int64(sm.StepsPerEpoch))
		epochs = min(epochs, int64(sm.Epochs))
	}
	total = perEpoch * epochs
	if tr.MaxSteps > 0 && int64(tr.MaxSteps) < total {
		total = int64(tr.MaxSteps)
	}
	return perEpoch, total
}

// Budget returns a run's gradient budget (train.budget) in samples of
// gradient evaluations, and its unit, the samples of one budget epoch:
// steps per epoch × batch size (both 0 without a budget). A smoke run's
// shorter epochs make a smaller unit.
func (r *Runner) Budget() (samples, unit int64) {
	tr := r.Exp.Train
	if tr.Budget <= 0 {
		return 0, 0
	}
	perEpoch, _ := r.Steps()
	unit = perEpoch * int64(tr.BatchSize)
	return int64(tr.Budget) * unit, unit
}

// Smoke is the shape of a smoke run (Runner.Smoke): at most Epochs epochs
// of at most StepsPerEpoch steps each.
type Smoke struct {
	Epochs, StepsPerEpoch int
}

// forRun returns the runner for run: r itself, or, when the run sweeps
// [train] keys, a copy whose Exp holds the run's values (see
// experiment.Run.Experiment).
func (r *Runner) forRun(run experiment.Run) *Runner {
	e := run.Experiment(r.Exp)
	if e == r.Exp {
		return r
	}
	c := *r
	c.Exp = e
	return &c
}

// Record starts the result record of a run (without metrics): the one
// place records are made. Its Config is the run's Config, rendered by the
// identity declaration (identity.Config.Map), and Identity that
// declaration's version.
func (r *Runner) Record(run experiment.Run, m Optimizer) results.Record {
	r = r.forRun(run)
	tr := r.Exp.Train
	cfg := r.Config(run, m).Map()
	rec := results.Record{
		Experiment: r.Exp.Name, Key: run.Key, Method: run.Label, Plugin: m.Plugin, PluginVersion: m.Version,
		Config: cfg, Identity: identity.Version, Dataset: r.Exp.Data.Dataset, Arch: run.Arch, Seed: run.Seed, Epochs: tr.Epochs,
		Device: r.Dev.String(), Libtorch: tensor.LibtorchDescription(), BLAS: tensor.BLASInUse().String(), GitCommit: r.Meta.GitCommit, Host: r.Meta.Host,
		Numerics: &results.Numerics{Deterministic: tr.Deterministic, CudnnBenchmark: tr.CudnnBenchmark, TF32: tr.TF32},
	}
	if len(run.Setting) > 0 {
		rec.Base, rec.Setting = run.Method.Name, run.SettingString()
	}
	if r.Data != nil && r.Data.LabelNoise != nil {
		st := r.Data.LabelNoise
		rec.LabelNoise = &results.LabelNoise{Samples: st.Samples, Flipped: st.Flipped, Fraction: st.Fraction(), Transition: st.Transition}
	}
	return rec
}

// Run trains one run and returns its record (Status ok). On failure it
// returns the error; the caller records the failure.
func (r *Runner) Run(ctx context.Context, run experiment.Run, m Optimizer) (results.Record, error) {
	r = r.forRun(run)
	rec := r.Record(run, m)
	start := time.Now()
	t, err := r.build(ctx, run, m)
	if err != nil {
		return rec, err
	}
	defer t.eng.Close()
	rec.Resolved = resolvedOf(m.Optimizer)
	t.cfg = rec.Config
	if err := r.resume(ctx, t); err != nil {
		return rec, err
	}
	// A failed run keeps what its observers logged; a finished one must
	// have written all of it.
	closed := false
	defer func() {
		if !closed {
			_ = t.obs.Close()
		}
	}()
	if err := r.loop(ctx, t, start); err != nil {
		return rec, err
	}
	if err := r.finalize(ctx, t); err != nil {
		return rec, err
	}
	wall := t.from.Elapsed + time.Since(start).Seconds()
	if err := r.saveModel(ctx, t); err != nil {
		return rec, err
	}
	if rec, err = r.score(ctx, t, rec, wall); err != nil {
		return rec, err
	}
	closed = true
	if err := t.obs.Close(); err != nil {
		return rec, fmt.Errorf("finishing the run's logs: %w", err)
	}
	return rec, nil
}

// finalize calls the optimizer's Finalize (when it declares
// optim.Features.Finalize) once, after the last step, before the run is
// evaluated and its model saved, and drops what its programs reported.
func (r *Runner) finalize(ctx context.Context, t *training) error {
	if !t.m.Optimizer.Info().Features.Finalize {
		return nil
	}
	if err := t.m.Optimizer.Finalize(ctx); err != nil {
		return fmt.Errorf("finalize: %w", err)
	}
	reps, err := t.eng.TakeReports(ctx)
	reps.Drop()
	if err != nil {
		return fmt.Errorf("finalize: %w", err)
	}
	return nil
}

// DefaultHost names this machine for records.
func DefaultHost() string {
	h, _ := os.Hostname()
	return h
}
