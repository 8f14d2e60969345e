// Package bsam is Bayesian SAM (Möllenhoff & Khan, ICLR 2023) as in the
// released code (team-approx-bayes/bayesian-sam, optim.py). It keeps a
// Gaussian posterior N(w, 1/(N·s)) with mean w (the live parameters),
// precision-like vector s and momentum g_m. Per step, for each of m
// sub-batches j (loader order):
//
//	θ_j = w + ξ_j ⊙ √(1/(N s)),  ξ_j ~ N(0, I)
//	g_j = ∇L_j(θ_j);  ε_j = ρ g_j / s   (not normalized)
//	gε_j = ∇L_j(w + ε_j);  h_j = √s ⊙ |g_j|
//
// then with averages g_ε, h: g_m ← β1 g_m + (1−β1)(g_ε + δ w),
// w ← w − lr · g_m / s, s ← β2 s + (1−β2)(h + γ + δ), where
// N = TrainSize·dafactor, δ = prior_prec/N and γ = damping. update_order
// "code" (default) divides by the old s as the released code does; "paper"
// updates s first (Alg. 1). There is no bias correction.
//
// bSAM does its own update and ignores the host's base optimizer (its
// momentum and weight decay); lr is StepInput.LR, so the experiment's
// schedule plays the role of α·lrfactor. One Exec per step. The reported
// loss and accuracy are the means over the noisy samples θ_j (and members).
//
// Members: with Config.Members = M > 1 every member m is its own bSAM run
// with its own s, g_m and Std (handles BSAM.S(m), Momentum(m) and Std(m))
// and its own noise draws (member 0's are those of a one-member run, so
// member 0 of an ensemble trains bitwise like a single model on the same
// batches), all in the one Exec of the step. The predictive of one member is the Gaussian:
// test_mc samples of w + ξ ⊙ √(1/(N s)). For M > 1 it is the average of the
// members' probabilities at their means w_m (a Members predictive): the
// mixture of the M Gaussians that a deep bSAM ensemble really is cannot be
// expressed as one optim.Predictive.
//
// testdata/trace.golden is the op-level description: the programs that
// Configure and two steps send (m = 2), with the handles by name.
package bsam

import (
	"context"
	"errors"
	"fmt"

	"github.com/optlab/optlab/plugins/compose"
	"github.com/optlab/optlab/sdk/hparams"
	"github.com/optlab/optlab/sdk/optim"
)

// Config holds bSAM's hyperparameters. Defaults are train.py's; the CIFAR-10
// README recipe is rho 0.01, prior_prec 40, dafactor 4 with lr 0.5.
type Config struct {
	Rho            float64 `hp:"rho" doc:"perturbation scale ρ (ε = ρ g / s)"`
	Beta1          float64 `hp:"beta1" doc:"momentum of g_m"`
	Beta2          float64 `hp:"beta2" doc:"averaging of s"`
	PriorPrec      float64 `hp:"prior_prec" doc:"prior precision; δ = prior_prec/N"`
	DAFactor       float64 `hp:"dafactor" range:"(0,)" doc:"data-augmentation factor: N = TrainSize·dafactor"`
	Damping        float64 `hp:"damping" doc:"γ added to s"`
	SInit          float64 `hp:"s_init" range:"(0,)" doc:"initial value of s"`
	M              int     `hp:"m" range:"[1,batch]" doc:"batch split (m-sharpness), as --batchsplit"`
	TestMC         int     `hp:"test_mc" range:"[1,)" doc:"MC samples of the predictive"`
	UpdateOrder    string  `hp:"update_order" enum:"code|paper" doc:"\"code\": w uses the old s (released code); \"paper\": s first"`
	FreezeBNSecond bool    `hp:"freeze_bn_second" doc:"freeze BatchNorm statistics at w+ε (the released code updates them)"`
	LRScale        float64 `hp:"lr_scale" range:"(0,)" doc:"multiplies the scheduled learning rate: bSAM's recipe α = 0.5 on a shared lr of 0.1 is lr_scale = 5"`
}

func defaults() Config {
	return Config{Rho: 0.1, Beta1: 0.9, Beta2: 0.999, PriorPrec: 25, DAFactor: 1, Damping: 0.1,
		SInit: 1, M: 8, TestMC: 32, UpdateOrder: "code", LRScale: 1}
}

// BSAM is the optimizer. Create it with New.
type BSAM struct {
	optim.Defaults
	h        optim.Host
	cfg      Config
	n, delta float64
	seed     int64
	hs       *optim.Handles
	vecs     []memberVecs // per member
}

// memberVecs holds one member's handles: s, momentum and std are state,
// the rest scratch.
type memberVecs struct {
	s, momentum, std optim.Vec
	point            optim.Vec // θ_j, then w + ε_j
	grad             optim.Vec // g_j, then gε_j
	tmp              optim.Vec // h_j, ε_j/ρ, the descent direction
	sqrtS            optim.Vec // √s
	gEps, h          optim.Vec // the means of gε_j and h_j
}

