// Package soap is SOAP (Vyas et al., 2024, "SOAP: Improving and Stabilizing
// Shampoo using Adam"): Adam run in the eigenbasis of Shampoo's factors,
// as the official code computes it (github.com/nikhilvyas/SOAP, soap.py at
// a1e5535, with its defaults merge_dims = False, precondition_1d = False,
// normalize_grads = False). It is an update rule (Rule) that other methods
// take as their update (SAM-SOAP: plugin "sam" with update = "soap") and a
// plugin of its own (New: every member's gradient, then the rule).
//
// Per call t (from 1) and member, with the schedule's rate lr and g the
// minibatch gradient, on every matrix tensor viewed as [d0, rest] and cut
// into blocks G of side at most max_precond_dim (MemberLayout.Tiles):
//
//	t = 1:  L ← (1−β_s)·G·Gᵀ, R ← (1−β_s)·Gᵀ·G; Q_L, Q_R their eigenvectors by descending
//	        eigenvalue. Nothing moves (soap.py skips the first step, so that the
//	        current gradient never shapes its own projection).
//	t ≥ 2, k = t − 1:
//	        g' = Q_Lᵀ·G·Q_R    m ← β₁·m + (1−β₁)·g'    v ← β₂·v + (1−β₂)·g'²
//	        θ ← θ − lr·√(1−β₂ᵏ)/(1−β₁ᵏ) · Q_L·(m/(√v + ε))·Q_Rᵀ,  then θ ← θ·(1 − lr·wd)
//	        L ← β_s·L + (1−β_s)·G·Gᵀ,  R likewise
//	        every precondition_frequency steps (k = f, 2f, …), on each side:
//	          m back to the original space; the estimates diag(Qᵀ·L·Q) sort Q's
//	          columns descending, v's rows (left) or columns (right) with them
//	          (the SortColumns op); Q ← QR(L·Q)'s Q (one power iteration); m into
//	          the new basis
//
// Tensors of fewer than two dims (biases, BatchNorm) take Adam's step with
// the same step size (g' = g). β_s is shampoo_beta, or β₂ when it is < 0.
//
// The factors and bases are factor vectors of the host (protocol minor 8),
// the sort is protocol minor 12's SortColumns, so the data-dependent
// permutation stays on the device: one Exec per step, no read. Saved with
// the run's checkpoint, so a resumed run continues bitwise, also between
// two refreshes.
//
// Departures from soap.py (docs/METHODS.md): a tensor of more than two
// dims is the matrix [d0, d1·d2·…] (soap.py keeps one factor per dim); a
// side above max_precond_dim is cut into blocks with their own factors
// (soap.py leaves such a side unrotated), and max_precond_dim is at most
// 8192 (optim.MaxBlock; soap.py's default is 10000); m is carried back and
// forth between the bases only when they change (soap.py does it every
// step, which changes nothing but rounding); equal eigenvalue estimates
// keep their order (soap.py's argsort is not stable); the eigenvectors and
// QR are computed in float64 from the float32 factors (soap.py: float32).
package soap

import (
	"context"
	"errors"
	"fmt"
	"math"

	"github.com/optlab/optlab/plugins/compose"
	"github.com/optlab/optlab/sdk/hparams"
	"github.com/optlab/optlab/sdk/optim"
)

// Config holds SOAP's hyperparameters; the defaults are soap.py's (betas
// 0.95 and 0.95, shampoo_beta −1, ε 1e-8, weight decay 0.01, a refresh
// every 10 steps, bias correction), except max_precond_dim (see the
// package documentation).
type Config struct {
	Beta1          float64 `hp:"beta1" range:"[0,1)" doc:"Adam's β₁, in the eigenbasis"`
	Beta2          float64 `hp:"beta2" range:"[0,1)" doc:"Adam's β₂, in the eigenbasis"`
	ShampooBeta    float64 `hp:"shampoo_beta" range:"[-1,1)" doc:"decay of the factors L and R; < 0: beta2"`
	Eps            float64 `hp:"eps" range:"(0,)" doc:"Adam's ε, added to √v"`
	WeightDecay    float64 `hp:"weight_decay" range:"[0,)" doc:"decoupled weight decay after the step: θ ← θ·(1 − lr·weight_decay)"`
	Frequency      int     `hp:"precondition_frequency" range:"[1,)" doc:"steps between two refreshes of the eigenbases (one power iteration and QR each)"`
	MaxPrecondDim  int     `hp:"max_precond_dim" range:"[1,8192]" doc:"largest side of a factor: larger sides are cut into blocks with their own factors"`
	BiasCorrection bool    `hp:"correct_bias" doc:"Adam's bias correction in the step size, lr·√(1−β₂ᵏ)/(1−β₁ᵏ)"`
}

