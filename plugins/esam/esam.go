// Package esam is Efficient SAM (Du et al., ICLR 2022, "Efficient
// Sharpness-aware Minimization for Improved Training of Neural Networks")
// as the official code computes it: github.com/dydjw9/Efficient_SAM,
// utils/Esam.py (class ESAM) at commit
// 1e06840c466beaebfafb049096d6a1733cb77a8c, with its train.py's base
// optimizer (torch.optim.SGD with momentum, the host's BaseStep here).
//
// Per step and member, in one Exec with no blocking read:
//
//	g, ℓ_before = ∇L(θ), per-sample losses        (whole batch, BatchNorm updated)
//	Stochastic Weight Perturbation: g ← M⊙g, M = 1 on a random subset of the
//	    tensors (each kept with probability β, drawn per tensor at the end of
//	    the previous step in Esam.py, all tensors at the first step)
//	e = ρ/(‖g‖ + 1e-7)/β · g;  θ ← θ + e
//	ℓ_after = per-sample losses at θ + e          (forward only, BatchNorm updated)
//	Sharpness-sensitive Data Selection: the samples with ℓ_after − ℓ_before
//	    above its ⌊B·γ⌋-th largest value (⌊B·γ⌋ − 1 samples), all when γ ≥ 0.99
//	g' = ∇ of their mean loss at θ + e            (that sub-batch alone, BatchNorm updated)
//	θ ← θ − e;  BaseStep(θ, g')
//
// The per-tensor choice uses the host's seeded stream (RandN with seed 0,
// checkpointed with the run): z ~ N(0, 1) and a tensor is kept when
// |z| < Φ⁻¹((1+β)/2) for the z at its first element, which has probability
// β. The per-sample losses and the sub-batch use sample vectors and
// Grad's OutLosses, Rank and Keep (protocol minor 10): the selection stays
// on the device. Gradient evaluations: B + ⌊B·γ⌋ − 1 per step (the
// forward-only pass is counted apart, ForwardSamples).
package esam

import (
	"context"
	"fmt"
	"math"

	"github.com/optlab/optlab/plugins/compose"
	"github.com/optlab/optlab/sdk/hparams"
	"github.com/optlab/optlab/sdk/optim"
)

// Config holds ESAM's hyperparameters.
type Config struct {
	Rho   float64 `hp:"rho" range:"[0,)" doc:"neighbourhood radius ρ (Esam.py's default 0.05; run.sh 0.05–0.2)"`
	Beta  float64 `hp:"beta" range:"(0,1]" doc:"SWP: probability that a tensor is perturbed; the perturbation is scaled by 1/β (Esam.py's default 1: all; run.sh 0.5–0.6)"`
	Gamma float64 `hp:"gamma" range:"(0,1]" doc:"SDS: fraction of the batch in the second pass, the samples whose loss rises most (Esam.py's default 1: all, as for any γ ≥ 0.99; run.sh 0.5)"`
}

func defaults() Config { return Config{Rho: 0.05, Beta: 1, Gamma: 1} }

// ESAM is the optimizer. Create it with New.
type ESAM struct {
	optim.Defaults
	h    optim.Host
	cfg  Config
	hs   *optim.Handles
	keep int64        // samples of the second pass (0: the whole batch)
	c    float64      // the SWP threshold on |z|
	vecs []memberVecs // per member
	// rules are the update rules its "update" may name (none: the host's
	// base step only); update is the chosen one, configured.
	rules  compose.Rules
	update *compose.Update
}

type memberVecs struct {
	g, g2          optim.Vec // the first and the second gradient
	lb, la         optim.Vec // per-sample losses before and after the perturbation (SDS)
	z, mask, first optim.Vec // SWP: draws, the tensor mask, 1 at each tensor's first element
}

// New returns an ESAM optimizer with the default hyperparameters.
func New() optim.Optimizer { return &ESAM{cfg: defaults()} }

// NewWith returns an ESAM optimizer that takes its update from the rule
// its "update" hyperparameter names among rules, as sam.NewWith: "base",
// the default, is the host's base step; "adamw" makes ESAM-AdamW. Its
// state is then the rule's.
func NewWith(rules compose.Rules) optim.Optimizer { return &ESAM{cfg: defaults(), rules: rules} }

// Info implements optim.Optimizer.
func (o *ESAM) Info() optim.Info {
	ruled := len(o.rules) > 0
	return optim.Info{Name: "esam", Version: "0.1.0",
		Features: optim.Features{Members: true, BaseStep: true, UpdateRule: ruled, State: ruled},
		Params:   append(hparams.MustSpecs(defaults()), o.rules.Params()...)}
}

// SaveState implements optim.Optimizer (Features.State, with an update
// rule): the rule's state; ESAM's own vectors are per-step scratch.
func (o *ESAM) SaveState(ctx context.Context) ([]byte, []optim.Vec, error) {
	return o.update.SaveState(ctx)
}

// LoadState implements optim.Optimizer (Features.State), after Configure.
func (o *ESAM) LoadState(ctx context.Context, blob []byte) error {
	return o.update.LoadState(ctx, blob)
}

func (o *ESAM) swp() bool { return o.cfg.Beta < 1 }

