package compose

import (
	"context"

	"github.com/optlab/optlab/sdk/optim"
)

// LRHost is the host as a member optimizer sees it inside a wrapper that
// sets the rate of some steps: the wrapper configures its member with the
// LRHost (the member keeps it, as every optimizer keeps the host of its
// Configure) and, before a step whose rate it sets, calls Before with its
// SetLR. The first program the member then sends goes with it in front, so
// the schedule costs no extra round trip and every BaseStep of the step
// uses its rate. SetLR sets no register, so the member's registers keep
// their numbers; the program sent is a copy of the member's with its
// identity, so its result reads as the member's. Without Before, programs
// pass through unchanged.
type LRHost struct {
	optim.Host
	// first is the program to send in front of the next one (nil once
	// sent).
	first *optim.Program
}

// NewLRHost returns the LRHost over h.
func NewLRHost(h optim.Host) *LRHost { return &LRHost{Host: h} }

// Before sends first (the wrapper's SetLR, from its Handles.Prog, which
// the member's handles are among) in front of the member's next program.
func (h *LRHost) Before(first *optim.Program) { h.first = first }

// Exec implements optim.Host.
func (h *LRHost) Exec(ctx context.Context, p *optim.Program) (optim.Result, error) {
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
