package train

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/optlab/optlab/host/data/devset"
	"github.com/optlab/optlab/host/engine"
	"github.com/optlab/optlab/host/metrics"
	"github.com/optlab/optlab/host/observe"
	"github.com/optlab/optlab/host/results"
	"github.com/optlab/optlab/host/tensor"
	"github.com/optlab/optlab/sdk/optim"
)

// loop trains a resumed (or fresh) run to its total steps. Every epoch
// draws the data orders; every step feeds the members their batch and runs
// an optimizer step with the schedule's learning rate. A step's metrics
// (what its programs reported, merged with the StepOutput's) are processed
// one step late, after the next step was issued, so that reading them back
// does not make the device wait between steps; the last step of an epoch is
// processed before the epoch ends. The learning rate the observers see is
// the one the step used (stepLR). Every epoch end appends the curve's row
// (evaluating the predictive on the validation, else test, set when the
// schedule needs the metric or eval.every_epochs says so) and saves the
// training state. With train.dump_params_every, the parameters are written
// before the first step and after every N-th (dump.go). start is when Run
// began.
func (r *Runner) loop(ctx context.Context, t *training, start time.Time) error {
	var pending *stepMetrics // the step issued last, not processed yet
	defer func() { pending.drop() }()
	var ep *devset.Epoch // the current epoch's batches on the device
	defer func() { r.dropEpoch(ep) }()
	if err := r.startDumps(ctx, t); err != nil {
		return err
	}
	for epoch := t.from.Epoch; t.step < t.total && !t.spent(); epoch++ {
		steps := int(min(t.perEpoch, t.total-t.step))
		var err error
		if ep, err = r.newEpoch(ctx, t, steps); err != nil {
			return fmt.Errorf("epoch %d: batches: %w", epoch+1, err)
		}
		sums := &epochSums{}
		for i := 0; i < steps && !t.spent(); i++ {
			if err := ctx.Err(); err != nil {
				return err
			}
			if err := r.feed(ctx, t, ep, i); err != nil {
				return fmt.Errorf("batch: %w", err)
			}
			lr := t.sched.LRAt(t.position(epoch, i))
			t.eng.BeginStep(t.step, lr)
			out, err := t.m.Optimizer.Step(ctx, optim.StepInput{Step: t.step, Epoch: epoch, LR: lr})
			if err != nil {
				// A non-finite loss of the step before explains a failure
				// of this one better than the failure itself.
				if perr := r.processStep(ctx, t, sums, pending); perr != nil {
					return perr
				}
				pending = nil
				return fmt.Errorf("step %d (epoch %d): %w", t.step, epoch+1, err)
			}
			reps, err := t.eng.TakeReports(ctx)
			if err != nil {
				return fmt.Errorf("step %d (epoch %d): %w", t.step, epoch+1, err)
			}
			if !t.ownsUpdate {
				lr = t.eng.LR(0) // SetLR's override, if any
			}
			cur := &stepMetrics{step: t.step, epoch: epoch, lr: lr, reports: reps, out: out.Metrics}
			t.step++
			err = r.processStep(ctx, t, sums, pending)
			pending = cur
			if err != nil {
				return err
			}
			if r.StepHook != nil {
				r.StepHook(cur.step, t.eng)
			}
			if err := r.dumpAfterStep(ctx, t); err != nil {
				return err
			}
		}
		err = r.processStep(ctx, t, sums, pending)
		pending = nil
		r.dropEpoch(ep)
		ep = nil
		if err != nil {
			return err
		}
		t.epochs++
		t.trainLoss, t.trainAcc = sums.loss/float64(sums.n), sums.acc/float64(sums.n)
		if math.IsNaN(t.trainLoss) || math.IsInf(t.trainLoss, 0) { // finite steps whose sum overflowed
			return fmt.Errorf("epoch %d: the mean training loss of the epoch is not finite (%v; every step's was): %w; lower the learning rate or ρ", t.epochs, t.trainLoss, ErrNaN)
		}
		if err := r.endEpoch(ctx, t, start); err != nil {
			return err
		}
	}
	return nil
}

