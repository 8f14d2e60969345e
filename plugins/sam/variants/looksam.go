package variants

import (
	"context"

	"github.com/optlab/optlab/sdk/optim"
)

// LookSAMConfig holds LookSAM's hyperparameters.
type LookSAMConfig struct {
	Rho   float64 `hp:"rho" range:"[0,)" doc:"neighbourhood radius ρ of the SAM steps"`
	K     int     `hp:"k" range:"[1,)" doc:"a full SAM step every k steps (steps 0, k, 2k, …), the reused direction between"`
	Alpha float64 `hp:"alpha" range:"[0,)" doc:"weight α of the stored orthogonal component, scaled by ‖g‖/‖g_v‖"`
}

func lookSAMDefaults() LookSAMConfig { return LookSAMConfig{Rho: 0.05, K: 5, Alpha: 0.7} }

// LookSAM is LookSAM (Liu et al., CVPR 2022, Algorithm 1). Per member, on
// the steps t ≡ 0 (mod k):
//
//	g = ∇L(θ), gs = ∇L(θ + ρ·g/(‖g‖+ε))
//	g_v = gs − (‖gs‖·cos/(‖g‖+ε))·g,  cos = g·gs/(‖g‖‖gs‖+ε)   (kept)
//	base step with gs
//
// and on the others g = ∇L(θ) and the base step with
// g + α·‖g‖/(‖g_v‖+ε)·g_v: one gradient. The step number decides, in the
// plugin (k is known), so the program needs no If; g_v is the state.
type LookSAM struct {
	core
	cfg LookSAMConfig
}

// NewLookSAM returns LookSAM with its defaults.
func NewLookSAM() optim.Optimizer {
	return &LookSAM{core: core{name: "looksam"}, cfg: lookSAMDefaults()}
}

// Info implements optim.Optimizer.
func (o *LookSAM) Info() optim.Info {
	return o.info(lookSAMDefaults(), true, true)
}

// Configure implements optim.Optimizer: g, saved, gs and the state g_v per member.
func (o *LookSAM) Configure(ctx context.Context, h optim.Host, cfg optim.Config) error {
	o.cfg = lookSAMDefaults()
	return o.configure(ctx, h, cfg, &o.cfg, nil, []string{"gs", "gv"}, []string{"gv"}, nil)
}

// Step implements optim.Optimizer with one Exec and no blocking read.
func (o *LookSAM) Step(ctx context.Context, in optim.StepInput) (optim.StepOutput, error) {
	p, evs, err := o.begin(in)
	if err != nil {
		return optim.StepOutput{}, err
	}
	full := in.Step%int64(o.cfg.K) == 0
	for m := range o.members {
		g, gs, gv := o.g[m], o.vec("gs", m), o.vec("gv", m)
		n := p.Norm(g)
		if full {
			o.perturbed(p, m, g, gs, optim.K(o.cfg.Rho), n)
			ns := p.Norm(gs)
			cos := p.Div(p.Dot(g, gs), p.Add(p.Mul(n, ns), optim.K(eps)))
			along := p.Div(p.Mul(ns, cos), p.Add(n, optim.K(eps)))
			p.LinComb(gv, optim.Term{Coef: optim.K(1), X: gs}, optim.Term{Coef: p.Sub(optim.K(0), along), X: g})
			o.step(p, m, gs, in)
			continue
		}
		a := p.Div(p.Mul(optim.K(o.cfg.Alpha), n), p.Add(p.Norm(gv), optim.K(eps)))
		p.Axpy(g, a, gv)
		o.step(p, m, g, in)
	}
	return o.exec(ctx, p, evs)
}
