// Package shampoo is Shampoo (Gupta, Koren & Singer, 2018) with the
// practical defaults of Meta's Distributed Shampoo on one device
// (github.com/facebookresearch/optimizers, distributed_shampoo): blocks,
// a preconditioner recomputed every k steps from ε-regularized factor
// statistics, a warm start on the grafted method, and grafting to Adam's
// or SGD's step norm. It is an update rule (Rule) that other methods take
// as their update (SAM-Shampoo: plugin "sam" with update = "shampoo") and a
// plugin of its own (New: every member's gradient, then the rule).
//
// Per step t (from 1) and member, with the schedule's rate lr and g the
// minibatch gradient, on every matrix tensor viewed as [d0, rest] and cut
// into blocks G of side at most block (MemberLayout.Tiles):
//
//	L ← β₂·L + (1−β₂)·G·Gᵀ,  R ← β₂·R + (1−β₂)·Gᵀ·G     (β₂ = 1: L ← L + G·Gᵀ)
//	every k steps (t = k, 2k, …): P_L = (L/(1−β₂ᵗ) + ε·I)^(−1/root), P_R likewise
//	m ← β₁·m + (1−β₁)·g,  m̂ = m/(1−β₁ᵗ)                   (the filtered gradient)
//	graft: Adam  v ← β·v + (1−β)·g², d = m̂/(√(v/(1−βᵗ)) + ε_g);  SGD  d = m̂
//	from step start on: u = P_L·m̂·P_R per block, scaled to d's norm per tensor: u ← u·‖d‖/(‖u‖ + 10⁻¹⁶)
//	θ ← θ·(1 − lr·wd) − lr·(u on matrix tensors, d elsewhere and before step start)
//
// The factors and preconditioners are factor vectors of the host (protocol
// minor 8: Alloc with a shape, Gram, MatMul, MatFunc's inverse root in
// float64), saved with the run's checkpoint, so a resumed run continues
// bitwise, also between two preconditioner updates. One Exec per step,
// no read.
//
// Departures from Distributed Shampoo (docs/METHODS.md): tensors of fewer
// than two dims (biases, BatchNorm) take the grafted step d (Distributed
// Shampoo would precondition a 1-D tensor with one d×d factor); a tensor
// of more than two dims is the matrix [d0, d1·d2·…] rather than Distributed
// Shampoo's merged dims, which differ only when d1·d2·… exceeds the block;
// the graft norm is taken per tensor rather than per block (the same when
// a tensor is one block, as every tensor of mlp and cnn is at the default
// block 1024); the inverse root is computed in float64 from the float32
// factors (Distributed Shampoo's default is float32, retried in float64).
package shampoo

import (
	"context"
	"errors"
	"fmt"
	"math"

	"github.com/optlab/optlab/plugins/compose"
	"github.com/optlab/optlab/sdk/hparams"
	"github.com/optlab/optlab/sdk/optim"
)

// Config holds Shampoo's hyperparameters; the defaults are Distributed
// Shampoo's as its README recommends them for replacing Adam(W) (betas 0.9
// and 0.999, ε 1e-12, bias correction, Adam grafting with β 0.999 and ε
// 1e-8, max_preconditioner_dim 1024, precondition_frequency 1, the warm
// start at precondition_frequency).
type Config struct {
	Beta1          float64 `hp:"beta1" range:"[0,1)" doc:"decay of the filtered gradient β₁ (0: the gradient itself)"`
	Beta2          float64 `hp:"beta2" range:"(0,1]" doc:"decay of the factor statistics β₂ (1: sums, as AdaGrad)"`
	Epsilon        float64 `hp:"epsilon" range:"(0,)" doc:"ε added to the factors' diagonal before the inverse root"`
	Root           float64 `hp:"root" range:"(0,)" doc:"the p of the preconditioners (L + εI)^(−1/p); 4 for a matrix (Gupta et al.: 2·order)"`
	Frequency      int     `hp:"precondition_frequency" range:"[1,)" doc:"steps between two computations of the preconditioners"`
	Start          int     `hp:"start_preconditioning_step" range:"[-1,)" doc:"first step (from 1) that uses the preconditioners (warm start on the graft before); -1: precondition_frequency"`
	Block          int     `hp:"block" range:"[1,8192]" doc:"largest side of a factor: matrices are cut into blocks of at most block×block (max_preconditioner_dim)"`
	Grafting       string  `hp:"grafting" enum:"adam|sgd" doc:"the method whose step norm the preconditioned step takes, and which the other tensors and the warm start use"`
	GraftBeta2     float64 `hp:"graft_beta2" range:"[0,1)" doc:"Adam grafting's β₂"`
	GraftEps       float64 `hp:"graft_eps" range:"(0,)" doc:"Adam grafting's ε"`
	WeightDecay    float64 `hp:"weight_decay" range:"[0,)" doc:"decoupled weight decay: θ ← θ·(1 − lr·weight_decay)"`
	BiasCorrection bool    `hp:"bias_correction" doc:"divide the filtered gradient by 1−β₁ᵗ and the factors by 1−β₂ᵗ"`
}

