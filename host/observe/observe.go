// Package observe is how a training run tells others what it does: it
// opens an Observer for each run (an Opener per kind of observer), calls
// its Step after every optimizer step, Epoch at every epoch end and Final
// after the test evaluation, and closes it. The run's learning curve
// (Curves), TensorBoard events (TensorBoard) and progress lines (Progress)
// are observers; a new logger is a new Opener.
package observe

import (
	"errors"

	"github.com/optlab/optlab/host/experiment"
	"github.com/optlab/optlab/host/metrics"
	"github.com/optlab/optlab/host/results"
)

// Start is what an Opener learns about the run it observes.
type Start struct {
	Run experiment.Run
	// Resumed reports that the run continues from its saved training
	// state (StatePath) after FromEpoch epochs and FromStep steps; what an
	// observer recorded past that point belongs to the interrupted attempt.
	Resumed    bool
	StatePath  string
	FromEpoch  int
	FromStep   int64
	TotalSteps int64 // the run's optimizer steps, over every attempt
	Epochs     int   // train.epochs, or train.budget (experiment.Train.Horizon)
}

// Step is one optimizer step's metrics (its programs' reports merged with
// its StepOutput's: "loss", "acc" and the method's own). LR is the
// learning rate the step used: its BaseSteps' (the schedule's, or member
// 0's SetLR override), or the metric "lr" that an optimizer owning its
// update (optim.Features.OwnsUpdate) reports, else the schedule's.
type Step struct {
	Step    int64 // steps taken, this one included (1-based)
	Epoch   int   // 1-based
	LR      float64
	Metrics map[string]float64
}

// Epoch is an epoch's end; LR is the learning rate of its last step
// (Step.LR).
type Epoch struct {
	Epoch               int   // epochs finished
	Step                int64 // steps taken
	LR                  float64
	TrainLoss, TrainAcc float64 // the epoch's means
	// Eval is the predictive's evaluation when the epoch evaluated (nil
	// otherwise): on the validation split when Validation, else on the
	// test set.
	Eval       *metrics.Report
	Validation bool
	// Seconds is the training's wall-clock time so far, over every attempt.
	Seconds float64
}

// Final is the trained run's test evaluation.
type Final struct {
	Step int64
	Test metrics.Report
}

// Observer follows one run. An error from any method fails the run. Close
// is called once, also when the run fails; a run that finished calls Final
// first.
type Observer interface {
	Step(Step) error
	Epoch(Epoch) error
	Final(Final) error
	Close() error
}

// Opener opens an observer for a run that starts (or resumes); nil, nil
// observes nothing.
type Opener func(Start) (Observer, error)

// Nop is an Observer that does nothing; embed it to implement some methods
// only.
type Nop struct{}

// Step does nothing.
func (Nop) Step(Step) error { return nil }

// Epoch does nothing.
func (Nop) Epoch(Epoch) error { return nil }

// Final does nothing.
func (Nop) Final(Final) error { return nil }

// Close does nothing.
func (Nop) Close() error { return nil }

// All is several observers as one: each event goes to each, in order, and
// the first error stops it; Close closes every one and joins their errors.
type All []Observer

// Open opens an observer of each opener for a run, in order; on an error
// those already open are closed.
func Open(openers []Opener, s Start) (All, error) {
	var all All
	for _, open := range openers {
		o, err := open(s)
		if err != nil {
			return nil, errors.Join(err, all.Close())
		}
		if o != nil {
			all = append(all, o)
		}
	}
	return all, nil
}

// Step sends s to every observer.
func (a All) Step(s Step) error { return a.each(func(o Observer) error { return o.Step(s) }) }

// Epoch sends e to every observer.
func (a All) Epoch(e Epoch) error { return a.each(func(o Observer) error { return o.Epoch(e) }) }

// Final sends f to every observer.
func (a All) Final(f Final) error { return a.each(func(o Observer) error { return o.Final(f) }) }

func (a All) each(fn func(Observer) error) error {
	for _, o := range a {
		if err := fn(o); err != nil {
			return err
		}
	}
	return nil
}

// Close closes every observer, in reverse order.
func (a All) Close() error {
	var errs []error
	for i := len(a) - 1; i >= 0; i-- {
		errs = append(errs, a[i].Close())
	}
	return errors.Join(errs...)
}

// Standard are the observers of a run of exp that host run attaches: its
// learning curve in the results folder l, its TensorBoard events when
// eval.tensorboard is on, and its progress lines to progress (nil: none),
// redrawn in place when terminal.
func Standard(exp *experiment.Experiment, l results.Layout, progress Progress) []Opener {
	openers := []Opener{Curves(l)}
	if ev := exp.Eval; ev.TensorBoard {
		openers = append(openers, TensorBoard(l, ev.TensorBoardEverySteps))
	}
	return append(openers, progress.Opener())
}
