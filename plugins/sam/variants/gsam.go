package variants

import (
	"context"
	"errors"

	"github.com/optlab/optlab/sdk/optim"
)

// GSAMConfig holds GSAM's hyperparameters.
type GSAMConfig struct {
	Rho    float64 `hp:"rho" range:"[0,)" doc:"neighbourhood radius ρ (ρ_max when lr_max > 0)"`
	Alpha  float64 `hp:"alpha" range:"[0,)" doc:"weight α of the surrogate-gap term (0: SAM)"`
	RhoMin float64 `hp:"rho_min" range:"[0,)" doc:"ρ_min: ρ at lr = lr_min when lr_max > 0"`
	LRMax  float64 `hp:"lr_max" range:"[0,)" doc:"the schedule's peak rate; > 0 makes ρ follow the rate: ρ_t = ρ_min + (ρ − ρ_min)·(lr_t − lr_min)/(lr_max − lr_min); 0: ρ fixed"`
	LRMin  float64 `hp:"lr_min" range:"[0,)" doc:"the schedule's lowest rate (lr_max > 0)"`
}

func gsamDefaults() GSAMConfig { return GSAMConfig{Rho: 0.05, Alpha: 0.1} }

// GSAM is GSAM (Zhuang et al., ICLR 2022) as juntang-zhuang/GSAM's
// gsam/gsam.py computes it. Per member:
//
//	g  = ∇L(θ), gp = ∇L(θ + ρ_t·g/(‖g‖+ε))
//	cos = g·gp/(‖g‖‖gp‖+ε)
//	d  = gp − α·(g − cos·‖g‖·gp/(‖gp‖+ε))
//	   = (1 + α·cos·‖g‖/(‖gp‖+ε))·gp − α·g
//	base step with d
//
// ρ_t is rho, or with lr_max > 0 the official ProportionScheduler's value
// at the step's rate. With α = 0, d = gp and GSAM is SAM bitwise. It keeps
// no state. examples/gsam is the same algorithm at a fixed ρ written
// against the SDK alone.
type GSAM struct {
	core
	cfg GSAMConfig
}

// NewGSAM returns GSAM with its defaults.
func NewGSAM() optim.Optimizer { return &GSAM{core: core{name: "gsam"}, cfg: gsamDefaults()} }

// Info implements optim.Optimizer.
func (o *GSAM) Info() optim.Info {
	return o.info(gsamDefaults(), false, true)
}

// Configure implements optim.Optimizer: g, saved and gp per member.
func (o *GSAM) Configure(ctx context.Context, h optim.Host, cfg optim.Config) error {
	o.cfg = gsamDefaults()
	return o.configure(ctx, h, cfg, &o.cfg, func() error {
		switch {
		case o.cfg.LRMax == 0 && (o.cfg.RhoMin != 0 || o.cfg.LRMin != 0):
			return errors.New("rho_min and lr_min schedule ρ: set lr_max too")
		case o.cfg.LRMax > 0 && o.cfg.LRMax <= o.cfg.LRMin:
			return errors.New("lr_max must exceed lr_min")
		case o.cfg.LRMax > 0 && o.cfg.RhoMin > o.cfg.Rho:
			return errors.New("rho_min must not exceed rho (ρ_max)")
		}
		return nil
	}, []string{"gp"}, nil, nil)
}

// rho returns ρ_t at the step's rate lr.
func (o *GSAM) rho(lr float64) float64 {
	if o.cfg.LRMax == 0 {
		return o.cfg.Rho
	}
	return o.cfg.RhoMin + (o.cfg.Rho-o.cfg.RhoMin)*(lr-o.cfg.LRMin)/(o.cfg.LRMax-o.cfg.LRMin)
}

// Step implements optim.Optimizer with one Exec and no blocking read.
func (o *GSAM) Step(ctx context.Context, in optim.StepInput) (optim.StepOutput, error) {
	p, evs, err := o.begin(in)
	if err != nil {
		return optim.StepOutput{}, err
	}
	norms := make([]optim.Reg, o.members)
	for m := range o.members { // SAM's order: every first pass and norm, then the rest
		norms[m] = p.Norm(o.g[m])
	}
	for m := range o.members {
		g, gp, n := o.g[m], o.vec("gp", m), norms[m]
		o.perturbed(p, m, g, gp, optim.K(o.rho(in.LR)), n)
		np := p.Norm(gp)
		cos := p.Div(p.Dot(g, gp), p.Add(p.Mul(n, np), optim.K(eps)))
		along := p.Div(p.Mul(cos, n), p.Add(np, optim.K(eps))) // g⊥ = g − along·gp
		a := optim.K(o.cfg.Alpha)
		p.LinComb(g, optim.Term{Coef: p.Add(optim.K(1), p.Mul(a, along)), X: gp}, optim.Term{Coef: optim.K(-o.cfg.Alpha), X: g})
		o.step(p, m, g, in)
	}
	return o.exec(ctx, p, evs)
}
