package variants

import (
	"context"

	"github.com/optlab/optlab/sdk/optim"
)

// WSAMConfig holds WSAM's hyperparameters.
type WSAMConfig struct {
	Rho      float64 `hp:"rho" range:"[0,)" doc:"neighbourhood radius ρ"`
	Gamma    float64 `hp:"gamma" range:"[0,1)" doc:"weight γ: the sharpness term is weighted α = γ/(1−γ)"`
	Decouple bool    `hp:"decouple" doc:"decoupled: base step with g, then θ −= lr·α·(gs − g); else base step with α·gs + (1−α)·g"`
	MaxNorm  float64 `hp:"max_norm" range:"[0,)" doc:"clip g and gs to this norm as torch.nn.utils.clip_grad_norm_ (0: no clipping)"`
}

func wsamDefaults() WSAMConfig { return WSAMConfig{Rho: 0.05, Gamma: 0.9, Decouple: true} }

// WSAM is WSAM (Yue et al., KDD 2023) as the authors' WeightedSAM
// (intelligent-machine-learning/dlrover, atorch/atorch/optimizers/wsam.py)
// computes it. Per member, with α = γ/(1−γ):
//
//	g = ∇L(θ), gs = ∇L(θ + ρ·g/(‖g‖+ε))     (the ascent with g unclipped)
//	g, gs clipped to max_norm when it is > 0 (each by its own norm)
//	decouple:  base step with g, then θ −= lr·α·(gs − g)
//	otherwise: base step with α·gs + (1−α)·g
//
// lr is the step's rate (StepInput.LR). It keeps no state. The decoupled
// update is not the base step alone, so WSAM does not declare
// Features.BaseStep (a wrapper's SetLR would not reach lr·α).
type WSAM struct {
	core
	cfg WSAMConfig
}

// NewWSAM returns WSAM with its defaults.
func NewWSAM() optim.Optimizer { return &WSAM{core: core{name: "wsam"}, cfg: wsamDefaults()} }

// Info implements optim.Optimizer.
func (o *WSAM) Info() optim.Info {
	return o.info(wsamDefaults(), false, false)
}

// Configure implements optim.Optimizer: g, saved and gs per member.
func (o *WSAM) Configure(ctx context.Context, h optim.Host, cfg optim.Config) error {
	o.cfg = wsamDefaults()
	return o.configure(ctx, h, cfg, &o.cfg, nil, []string{"gs"}, nil, nil)
}

// clip appends torch.nn.utils.clip_grad_norm_(x, max_norm): x scaled by
// min(max_norm/(‖x‖+1e-6), 1).
func (o *WSAM) clip(p *optim.Program, x optim.Vec, n optim.Reg) {
	p.Scale(x, p.Min(p.Div(optim.K(o.cfg.MaxNorm), p.Add(n, optim.K(1e-6))), optim.K(1)))
}

// Step implements optim.Optimizer with one Exec and no blocking read.
func (o *WSAM) Step(ctx context.Context, in optim.StepInput) (optim.StepOutput, error) {
	p, evs, err := o.begin(in)
	if err != nil {
		return optim.StepOutput{}, err
	}
	alpha := o.cfg.Gamma / (1 - o.cfg.Gamma)
	for m := range o.members {
		th, g, gs := optim.ParamsOf(m), o.g[m], o.vec("gs", m)
		n := p.Norm(g)
		o.perturbed(p, m, g, gs, optim.K(o.cfg.Rho), n)
		if o.cfg.MaxNorm > 0 {
			o.clip(p, g, n)
			o.clip(p, gs, p.Norm(gs))
		}
		if !o.cfg.Decouple {
			p.LinComb(gs, optim.Term{Coef: optim.K(alpha), X: gs}, optim.Term{Coef: optim.K(1 - alpha), X: g})
			o.step(p, m, gs, in)
			continue
		}
		p.Axpy(gs, optim.K(-1), g) // the sharpness gs − g
		o.step(p, m, g, in)
		p.Axpy(th, optim.K(-in.LR*alpha), gs)
	}
	return o.exec(ctx, p, evs)
}
