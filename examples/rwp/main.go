// Command rwp is an optlab optimizer plugin written against the SDK only:
// random weight perturbation with filter-wise scales (Li et al., 2022;
// the filter-wise noise of Bisla et al.'s LPF-SGD): the gradient is taken
// at θ + ε with
//
//	ε_r ~ N(0, (σ·‖θ_r‖)²·I)   for every row r (output channel, filter)
//
// of every parameter tensor (a 1-D tensor's rows are its elements, so a
// bias moves by σ·|b_i|), and with mix λ > 0 (m-RWP) the update direction
// is λ·∇L(θ) + (1−λ)·∇L(θ+ε). Then the host's base step from θ.
//
// It is the showcase of protocol minor 5's segment ops: the per-filter
// norms are one SegReduce over the whole vector and the per-filter scaling
// one Scale by a segment register, a constant number of device kernels
// however many filters the model has (with whole-vector ops it took a mask
// fill and a Dot per tensor, ~70× SGD's time per epoch). One Exec per step,
// no blocking read.
//
// Noise seeds come from the run seed and the step (splitmix64), so the
// method is stateless and a resumed run draws what an uninterrupted one
// would.
//
//	[[method]]
//	name = "RWP"
//	path = "examples/rwp/rwp"
//	[method.params]
//	sigma = 0.01
package main

import (
	"context"
	"fmt"

	"github.com/optlab/optlab/sdk/hparams"
	"github.com/optlab/optlab/sdk/optim"
	"github.com/optlab/optlab/sdk/serve"
)

// Config holds RWP's hyperparameters.
type Config struct {
	Sigma float64 `hp:"sigma" range:"[0,)" doc:"relative noise scale σ: row r's noise has std σ·‖θ_r‖"`
	Mix   float64 `hp:"mix" range:"[0,1]" doc:"m-RWP's λ: weight of the clean gradient ∇L(θ) (0: plain RWP, one gradient pass)"`
}

func defaults() Config { return Config{Sigma: 0.01} }

// RWP is the optimizer.
type RWP struct {
	optim.Defaults
	h    optim.Host
	cfg  Config
	seed int64
	hs   *optim.Handles
	// per member: the gradient, the noise ε, θ saved before the
	// perturbation, and (mix > 0) the clean gradient
	g, eps, saved, clean []optim.Vec
}

// New returns RWP with its defaults.
func New() optim.Optimizer { return &RWP{cfg: defaults()} }

// Info implements optim.Optimizer.
func (o *RWP) Info() optim.Info {
	return optim.Info{Name: "rwp", Version: "0.1.0", Features: optim.Features{Members: true, BaseStep: true},
		Params: hparams.MustSpecs(defaults())}
}

// Configure implements optim.Optimizer.
func (o *RWP) Configure(ctx context.Context, h optim.Host, cfg optim.Config) error {
	o.h, o.cfg = h, defaults()
	if err := hparams.Apply(&o.cfg, cfg.Params); err != nil {
		return fmt.Errorf("rwp: %w", err)
	}
	members := cfg.MemberCount()
	o.seed, o.hs = cfg.Seed, cfg.Namespace("rwp")
	o.g, o.eps, o.saved = o.hs.PerMember("g", members), o.hs.PerMember("eps", members), o.hs.PerMember("saved", members)
	p := o.hs.Prog()
	for m := range members {
		p.Alloc(o.g[m], m).Alloc(o.eps[m], m).Alloc(o.saved[m], m)
	}
	if o.cfg.Mix > 0 {
		o.clean = o.hs.PerMember("clean", members)
		for m, c := range o.clean {
			p.Alloc(c, m)
		}
	}
	if _, err := h.Exec(ctx, p); err != nil {
		return fmt.Errorf("rwp: configure: %w", err)
	}
	return nil
}

// Step implements optim.Optimizer: one Exec for all members; it reports the
// loss and accuracy at the perturbed weights.
func (o *RWP) Step(ctx context.Context, in optim.StepInput) (optim.StepOutput, error) {
	p := o.hs.Prog()
	evs := make([]optim.Eval, len(o.g))
	for m, g := range o.g {
		th, e := optim.ParamsOf(m), o.eps[m]
		if o.cfg.Mix > 0 {
			p.Grad(o.clean[m], th, optim.Batch{}, optim.BNFreeze)
		}
		std := p.Mul(p.SegNorm(optim.PerRow, th), optim.K(o.cfg.Sigma)) // σ·‖θ_r‖ per row
		p.RandN(e, 1, noiseSeed(o.seed, in.Step, m)).Scale(e, std)
		p.Copy(o.saved[m], th).Axpy(th, optim.K(1), e)
		evs[m] = p.Grad(g, th, optim.Batch{}, optim.BNUpdate)
		p.Copy(th, o.saved[m])
		if o.cfg.Mix > 0 {
			p.LinComb(g, optim.Term{Coef: optim.K(1 - o.cfg.Mix), X: g}, optim.Term{Coef: optim.K(o.cfg.Mix), X: o.clean[m]})
		}
		p.BaseStep(th, g)
	}
	p.ReportMetrics(p.Mean(evs))
	if _, err := o.h.Exec(ctx, p); err != nil {
		return optim.StepOutput{}, fmt.Errorf("rwp: step: %w", err)
	}
	return optim.StepOutput{}, nil
}

// noiseSeed derives a nonzero RandN seed for member m at a step
// (splitmix64 of the run seed, the step and the member).
func noiseSeed(seed, step int64, m int) int64 {
	z := uint64(seed) + 0x9e3779b97f4a7c15*uint64(step+1) + 0xd1b54a32d192ed03*uint64(m+1)
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return int64((z^(z>>31))>>1) | 1
}

func main() { serve.Serve(New) }
