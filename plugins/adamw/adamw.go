// Package adamw is AdamW (Loshchilov & Hutter, 2019) as torch.optim.AdamW
// computes it, as an update rule (Rule) that other methods take as their
// update (SAM-AdamW: plugin "sam" with update = "adamw") and as a plugin of
// its own (New: the gradient of every member, then the rule).
//
// Per step t (from 1) and member, with the schedule's rate lr:
//
//	θ ← θ·(1 − lr·wd)                      (decoupled weight decay)
//	m ← β₁m + (1−β₁)g,  v ← β₂v + (1−β₂)g²
//	θ ← θ − (lr/(1−β₁ᵗ)) · m / (√v/√(1−β₂ᵗ) + ε)
//
// torch.optim.AdamW's single-tensor path in that order (it writes the first
// moment as m.lerp_(g, 1−β₁), equal up to rounding; amsgrad and maximize
// are not offered). The moments are vectors of the member's layout, saved
// with the run's checkpoint; the step count is the rule's state blob. The
// rule owns its update: the base optimizer is not used, only the
// schedule's rate (StepInput.LR).
package adamw

import (
	"context"
	"encoding/json"
	"fmt"
	"math"

	"github.com/optlab/optlab/plugins/compose"
	"github.com/optlab/optlab/sdk/hparams"
	"github.com/optlab/optlab/sdk/optim"
)

// Config holds AdamW's hyperparameters, with torch.optim.AdamW's defaults.
type Config struct {
	Beta1       float64 `hp:"beta1" range:"[0,1)" doc:"decay of the first moment β₁"`
	Beta2       float64 `hp:"beta2" range:"[0,1)" doc:"decay of the second moment β₂"`
	Eps         float64 `hp:"eps" range:"(0,)" doc:"ε added to √v̂"`
	WeightDecay float64 `hp:"weight_decay" range:"[0,)" doc:"decoupled weight decay: θ ← θ·(1 − lr·weight_decay) every step"`
}

// DefaultConfig returns torch.optim.AdamW's defaults.
func DefaultConfig() Config { return Config{Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, WeightDecay: 1e-2} }

// Rule is AdamW as an update rule (compose.Rule). Create it with NewRule.
type Rule struct {
	cfg Config
	hs  *optim.Handles
	// per member: the first and second moments and a scratch vector
	m, v, tmp []optim.Vec
	// t is the number of steps begun (the bias corrections' exponent).
	t int64
}

// NewRule returns the rule with the default hyperparameters.
func NewRule() compose.Rule { return &Rule{cfg: DefaultConfig()} }

// Info implements compose.Rule.
func (r *Rule) Info() optim.Info {
	return optim.Info{Name: "adamw", Version: "0.1.0", Features: optim.Features{State: true},
		Params: hparams.MustSpecs(DefaultConfig())}
}

// Configure implements compose.Rule: the moments of every member, zero.
func (r *Rule) Configure(ctx context.Context, h optim.Host, cfg optim.Config) error {
	r.cfg, r.t = DefaultConfig(), 0
	if err := hparams.Apply(&r.cfg, cfg.Params); err != nil {
		return fmt.Errorf("adamw: %w", err)
	}
	n := cfg.MemberCount()
	r.hs = cfg.Namespace("adamw")
	r.m, r.v, r.tmp = r.hs.PerMember("m", n), r.hs.PerMember("v", n), r.hs.PerMember("tmp", n)
	p := r.hs.Prog()
	for k := range n {
		p.Alloc(r.m[k], k).Alloc(r.v[k], k).Alloc(r.tmp[k], k)
	}
	if _, err := h.Exec(ctx, p); err != nil {
		return fmt.Errorf("adamw: configure: %w", err)
	}
	return nil
}

// Begin implements compose.Rule: the step count.
func (r *Rule) Begin(optim.StepInput) error {
	r.t++
	return nil
}

// Apply implements compose.Rule: AdamW's update of member m (see the
// package documentation), all its coefficients immediates.
func (r *Rule) Apply(p *optim.Program, m int, th, g optim.Vec, in optim.StepInput) {
	c, lr := r.cfg, in.LR
	mv, v, tmp := r.m[m], r.v[m], r.tmp[m]
	bc1 := 1 - math.Pow(c.Beta1, float64(r.t))
	bc2 := 1 - math.Pow(c.Beta2, float64(r.t))
	if c.WeightDecay != 0 {
		p.Scale(th, optim.K(1-lr*c.WeightDecay))
	}
	p.LinComb(mv, optim.Term{Coef: optim.K(c.Beta1), X: mv}, optim.Term{Coef: optim.K(1 - c.Beta1), X: g})
	p.Binary(tmp, g, g, optim.Mul).
		LinComb(v, optim.Term{Coef: optim.K(c.Beta2), X: v}, optim.Term{Coef: optim.K(1 - c.Beta2), X: tmp})
	p.Unary(tmp, v, optim.Sqrt).Scale(tmp, optim.K(1/math.Sqrt(bc2))).AddConst(tmp, optim.K(c.Eps)).
		Binary(tmp, mv, tmp, optim.Div).Axpy(th, optim.K(-lr/bc1), tmp)
}

// state is the checkpointed blob.
type state struct {
	Version int   `json:"version"`
	Steps   int64 `json:"steps"`
}

// SaveState implements compose.Rule: the step count, and the moments.
func (r *Rule) SaveState(context.Context) ([]byte, []optim.Vec, error) {
	b, err := json.Marshal(state{Version: 1, Steps: r.t})
	vecs := make([]optim.Vec, 0, 2*len(r.m))
	for k := range r.m {
		vecs = append(vecs, r.m[k], r.v[k])
	}
	return b, vecs, err
}

// LoadState implements compose.Rule, after Configure (the host has
// restored the moments).
func (r *Rule) LoadState(_ context.Context, blob []byte) error {
	var s state
	if err := json.Unmarshal(blob, &s); err != nil {
		return fmt.Errorf("adamw: load state: %w", err)
	}
	if s.Version != 1 || s.Steps < 0 {
		return fmt.Errorf("adamw: load state: version %d, %d steps", s.Version, s.Steps)
	}
	r.t = s.Steps
	return nil
}

// New returns the AdamW plugin with the default hyperparameters: every
// member's gradient, then the rule (compose.Alone).
func New() optim.Optimizer { return compose.NewAlone(&Rule{}) }