// Configure implements optim.Optimizer.
func (o *ESAM) Configure(ctx context.Context, h optim.Host, cfg optim.Config) error {
	o.h, o.cfg = h, defaults()
	rule, ruleParams, own, err := o.rules.Split("esam", cfg.Params)
	if err != nil {
		return err
	}
	if err := hparams.Apply(&o.cfg, own); err != nil {
		return fmt.Errorf("esam: %w", err)
	}
	l, err := h.Layout(ctx)
	if err != nil {
		return fmt.Errorf("esam: layout: %w", err)
	}
	o.keep = 0
	if o.cfg.Gamma < 0.99 { // Esam.py: prob >= 0.99 takes every sample
		position := int64(float64(l.BatchSize) * o.cfg.Gamma)
		if position < 2 {
			return fmt.Errorf("esam: gamma = %v of a batch of %d selects %d samples (Esam.py keeps those above the ⌊B·γ⌋-th largest rise: ⌊B·γ⌋ − 1); raise gamma or the batch size",
				o.cfg.Gamma, l.BatchSize, position-1)
		}
		o.keep = position - 1
	}
	o.c = math.Sqrt2 * math.Erfinv(o.cfg.Beta)
	members := cfg.MemberCount()
	if len(l.Members) < members {
		return fmt.Errorf("esam: layout has %d members, want %d", len(l.Members), members)
	}
	o.hs = cfg.Namespace("esam")
	o.vecs = make([]memberVecs, members)
	p := o.hs.Prog()
	g, g2 := o.hs.PerMember("g", members), o.hs.PerMember("g2", members)
	for m := range o.vecs {
		v := &o.vecs[m]
		v.g, v.g2 = g[m], g2[m]
		p.Alloc(v.g, m).Alloc(v.g2, m)
	}
	if o.keep > 0 {
		lb, la := o.hs.PerMember("loss_before", members), o.hs.PerMember("loss_rise", members)
		for m := range o.vecs {
			v := &o.vecs[m]
			v.lb, v.la = lb[m], la[m]
			p.AllocSamples(v.lb, m).AllocSamples(v.la, m)
		}
	}
	if o.swp() {
		z, mask, first := o.hs.PerMember("z", members), o.hs.PerMember("mask", members), o.hs.PerMember("first", members)
		for m := range o.vecs {
			v := &o.vecs[m]
			v.z, v.mask, v.first = z[m], mask[m], first[m]
			p.Alloc(v.z, m).Alloc(v.mask, m).Alloc(v.first, m)
			ts := l.Members[m].Tensors
			if len(ts) == 0 {
				ts = []optim.Tensor{{Shape: []int64{l.Members[m].Numel}}}
			}
			for _, t := range ts {
				p.FillRange(v.first, t.Offset, 1, 1)
			}
		}
	}
	if _, err := h.Exec(ctx, p); err != nil {
		return fmt.Errorf("esam: configure: %w", err)
	}
	// The rule allocates after ESAM's own vectors, so that these keep
	// their handles whatever the rule.
	o.update, err = o.rules.NewUpdate(ctx, h, "esam", rule, ruleParams, cfg, o.hs)
	return err
}

// Step implements optim.Optimizer with one Exec and no blocking read.
func (o *ESAM) Step(ctx context.Context, in optim.StepInput) (optim.StepOutput, error) {
	if err := o.update.Begin(in); err != nil {
		return optim.StepOutput{}, fmt.Errorf("esam: %w", err)
	}
	p := o.hs.Prog()
	evs := make([]optim.Eval, len(o.vecs))
	for m, v := range o.vecs {
		th := optim.ParamsOf(m)
		evs[m] = p.GradOp(optim.Grad{Out: v.g, At: th, BN: optim.BNUpdate, OutLosses: v.lb})
		if o.swp() && in.Step > 0 {
			// Esam.py draws after each step which tensors the next one
			// perturbs (all at the first): a tensor's first draw decides.
			p.RandN(v.z, 1, 0).Binary(v.z, v.z, v.first, optim.Mul)
			p.Fill(v.mask, p.SegReduce(optim.SegSumAbs, optim.PerTensor, v.z, 0))
			p.AddConst(v.mask, optim.K(-o.c)).Unary(v.mask, v.mask, optim.Sign)
			p.Scale(v.mask, optim.K(-0.5)).AddConst(v.mask, optim.K(0.5))
			p.Binary(v.g, v.g, v.mask, optim.Mul)
		}
		s := p.Div(optim.K(o.cfg.Rho/o.cfg.Beta), p.Add(p.Norm(v.g), optim.K(1e-7)))
		p.Axpy(th, s, v.g)
		second := optim.Grad{Out: v.g2, At: th, BN: optim.BNUpdate}
		if o.keep > 0 {
			p.GradOp(optim.Grad{At: th, BN: optim.BNUpdate, OutLosses: v.la})
			p.Binary(v.la, v.la, v.lb, optim.Sub)
			second.Rank, second.Keep = v.la, o.keep
		}
		p.GradOp(second)
		p.Axpy(th, p.Mul(s, optim.K(-1)), v.g)
		o.update.Apply(p, m, th, v.g2, in)
	}
	p.ReportMetrics(p.Mean(evs))
	if _, err := o.h.Exec(ctx, p); err != nil {
		return optim.StepOutput{}, fmt.Errorf("esam: step: %w", err)
	}
	return optim.StepOutput{}, nil
}