// stepMetrics is an issued step whose metrics are not processed yet: the
// reports its programs made (on the device) and its StepOutput's metrics.
// lr is the learning rate the step used as far as the host knows it:
// member 0's BaseStep rate (the schedule's, or a SetLR's override), or for
// an optimizer that owns its update the schedule's (StepInput.LR), which
// its metric "lr" replaces (stepLR).
type stepMetrics struct {
	step    int64 // 0-based
	epoch   int   // 0-based
	lr      float64
	reports *engine.Reports
	out     map[string]float64
}

func (m *stepMetrics) drop() {
	if m != nil {
		m.reports.Drop()
	}
}

// epochSums accumulates an epoch's training loss and accuracy, step by
// step in order.
type epochSums struct {
	loss, acc float64
	n         int
}

// processStep reads the metrics of step m (nil: none) and processes them:
// the finiteness check of the loss, the epoch's sums, and the observers.
func (r *Runner) processStep(ctx context.Context, t *training, sums *epochSums, m *stepMetrics) error {
	if m == nil {
		return nil
	}
	metrics, err := stepValues(ctx, m)
	if err != nil {
		return fmt.Errorf("step %d (epoch %d): %w", m.step, m.epoch+1, err)
	}
	loss := metrics["loss"]
	if math.IsNaN(loss) || math.IsInf(loss, 0) {
		return fmt.Errorf("step %d (epoch %d, lr %g): %w (%v); lower the learning rate or ρ", m.step, m.epoch+1, m.lr, ErrNaN, loss)
	}
	sums.loss += loss
	sums.acc += metrics["acc"]
	sums.n++
	t.lr = stepLR(t, m, metrics)
	return t.obs.Step(observe.Step{Step: m.step + 1, Epoch: m.epoch + 1, LR: t.lr, Metrics: metrics})
}

// stepLR is the learning rate step m used, for the curves and TensorBoard:
// the rate of its BaseSteps (m.lr), or, for an optimizer that owns its
// update, the metric "lr" it reports, else StepInput.LR.
func stepLR(t *training, m *stepMetrics, metrics map[string]float64) float64 {
	if lr, ok := metrics["lr"]; ok && t.ownsUpdate {
		return lr
	}
	return m.lr
}

// stepValues returns a step's metrics: its reports, read back, merged with
// the metrics its StepOutput carries (a name in both is an error).
func stepValues(ctx context.Context, m *stepMetrics) (map[string]float64, error) {
	reported, err := m.reports.Values(ctx)
	if err != nil {
		return nil, err
	}
	if len(reported) == 0 {
		return m.out, nil
	}
	metrics := make(map[string]float64, len(reported)+len(m.out))
	for k, v := range reported {
		metrics[k] = v
	}
	for k, v := range m.out {
		if _, dup := reported[k]; dup {
			return nil, fmt.Errorf("metric %q is both reported by a program (Report) and returned in the step's output", k)
		}
		metrics[k] = v
	}
	return metrics, nil
}

// dataOrders returns this epoch's sample order of every data order: the
// training set in order, shuffled when data.shuffle is set.
func (r *Runner) dataOrders(t *training) [][]int64 {
	idx := make([][]int64, t.orders)
	for k := range idx {
		idx[k] = make([]int64, r.Data.TrainSize)
		for i := range idx[k] {
			idx[k][i] = int64(i)
		}
		if r.Exp.Data.Shuffle {
			t.rngs[k].Shuffle(len(idx[k]), func(i, j int) { idx[k][i], idx[k][j] = idx[k][j], idx[k][i] })
		}
	}
	return idx
}

