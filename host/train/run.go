// Package train runs one training run of an experiment's grid: it builds the
// members, hands the optimizer (in-process or plugin) an engine to drive,
// feeds minibatches with the schedule's learning rate, evaluates the
// optimizer's predictive with the metrics suite, and returns the result
// record.
package train

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"time"

	"github.com/optlab/optlab/host/checkpoint/statedict"
	"github.com/optlab/optlab/host/curves"
	"github.com/optlab/optlab/host/data/devset"
	"github.com/optlab/optlab/host/engine"
	"github.com/optlab/optlab/host/eval"
	"github.com/optlab/optlab/host/experiment"
	"github.com/optlab/optlab/host/metrics"
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

// Record starts the result record of a run (without metrics).
func (r *Runner) Record(run experiment.Run, m Method) results.Record {
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
	addTable(cfg, "eval", r.Exp.Eval)
	return results.Record{
		Experiment: r.Exp.Name, Key: run.Key, Method: run.Method.Name, Plugin: m.Plugin, PluginVersion: m.Version,
		Config: cfg, Dataset: r.Exp.Data.Dataset, Arch: run.Arch, Seed: run.Seed, Epochs: tr.Epochs,
		Device: r.Dev.String(), Libtorch: tensor.LibtorchDescription(), BLAS: tensor.BLASInUse().String(), GitCommit: r.Meta.GitCommit, Host: r.Meta.Host,
	}
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

// Preflight does what the start of Run does, without training: it builds
// the run's models and engine, loads model.init_from, checks that an epoch
// has a step, and configures the optimizer, which validates its
// hyperparameters. host check uses it so that it fails exactly where and
// how a run would. The engine is closed again.
func (r *Runner) Preflight(ctx context.Context, run experiment.Run, m Method) error {
	eng, _, _, _, err := r.build(ctx, run, m)
	if err == nil {
		eng.Close()
	}
	return err
}

// build makes run's models and engine, initializes them (model.init_from)
// and configures the optimizer; it returns the models, the steps per epoch
// and the total steps. On error nothing is left open.
func (r *Runner) build(ctx context.Context, run experiment.Run, m Method) (eng *engine.Engine, models []*model.Model, perEpoch, total int64, err error) {
	models = make([]*model.Model, len(run.Members))
	for i, arch := range run.Members {
		mod, err := r.Zoo.New(arch, r.Data.Classes, r.Data.Shape)
		if err != nil {
			return nil, nil, 0, 0, err
		}
		models[i] = mod
	}
	tr := r.Exp.Train
	o := tr.Optimizer
	base := engine.BaseConfig{Name: o.Name, Momentum: o.Momentum, Nesterov: o.Nesterov, WeightDecay: o.WeightDecay, Eps: o.Eps}
	if len(o.Betas) == 2 {
		base.Beta1, base.Beta2 = o.Betas[0], o.Betas[1]
	}
	ecfg := engine.Config{
		Device: r.Dev, Seed: run.Seed, LabelSmoothing: tr.LabelSmoothing, Base: base,
		TrainSize: int64(r.Data.TrainSize), BatchSize: int64(tr.BatchSize),
	}
	if mo := r.Exp.Model; mo.Variational {
		v := mo.VariationalOpts
		ecfg.Variational = &engine.Variational{PriorSigma: v.PriorSigma, RhoInit: v.RhoInit, RhoInitStd: 0.1,
			KL: v.KL, KLReduction: v.KLReduction, Beta: v.Beta, LocalReparam: v.LocalReparam}
	}
	perEpoch, total = r.Steps()
	if perEpoch == 0 {
		return nil, nil, 0, 0, fmt.Errorf("the training set (%d samples) is smaller than one batch (%d)", r.Data.TrainSize, tr.BatchSize)
	}
	eng, err = engine.New(ctx, r.W, ecfg, models)
	if err != nil {
		return nil, nil, 0, 0, err
	}
	fail := func(e error) (*engine.Engine, []*model.Model, int64, int64, error) {
		eng.Close()
		return nil, nil, 0, 0, e
	}
	if from := r.Exp.Model.InitFrom; from != "" {
		if err := statedict.Load(ctx, eng, from); err != nil {
			return fail(fmt.Errorf("model.init_from: %w", err))
		}
	}
	if err := m.Optimizer.Configure(ctx, eng, optim.Config{
		Params: m.Params, Seed: run.Seed, TotalSteps: total, StepsPerEpoch: perEpoch, Members: len(models),
	}); err != nil {
		return fail(fmt.Errorf("configure: %w", err))
	}
	return eng, models, perEpoch, total, nil
}

// Run trains one run and returns its record (Status ok). On failure it
// returns the error; the caller records the failure.
func (r *Runner) Run(ctx context.Context, run experiment.Run, m Method) (results.Record, error) {
	rec := r.Record(run, m)
	start := time.Now()
	eng, models, perEpoch, total, err := r.build(ctx, run, m)
	if err != nil {
		return rec, err
	}
	defer eng.Close()
	tr := r.Exp.Train
	sched := NewSchedule(tr)
	// One data order for all members, or one per member when the optimizer
	// asks for it (deep ensembles).
	orders := 1
	for _, c := range m.Optimizer.Info().Capabilities {
		if c == optim.CapMemberDataOrder {
			orders = len(models)
		}
	}
	rngs := make([]*rand.Rand, orders)
	srcs := make([]*rand.PCG, orders)
	for k := range rngs {
		srcs[k] = rand.NewPCG(uint64(run.Seed), uint64(1+2*k))
		rngs[k] = rand.New(srcs[k])
	}
	augSrc := rand.NewPCG(uint64(run.Seed), 2)
	augRNG := rand.New(augSrc)
	statePath := r.StatePath(run)
	if err := r.retireStaleState(run, statePath, rec.Config); err != nil {
		return rec, err
	}
	ls, resumed, err := r.loadState(ctx, statePath, eng, m.Optimizer, srcs, augSrc, sched)
	if err != nil {
		return rec, err
	}
	if resumed && r.Progress != nil {
		fmt.Fprintf(r.Progress, "%s: resuming after epoch %d (step %d) from %s\n", run.Key, ls.Epoch, ls.Step, statePath)
	}
	var curve *curves.Writer
	if r.Exp.ResultsDir != "" {
		path := curves.Path(r.Exp.ResultsDir, r.Exp.Name, run.Key)
		if resumed {
			curve, err = curves.Continue(path, ls.Epoch)
		} else {
			curve, err = curves.Create(path)
		}
		if err != nil {
			return rec, err
		}
		defer curve.Close()
	}
	prog := newProgress(r.Progress, r.Terminal, fmt.Sprintf("%s %s seed %d", run.Method.Name, run.Arch, run.Seed), total-ls.Step)
	defer prog.done()
	step := ls.Step
	trainLoss, trainAcc := ls.TrainLoss, ls.TrainAcc
	epochs := ls.Epoch
	var lastLR float64
	for epoch := ls.Epoch; step < total; epoch++ {
		idx := make([][]int64, orders)
		for k := range idx {
			idx[k] = make([]int64, r.Data.TrainSize)
			for i := range idx[k] {
				idx[k][i] = int64(i)
			}
			if r.Exp.Data.Shuffle {
				rngs[k].Shuffle(len(idx[k]), func(i, j int) { idx[k][i], idx[k][j] = idx[k][j], idx[k][i] })
			}
		}
		var sumLoss, sumAcc float64
		var n int
		for i := 0; i < int(perEpoch) && step < total; i++ {
			if err := ctx.Err(); err != nil {
				return rec, err
			}
			bs := int64(tr.BatchSize)
			err := r.W.Do(ctx, func() error {
				s := tensor.NewScope()
				defer s.Close()
				for k := range idx {
					x, y := r.Data.Train.Batch(s, idx[k][int64(i)*bs:int64(i+1)*bs], r.Data.Augment, augRNG, r.Dev)
					if err := s.Err(); err != nil {
						return err
					}
					x, y = s.Keep(x), s.Keep(y)
					if orders == 1 {
						for mi := range models {
							eng.SetBatch(mi, x, y)
						}
					} else {
						eng.SetBatch(k, x, y)
					}
				}
				return nil
			})
			if err != nil {
				return rec, fmt.Errorf("batch: %w", err)
			}
			lr := sched.LR(epoch, i, int(perEpoch))
			lastLR = lr
			eng.BeginStep(step, lr)
			out, err := m.Optimizer.Step(ctx, eng, optim.StepInput{Step: step, Epoch: epoch, LR: lr})
			if err != nil {
				return rec, fmt.Errorf("step %d (epoch %d): %w", step, epoch+1, err)
			}
			loss := out.Metrics["loss"]
			if math.IsNaN(loss) || math.IsInf(loss, 0) {
				return rec, fmt.Errorf("step %d (epoch %d, lr %g): %w (%v); lower the learning rate or ρ", step, epoch+1, lr, ErrNaN, loss)
			}
			sumLoss += loss
			sumAcc += out.Metrics["acc"]
			n++
			step++
			prog.update(epoch+1, tr.Epochs, step-ls.Step, loss, out.Metrics["acc"])
		}
		epochs++
		trainLoss, trainAcc = sumLoss/float64(n), sumAcc/float64(n)
		row := curves.NaNRow(epochs, step)
		row.LR, row.TrainLoss, row.TrainAcc = lastLR, trainLoss, trainAcc
		every := r.Exp.Eval.EveryEpochs
		if sched.NeedsMetric() || (every > 0 && epochs%every == 0) {
			set := r.Data.Val
			if set == nil {
				set = r.Data.Test
			}
			rep, err := r.evaluate(ctx, eng, m.Optimizer, set, run.Seed, metrics.CalNone)
			if err != nil {
				return rec, err
			}
			sched.Observe(rep.NLL)
			row.TestLoss, row.TestAcc = rep.NLL, rep.Acc
		}
		row.Seconds = ls.Elapsed + time.Since(start).Seconds()
		if curve != nil {
			if err := curve.Append(row); err != nil {
				return rec, err
			}
		}
		if statePath != "" && step < total {
			ls := loopState{Epoch: epochs, Step: step, TrainLoss: trainLoss, TrainAcc: trainAcc, Elapsed: ls.Elapsed + time.Since(start).Seconds()}
			if err := r.saveState(ctx, statePath, rec.Config, eng, m.Optimizer, ls, srcs, augSrc, sched); err != nil {
				return rec, fmt.Errorf("saving the training state after epoch %d: %w", epochs, err)
			}
		}
		if r.afterEpoch != nil {
			if err := r.afterEpoch(epochs); err != nil {
				return rec, err
			}
		}
	}
	wall := ls.Elapsed + time.Since(start).Seconds()
	if p := r.ModelPath(run); p != "" {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return rec, err
		}
		if err := statedict.Save(ctx, eng, p, map[string]string{"run_key": run.Key, "experiment": r.Exp.Name}); err != nil {
			return rec, fmt.Errorf("saving the final model: %w", err)
		}
		if statePath != "" {
			_ = os.Remove(statePath)
		}
	}
	rep, err := r.evaluate(ctx, eng, m.Optimizer, r.Data.Test, run.Seed, r.calibration())
	if err != nil {
		return rec, err
	}
	rec.Metrics = rep.Map()
	rec.Metrics["train_loss"] = trainLoss
	rec.Metrics["train_acc"] = trainAcc
	rec.Metrics["test_loss"] = rep.NLL
	rec.Steps = step
	rec.Epochs = epochs
	rec.WallSeconds = wall
	rec.SecondsPerEpoch = wall / (float64(step) / float64(perEpoch))
	rec.Status = results.StatusOK
	return rec, nil
}

