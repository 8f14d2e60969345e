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
	"reflect"
	"strings"
	"time"

	"github.com/optlab/optlab/host/engine"
	"github.com/optlab/optlab/host/experiment"
	"github.com/optlab/optlab/host/model"
	"github.com/optlab/optlab/host/results"
	"github.com/optlab/optlab/host/tensor"
	"github.com/optlab/optlab/sdk/optim"
)

// Runner runs the runs of one experiment on one device.
type Runner struct {
	W    *tensor.Worker
	Dev  tensor.Device
	Exp  *experiment.Experiment
	Data *Data
	Zoo  model.Zoo
	// Progress receives progress output; nil discards it.
	Progress io.Writer
	// Log receives notices that must reach the user even without
	// progress output (a saved state not resumed, …); nil discards them.
	Log io.Writer
	// Terminal selects a redrawn progress line instead of periodic lines.
	Terminal bool
	// Meta fills the provenance fields of every record.
	Meta Meta
	// Smoke caps every run at a few steps (host run --smoke).
	SmokeSteps int
	// StateDir, when set, receives each run's training state at every
	// epoch end (removed when the run finishes) so an interrupted run
	// resumes from its last finished epoch, and ../checkpoints/ receives the
	// final model of every run (PyTorch names).
	StateDir string
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

// Method is the optimizer of a run with what the record says about it.
type Method struct {
	Optimizer optim.Optimizer
	Plugin    string
	Version   string
	// Params are the validated hyperparameters, defaults filled in.
	Params map[string]any
}

// ErrNaN reports a diverged run.
var ErrNaN = errors.New("loss is not finite")

// Steps returns the number of optimizer steps per epoch and in total.
func (r *Runner) Steps() (perEpoch, total int64) {
	tr := r.Exp.Train
	perEpoch = int64(r.Data.TrainSize / tr.BatchSize)
	total = perEpoch * int64(tr.Epochs)
	if tr.MaxSteps > 0 && int64(tr.MaxSteps) < total {
		total = int64(tr.MaxSteps)
	}
	if r.SmokeSteps > 0 && int64(r.SmokeSteps) < total {
		total = int64(r.SmokeSteps)
	}
	return perEpoch, total
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

// Record starts the result record of a run (without metrics).
func (r *Runner) Record(run experiment.Run, m Method) results.Record {
	r = r.forRun(run)
	cfg := map[string]any{}
	for k, v := range m.Params {
		cfg["params."+k] = v
	}
	tr := r.Exp.Train
	cfg["train.epochs"] = int64(tr.Epochs)
	cfg["train.batch_size"] = int64(tr.BatchSize)
	cfg["train.optimizer"] = fmt.Sprintf("%s lr=%g mom=%g nesterov=%v wd=%g", tr.Optimizer.Name, tr.Optimizer.LR, tr.Optimizer.Momentum, tr.Optimizer.Nesterov, tr.Optimizer.WeightDecay)
	cfg["train.schedule"] = tr.Schedule.Kind
	cfg["train.label_smoothing"] = tr.LabelSmoothing
	cfg["train.max_steps"] = int64(tr.MaxSteps)
	cfg["data.augment"] = fmt.Sprint(r.Exp.Data.Augment)
	cfg["plugin"] = m.Plugin
	// Everything else that changes what a run trains or how it is scored
	// (ConfigDiff ignores keys that records of older versions lack).
	d := r.Exp.Data
	cfg["data.dataset"] = d.Dataset
	cfg["data.validation"] = d.Validation
	cfg["data.test_fraction"] = d.TestFraction
	cfg["data.normalize"] = d.Normalize
	cfg["data.shuffle"] = d.Shuffle
	cfg["data.classes"] = int64(d.Classes)
	if d.Dataset == experiment.DatasetSynthetic || d.OOD == experiment.DatasetSynthetic {
		addTable(cfg, "data.synthetic", d.Synthetic)
	}
	cfg["data.ood"] = d.OOD
	addTable(cfg, "train.schedule", tr.Schedule)
	addTable(cfg, "train.optimizer", tr.Optimizer)
	cfg["model.variational"] = r.Exp.Model.Variational
	if r.Exp.Model.Variational {
		addTable(cfg, "model.variational_opts", r.Exp.Model.VariationalOpts)
	}
	cfg["model.init_from"] = r.Exp.Model.InitFrom
	// Numerics: recorded only when not the default, so that records of
	// float32 runs keep the configuration (and hash) they had before these
	// keys existed (results.OmittedDefaults compares a missing key as its
	// default).
	if p := tr.Precision; p != "" && p != experiment.PrecisionFP32 {
		cfg["train.precision"] = p
	}
	if f := r.Exp.Model.MemoryFormat; f != "" && f != experiment.MemoryContiguous {
		cfg["model.memory_format"] = f
	}
	// The files behind data.path and init_from, by content: another file
	// under the same name (or the same one edited) is another run.
	if d.Dataset == experiment.DatasetCSV && d.Path != "" {
		if id, ok := FileIdentity(d.Path); ok {
			cfg["data.path.content"] = id
		}
	}
	if r.Exp.Model.InitFrom != "" {
		if id, ok := FileIdentity(r.Exp.Model.InitFrom); ok {
			cfg["model.init_from.content"] = id
		}
	}
	addTable(cfg, "eval", r.Exp.Eval)
	// Determinism and precision: only when on, so that a run at the
	// defaults keeps the configuration (and hash) of the records written
	// before these keys existed; Record.Numerics has all three.
	for k, on := range map[string]bool{"train.deterministic": tr.Deterministic, "train.cudnn_benchmark": tr.CudnnBenchmark, "train.tf32": tr.TF32} {
		if on {
			cfg[k] = true
		}
	}
	// What TensorBoard logs changes no result: turning it off or on must
	// neither supersede finished runs nor retire saved states.
	delete(cfg, "eval.tensorboard")
	delete(cfg, "eval.tensorboard_every_steps")
	rec := results.Record{
		Experiment: r.Exp.Name, Key: run.Key, Method: run.Label, Plugin: m.Plugin, PluginVersion: m.Version,
		Config: cfg, Dataset: r.Exp.Data.Dataset, Arch: run.Arch, Seed: run.Seed, Epochs: tr.Epochs,
		Device: r.Dev.String(), Libtorch: tensor.LibtorchDescription(), BLAS: tensor.BLASInUse().String(), GitCommit: r.Meta.GitCommit, Host: r.Meta.Host,
		Numerics: &results.Numerics{Deterministic: tr.Deterministic, CudnnBenchmark: tr.CudnnBenchmark, TF32: tr.TF32},
	}
	if len(run.Setting) > 0 {
		rec.Base, rec.Setting = run.Method.Name, run.SettingString()
	}
	return rec
}

// addTable adds the fields of an experiment table (a struct with toml
// tags) to a run's configuration as prefix.<toml key> entries, nested
// tables flattened the same way.
func addTable(cfg map[string]any, prefix string, v any) {
	rv := reflect.ValueOf(v)
	rt := rv.Type()
	for i := range rt.NumField() {
		f := rt.Field(i)
		key, _, _ := strings.Cut(f.Tag.Get("toml"), ",")
		if key == "" || key == "-" || !f.IsExported() {
			continue
		}
		fv := rv.Field(i)
		if fv.Kind() == reflect.Struct {
			addTable(cfg, prefix+"."+key, fv.Interface())
			continue
		}
		cfg[prefix+"."+key] = fv.Interface()
	}
}

// Run trains one run and returns its record (Status ok). On failure it
// returns the error; the caller records the failure.
func (r *Runner) Run(ctx context.Context, run experiment.Run, m Method) (results.Record, error) {
	r = r.forRun(run)
	rec := r.Record(run, m)
	start := time.Now()
	t, err := r.build(ctx, run, m)
	if err != nil {
		return rec, err
	}
	defer t.eng.Close()
	if err := r.resume(ctx, t, rec.Config); err != nil {
		return rec, err
	}
	// A failed run keeps what it logged; a finished one must have written
	// all of it (both Close twice as a no-op).
	defer func() { _ = t.curve.Close() }()
	defer func() { _ = t.tb.Close() }()
	prog := newProgress(r.Progress, r.Terminal, fmt.Sprintf("%s %s seed %d", run.Label, run.Arch, run.Seed), t.total-t.from.Step)
	defer prog.done()
	if err := r.loop(ctx, t, prog, rec.Config, start); err != nil {
		return rec, err
	}
	wall := t.from.Elapsed + time.Since(start).Seconds()
	if err := r.saveModel(ctx, t); err != nil {
		return rec, err
	}
	if rec, err = r.score(ctx, t, rec, wall); err != nil {
		return rec, err
	}
	if err := errors.Join(t.curve.Close(), t.tb.Close()); err != nil {
		return rec, fmt.Errorf("finishing the run's logs: %w", err)
	}
	return rec, nil
}

// DefaultHost names this machine for records.
func DefaultHost() string {
	h, _ := os.Hostname()
	return h
}