// newEpoch draws the epoch's batches, its next steps steps, and copies
// them to the device at once: every data order (shuffled when
// data.shuffle is set) and the augmentations of every batch, drawn from the
// run's streams in the order that drawing them batch by batch would (so
// a resumed run and the trajectories are those of per-batch drawing).
func (r *Runner) newEpoch(ctx context.Context, t *training, steps int) (*devset.Epoch, error) {
	idx := r.dataOrders(t)
	var ep *devset.Epoch
	err := r.W.Do(ctx, func() error {
		s := tensor.NewScope()
		defer s.Close()
		var err error
		ep, err = r.Data.Train.NewEpoch(s, idx, int64(r.Exp.Train.BatchSize), steps, r.Data.Augment, t.augRNG, r.Dev)
		return err
	})
	return ep, err
}

// dropEpoch frees an epoch's batches (nil: none).
func (r *Runner) dropEpoch(ep *devset.Epoch) {
	if ep != nil {
		_ = r.W.Do(context.Background(), func() error { ep.Drop(); return nil })
	}
}

// feed cuts step i's batch of every data order out of the epoch on the
// device (no copy from the host) and makes it the current batch: of every
// member with one data order, of member k with one per member.
func (r *Runner) feed(ctx context.Context, t *training, ep *devset.Epoch, i int) error {
	return r.W.Do(ctx, func() error {
		s := tensor.NewScope()
		defer s.Close()
		for k := range t.orders {
			x, y := ep.Batch(s, k, i)
			if err := s.Err(); err != nil {
				return err
			}
			x, y = s.Keep(x), s.Keep(y)
			if t.orders == 1 {
				for mi := range t.members {
					t.eng.SetBatch(mi, x, y)
				}
			} else {
				t.eng.SetBatch(k, x, y)
			}
		}
		return nil
	})
}

// endEpoch finishes an epoch: it evaluates when needed (feeding the
// schedule's plateau detection), tells the observers, and saves the
// training state unless the run is done.
func (r *Runner) endEpoch(ctx context.Context, t *training, start time.Time) error {
	e := observe.Epoch{Epoch: t.epochs, Step: t.step, LR: t.lr, TrainLoss: t.trainLoss, TrainAcc: t.trainAcc, Validation: r.Data.Val != nil}
	every := r.Exp.Eval.EveryEpochs
	if t.sched.NeedsMetric() || (every > 0 && t.epochs%every == 0) {
		set := r.Data.Val
		if set == nil {
			set = r.Data.Test
		}
		began := time.Now()
		rep, err := r.evaluate(ctx, t, set, metrics.CalNone)
		if err != nil {
			return err
		}
		t.evalSeconds += time.Since(began).Seconds()
		t.evals = append(t.evals, results.EvalPoint{Epoch: t.epochs, Step: t.step, GradEvals: t.gradEvals(),
			TrainSeconds: t.from.Elapsed + time.Since(start).Seconds() - t.evalSeconds, Acc: rep.Acc})
		t.sched.Observe(rep.NLL)
		e.Eval = &rep
		if set == r.Data.Val {
			if err := r.observeBest(ctx, t, rep); err != nil {
				return err
			}
		}
	}
	e.Seconds = t.from.Elapsed + time.Since(start).Seconds()
	if err := t.obs.Epoch(e); err != nil {
		return err
	}
	if t.statePath != "" && t.step < t.total && !t.spent() {
		ls := loopState{Epoch: t.epochs, Step: t.step, TrainLoss: t.trainLoss, TrainAcc: t.trainAcc, GradEvals: t.gradEvals(),
			Elapsed: t.from.Elapsed + time.Since(start).Seconds(), Best: t.best, EvalSeconds: t.evalSeconds, Evals: t.evals}
		if err := r.saveState(ctx, t, ls); err != nil {
			return fmt.Errorf("saving the training state after epoch %d: %w", t.epochs, err)
		}
	}
	if r.afterEpoch != nil {
		if err := r.afterEpoch(t.epochs); err != nil {
			return err
		}
	}
	return nil
}
