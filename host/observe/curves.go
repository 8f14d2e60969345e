package observe

import (
	"fmt"
	"path/filepath"

	"github.com/optlab/optlab/host/curves"
	"github.com/optlab/optlab/host/results"
)

// curveLog writes a run's learning curve: one row per epoch.
type curveLog struct {
	Nop
	w *curves.Writer
}

// Curves observes a run by its learning curve in the results folder l
// (results.Layout.Curve): a run that starts over rewrites it; a resumed
// one keeps the rows of the epochs it resumes after.
func Curves(l results.Layout) Opener {
	return func(s Start) (Observer, error) {
		path := l.Curve(s.Run.Key)
		if err := results.MkdirIn(l.Dir, filepath.Dir(path)); err != nil {
			return nil, fmt.Errorf("curve: %w", err)
		}
		var w *curves.Writer
		var err error
		if s.Resumed {
			w, err = curves.Continue(path, s.FromEpoch)
		} else {
			w, err = curves.Create(path)
		}
		if err != nil {
			return nil, err
		}
		return &curveLog{w: w}, nil
	}
}

// Epoch appends the epoch's row.
func (c *curveLog) Epoch(e Epoch) error {
	row := curves.NaNRow(e.Epoch, e.Step)
	row.LR, row.TrainLoss, row.TrainAcc = e.LR, e.TrainLoss, e.TrainAcc
	if e.Eval != nil {
		row.EvalLoss, row.EvalAcc = e.Eval.NLL, e.Eval.Acc
	}
	row.Seconds = e.Seconds
	return c.w.Append(row)
}

// Close closes the curve file.
func (c *curveLog) Close() error { return c.w.Close() }