// all lists v's handles, state first.
func (v memberVecs) all() []optim.Vec {
	return []optim.Vec{v.s, v.momentum, v.std, v.point, v.grad, v.tmp, v.sqrtS, v.gEps, v.h}
}

// New returns a bSAM optimizer with the default hyperparameters.
func New() optim.Optimizer { return &BSAM{cfg: defaults()} }

// S returns the handle of member m's s. Like Momentum and Std it is valid
// after Configure, for m < Config.Members.
func (o *BSAM) S(m int) optim.Vec { return o.vecs[m].s }

// Momentum returns the handle of member m's momentum g_m.
func (o *BSAM) Momentum(m int) optim.Vec { return o.vecs[m].momentum }

// Std returns the handle of member m's noise std √(1/(N s)).
func (o *BSAM) Std(m int) optim.Vec { return o.vecs[m].std }

// Info implements optim.Optimizer.
func (o *BSAM) Info() optim.Info {
	return optim.Info{Name: "bsam", Version: "0.1.0", Features: optim.Features{Members: true, Predictive: true, State: true},
		Params: hparams.MustSpecs(defaults())}
}

// Configure implements optim.Optimizer: s = s_init, g_m = 0 for every member.
func (o *BSAM) Configure(ctx context.Context, h optim.Host, cfg optim.Config) error {
	o.h, o.cfg, o.seed = h, defaults(), cfg.Seed
	l, err := h.Layout(ctx)
	if err != nil {
		return fmt.Errorf("bsam: layout: %w", err)
	}
	// m is bounded by the batch it splits ("[1,batch]").
	var b hparams.Bounds
	if l.BatchSize > 0 {
		b = hparams.Bounds{"batch": float64(l.BatchSize)}
	}
	if err := hparams.ApplyIn(&o.cfg, cfg.Params, b); err != nil {
		return fmt.Errorf("bsam: %w", err)
	}
	c := o.cfg
	if l.TrainSize <= 0 {
		return fmt.Errorf("bsam: needs the train size, layout has %d", l.TrainSize)
	}
	o.n = float64(l.TrainSize) * c.DAFactor
	o.delta = c.PriorPrec / o.n
	members := cfg.MemberCount()
	o.hs = cfg.Namespace("bsam")
	o.vecs = make([]memberVecs, members)
	p := o.hs.Prog()
	for m := range o.vecs {
		// Member by member, so that a standalone run's handles (those its
		// checkpoints name) are the ones bsam numbered by hand before.
		vec := func(name string) optim.Vec { return o.hs.New(fmt.Sprintf("%s[%d]", name, m)) }
		v := memberVecs{s: vec("s"), momentum: vec("momentum"), std: vec("std"), point: vec("point"),
			grad: vec("g"), tmp: vec("tmp"), sqrtS: vec("sqrt_s"), gEps: vec("g_eps"), h: vec("h")}
		for _, x := range v.all() {
			p.Alloc(x, m)
		}
		o.updateStd(p.Fill(v.s, optim.K(c.SInit)), v)
		o.vecs[m] = v
	}
	if _, err := h.Exec(ctx, p); err != nil {
		return fmt.Errorf("bsam: configure: %w", err)
	}
	return nil
}

// updateStd appends Std = √(1/(N s)) of the member whose handles are v.
func (o *BSAM) updateStd(p *optim.Program, v memberVecs) *optim.Program {
	return p.Unary(v.std, v.s, optim.Reciprocal).Scale(v.std, optim.K(1/o.n)).Unary(v.std, v.std, optim.Sqrt)
}

// Step implements optim.Optimizer with one Exec for all members and no
// blocking read: it reports the mean loss and accuracy at the noisy
// samples θ_j.
func (o *BSAM) Step(ctx context.Context, in optim.StepInput) (optim.StepOutput, error) {
	p := o.hs.Prog()
	var evs []optim.Eval // loss and accuracy at θ_j, per member and j
	for m, v := range o.vecs {
		evs = append(evs, o.member(p, m, v, in)...)
	}
	// Σ inv·x in order, as the plugin summed before registers (inv·x, not
	// x/n as Program.Mean does: the last bit can differ).
	inv := optim.K(1 / float64(len(evs)))
	var loss, acc optim.Reg
	for i, ev := range evs {
		l, a := p.Mul(inv, ev.Loss), p.Mul(inv, ev.Acc)
		if i > 0 {
			l, a = p.Add(loss, l), p.Add(acc, a)
		}
		loss, acc = l, a
	}
	p.ReportMetrics(loss, acc)
	if _, err := o.h.Exec(ctx, p); err != nil {
		return optim.StepOutput{}, fmt.Errorf("bsam: step: %w", err)
	}
	return optim.StepOutput{}, nil
}

