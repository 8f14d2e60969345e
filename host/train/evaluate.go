package train

import (
	"context"
	"fmt"

	"github.com/optlab/optlab/host/corrupt"
	"github.com/optlab/optlab/host/data/devset"
	"github.com/optlab/optlab/host/eval"
	"github.com/optlab/optlab/host/metrics"
	"github.com/optlab/optlab/host/observe"
	"github.com/optlab/optlab/host/results"
	"github.com/optlab/optlab/host/tensor"
	"github.com/optlab/optlab/sdk/optim"
)

// ValPrefix starts the keys of the metrics of the validation split in a
// record (val_acc, val_nll, val_brier, val_ece, val_aac, val_auroc),
// present when data.validation > 0.
const ValPrefix = "val_"

// score evaluates a trained run on the test set, calibrated as the
// experiment says, and on the validation split, if any, uncalibrated,
// writes the test loss and accuracy to TensorBoard and closes its log, and
// completes its record: metrics, steps, epochs and times (wall is the
// training's wall-clock time in seconds, over every resumption).
func (r *Runner) score(ctx context.Context, t *training, rec results.Record, wall float64) (results.Record, error) {
	rep, err := r.evaluate(ctx, t, r.Data.Test, r.calibration())
	if err != nil {
		return rec, err
	}
	if err := t.obs.Final(observe.Final{Step: t.step, Test: rep}); err != nil {
		return rec, err
	}
	rec.Metrics = rep.Map()
	rec.Metrics["train_loss"] = t.trainLoss
	rec.Metrics["train_acc"] = t.trainAcc
	// The gradient evaluations the training cost, in samples of
	// forward-backward passes: SAM's two passes per step count twice
	// SGD's one (host table --metrics grad_evals; docs/EXPERIMENTS.md).
	rec.Metrics["grad_evals"] = float64(t.gradEvals())
	rec.Metrics["test_loss"] = rep.NLL
	if r.Data.Val != nil {
		// The validation split's metrics (uncalibrated), for choosing
		// among the settings of a sweep without looking at the test set
		// (host table --select).
		vrep, err := r.evaluate(ctx, t, r.Data.Val, metrics.CalNone)
		if err != nil {
			return rec, fmt.Errorf("validation split: %w", err)
		}
		for k, v := range vrep.Map() {
			rec.Metrics[ValPrefix+k] = v
		}
	}
	for k, v := range bestMetrics(r.Exp.Eval.BestEpoch, t.best) {
		rec.Metrics[k] = v
	}
	if err := r.scoreCorrupted(ctx, t, rec.Metrics); err != nil {
		return rec, err
	}
	if len(t.evals) > 0 {
		rec.EvalSet, rec.Evals = "test", t.evals
		if r.Data.Val != nil {
			rec.EvalSet = "validation"
		}
	}
	rec.Steps = t.step
	rec.Epochs = t.epochs
	rec.WallSeconds = wall
	rec.SecondsPerEpoch = wall / (float64(t.step) / float64(t.perEpoch))
	rec.Status = results.StatusOK
	return rec, nil
}

// scoreCorrupted scores the run on the corrupted test sets of
// [eval.corruptions], calibrated like the clean test set, and adds the
// metrics to m (corrupt.Record's keys).
func (r *Runner) scoreCorrupted(ctx context.Context, t *training, m map[string]float64) error {
	c := r.Exp.Eval.Corruptions
	if !c.Active() {
		return nil
	}
	fams, err := corrupt.Select(c.Families)
	if err != nil {
		return err
	}
	var res []corrupt.Result
	for _, f := range fams {
		for _, sev := range c.Severities {
			set, err := r.Data.Corrupted(ctx, r.W, f, sev, c.Seed)
			if err != nil {
				return err
			}
			rep, err := r.evaluate(ctx, t, set, r.calibration())
			if err != nil {
				return fmt.Errorf("%s at severity %d: %w", f.Name, sev, err)
			}
			res = append(res, corrupt.Result{Family: f.Name, Severity: sev, Metrics: rep.Map()})
		}
	}
	for k, v := range corrupt.Record(res) {
		m[k] = v
	}
	return nil
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

// predictive returns how the run is evaluated now: the optimizer's
// predictive (when it declares optim.Features.Predictive), with the
// experiment's number of MC samples when it leaves it to the host, else the
// point estimate of member 0.
func (r *Runner) predictive(ctx context.Context, t *training) (optim.Predictive, error) {
	pred := optim.Predictive{Kind: optim.Point}
	if !t.m.Optimizer.Info().Features.Predictive {
		return pred, nil
	}
	pred, err := t.m.Optimizer.Predictive(ctx)
	if err != nil {
		return pred, fmt.Errorf("predictive: %w", err)
	}
	if pred.Kind == optim.Samples && pred.N == 0 {
		pred.N = r.Exp.Eval.MCSamples
		if pred.Std == 0 && r.Exp.Model.Variational {
			pred.N = r.Exp.Model.VariationalOpts.MCSamples
		}
	}
	return pred, nil
}

// evaluate forms the optimizer's predictive on set and computes the metrics.
func (r *Runner) evaluate(ctx context.Context, t *training, set *devset.Set, cal metrics.Calibration) (metrics.Report, error) {
	pred, err := r.predictive(ctx, t)
	if err != nil {
		return metrics.Report{}, err
	}
	bs := int64(r.Exp.Train.EvalBatchSize)
	seed := t.run.Seed
	probs, err := eval.Predict(ctx, t.eng, pred, set, bs, seed)
	if err != nil {
		return metrics.Report{}, fmt.Errorf("evaluation: %w", err)
	}
	labels, err := r.labels(ctx, set)
	if err != nil {
		return metrics.Report{}, err
	}
	opts := metrics.Options{AACSteps: r.Exp.Eval.AACSteps, Calibration: cal, Seed: uint64(seed)}
	if cal == metrics.CalValidation && r.Data.Val != nil {
		vp, err := eval.Predict(ctx, t.eng, pred, r.Data.Val, bs, seed)
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
		op, err := eval.Predict(ctx, t.eng, pred, r.Data.OOD, bs, seed)
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
