// Package sgd is the baseline optimizer plugin: per step and member, one
// gradient on the full batch and the host's base step (SGD with momentum,
// Nesterov and weight decay, or Adam, as the experiment configures it).
// It sends one program per step and trains every member independently.
//
// testdata/trace.golden is the op-level description: the programs that
// Configure and two steps send, with their handles by name.
package sgd

import (
	"context"
	"fmt"

	"github.com/optlab/optlab/sdk/hparams"
	"github.com/optlab/optlab/sdk/optim"
)

// Config holds the hyperparameters; plain SGD has none of its own (the
// base optimizer's are the host's).
type Config struct{}

// SGD is the optimizer. Create it with New. Its only vectors are scratch
// gradients and the base optimizer's state belongs to the host, so it
// keeps every optional method's default.
type SGD struct {
	optim.Defaults
	h  optim.Host
	hs *optim.Handles
	g  []optim.Vec // g[m]: member m's gradient
}

// New returns an SGD optimizer.
func New() optim.Optimizer { return &SGD{} }

// Info implements optim.Optimizer.
func (o *SGD) Info() optim.Info {
	return optim.Info{Name: "sgd", Version: "0.1.0", Features: optim.Features{Members: true, BaseStep: true},
		Params: hparams.MustSpecs(Config{})}
}

// Configure implements optim.Optimizer: it allocates a gradient buffer per
// member.
func (o *SGD) Configure(ctx context.Context, h optim.Host, cfg optim.Config) error {
	if err := hparams.Apply(&Config{}, cfg.Params); err != nil {
		return fmt.Errorf("sgd: %w", err)
	}
	o.h, o.hs = h, cfg.Namespace("sgd")
	o.g = o.hs.PerMember("g", cfg.MemberCount())
	p := o.hs.Prog()
	for m, g := range o.g {
		p.Alloc(g, m)
	}
	if _, err := h.Exec(ctx, p); err != nil {
		return fmt.Errorf("sgd: configure: %w", err)
	}
	return nil
}

// Step implements optim.Optimizer with a single Exec and no blocking read:
// the mean loss and accuracy over the members are reported to the host
// from the device.
func (o *SGD) Step(ctx context.Context, _ optim.StepInput) (optim.StepOutput, error) {
	p := o.hs.Prog()
	evs := make([]optim.Eval, len(o.g))
	for m, g := range o.g {
		evs[m] = p.Grad(g, optim.ParamsOf(m), optim.Batch{}, optim.BNUpdate)
		p.BaseStep(optim.ParamsOf(m), g)
	}
	p.ReportMetrics(p.Mean(evs))
	if _, err := o.h.Exec(ctx, p); err != nil {
		return optim.StepOutput{}, fmt.Errorf("sgd: step: %w", err)
	}
	return optim.StepOutput{}, nil
}
