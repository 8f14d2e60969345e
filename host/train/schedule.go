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
	return &Schedule{cfg: tr.Schedule, lr: tr.Optimizer.LR, epochs: tr.Epochs,
		milestones: tr.Schedule.MilestoneEpochs(tr.Epochs), scale: 1, best: math.Inf(1)}
}

// LR returns the learning rate of step i (0-based) of epoch (0-based) with n
// steps per epoch.
//
//   - constant: lr.
//   - step: lr·gamma^k, k = the number of milestones ≤ epoch.
//   - cosine: per epoch, min_lr + (lr − min_lr)·½(1 + cos(π·epoch/epochs)),
//     as PyTorch's CosineAnnealingLR stepped once per epoch.
//   - plateau: lr times the factors applied so far by Observe, floored at
//     min_lr.
//   - cyclic: FGE's triangle per step, t = ((epoch mod c) + i/n)/c:
//     lr_max(1−2t) + lr_min·2t for t < ½, lr_max(2t−1) + lr_min(2−2t) after.
//
// Warm-up (any kind) multiplies by (epoch + i/n + 1/n)/warmup_epochs during
// the first warmup_epochs epochs.
func (s *Schedule) LR(epoch, i, n int) float64 {
	c := s.cfg
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
		t := (float64(epoch%c.CycleEpochs) + float64(i)/float64(n)) / float64(c.CycleEpochs)
		if t < 0.5 {
			lr = c.LRMax*(1-2*t) + c.LRMin*2*t
		} else {
			lr = c.LRMax*(2*t-1) + c.LRMin*(2-2*t)
		}
	default:
		lr = s.lr
	}
	if c.WarmupEpochs > 0 && epoch < c.WarmupEpochs {
		lr *= (float64(epoch) + float64(i+1)/float64(n)) / float64(c.WarmupEpochs)
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