// DefaultConfig returns the defaults (see Config).
func DefaultConfig() Config {
	return Config{Beta1: 0.95, Beta2: 0.95, ShampooBeta: -1, Eps: 1e-8, WeightDecay: 0.01, Frequency: 10,
		MaxPrecondDim: optim.MaxBlock, BiasCorrection: true}
}

// Rule is SOAP as an update rule (compose.Rule). Create it with NewRule.
type Rule struct {
	cfg  Config
	hs   *optim.Handles
	vecs []memberVecs
	// t is the current step's number from 1.
	t int64
}

// memberVecs are one member's handles: m, v, the factors and the bases
// are its state, the rest is scratch.
type memberVecs struct {
	m, v         optim.Vec // Adam's moments in the eigenbasis (g itself on tensors of fewer dims)
	l, r, ql, qr optim.Vec // factors and their eigenbases
	u            optim.Vec // the rotated gradient, then the step
	kl, kr       optim.Vec // the estimates Qᵀ·L·Q, then L·Q
	matrices     bool      // the member has matrix tensors
}

// NewRule returns the rule with the default hyperparameters.
func NewRule() compose.Rule { return &Rule{cfg: DefaultConfig()} }

// New returns the SOAP plugin with the default hyperparameters: every
// member's gradient, then the rule (compose.Alone).
func New() optim.Optimizer { return compose.NewAlone(NewRule()) }

// Info implements compose.Rule.
func (r *Rule) Info() optim.Info {
	return optim.Info{Name: "soap", Version: "0.1.0", Features: optim.Features{State: true},
		Params: hparams.MustSpecs(DefaultConfig())}
}

// Bases returns member m's factors and eigenbases (valid after Configure).
func (r *Rule) Bases(m int) (l, r2, ql, qr optim.Vec) {
	v := r.vecs[m]
	return v.l, v.r, v.ql, v.qr
}

// Configure implements compose.Rule: zero state and, per member with
// matrix tensors, the factor vectors in blocks.
func (r *Rule) Configure(ctx context.Context, h optim.Host, cfg optim.Config) error {
	r.cfg = DefaultConfig()
	if err := hparams.Apply(&r.cfg, cfg.Params); err != nil {
		return fmt.Errorf("soap: %w", err)
	}
	l, err := h.Layout(ctx)
	if err != nil {
		return fmt.Errorf("soap: layout: %w", err)
	}
	members := cfg.MemberCount()
	if len(l.Members) < members {
		return fmt.Errorf("soap: %d members, the layout has %d", members, len(l.Members))
	}
	r.hs = cfg.Namespace("soap")
	r.vecs = make([]memberVecs, members)
	p := r.hs.Prog()
	block := int64(r.cfg.MaxPrecondDim)
	for m := range r.vecs {
		vec := func(name string) optim.Vec { return r.hs.New(fmt.Sprintf("%s[%d]", name, m)) }
		v := memberVecs{m: vec("m"), v: vec("v"), u: vec("u")}
		p.Alloc(v.m, m).Alloc(v.v, m).Alloc(v.u, m)
		if v.matrices = len(l.Members[m].Matrices()) > 0; v.matrices {
			if err := l.Members[m].CheckFactors(optim.LeftFactor, block); err != nil {
				return fmt.Errorf("soap: member %d: %w", m, err)
			}
			v.l, v.r, v.ql, v.qr, v.kl, v.kr = vec("L"), vec("R"), vec("QL"), vec("QR"), vec("KL"), vec("KR")
			for _, f := range []optim.Vec{v.l, v.ql, v.kl} {
				p.AllocFactor(f, m, optim.LeftFactor, block)
			}
			for _, f := range []optim.Vec{v.r, v.qr, v.kr} {
				p.AllocFactor(f, m, optim.RightFactor, block)
			}
		}
		r.vecs[m] = v
	}
	if _, err := h.Exec(ctx, p); err != nil {
		return fmt.Errorf("soap: configure: %w", err)
	}
	return nil
}

// Begin implements compose.Rule: the step's number.
func (r *Rule) Begin(in optim.StepInput) error {
	r.t = in.Step + 1
	return nil
}

