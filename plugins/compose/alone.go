package compose

import (
	"context"
	"errors"
	"fmt"

	"github.com/optlab/optlab/sdk/optim"
)

// Metered is an update rule that reports metrics of its own each step
// (muon's AdamW rate, say), which Alone returns in its StepOutput.
type Metered interface {
	Metrics(in optim.StepInput) map[string]float64
}

// Alone is an update rule as an optimizer of its own: every member's
// gradient on the whole batch (BatchNorm statistics updated), then the
// rule's update, all members in one Exec per step with no read; it reports
// the mean loss and accuracy. The plugins adamw, muon and shampoo are
// their rules alone. Create it with NewAlone.
type Alone struct {
	optim.Defaults
	rule Rule
	h    optim.Host
	hs   *optim.Handles
	g    []optim.Vec // per member: the gradient
}

// NewAlone returns the optimizer that applies rule r alone.
func NewAlone(r Rule) *Alone { return &Alone{rule: r} }

// Rule returns the rule (its state's handles are valid after Configure).
func (o *Alone) Rule() Rule { return o.rule }

// Info implements optim.Optimizer: the rule's name, version and
// hyperparameters, with members and its own update.
func (o *Alone) Info() optim.Info {
	i := o.rule.Info()
	i.Features = optim.Features{Members: true, OwnsUpdate: true, State: i.Features.State}
	return i
}

// Configure implements optim.Optimizer: the rule's state in the
// optimizer's namespace, and a gradient per member.
func (o *Alone) Configure(ctx context.Context, h optim.Host, cfg optim.Config) error {
	name := o.rule.Info().Name
	o.h, o.hs = h, cfg.Namespace(name)
	o.g = o.hs.PerMember("g", cfg.MemberCount())
	p := o.hs.Prog()
	for m, g := range o.g {
		p.Alloc(g, m)
	}
	if _, err := h.Exec(ctx, p); err != nil {
		return fmt.Errorf("%s: configure: %w", name, err)
	}
	rcfg := cfg
	rcfg.Handles = o.hs
	return o.rule.Configure(ctx, h, rcfg)
}

// Step implements optim.Optimizer with one Exec and no blocking read.
func (o *Alone) Step(ctx context.Context, in optim.StepInput) (optim.StepOutput, error) {
	name := o.rule.Info().Name
	if o.hs == nil {
		return optim.StepOutput{}, fmt.Errorf("%s: step before configure", name)
	}
	if err := o.rule.Begin(in); err != nil {
		return optim.StepOutput{}, fmt.Errorf("%s: %w", name, err)
	}
	p := o.hs.Prog()
	evs := make([]optim.Eval, len(o.g))
	for m, g := range o.g {
		th := optim.ParamsOf(m)
		evs[m] = p.Grad(g, th, optim.Batch{}, optim.BNUpdate)
		o.rule.Apply(p, m, th, g, in)
	}
	p.ReportMetrics(p.Mean(evs))
	if _, err := o.h.Exec(ctx, p); err != nil {
		return optim.StepOutput{}, fmt.Errorf("%s: step: %w", name, err)
	}
	var out optim.StepOutput
	if m, ok := o.rule.(Metered); ok {
		out.Metrics = m.Metrics(in)
	}
	return out, nil
}

// SaveState implements optim.Optimizer (Features.State): the rule's.
func (o *Alone) SaveState(ctx context.Context) ([]byte, []optim.Vec, error) {
	if o.hs == nil {
		return nil, nil, errors.New(o.rule.Info().Name + ": save state before configure")
	}
	return o.rule.SaveState(ctx)
}

// LoadState implements optim.Optimizer (Features.State): the rule's.
func (o *Alone) LoadState(ctx context.Context, blob []byte) error {
	if o.hs == nil {
		return errors.New(o.rule.Info().Name + ": load state before configure")
	}
	return o.rule.LoadState(ctx, blob)
}