// DefaultConfig returns the defaults (see Config).
func DefaultConfig() Config {
	return Config{Beta1: 0.9, Beta2: 0.999, Epsilon: 1e-12, Root: 4, Frequency: 1, Start: -1, Block: 1024,
		Grafting: "adam", GraftBeta2: 0.999, GraftEps: 1e-8, BiasCorrection: true}
}

// Rule is Shampoo as an update rule (compose.Rule). Create it with NewRule.
type Rule struct {
	cfg  Config
	hs   *optim.Handles
	vecs []memberVecs
	// t is the current step's number from 1.
	t int64
}

// memberVecs are one member's handles: m, v and the factors are its
// state, the masks are made by Configure, the rest is scratch.
type memberVecs struct {
	m, v         optim.Vec // filtered gradient, Adam grafting's second moment
	l, r, pl, pr optim.Vec // factor statistics and preconditioners
	mat, other   optim.Vec // 1 on matrix tensors; 1 elsewhere
	u, d, tmp    optim.Vec // preconditioned and grafted directions, scratch
	matrices     bool      // the member has matrix tensors
}

// NewRule returns the rule with the default hyperparameters.
func NewRule() compose.Rule { return &Rule{cfg: DefaultConfig()} }

// New returns the Shampoo plugin with the default hyperparameters: every
// member's gradient, then the rule (compose.Alone).
func New() optim.Optimizer { return compose.NewAlone(NewRule()) }

// Info implements compose.Rule.
func (r *Rule) Info() optim.Info {
	return optim.Info{Name: "shampoo", Version: "0.1.0", Features: optim.Features{State: true},
		Params: hparams.MustSpecs(DefaultConfig())}
}

// start returns the first step that uses the preconditioners.
func (r *Rule) start() int64 {
	if r.cfg.Start < 0 {
		return int64(r.cfg.Frequency)
	}
	return int64(r.cfg.Start)
}

// Factors returns member m's factor statistics and preconditioners (valid
// after Configure).
func (r *Rule) Factors(m int) (l, r2, pl, pr optim.Vec) {
	v := r.vecs[m]
	return v.l, v.r, v.pl, v.pr
}

// Configure implements compose.Rule: zero state, the factor vectors in
// blocks, and per member the masks of its matrix tensors.
func (r *Rule) Configure(ctx context.Context, h optim.Host, cfg optim.Config) error {
	r.cfg = DefaultConfig()
	if err := hparams.Apply(&r.cfg, cfg.Params); err != nil {
		return fmt.Errorf("shampoo: %w", err)
	}
	if s := r.start(); s < int64(r.cfg.Frequency) {
		return fmt.Errorf("shampoo: start_preconditioning_step = %d comes before the first preconditioner (step precondition_frequency = %d)", s, r.cfg.Frequency)
	}
	l, err := h.Layout(ctx)
	if err != nil {
		return fmt.Errorf("shampoo: layout: %w", err)
	}
	members := cfg.MemberCount()
	if len(l.Members) < members {
		return fmt.Errorf("shampoo: %d members, the layout has %d", members, len(l.Members))
	}
	r.hs = cfg.Namespace("shampoo")
	r.vecs = make([]memberVecs, members)
	p := r.hs.Prog()
	block := int64(r.cfg.Block)
	for m := range r.vecs {
		vec := func(name string) optim.Vec { return r.hs.New(fmt.Sprintf("%s[%d]", name, m)) }
		v := memberVecs{m: vec("m"), v: vec("v"), mat: vec("mat"), other: vec("other"), u: vec("u"), d: vec("d"), tmp: vec("tmp")}
		for _, x := range []optim.Vec{v.m, v.v, v.mat, v.other, v.u, v.d, v.tmp} {
			p.Alloc(x, m)
		}
		p.Fill(v.other, optim.K(1))
		ms := l.Members[m].Matrices()
		for _, mx := range ms {
			n := mx.Rows * mx.Cols
			p.FillRange(v.mat, mx.Offset, n, 1).FillRange(v.other, mx.Offset, n, 0)
		}
		if v.matrices = len(ms) > 0; v.matrices {
			if err := l.Members[m].CheckFactors(optim.LeftFactor, block); err != nil {
				return fmt.Errorf("shampoo: member %d: %w", m, err)
			}
			v.l, v.r, v.pl, v.pr = vec("L"), vec("R"), vec("PL"), vec("PR")
			p.AllocFactor(v.l, m, optim.LeftFactor, block).AllocFactor(v.r, m, optim.RightFactor, block).
				AllocFactor(v.pl, m, optim.LeftFactor, block).AllocFactor(v.pr, m, optim.RightFactor, block)
		}
		r.vecs[m] = v
	}
	if _, err := h.Exec(ctx, p); err != nil {
		return fmt.Errorf("shampoo: configure: %w", err)
	}
	return nil
}

