package train

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"github.com/optlab/optlab/host/metrics"
	"github.com/optlab/optlab/host/results"
	"github.com/optlab/optlab/host/tensorboard"
)

// TensorBoardDir is the folder of run key's TensorBoard event files,
// relative to the experiment's results folder: tb/<KeyFileStem(key)>.
func TensorBoardDir(key string) string {
	return filepath.Join("tb", results.KeyFileStem(key))
}

// Tags of the values a run writes to TensorBoard (docs/EXPERIMENTS.md,
// "TensorBoard files"). Every other metric an optimizer step reports is
// written per epoch as tbMethodPrefix + its name.
const (
	tbTrainLossStep = "train/loss_step"
	tbTrainLoss     = "train/loss"
	tbTrainAcc      = "train/acc"
	tbLR            = "lr"
	tbValLoss       = "val/loss"
	tbValAcc        = "val/acc"
	tbTestLoss      = "test/loss"
	tbTestAcc       = "test/acc"
	tbMethodPrefix  = "method/"
)

// tbLog writes a run's TensorBoard events (eval.tensorboard), with the
// number of optimizer steps taken as their step: the training loss of every
// every-th step; at every epoch end the epoch's means of the training loss,
// accuracy and the optimizer's other metrics, the learning rate, and the
// evaluation when the epoch evaluates; after training, the test loss and
// accuracy. Every method of a nil *tbLog does nothing.
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

// step records the metrics of the optimizer step that made step steps
// taken, and writes its loss when step is a multiple of the interval.
func (l *tbLog) step(step int64, m map[string]float64) error {
	if l == nil {
		return nil
	}
	for k, v := range m {
		if k != "loss" && k != "acc" {
			l.sums[k] += v
			l.counts[k]++
		}
	}
	if l.every > 0 && step%l.every == 0 {
		return l.w.Scalar(step, tbTrainLossStep, m["loss"])
	}
	return nil
}

// epoch writes an epoch's values at step and flushes the file: the
// training means, the learning rate lr, the means of the optimizer's other
// metrics, and rep when the epoch evaluated (eval; on the validation split
// when val, else on the test set).
func (l *tbLog) epoch(step int64, lr, trainLoss, trainAcc float64, rep metrics.Report, eval, val bool) error {
	if l == nil {
		return nil
	}
	vs := []tensorboard.Value{{Tag: tbTrainLoss, Value: trainLoss}, {Tag: tbTrainAcc, Value: trainAcc}, {Tag: tbLR, Value: lr}}
	keys := make([]string, 0, len(l.sums))
	for k := range l.sums {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		vs = append(vs, tensorboard.Value{Tag: tbMethodPrefix + k, Value: l.sums[k] / float64(l.counts[k])})
	}
	clear(l.sums)
	clear(l.counts)
	switch {
	case eval && val:
		vs = append(vs, tensorboard.Value{Tag: tbValLoss, Value: rep.NLL}, tensorboard.Value{Tag: tbValAcc, Value: rep.Acc})
	case eval:
		vs = append(vs, tensorboard.Value{Tag: tbTestLoss, Value: rep.NLL}, tensorboard.Value{Tag: tbTestAcc, Value: rep.Acc})
		l.testAt = step
	}
	if err := l.w.Scalars(step, vs...); err != nil {
		return err
	}
	return l.w.Flush()
}

// final writes the test loss and accuracy of the trained run at step,
// unless the last epoch wrote them at that step already.
func (l *tbLog) final(step int64, rep metrics.Report) error {
	if l == nil || l.testAt == step {
		return nil
	}
	return l.w.Scalars(step, tensorboard.Value{Tag: tbTestLoss, Value: rep.NLL}, tensorboard.Value{Tag: tbTestAcc, Value: rep.Acc})
}

// Close flushes and closes the event file.
func (l *tbLog) Close() error {
	if l == nil {
		return nil
	}
	return l.w.Close()
}
