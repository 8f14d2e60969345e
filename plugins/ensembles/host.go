package ensembles

import (
	"context"
	"slices"

	"github.com/optlab/optlab/sdk/optim"
)

// lrHost is the host as a member optimizer sees it during a scheduled step
// (snapshot, FGE): the first program of the step is sent with the step's
// SetLR in front, so the schedule costs no extra round trip and every
// BaseStep of the step uses its rate.
type lrHost struct {
	optim.Host
	first []optim.Op
}

// Exec implements optim.Host.
func (h *lrHost) Exec(ctx context.Context, p *optim.Program) (optim.Result, error) {
	if len(h.first) > 0 {
		var ops []optim.Op
		if p != nil {
			ops = p.Ops
		}
		p = &optim.Program{Ops: slices.Concat(h.first, ops)}
		h.first = nil
	}
	return h.Host.Exec(ctx, p)
}