func (r *Runner) calibration() metrics.Calibration {
	switch r.Exp.Eval.Temperature {
	case "none":
		return metrics.CalNone
	case "validation":
		return metrics.CalValidation
	}
	return metrics.CalCrossFit
}

// evaluate forms the optimizer's predictive on set and computes the metrics.
func (r *Runner) evaluate(ctx context.Context, eng *engine.Engine, opt optim.Optimizer, set *devset.Set, seed int64, cal metrics.Calibration) (metrics.Report, error) {
	pred := optim.Predictive{Kind: optim.Point}
	if p, ok := opt.(optim.Predictor); ok {
		var err error
		if pred, err = p.Predictive(ctx); err != nil {
			return metrics.Report{}, fmt.Errorf("predictive: %w", err)
		}
		if pred.Kind == optim.Samples && pred.N == 0 {
			pred.N = r.Exp.Eval.MCSamples
			if pred.Std == 0 && r.Exp.Model.Variational {
				pred.N = r.Exp.Model.VariationalOpts.MCSamples
			}
		}
	}
	bs := int64(r.Exp.Train.EvalBatchSize)
	probs, err := eval.Predict(ctx, eng, pred, set, bs, seed)
	if err != nil {
		return metrics.Report{}, fmt.Errorf("evaluation: %w", err)
	}
	labels, err := r.labels(ctx, set)
	if err != nil {
		return metrics.Report{}, err
	}
	opts := metrics.Options{AACSteps: r.Exp.Eval.AACSteps, Calibration: cal, Seed: uint64(seed)}
	if cal == metrics.CalValidation && r.Data.Val != nil {
		vp, err := eval.Predict(ctx, eng, pred, r.Data.Val, bs, seed)
		if err != nil {
			return metrics.Report{}, fmt.Errorf("evaluation on validation data: %w", err)
		}
		vl, err := r.labels(ctx, r.Data.Val)
		if err != nil {
			return metrics.Report{}, err
		}
		opts.Validation = &metrics.Predictions{Probs: vp, Classes: set.Classes}
		opts.ValidationLabels = vl
	}
	if r.Data.OOD != nil && set == r.Data.Test {
		op, err := eval.Predict(ctx, eng, pred, r.Data.OOD, bs, seed)
		if err != nil {
			return metrics.Report{}, fmt.Errorf("evaluation on OOD data: %w", err)
		}
		opts.OOD = &metrics.Predictions{Probs: op, Classes: set.Classes}
	}
	return metrics.Evaluate(metrics.Predictions{Probs: probs, Classes: set.Classes}, labels, opts)
}

func (r *Runner) labels(ctx context.Context, set *devset.Set) ([]int32, error) {
	var out []int32
	err := r.W.Do(ctx, func() error {
		s := tensor.NewScope()
		defer s.Close()
		out = set.Labels(s)
		return s.Err()
	})
	return out, err
}

// DefaultHost names this machine for records.
func DefaultHost() string {
	h, _ := os.Hostname()
	return h
}