// member appends to p the step of member m, whose handles are v, and
// returns the slots of the loss and accuracy at each noisy sample θ_j.
func (o *BSAM) member(p *optim.Program, m int, v memberVecs, in optim.StepInput) []optim.Eval {
	c, w, bn, inv := o.cfg, optim.ParamsOf(m), optim.BNUpdate, 1/float64(o.cfg.M)
	if c.FreezeBNSecond {
		bn = optim.BNFreeze
	}
	s, mom, pt, g, t, sq, gs, hs := v.s, v.momentum, v.point, v.grad, v.tmp, v.sqrtS, v.gEps, v.h
	p.Unary(sq, s, optim.Sqrt).Fill(gs, optim.K(0)).Fill(hs, optim.K(0))
	evs := make([]optim.Eval, c.M)
	for j := range c.M {
		b := optim.Batch{Part: int32(j), Of: int32(c.M)}
		p.RandN(pt, 1, noiseSeed(o.seed, in.Step, m*c.M+j)).Binary(pt, pt, v.std, optim.Mul).Axpy(pt, optim.K(1), w)
		evs[j] = p.Grad(g, pt, b, optim.BNUpdate)
		p.Unary(t, g, optim.Abs).Binary(t, t, sq, optim.Mul).Axpy(hs, optim.K(inv), t).
			Binary(t, g, s, optim.Div).LinComb(pt, optim.Term{Coef: optim.K(1), X: w}, optim.Term{Coef: optim.K(c.Rho), X: t})
		p.Grad(g, pt, b, bn)
		p.Axpy(gs, optim.K(inv), g)
	}
	p.LinComb(mom, optim.Term{Coef: optim.K(c.Beta1), X: mom}, optim.Term{Coef: optim.K(1 - c.Beta1), X: gs},
		optim.Term{Coef: optim.K((1 - c.Beta1) * o.delta), X: w})
	descend := func() { p.Binary(t, mom, s, optim.Div).Axpy(w, optim.K(-in.LR*c.LRScale), t) }
	if c.UpdateOrder == "code" {
		descend()
	}
	p.LinComb(s, optim.Term{Coef: optim.K(c.Beta2), X: s}, optim.Term{Coef: optim.K(1 - c.Beta2), X: hs}).
		AddConst(s, optim.K((1-c.Beta2)*(c.Damping+o.delta)))
	if c.UpdateOrder == "paper" {
		descend()
	}
	o.updateStd(p, v)
	return evs
}

// noiseSeed derives a nonzero RandN seed for draw j of a step (splitmix64),
// so the draws depend only on the run seed and the step. Member m's
// sub-batch j is draw m·M + j, so member 0 draws as a one-member run does.
func noiseSeed(seed, step int64, j int) int64 {
	z := uint64(seed) + 0x9e3779b97f4a7c15*uint64(step+1) + 0xd1b54a32d192ed03*uint64(j+1)
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return int64((z^(z>>31))>>1) | 1
}

// Predictive implements optim.Optimizer (Features.Predictive): test_mc samples of N(w, Std²) for
// one member; for M > 1 the average of the members' probabilities at their
// means (see the package documentation).
func (o *BSAM) Predictive(context.Context) (optim.Predictive, error) {
	if len(o.vecs) == 0 {
		return optim.Predictive{}, errors.New("bsam: predictive before Configure")
	}
	if len(o.vecs) > 1 {
		vecs := make([]optim.Vec, len(o.vecs))
		for m := range vecs {
			vecs[m] = optim.ParamsOf(m)
		}
		return optim.Predictive{Kind: optim.Members, Vecs: vecs}, nil
	}
	return optim.Predictive{Kind: optim.Samples, Mean: optim.Params, Std: o.vecs[0].std, N: o.cfg.TestMC}, nil
}

// stateVecs lists s, g_m and Std of every member.
func (o *BSAM) stateVecs() []optim.Vec {
	var vecs []optim.Vec
	for _, v := range o.vecs {
		vecs = append(vecs, v.s, v.momentum, v.std)
	}
	return vecs
}

// SaveState implements optim.Optimizer (Features.State). The vectors are every member's s,
// g_m and the derived Std (saved too because LoadState has no Host to
// recompute it).
func (o *BSAM) SaveState(context.Context) ([]byte, []optim.Vec, error) {
	return compose.SaveVecs("bsam", o.stateVecs())
}

// LoadState implements optim.Optimizer (Features.State). The host restores the vectors'
// contents into the handles that Configure allocated.
func (o *BSAM) LoadState(_ context.Context, blob []byte) error {
	return compose.LoadVecs("bsam", blob, o.stateVecs())
}
