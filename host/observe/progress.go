package observe

import (
	"fmt"
	"io"
	"time"
)

// Progress says where the progress of runs goes.
type Progress struct {
	// W receives the progress lines; nil discards them.
	W io.Writer
	// Terminal redraws one line in place instead of printing a line every
	// 10 seconds.
	Terminal bool
}

// Opener observes a run by its progress lines: epoch, step, loss,
// accuracy and the time left. A resumed run says so first.
func (p Progress) Opener() Opener {
	return func(s Start) (Observer, error) {
		if p.W == nil {
			return nil, nil
		}
		if s.Resumed {
			fmt.Fprintf(p.W, "%s: resuming after epoch %d (step %d) from %s\n", s.Run.Key, s.FromEpoch, s.FromStep, s.StatePath)
		}
		label := fmt.Sprintf("%s %s seed %d", s.Run.Label, s.Run.Arch, s.Run.Seed)
		pr := newProgress(p.W, p.Terminal, label, s.TotalSteps-s.FromStep)
		pr.from, pr.epochs = s.FromStep, s.Epochs
		return pr, nil
	}
}

// progress prints a run's progress: a redrawn line on a terminal, else a
// plain line every 10 seconds.
type progress struct {
	Nop
	from     int64 // the step the run resumed at
	epochs   int
	w        io.Writer
	terminal bool
	label    string
	total    int64
	start    time.Time
	last     time.Time
	printed  bool
}

func newProgress(w io.Writer, terminal bool, label string, total int64) *progress {
	now := time.Now()
	return &progress{w: w, terminal: terminal, label: label, total: total, start: now, last: now}
}

// Step updates the line (or prints one when it is time).
func (p *progress) Step(s Step) error {
	p.update(s.Epoch, p.epochs, s.Step-p.from, s.Metrics["loss"], s.Metrics["acc"])
	return nil
}

func (p *progress) update(epoch, epochs int, step int64, loss, acc float64) {
	now := time.Now()
	every := 10 * time.Second
	if p.terminal {
		every = 100 * time.Millisecond
	}
	if now.Sub(p.last) < every && step < p.total {
		return
	}
	p.last = now
	el := now.Sub(p.start)
	eta := time.Duration(float64(el) / float64(step) * float64(p.total-step)).Round(time.Second)
	frac := float64(step) / float64(p.total)
	line := fmt.Sprintf("%s: epoch %d/%d step %d/%d loss %.4f acc %.3f ETA %s", p.label, epoch, epochs, step, p.total, loss, acc, eta)
	if p.terminal {
		const width = 20
		bar := make([]byte, width)
		for i := range bar {
			bar[i] = ' '
			if float64(i) < frac*width {
				bar[i] = '='
			}
		}
		fmt.Fprintf(p.w, "\r\033[K[%s] %s", bar, line)
		p.printed = true
		return
	}
	fmt.Fprintln(p.w, line)
}

// Close ends a redrawn line.
func (p *progress) Close() error {
	if p.terminal && p.printed {
		fmt.Fprintln(p.w)
	}
	return nil
}
