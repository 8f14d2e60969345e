// Command lookahead is an optlab optimizer plugin written outside the optlab
// module, against the SDK only: Lookahead (Zhang, Lucas, Hinton and Ba,
// 2019) around the host's base optimizer. Every step is the host's base
// step (the fast weights θ); every k steps the slow weights move toward
// them, φ ← φ + α(θ − φ), and the fast weights restart from there, θ ← φ.
//
// Build it with `go build -o lookahead .` in this directory and name the
// binary in an experiment:
//
//	[[method]]
//	name = "Lookahead"
//	path = "examples/lookahead/lookahead"
//	[method.params]
//	k = 5
//	alpha = 0.5
package main

import (
	"context"
	"encoding/binary"
	"fmt"

	"github.com/optlab/optlab/sdk/hparams"
	"github.com/optlab/optlab/sdk/optim"
	"github.com/optlab/optlab/sdk/serve"
)

// Config holds Lookahead's hyperparameters; the host validates an
// experiment's values against these tags before training.
type Config struct {
	K     int     `hp:"k" range:"[1,)" doc:"fast steps between slow updates"`
	Alpha float64 `hp:"alpha" range:"(0,1]" doc:"slow step size α"`
}

// Lookahead is the optimizer.
type Lookahead struct {
	optim.Defaults
	h     optim.Host
	cfg   Config
	hs    *optim.Handles
	grad  []optim.Vec // per member: the gradient
	slow  []optim.Vec // per member: the slow weights φ
	steps int64
}

// New returns Lookahead with the paper's defaults (k = 5, α = 0.5).
func New() optim.Optimizer { return &Lookahead{cfg: Config{K: 5, Alpha: 0.5}} }

// Info implements optim.Optimizer.
func (o *Lookahead) Info() optim.Info {
	return optim.Info{Name: "lookahead", Version: "0.1.0", Features: optim.Features{Members: true, State: true},
		Params: hparams.MustSpecs(Config{K: 5, Alpha: 0.5})}
}

// Configure implements optim.Optimizer: per member a gradient buffer and
// the slow weights, which start at the initial parameters.
func (o *Lookahead) Configure(ctx context.Context, h optim.Host, cfg optim.Config) error {
	o.h, o.cfg = h, Config{K: 5, Alpha: 0.5}
	if err := hparams.Apply(&o.cfg, cfg.Params); err != nil {
		return fmt.Errorf("lookahead: %w", err)
	}
	members := cfg.MemberCount()
	o.hs = cfg.Namespace("lookahead")
	o.grad, o.slow = o.hs.PerMember("grad", members), o.hs.PerMember("slow", members)
	p := o.hs.Prog()
	for m := range members {
		p.Alloc(o.grad[m], m).Alloc(o.slow[m], m).Copy(o.slow[m], optim.ParamsOf(m))
	}
	if _, err := h.Exec(ctx, p); err != nil {
		return fmt.Errorf("lookahead: configure: %w", err)
	}
	o.steps = 0
	return nil
}

// Step implements optim.Optimizer with one program and no blocking read:
// the fast step of every member and, every k steps, the slow update.
func (o *Lookahead) Step(ctx context.Context, _ optim.StepInput) (optim.StepOutput, error) {
	p := o.hs.Prog()
	evals := make([]optim.Eval, len(o.grad))
	sync := (o.steps+1)%int64(o.cfg.K) == 0
	for m := range o.grad {
		theta := optim.ParamsOf(m)
		evals[m] = p.Grad(o.grad[m], theta, optim.Batch{}, optim.BNUpdate)
		p.BaseStep(theta, o.grad[m])
		if sync {
			p.LinComb(o.slow[m], optim.Term{Coef: optim.K(1 - o.cfg.Alpha), X: o.slow[m]}, optim.Term{Coef: optim.K(o.cfg.Alpha), X: theta}).
				Copy(theta, o.slow[m])
		}
	}
	p.ReportMetrics(p.Mean(evals)) // to the host's logs, without a blocking read
	if _, err := o.h.Exec(ctx, p); err != nil {
		return optim.StepOutput{}, fmt.Errorf("lookahead: step: %w", err)
	}
	o.steps++
	return optim.StepOutput{}, nil
}

// SaveState implements optim.Optimizer (Features.State): the step count,
// and the slow weights for the host to save beside the model.
func (o *Lookahead) SaveState(context.Context) ([]byte, []optim.Vec, error) {
	return binary.AppendVarint(nil, o.steps), o.slow, nil
}

// LoadState implements optim.Optimizer (Features.State; the host has
// restored the slow weights' contents).
func (o *Lookahead) LoadState(_ context.Context, blob []byte) error {
	steps, n := binary.Varint(blob)
	if n <= 0 || n != len(blob) {
		return fmt.Errorf("lookahead: bad %d-byte state", len(blob))
	}
	o.steps = steps
	return nil
}

func main() { serve.Serve(New) }
