package observe

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"github.com/optlab/optlab/host/results"
	"github.com/optlab/optlab/host/tensorboard"
)

// Tags of the values a run writes to TensorBoard (docs/EXPERIMENTS.md,
// "TensorBoard files"). Every other metric an optimizer step reports is
// written per epoch as TagMethodPrefix + its name.
const (
	TagTrainLossStep = "train/loss_step"
	TagTrainLoss     = "train/loss"
	TagTrainAcc      = "train/acc"
	TagLR            = "lr"
	TagValLoss       = "val/loss"
	TagValAcc        = "val/acc"
	TagTestLoss      = "test/loss"
	TagTestAcc       = "test/acc"
	TagMethodPrefix  = "method/"
)

// tbLog writes a run's TensorBoard events (eval.tensorboard), with the
// number of optimizer steps taken as their step: the training loss of every
// every-th step; at every epoch end the epoch's means of the training loss,
// accuracy and the optimizer's other metrics, the learning rate, and the
// evaluation when the epoch evaluates; after training, the test loss and
// accuracy.
type tbLog struct {
	w     *tensorboard.Writer
	every int64
	// sums and counts accumulate the epoch's optimizer metrics other than
	// loss and acc.
	sums   map[string]float64
	counts map[string]int
	// testAt is the step of the last test/* values (-1: none yet).
	testAt int64
}

// TensorBoard observes a run by its TensorBoard events in the results
// folder l (results.Layout.TensorBoard), the training loss of every
// every-th step among them (0: none).
func TensorBoard(l results.Layout, every int) Opener {
	return func(s Start) (Observer, error) {
		dir := l.TensorBoard(s.Run.Key)
		// A linked tb/ or tb/<run>/ would have the host delete and write
		// event files outside the results folder.
		if err := results.MkdirIn(l.Dir, dir); err != nil {
			return nil, fmt.Errorf("tensorboard: %w", err)
		}
		return openTB(dir, s.Resumed, s.FromStep, every)
	}
}

// openTB starts a run's event file in dir. A run that starts from scratch
// first removes the event files an earlier attempt left there, as its curve
// is overwritten; a resumed one (after from steps) adds its file to them.
// Every file marks the first step it logs with a session start, which makes
// TensorBoard drop what an interrupted attempt logged past its saved state.
func openTB(dir string, resumed bool, from int64, every int) (*tbLog, error) {
	if !resumed {
		old, err := filepath.Glob(filepath.Join(dir, "events.out.tfevents.*"))
		if err != nil {
			return nil, fmt.Errorf("tensorboard: %w", err)
		}
		for _, f := range old {
			if err := os.Remove(f); err != nil {
				return nil, fmt.Errorf("tensorboard: removing the files of an earlier attempt: %w", err)
			}
		}
	}
	w, err := tensorboard.Create(dir)
	if err != nil {
		return nil, err
	}
	if err := w.SessionStart(from + 1); err != nil {
		_ = w.Close()
		return nil, err
	}
	return &tbLog{w: w, every: int64(every), sums: map[string]float64{}, counts: map[string]int{}, testAt: -1}, nil
}

// Step records the metrics of the optimizer step that made s.Step steps
// taken, and writes its loss when s.Step is a multiple of the interval.
func (l *tbLog) Step(s Step) error {
	step, m := s.Step, s.Metrics
	for k, v := range m {
		if k != "loss" && k != "acc" {
			l.sums[k] += v
			l.counts[k]++
		}
	}
	if l.every > 0 && step%l.every == 0 {
		return l.w.Scalar(step, TagTrainLossStep, m["loss"])
	}
	return nil
}

// Epoch writes an epoch's values at its step and flushes the file: the
// training means, the learning rate, the means of the optimizer's other
// metrics, and the evaluation when the epoch evaluated (on the validation
// split, else on the test set).
func (l *tbLog) Epoch(e Epoch) error {
	step := e.Step
	vs := []tensorboard.Value{{Tag: TagTrainLoss, Value: e.TrainLoss}, {Tag: TagTrainAcc, Value: e.TrainAcc}, {Tag: TagLR, Value: e.LR}}
	keys := make([]string, 0, len(l.sums))
	for k := range l.sums {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		vs = append(vs, tensorboard.Value{Tag: TagMethodPrefix + k, Value: l.sums[k] / float64(l.counts[k])})
	}
	clear(l.sums)
	clear(l.counts)
	switch rep := e.Eval; {
	case rep != nil && e.Validation:
		vs = append(vs, tensorboard.Value{Tag: TagValLoss, Value: rep.NLL}, tensorboard.Value{Tag: TagValAcc, Value: rep.Acc})
	case rep != nil:
		vs = append(vs, tensorboard.Value{Tag: TagTestLoss, Value: rep.NLL}, tensorboard.Value{Tag: TagTestAcc, Value: rep.Acc})
		l.testAt = step
	}
	if err := l.w.Scalars(step, vs...); err != nil {
		return err
	}
	return l.w.Flush()
}

// Final writes the test loss and accuracy of the trained run at its step,
// unless the last epoch wrote them at that step already.
func (l *tbLog) Final(f Final) error {
	if l.testAt == f.Step {
		return nil
	}
	return l.w.Scalars(f.Step, tensorboard.Value{Tag: TagTestLoss, Value: f.Test.NLL}, tensorboard.Value{Tag: TagTestAcc, Value: f.Test.Acc})
}

// Close flushes and closes the event file.
func (l *tbLog) Close() error {
	return l.w.Close()
}
