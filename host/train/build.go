package train

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"

	"github.com/optlab/optlab/host/checkpoint/statedict"
	"github.com/optlab/optlab/host/engine"
	"github.com/optlab/optlab/host/experiment"
	"github.com/optlab/optlab/host/model"
	"github.com/optlab/optlab/host/observe"
	"github.com/optlab/optlab/host/results"
	"github.com/optlab/optlab/host/tensor"
	"github.com/optlab/optlab/sdk/optim"
)

// training is one run in progress: build makes its engine, resume sets up
// (or restores) the random streams, schedule and curve, and the loop
// advances it.
type training struct {
	run experiment.Run
	m   Optimizer
	// cfg is the run's configuration as its record has it (Config.Map),
	// saved with its training state.
	cfg     map[string]any
	eng     *engine.Engine
	members int
	// perEpoch and total are the optimizer steps per epoch and in all
	// (with a budget, a bound).
	perEpoch, total int64
	// budget is train.budget in samples of gradient evaluations (0: none)
	// and budgetUnit those of one budget epoch (Runner.Budget); batch is
	// train.batch_size.
	budget, budgetUnit, batch int64
	// ownsUpdate says that the optimizer applies its own update
	// (optim.Features.OwnsUpdate).
	ownsUpdate bool

	sched *Schedule
	// orders is the number of data orders: 1, or one per member when the
	// optimizer asks for it (deep ensembles). srcs (and rngs drawing from
	// them) shuffle them; augSrc (augRNG) draws the augmentations.
	orders int
	srcs   []*rand.PCG
	rngs   []*rand.Rand
	augSrc *rand.PCG
	augRNG *rand.Rand
	// statePath is where the training state is saved ("" for none); from
	// is the loop state the run starts at (read from it, or zero).
	statePath string
	from      loopState
	obs       observe.All

	// The loop's progress: steps and epochs done, the last epoch's mean
	// training loss and accuracy, and the learning rate of the last step
	// processed (stepLR).
	lr                  float64
	step                int64
	epochs              int
	trainLoss, trainAcc float64
	// best is the best epoch so far under eval.best_epoch (nil: none yet).
	best *bestEpoch
	// evalSeconds is the time spent evaluating at epoch ends, over every
	// resumption, and evals what those evaluations measured.
	evalSeconds float64
	evals       []results.EvalPoint
}

// spent reports whether the run's gradient budget (train.budget) is
// spent; false without one.
func (t *training) spent() bool { return t.budget > 0 && t.gradEvals() >= t.budget }

// position is where step i (0-based) of epoch (0-based) stands in the
// schedule: by steps, or with a budget by the gradient evaluations spent
// (BudgetPosition).
func (t *training) position(epoch, i int) Position {
	if t.budget > 0 {
		return BudgetPosition(t.gradEvals(), t.budgetUnit, t.batch)
	}
	return StepPosition(epoch, i, int(t.perEpoch))
}

// gradEvals returns the run's gradient evaluations so far: the samples of
// its forward-backward passes, over every resumption.
func (t *training) gradEvals() int64 { return t.from.GradEvals + t.eng.Counters().GradSamples }

// Preflight does what the start of Run does, without training: it builds
// the run's models and engine, loads model.init_from, checks that an epoch
// has a step, and configures the optimizer, which validates its
// hyperparameters. host check uses it so that it fails exactly where and
// how a run would. The engine is closed again.
func (r *Runner) Preflight(ctx context.Context, run experiment.Run, m Optimizer) error {
	t, err := r.forRun(run).build(ctx, run, m)
	if err == nil {
		t.eng.Close()
	}
	return err
}

// ModelNumerics is how the experiment's models compute: train.precision
// and model.memory_format. bf16 is an error when this libtorch's autocast
// cannot be reached.
func ModelNumerics(e *experiment.Experiment) (model.Numerics, error) {
	n := model.Numerics{
		BF16:         e.Train.Precision == experiment.PrecisionBF16,
		ChannelsLast: e.Model.MemoryFormat == experiment.MemoryChannelsLast,
	}
	if n.BF16 {
		if _, err := tensor.AutocastAvailable(); err != nil {
			return n, fmt.Errorf("train.precision = \"bf16\": %w", err)
		}
	}
	return n, nil
}

