package compose

import (
	"context"

	"github.com/optlab/optlab/sdk/optim"
)

// WithSetLR returns the host as a member optimizer sees it during a step
// whose rate the wrapper sets: the first program the member sends goes
// with first (the wrapper's SetLR) in front, so the schedule costs no extra
// round trip and every BaseStep of the step uses its rate. SetLR sets no
// register, so the member's registers keep their numbers; the program sent
// is a copy of the member's with its identity, so its result reads as the
// member's. first names the wrapper's handles (its Handles.Prog), which
// the member's are among. Make one per step.
func WithSetLR(h optim.Host, first *optim.Program) optim.Host {
	return &lrHost{Host: h, first: first}
}

// lrHost is the host of WithSetLR.
type lrHost struct {
	optim.Host
	// first is the program to send in front of the next one (nil once
	// sent).
	first *optim.Program
}

// Exec implements optim.Host.
func (h *lrHost) Exec(ctx context.Context, p *optim.Program) (optim.Result, error) {
	if h.first != nil {
		q := h.first
		if p != nil {
			q = new(optim.Program)
			*q = *p
			q.Ops = append(h.first.Ops, p.Ops...)
		}
		p, h.first = q, nil
	}
	return h.Host.Exec(ctx, p)
}
