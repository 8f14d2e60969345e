// Package msam is Momentum-SAM (Becker, Altrock & Risse, 2023,
// "Momentum-SAM: Sharpness Aware Minimization without Computational
// Overhead"), as the official code computes it: MarlonBecker/MSAM,
// optimizer/msam.py at commit 780fa4f623fe0c99760fd7cfb1a94d14f00179ee.
//
// SAM perturbs along the gradient, which costs a second gradient per step;
// MSAM perturbs along the negative momentum of the base optimizer (SGD),
// which it already has, so a step costs one gradient, as SGD's. Per step
// and member, with v the base step's momentum buffer before the step
// (zeros before the first, as the official code initialises it):
//
//	c  = ρ / (‖v‖ + 1e-12)            (global L2 norm, on the device)
//	θ̃  = θ − c·v                      (the perturbed point)
//	g  = ∇L(θ̃)                        (BatchNorm statistics updated, one pass)
//	BaseStep at θ̃ with g:  d = g + wd·θ̃,  v ← μ·v + d,  θ̃ ← θ̃ − lr·v
//	θ  = θ̃ + c·v_old                  (the perturbation undone)
//
// which is msam.py's step: its parameters hold θ̃ between steps (the
// perturbation of step t+1 is applied at the end of step t, and
// move_back_from_momentumAscent/move_up_to_momentumAscent take it off
// around each evaluation); here the live parameters hold θ between steps,
// so evaluations, checkpoints and the host's other tools see θ, and the
// same arithmetic happens within the step. Weight decay is taken at θ̃, as
// msam.py adds it to the gradient before moving back, because the
// BaseStep runs before the perturbation is undone. The plugin reads v with
// the BaseState op (protocol minor 10), a copy, since the BaseStep changes
// the buffer in place and the undo needs the old one.
//
// The step is one Exec with no blocking read; it keeps no state of its own
// (the momentum buffer is the host's and travels with its checkpoints).
// The base optimizer must be SGD with momentum ≠ 0: the host refuses
// BaseState otherwise (with momentum 0 msam.py would perturb along the
// previous step's gradient; Adam is AdamW_MSAM's business, not this one's).
// msam.py has no Nesterov and no dampening: with those set in the base
// optimizer the descent follows them while the perturbation uses the
// buffer as the host keeps it.
package msam

import (
	"context"
	"fmt"

	"github.com/optlab/optlab/sdk/hparams"
	"github.com/optlab/optlab/sdk/optim"
)

// Config holds MSAM's hyperparameter.
type Config struct {
	Rho float64 `hp:"rho" range:"[0,)" doc:"perturbation radius ρ along the normalised negative momentum (msam.py's default 0.3; the paper's CIFAR-100 WRN-16-4 config uses 3)"`
}

func defaults() Config { return Config{Rho: 0.3} }

// MSAM is the optimizer. Create it with New.
type MSAM struct {
	optim.Defaults
	h    optim.Host
	cfg  Config
	hs   *optim.Handles
	g, v []optim.Vec // per member: the gradient and the copy of the momentum buffer
}

// New returns an MSAM optimizer with the default hyperparameters.
func New() optim.Optimizer { return &MSAM{cfg: defaults()} }

// Info implements optim.Optimizer.
func (o *MSAM) Info() optim.Info {
	return optim.Info{Name: "msam", Version: "0.1.0",
		Features: optim.Features{Members: true, BaseStep: true},
		Params:   hparams.MustSpecs(defaults())}
}

// Configure implements optim.Optimizer.
func (o *MSAM) Configure(ctx context.Context, h optim.Host, cfg optim.Config) error {
	o.h, o.cfg = h, defaults()
	if err := hparams.Apply(&o.cfg, cfg.Params); err != nil {
		return fmt.Errorf("msam: %w", err)
	}
	members := cfg.MemberCount()
	o.hs = cfg.Namespace("msam")
	o.g, o.v = o.hs.PerMember("g", members), o.hs.PerMember("v", members)
	p := o.hs.Prog()
	for m := range members {
		p.Alloc(o.g[m], m).Alloc(o.v[m], m)
	}
	if _, err := h.Exec(ctx, p); err != nil {
		return fmt.Errorf("msam: configure: %w", err)
	}
	return nil
}

// Step implements optim.Optimizer with one Exec and no blocking read.
func (o *MSAM) Step(ctx context.Context, _ optim.StepInput) (optim.StepOutput, error) {
	p := o.hs.Prog()
	evs := make([]optim.Eval, len(o.g))
	for m := range o.g {
		th, g, v := optim.ParamsOf(m), o.g[m], o.v[m]
		p.BaseState(v, th, optim.MomentumBuffer)
		c := p.Div(optim.K(o.cfg.Rho), p.Add(p.Norm(v), optim.K(1e-12)))
		p.Axpy(th, p.Mul(c, optim.K(-1)), v)
		evs[m] = p.Grad(g, th, optim.Batch{}, optim.BNUpdate)
		p.BaseStep(th, g)
		p.Axpy(th, c, v)
	}
	p.ReportMetrics(p.Mean(evs))
	if _, err := o.h.Exec(ctx, p); err != nil {
		return optim.StepOutput{}, fmt.Errorf("msam: step: %w", err)
	}
	return optim.StepOutput{}, nil
}