// build makes run's models and engine, initializes them (model.init_from)
// and configures the optimizer; the training it returns has the engine,
// the number of members, the steps per epoch and the total steps. On error
// nothing is left open.
func (r *Runner) build(ctx context.Context, run experiment.Run, m Optimizer) (*training, error) {
	num, err := ModelNumerics(r.Exp)
	if err != nil {
		return nil, err
	}
	models, err := r.models(ctx, run, num)
	if err != nil {
		return nil, err
	}
	// r is the run's runner (forRun): its Train has the run's swept values
	// and its method's optimizer and schedule.
	tr := r.Exp.Train
	o := tr.Optimizer
	base := engine.BaseConfig{Name: o.Name, Momentum: o.Momentum, Nesterov: o.Nesterov, WeightDecay: o.WeightDecay, Eps: o.Eps}
	if len(o.Betas) == 2 {
		base.Beta1, base.Beta2 = o.Betas[0], o.Betas[1]
	}
	ecfg := engine.Config{
		Device: r.Dev, Seed: run.Seed, LabelSmoothing: tr.LabelSmoothing, Base: base, OwnsUpdate: m.ownsUpdate(),
		TrainSize: int64(r.Data.TrainSize), BatchSize: int64(tr.BatchSize),
		DebugNonFinite: os.Getenv(engine.DebugNonFiniteEnv) == "1",
		Spill:          tr.Spill,
		MicroBatches:   tr.MicroBatches,
		Log:            r.logLine(run),
	}
	if mo := r.Exp.Model; mo.Variational {
		v := mo.VariationalOpts
		ecfg.Variational = &engine.Variational{PriorSigma: v.PriorSigma, RhoInit: v.RhoInit, RhoInitStd: 0.1,
			KL: v.KL, KLReduction: v.KLReduction, Beta: v.Beta, LocalReparam: v.LocalReparam}
	}
	// The experiment's determinism and precision, set in full for every
	// run (libtorch's switches are process-wide).
	tnum := tensor.Numerics{Deterministic: tr.Deterministic, CudnnBenchmark: tr.CudnnBenchmark, TF32: tr.TF32}
	if err := r.W.Do(ctx, func() error { return tensor.SetNumerics(tnum) }); err != nil {
		releaseModels(r.W, models)
		return nil, err
	}
	perEpoch, total := r.Steps()
	if perEpoch == 0 {
		releaseModels(r.W, models)
		return nil, fmt.Errorf("the training set (%d samples) is smaller than one batch (%d)", r.Data.TrainSize, tr.BatchSize)
	}
	eng, err := engine.New(ctx, r.W, ecfg, models)
	if err != nil {
		releaseModels(r.W, models)
		return nil, err
	}
	fail := func(e error) (*training, error) {
		eng.Close()
		return nil, e
	}
	// UpdateBN passes over the training samples in order, in batches of
	// the training batch size, without augmentation.
	// (host check's preflight builds runs without the data on the device.)
	if train := r.Data.Train; train != nil {
		eng.SetBNData(engine.BNData{N: train.N, Batch: int64(tr.BatchSize), Inputs: func(s *tensor.Scope, start, n int64) tensor.T {
			x, _ := train.Range(s, start, n)
			return x
		}})
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
	if err := checkResolved(m.Optimizer.Resolved()); err != nil {
		r.logLine(run)(fmt.Sprintf("warning: %v; the record writes it as a string (results.Record.Resolved)", err))
	}
	budget, unit := r.Budget()
	return &training{run: run, m: m, eng: eng, members: len(models), perEpoch: perEpoch, total: total,
		budget: budget, budgetUnit: unit, batch: int64(r.Exp.Train.BatchSize), ownsUpdate: ecfg.OwnsUpdate}, nil
}

// models builds run's members (a TorchScript file is loaded once per
// member: each has its own module) with the experiment's numerics. On
// error nothing is left open.
func (r *Runner) models(ctx context.Context, run experiment.Run, num model.Numerics) ([]*model.Model, error) {
	if num.ChannelsLast {
		if err := r.W.Do(ctx, func() error { return tensor.ChannelsLastSound(r.Dev) }); err != nil {
			return nil, fmt.Errorf("model.memory_format = \"channels_last\": %w", err)
		}
	}
	var models []*model.Model
	for _, arch := range run.Members {
		mod, err := r.Zoo.Make(ctx, r.W, r.Dev, arch, r.Data.Classes, r.Data.Shape)
		if err != nil {
			releaseModels(r.W, models)
			return nil, err
		}
		models = append(models, mod)
		if mod.IsTorchScript() && r.Exp.Model.Variational {
			err = fmt.Errorf("model.variational = true: %s is a TorchScript module, which has no variational (local-reparameterization) forward; use a built-in arch", arch)
		}
		if err == nil {
			err = mod.SetNumerics(num)
		}
		if r.Exp.Model.TorchScriptInit == experiment.TorchScriptInitReset {
			mod.ResetInit()
		}
		if err != nil {
			releaseModels(r.W, models)
			return nil, err
		}
	}
	return models, nil
}

// releaseModels frees what models hold on the device, on w.
func releaseModels(w *tensor.Worker, models []*model.Model) {
	_ = w.Do(context.Background(), func() error {
		for _, m := range models {
			m.Release()
		}
		return nil
	})
}

// logLine writes one of the engine's notices (a spilled vector) to the log,
// naming the run.
func (r *Runner) logLine(run experiment.Run) func(string) {
	return func(line string) {
		if r.Log != nil {
			fmt.Fprintf(r.Log, "host: %s: %s\n", run.Key, line)
		}
	}
}
