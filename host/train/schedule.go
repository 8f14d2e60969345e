package train

import (
	"math"

	"github.com/optlab/optlab/host/experiment"
)

// Schedule gives the base learning rate of every step.
type Schedule struct {
	cfg        experiment.Schedule
	lr         float64
	epochs     int
	milestones []float64
	// plateau state
	scale     float64
	best      float64
	badEpochs int
}

// NewSchedule makes the experiment's schedule.
func NewSchedule(tr experiment.Train) *Schedule {
	h := tr.Horizon()
	return &Schedule{cfg: tr.Schedule, lr: tr.Optimizer.LR, epochs: h,
		milestones: tr.Schedule.MilestoneEpochs(h), scale: 1, best: math.Inf(1)}
}

// Position is where a step stands in the schedule: the 0-based epoch, and
// the fractions of it done when the step starts and when it ends.
type Position struct {
	Epoch      int
	Start, End float64
}

// StepPosition is step i (0-based) of epoch (0-based) with n steps per
// epoch: (epoch, i/n, (i+1)/n).
func StepPosition(epoch, i, n int) Position {
	return Position{Epoch: epoch, Start: float64(i) / float64(n), End: float64(i+1) / float64(n)}
}

// BudgetPosition is where a step stands in a schedule over a gradient
// budget (train.budget): spent samples of gradient evaluations before the
// step, in budget epochs of unit samples (steps per epoch × batch size),
// the step counted as one batch of batch samples. SGD's step i of epoch
// e (spent = (e·n + i)·batch, unit = n·batch) stands at StepPosition(e,
// i, n) exactly: floating-point division is correctly rounded, and i·b /
// n·b is i/n.
func BudgetPosition(spent, unit, batch int64) Position {
	e, rem := spent/unit, spent%unit
	return Position{Epoch: int(e), Start: float64(rem) / float64(unit), End: float64(rem+batch) / float64(unit)}
}

// LR returns the learning rate of step i (0-based) of epoch (0-based) with
// n steps per epoch: LRAt(StepPosition(epoch, i, n)).
func (s *Schedule) LR(epoch, i, n int) float64 { return s.LRAt(StepPosition(epoch, i, n)) }

// LRAt returns the learning rate of a step at position p, with t the
// step's fraction of its epoch, p.Start:
//
//   - constant: lr.
//   - step: lr·gamma^k, k = the number of milestones ≤ epoch.
//   - cosine: per epoch, min_lr + (lr − min_lr)·½(1 + cos(π·epoch/epochs)),
//     as PyTorch's CosineAnnealingLR stepped once per epoch.
//   - plateau: lr times the factors applied so far by Observe, floored at
//     min_lr.
//   - cyclic: FGE's triangle per step, t = ((epoch mod c) + p.Start)/c:
//     lr_max(1−2t) + lr_min·2t for t < ½, lr_max(2t−1) + lr_min(2−2t) after.
//
// Warm-up (any kind) multiplies by (epoch + p.End)/warmup_epochs during
// the first warmup_epochs epochs.
//
// The epochs are those of train.epochs, or with train.budget budget
// epochs (BudgetPosition).
func (s *Schedule) LRAt(p Position) float64 {
	c := s.cfg
	epoch := p.Epoch
	var lr float64
	switch c.Kind {
	case "", "constant":
		lr = s.lr
	case "step":
		lr = s.lr
		for _, m := range s.milestones {
			if float64(epoch) >= m {
				lr *= c.Gamma
			}
		}
	case "cosine":
		lr = c.MinLR + (s.lr-c.MinLR)*0.5*(1+math.Cos(math.Pi*float64(epoch)/float64(s.epochs)))
	case "plateau":
		lr = math.Max(s.lr*s.scale, c.MinLR)
	case "cyclic":
		t := (float64(epoch%c.CycleEpochs) + p.Start) / float64(c.CycleEpochs)
		if t < 0.5 {
			lr = c.LRMax*(1-2*t) + c.LRMin*2*t
		} else {
			lr = c.LRMax*(2*t-1) + c.LRMin*(2-2*t)
		}
	default:
		lr = s.lr
	}
	if c.WarmupEpochs > 0 && epoch < c.WarmupEpochs {
		lr *= (float64(epoch) + p.End) / float64(c.WarmupEpochs)
	}
	return lr
}

// NeedsMetric tells whether the schedule must Observe a loss every epoch.
func (s *Schedule) NeedsMetric() bool { return s.cfg.Kind == "plateau" }

// Observe feeds the epoch's monitored loss to a plateau schedule (PyTorch's
// ReduceLROnPlateau, mode min, threshold 1e-4 relative).
func (s *Schedule) Observe(loss float64) {
	if s.cfg.Kind != "plateau" {
		return
	}
	if loss < s.best*(1-1e-4) {
		s.best = loss
		s.badEpochs = 0
		return
	}
	s.badEpochs++
	if s.badEpochs > s.cfg.Patience {
		s.scale *= s.cfg.Factor
		s.badEpochs = 0
	}
}
