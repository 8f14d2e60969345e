package train

import (
	"fmt"
	"io"
	"time"
)

// progress prints a run's progress: a redrawn line on a terminal, else a
// plain line every 10 seconds.
type progress struct {
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

func (p *progress) update(epoch, epochs int, step int64, loss, acc float64) {
	if p.w == nil {
		return
	}
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

func (p *progress) done() {
	if p.w != nil && p.terminal && p.printed {
		fmt.Fprintln(p.w)
	}
}
