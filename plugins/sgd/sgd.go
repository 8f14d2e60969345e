// Package sgd is the baseline optimizer plugin: per step and member, one
// gradient on the full batch and the host's base step (SGD with momentum,
// Nesterov and weight decay, or Adam, as the experiment configures it).
// It sends one program per step and trains every member independently.
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

// SGD is the optimizer. Create it with New.
type SGD struct{ members int }

// New returns an SGD optimizer.
func New() optim.Optimizer { return &SGD{} }

// grad returns the handle of member m's gradient buffer.
func grad(m int) optim.Vec { return optim.Vec(1 + m) }

// Info implements optim.Optimizer.
func (o *SGD) Info() optim.Info {
	return optim.Info{Name: "sgd", Version: "0.1.0", ProtocolMinor: optim.ProtocolMinor,
		Capabilities: []string{"members", "state"}, Params: hparams.MustSpecs(Config{})}
}

// Configure implements optim.Optimizer: it allocates a gradient buffer per
// member.
func (o *SGD) Configure(ctx context.Context, h optim.Host, cfg optim.Config) error {
	if err := hparams.Apply(&Config{}, cfg.Params); err != nil {
		return fmt.Errorf("sgd: %w", err)
	}
	o.members = max(cfg.Members, 1)
	p := optim.Prog()
	for m := range o.members {
		p.AllocFor(grad(m), m)
	}
	if _, err := h.Exec(ctx, p); err != nil {
		return fmt.Errorf("sgd: configure: %w", err)
	}
	return nil
}

// Step implements optim.Optimizer with a single Exec.
func (o *SGD) Step(ctx context.Context, h optim.Host, _ optim.StepInput) (optim.StepOutput, error) {
	p := optim.Prog()
	for m := range o.members {
		p.Grad(grad(m), optim.ParamsOf(m), optim.Batch{}, optim.BNUpdate).BaseStep(optim.ParamsOf(m), grad(m))
	}
	r, err := h.Exec(ctx, p)
	if err != nil {
		return optim.StepOutput{}, fmt.Errorf("sgd: step: %w", err)
	}
	var loss, acc float64
	for m := range o.members {
		loss += r.Scalar(2*m) / float64(o.members)
		acc += r.Scalar(2*m+1) / float64(o.members)
	}
	return optim.StepOutput{Metrics: map[string]float64{"loss": loss, "acc": acc}}, nil
}

// SaveState implements optim.Stateful. SGD's only vectors are scratch
// gradients and the base optimizer's state belongs to the host, so the
// state is empty.
func (o *SGD) SaveState(context.Context) ([]byte, []optim.Vec, error) { return nil, nil, nil }

// LoadState implements optim.Stateful.
func (o *SGD) LoadState(_ context.Context, blob []byte) error {
	if len(blob) != 0 {
		return fmt.Errorf("sgd: unexpected %d-byte state", len(blob))
	}
	return nil
}