// Begin implements compose.Rule: the step's number.
func (r *Rule) Begin(in optim.StepInput) error {
	r.t = in.Step + 1
	return nil
}

// Apply implements compose.Rule: Shampoo's step of member m (see the
// package documentation); g is kept.
func (r *Rule) Apply(p *optim.Program, m int, th, g optim.Vec, in optim.StepInput) {
	c, v, t := r.cfg, r.vecs[m], r.t
	lr := in.LR
	bc1, bc2, bcg := 1.0, 1.0, 1.0
	if c.BiasCorrection {
		bc1, bc2 = 1-math.Pow(c.Beta1, float64(t)), 1-math.Pow(c.Beta2, float64(t))
	}
	if c.Beta2 == 1 {
		bc2 = 1
	}
	// The filtered gradient m̂ = m/(1−β₁ᵗ), kept undivided in m.
	p.LinComb(v.m, optim.Term{Coef: optim.K(c.Beta1), X: v.m}, optim.Term{Coef: optim.K(1 - c.Beta1), X: g})
	// The grafted direction d.
	if c.Grafting == "adam" {
		bcg = 1 - math.Pow(c.GraftBeta2, float64(t))
		p.Unary(v.tmp, g, optim.Square)
		p.LinComb(v.v, optim.Term{Coef: optim.K(c.GraftBeta2), X: v.v}, optim.Term{Coef: optim.K(1 - c.GraftBeta2), X: v.tmp})
		p.LinComb(v.d, optim.Term{Coef: optim.K(1 / bcg), X: v.v}).Unary(v.d, v.d, optim.Sqrt).AddConst(v.d, optim.K(c.GraftEps)).
			Binary(v.d, v.m, v.d, optim.Div).Scale(v.d, optim.K(1/bc1))
	} else {
		p.LinComb(v.d, optim.Term{Coef: optim.K(1 / bc1), X: v.m})
	}
	dir := v.d
	if v.matrices {
		alpha := 1 - c.Beta2
		if c.Beta2 == 1 {
			alpha = 1
		}
		p.Gram(v.l, g, c.Beta2, alpha).Gram(v.r, g, c.Beta2, alpha)
		if t%int64(c.Frequency) == 0 {
			for _, f := range [][2]optim.Vec{{v.pl, v.l}, {v.pr, v.r}} {
				p.LinComb(f[0], optim.Term{Coef: optim.K(1 / bc2), X: f[1]}).InvRoot(f[0], f[0], c.Root, c.Epsilon)
			}
		}
		if t >= r.start() {
			p.MatMul(v.u, v.pl, v.m, v.pr).Scale(v.u, optim.K(1/bc1))
			su, sd := p.SegNorm(optim.PerTensor, v.u), p.SegNorm(optim.PerTensor, v.d)
			p.Scale(v.u, p.Div(sd, p.Add(su, optim.K(1e-16))))
			p.Binary(v.u, v.u, v.mat, optim.Mul).Binary(v.tmp, v.d, v.other, optim.Mul).Binary(v.u, v.u, v.tmp, optim.Add)
			dir = v.u
		}
	}
	if c.WeightDecay != 0 {
		p.Scale(th, optim.K(1-lr*c.WeightDecay))
	}
	p.Axpy(th, optim.K(-lr), dir)
}

// stateVecs lists every member's filtered gradient, graft moment, factor
// statistics and preconditioners.
func (r *Rule) stateVecs() []optim.Vec {
	var vecs []optim.Vec
	for _, v := range r.vecs {
		vecs = append(vecs, v.m, v.v)
		if v.matrices {
			vecs = append(vecs, v.l, v.r, v.pl, v.pr)
		}
	}
	return vecs
}

// SaveState implements compose.Rule: the vectors are the whole state (the
// step count is the step's).
func (r *Rule) SaveState(context.Context) ([]byte, []optim.Vec, error) {
	if len(r.vecs) == 0 {
		return nil, nil, errors.New("shampoo: save state before Configure")
	}
	return compose.SaveVecs("shampoo", r.stateVecs())
}

// LoadState implements compose.Rule; the host restores the vectors into
// the handles Configure allocated.
func (r *Rule) LoadState(_ context.Context, blob []byte) error {
	return compose.LoadVecs("shampoo", blob, r.stateVecs())
}
