package variants

import (
	"context"

	"github.com/optlab/optlab/sdk/optim"
)

// FSAMConfig holds Friendly-SAM's hyperparameters.
type FSAMConfig struct {
	Rho    float64 `hp:"rho" range:"[0,)" doc:"neighbourhood radius ρ"`
	Sigma  float64 `hp:"sigma" range:"[0,)" doc:"weight σ of the full-gradient estimate removed from g in the perturbation"`
	Lambda float64 `hp:"lambda" range:"[0,1]" doc:"EMA rate λ of the full-gradient estimate m ← λ·m + (1−λ)·g"`
}

func fsamDefaults() FSAMConfig { return FSAMConfig{Rho: 0.05, Sigma: 1, Lambda: 0.95} }

// FSAM is Friendly-SAM (Li et al., CVPR 2024) as nblt/F-SAM's
// FriendlySAM.first_step computes it. Per member, with g = ∇L(θ):
//
//	first step:  d = g,          m = g
//	later:       d = g − σ·m,    m = λ·m + (1−λ)·g
//	gs = ∇L(θ + ρ·d/(‖d‖+ε)), base step with gs
//
// m, the EMA of past gradients (the full-gradient estimate), is the state,
// with the count of steps taken (the first step initialises m).
type FSAM struct {
	core
	cfg FSAMConfig
}

// NewFSAM returns Friendly-SAM with its defaults.
func NewFSAM() optim.Optimizer { return &FSAM{core: core{name: "fsam"}, cfg: fsamDefaults()} }

// Info implements optim.Optimizer.
func (o *FSAM) Info() optim.Info {
	return o.info(fsamDefaults(), true, true)
}

// Configure implements optim.Optimizer: g, saved, d and the state m per member.
func (o *FSAM) Configure(ctx context.Context, h optim.Host, cfg optim.Config) error {
	o.cfg = fsamDefaults()
	return o.configure(ctx, h, cfg, &o.cfg, nil, []string{"d", "m"}, []string{"m"}, nil)
}

// Step implements optim.Optimizer with one Exec and no blocking read.
func (o *FSAM) Step(ctx context.Context, in optim.StepInput) (optim.StepOutput, error) {
	p, evs, err := o.begin(in)
	if err != nil {
		return optim.StepOutput{}, err
	}
	for m := range o.members {
		g, d, mom := o.g[m], o.vec("d", m), o.vec("m", m)
		if o.taken == 0 {
			p.Copy(mom, g)
			o.perturbed(p, m, g, g, optim.K(o.cfg.Rho), p.Norm(g))
			o.step(p, m, g, in)
			continue
		}
		p.LinComb(d, optim.Term{Coef: optim.K(1), X: g}, optim.Term{Coef: optim.K(-o.cfg.Sigma), X: mom})
		p.LinComb(mom, optim.Term{Coef: optim.K(o.cfg.Lambda), X: mom}, optim.Term{Coef: optim.K(1 - o.cfg.Lambda), X: g})
		o.perturbed(p, m, d, d, optim.K(o.cfg.Rho), p.Norm(d))
		o.step(p, m, d, in)
	}
	return o.exec(ctx, p, evs)
}