// shampooBeta returns the factors' decay β_s.
func (r *Rule) shampooBeta() float64 {
	if r.cfg.ShampooBeta < 0 {
		return r.cfg.Beta2
	}
	return r.cfg.ShampooBeta
}

// Apply implements compose.Rule: SOAP's step of member m (see the package
// documentation); g is kept.
func (r *Rule) Apply(p *optim.Program, m int, th, g optim.Vec, in optim.StepInput) {
	c, v, t := r.cfg, r.vecs[m], r.t
	sb := r.shampooBeta()
	if t == 1 {
		if v.matrices {
			p.Gram(v.l, g, sb, 1-sb).Gram(v.r, g, sb, 1-sb).
				MatFunc(v.ql, v.l, optim.EigVecs, 0, 0).MatFunc(v.qr, v.r, optim.EigVecs, 0, 0)
		}
		return
	}
	k := t - 1
	// g' = Q_Lᵀ·g·Q_R (g itself outside the matrix tensors).
	if v.matrices {
		p.MatMulOp(optim.MatMul{Dst: v.u, Src: g, Left: v.ql, Right: v.qr, TransLeft: true})
	} else {
		p.Copy(v.u, g)
	}
	p.LinComb(v.m, optim.Term{Coef: optim.K(c.Beta1), X: v.m}, optim.Term{Coef: optim.K(1 - c.Beta1), X: v.u})
	p.Unary(v.u, v.u, optim.Square)
	p.LinComb(v.v, optim.Term{Coef: optim.K(c.Beta2), X: v.v}, optim.Term{Coef: optim.K(1 - c.Beta2), X: v.u})
	p.Unary(v.u, v.v, optim.Sqrt).AddConst(v.u, optim.K(c.Eps)).Binary(v.u, v.m, v.u, optim.Div)
	if v.matrices {
		p.MatMulOp(optim.MatMul{Dst: v.u, Src: v.u, Left: v.ql, Right: v.qr, TransRight: true})
	}
	step := in.LR
	if c.BiasCorrection {
		step = in.LR * math.Sqrt(1-math.Pow(c.Beta2, float64(k))) / (1 - math.Pow(c.Beta1, float64(k)))
	}
	p.Axpy(th, optim.K(-step), v.u)
	if c.WeightDecay > 0 {
		p.Scale(th, optim.K(1-in.LR*c.WeightDecay))
	}
	if !v.matrices {
		return
	}
	p.Gram(v.l, g, sb, 1-sb).Gram(v.r, g, sb, 1-sb)
	if k%int64(c.Frequency) != 0 {
		return
	}
	// The refresh: m to the original space, each basis sorted by its
	// estimates (v follows) and through one power iteration, m back.
	p.MatMulOp(optim.MatMul{Dst: v.m, Src: v.m, Left: v.ql, Right: v.qr, TransRight: true})
	for _, s := range []struct{ f, q, k optim.Vec }{{v.l, v.ql, v.kl}, {v.r, v.qr, v.kr}} {
		p.MatMulOp(optim.MatMul{Dst: s.k, Src: s.f, Left: s.q, Right: s.q, TransLeft: true}).
			SortColumns(s.q, s.k, v.v).
			MatMul(s.k, s.f, s.q, 0).
			MatFunc(s.q, s.k, optim.QR, 0, 0)
	}
	p.MatMulOp(optim.MatMul{Dst: v.m, Src: v.m, Left: v.ql, Right: v.qr, TransLeft: true})
}

// stateVecs lists every member's moments, factors and bases.
func (r *Rule) stateVecs() []optim.Vec {
	var vecs []optim.Vec
	for _, v := range r.vecs {
		vecs = append(vecs, v.m, v.v)
		if v.matrices {
			vecs = append(vecs, v.l, v.r, v.ql, v.qr)
		}
	}
	return vecs
}

// SaveState implements compose.Rule: the vectors are the whole state (the
// step count is the step's).
func (r *Rule) SaveState(context.Context) ([]byte, []optim.Vec, error) {
	if len(r.vecs) == 0 {
		return nil, nil, errors.New("soap: save state before Configure")
	}
	return compose.SaveVecs("soap", r.stateVecs())
}

// LoadState implements compose.Rule; the host restores the vectors into
// the handles Configure allocated.
func (r *Rule) LoadState(_ context.Context, blob []byte) error {
	return compose.LoadVecs("soap", blob, r.stateVecs())
}
