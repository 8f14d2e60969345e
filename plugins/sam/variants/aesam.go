package variants

import (
	"context"

	"github.com/optlab/optlab/sdk/optim"
)

// AESAMConfig holds AE-SAM's hyperparameters.
type AESAMConfig struct {
	Rho    float64 `hp:"rho" range:"[0,)" doc:"neighbourhood radius ρ of the SAM steps"`
	Delta  float64 `hp:"delta" range:"[0,1)" doc:"EMA rate δ of the mean and variance of ‖g‖²"`
	CStart float64 `hp:"c_start" doc:"threshold c_t at the first step (the paper's λ2): SAM when ‖g‖² > μ_t + c_t·σ_t"`
	CEnd   float64 `hp:"c_end" doc:"threshold c_t at the last step (the paper's λ1); linear in between"`
}

func aesamDefaults() AESAMConfig { return AESAMConfig{Rho: 0.05, Delta: 0.9, CStart: 1, CEnd: -1} }

// AESAM is AE-SAM (Jiang et al., ICLR 2023, Algorithm 1). Per member and
// step, with g = ∇L(θ) and s = ‖g‖² (= g·g):
//
//	μ_t = δ·μ_{t−1} + (1−δ)·s
//	σ²_t = δ·σ²_{t−1} + (1−δ)·(s − μ_t)²         (μ_{−1} = σ²_{−1} = 0)
//	c_t = c_start + (c_end − c_start)·t/T
//	if s − (μ_t + c_t·σ_t) > 0:  g ← ∇L(θ + ρ·g/(‖g‖+ε))   (SAM)
//	base step with g
//
// The choice is made on the device: the SAM pass is the block of an If op
// on that register (protocol minor 9), so a step that skips it costs one
// gradient and no read-back. μ and σ² are the state: elements 0 and 1 of a
// vector (stats = μ·e0 + σ²·e1, read back into registers with Dot against
// the constant one-hot vectors e0 and e1, exact).
type AESAM struct {
	core
	cfg   AESAMConfig
	total int64 // T, the run's steps
}

// NewAESAM returns AE-SAM with its defaults.
func NewAESAM() optim.Optimizer { return &AESAM{core: core{name: "aesam"}, cfg: aesamDefaults()} }

// Info implements optim.Optimizer.
func (o *AESAM) Info() optim.Info {
	return o.info(aesamDefaults(), true, true)
}

// Configure implements optim.Optimizer: g, saved, the state stats and the
// constants e0, e1 per member.
func (o *AESAM) Configure(ctx context.Context, h optim.Host, cfg optim.Config) error {
	o.cfg, o.total = aesamDefaults(), cfg.TotalSteps
	return o.configure(ctx, h, cfg, &o.cfg, nil, []string{"stats", "e0", "e1"}, []string{"stats"}, func(p *optim.Program, m int) {
		p.FillRange(o.vec("e0", m), 0, 1, 1).FillRange(o.vec("e1", m), 1, 1, 1)
	})
}

// threshold returns c_t.
func (o *AESAM) threshold(step int64) float64 {
	if o.total <= 0 {
		return o.cfg.CStart
	}
	return o.cfg.CStart + (o.cfg.CEnd-o.cfg.CStart)*float64(step)/float64(o.total)
}

// Step implements optim.Optimizer with one Exec and no blocking read.
func (o *AESAM) Step(ctx context.Context, in optim.StepInput) (optim.StepOutput, error) {
	p, evs, err := o.begin(in)
	if err != nil {
		return optim.StepOutput{}, err
	}
	d := o.cfg.Delta
	c := optim.K(o.threshold(in.Step))
	for m := range o.members {
		g, stats, e0, e1 := o.g[m], o.vec("stats", m), o.vec("e0", m), o.vec("e1", m)
		s := p.Dot(g, g)
		mu := p.Add(p.Mul(optim.K(d), p.Dot(stats, e0)), p.Mul(optim.K(1-d), s))
		dev := p.Sub(s, mu)
		v := p.Add(p.Mul(optim.K(d), p.Dot(stats, e1)), p.Mul(optim.K(1-d), p.Mul(dev, dev)))
		p.LinComb(stats, optim.Term{Coef: mu, X: e0}, optim.Term{Coef: v, X: e1})
		over := p.Sub(s, p.Add(mu, p.Mul(c, p.Sqrt(v))))
		p.If(over, func(p *optim.Program) {
			o.perturbed(p, m, g, g, optim.K(o.cfg.Rho), p.Norm(g))
		})
		o.step(p, m, g, in)
	}
	return o.exec(ctx, p, evs)
}
