// Command gsam is an optlab optimizer plugin written against the SDK only:
// GSAM, Surrogate Gap Guided Sharpness-Aware Minimization (Zhuang et al.,
// ICLR 2022), as the authors' code (juntang-zhuang/GSAM) computes it with
// a fixed ρ.
//
// Per step and member, in ONE program with no blocking read (protocol
// minor 5: the data-dependent coefficients are registers on the device):
//
//	g  = ∇L(θ)                       (BatchNorm updated)
//	θ' = θ + ρ·g/(‖g‖+ε)             (SAM's ascent)
//	gp = ∇L(θ')                      (BatchNorm frozen), then θ restored bitwise
//	cos = g·gp / (‖g‖‖gp‖ + ε)
//	g⊥ = g − cos·‖g‖·gp/(‖gp‖+ε)      (g's component orthogonal to gp)
//	d  = gp − α·g⊥ = (1 + α·cos·‖g‖/(‖gp‖+ε))·gp − α·g
//
// then the host's base step with d. With α = 0, d = gp exactly and GSAM is
// SAM (Foret et al.) step for step: a test in the optlab module checks that
// against the built-in SAM plugin bitwise. ε = 1e-12 as in SAM's ascent.
//
// Build it with `go build -o gsam .` here and name the binary in an
// experiment:
//
//	[[method]]
//	name = "GSAM"
//	path = "examples/gsam/gsam"
//	[method.params]
//	rho = 0.05
//	alpha = 0.1
package main

import (
	"context"
	"fmt"

	"github.com/optlab/optlab/sdk/hparams"
	"github.com/optlab/optlab/sdk/optim"
	"github.com/optlab/optlab/sdk/serve"
)

// eps is the denominators' guard, SAM's 1e-12.
const eps = 1e-12

// Config holds GSAM's hyperparameters.
type Config struct {
	Rho   float64 `hp:"rho" range:"[0,)" doc:"neighbourhood radius ρ of the ascent"`
	Alpha float64 `hp:"alpha" range:"[0,)" doc:"weight α of the surrogate-gap term (0: SAM)"`
}

func defaults() Config { return Config{Rho: 0.05, Alpha: 0.1} }

// GSAM is the optimizer; its vectors are per-step scratch, so it declares
// no state and keeps the defaults of every optional method.
type GSAM struct {
	optim.Defaults
	h   optim.Host
	cfg Config
	hs  *optim.Handles
	// per member: the gradient at θ (then the update d), the gradient at
	// the perturbed point, and θ saved before the perturbation
	g, gp, saved []optim.Vec
}

// New returns GSAM with its defaults.
func New() optim.Optimizer { return &GSAM{cfg: defaults()} }

// Info implements optim.Optimizer.
func (o *GSAM) Info() optim.Info {
	return optim.Info{Name: "gsam", Version: "0.1.0", Features: optim.Features{Members: true, BaseStep: true},
		Params: hparams.MustSpecs(defaults())}
}

// Configure implements optim.Optimizer: three vectors per member.
func (o *GSAM) Configure(ctx context.Context, h optim.Host, cfg optim.Config) error {
	o.h, o.cfg = h, defaults()
	if err := hparams.Apply(&o.cfg, cfg.Params); err != nil {
		return fmt.Errorf("gsam: %w", err)
	}
	members := cfg.MemberCount()
	o.hs = cfg.Namespace("gsam")
	o.g, o.gp, o.saved = o.hs.PerMember("g", members), o.hs.PerMember("gp", members), o.hs.PerMember("saved", members)
	p := o.hs.Prog()
	for m := range members {
		p.Alloc(o.g[m], m).Alloc(o.gp[m], m).Alloc(o.saved[m], m)
	}
	if _, err := h.Exec(ctx, p); err != nil {
		return fmt.Errorf("gsam: configure: %w", err)
	}
	return nil
}

// Step implements optim.Optimizer: one Exec for all members, and the loss
// and accuracy at θ reported to the host's logs.
func (o *GSAM) Step(ctx context.Context, _ optim.StepInput) (optim.StepOutput, error) {
	p := o.hs.Prog()
	evs := make([]optim.Eval, len(o.g))
	norms := make([]optim.Reg, len(o.g))
	for m, g := range o.g { // SAM's order: every member's first pass, then the rest
		evs[m] = p.Grad(g, optim.ParamsOf(m), optim.Batch{}, optim.BNUpdate)
		norms[m] = p.Norm(g)
	}
	for m, g := range o.g {
		th, gp, n := optim.ParamsOf(m), o.gp[m], norms[m]
		p.Copy(o.saved[m], th).Axpy(th, p.Div(optim.K(o.cfg.Rho), p.Add(n, optim.K(eps))), g)
		p.Grad(gp, th, optim.Batch{}, optim.BNFreeze)
		p.Copy(th, o.saved[m])
		np := p.Norm(gp)
		cos := p.Div(p.Dot(g, gp), p.Add(p.Mul(n, np), optim.K(eps)))
		along := p.Div(p.Mul(cos, n), p.Add(np, optim.K(eps))) // g⊥ = g − along·gp
		a := optim.K(o.cfg.Alpha)
		p.LinComb(g, optim.Term{Coef: p.Add(optim.K(1), p.Mul(a, along)), X: gp}, optim.Term{Coef: optim.K(-o.cfg.Alpha), X: g})
		p.BaseStep(th, g)
	}
	p.ReportMetrics(p.Mean(evs))
	if _, err := o.h.Exec(ctx, p); err != nil {
		return optim.StepOutput{}, fmt.Errorf("gsam: step: %w", err)
	}
	return optim.StepOutput{}, nil
}

func main() { serve.Serve(New) }
