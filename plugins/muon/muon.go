// Package muon is Muon (Keller Jordan, github.com/KellerJordan/Muon,
// muon.py's SingleDeviceMuonWithAuxAdam) with AdamW for the parameters
// Muon is not for. Per step and member, with g the minibatch gradient:
//
// On the matrix tensors (two or more dims, viewed as [d0, rest]; a conv
// filter [out, in, kh, kw] as [out, in·kh·kw]), Muon:
//
//	buf ← μ·buf + (1−μ)·g                    (muon.py: momentum.lerp_(grad, 1 − β))
//	u = (1−μ)·g + μ·buf  (Nesterov), else buf (grad.lerp_(momentum, β))
//	u ← NewtonSchulz(u)·max(1, rows/cols)^½  (zeropower_via_newtonschulz5, ns_steps steps)
//	θ ← θ·(1 − lr·wd) − lr·u
//
// with lr = StepInput.LR (the experiment's learning rate and schedule). On
// the other tensors (biases, BatchNorm weights), AdamW as muon.py's
// adam_update, at the rate adamw_lr·StepInput.LR/lr_peak (it follows the
// schedule in proportion; lr_peak = −1 takes the first step's learning
// rate as the schedule's peak, kept in the saved state):
//
//	m ← β1·m + (1−β1)·g;  v ← β2·v + (1−β2)·g²;  t = step + 1
//	θ ← θ·(1 − lr_a·wd_a) − lr_a·(m/(1−β1ᵗ)) / (√(v/(1−β2ᵗ)) + ε)
//
// The Newton–Schulz iteration is the host's NewtonSchulz op (protocol
// minor 7), in float32 on the engine where Keller Jordan uses bfloat16.
// Departures from muon.py: the scale uses the rows and columns of the 2-D
// view (muon.py's muon_update takes grad.size(−2)/grad.size(−1), which for
// a 4-D conv filter is kh/kw); Muon and AdamW are chosen by the tensor's
// dims alone (muon.py leaves the choice of groups to the user: its
// examples give the embedding and the output layer to AdamW too). The
// momentum is muon.py's lerp form; the form buf ← μ·buf + g, u = g + μ·buf
// of its earlier versions is this one divided by 1 − μ, which the
// normalisation of the iteration removes (up to its ε).
//
// Every member is its own run, all in one Exec per step with no read.
// testdata/trace.golden is the op-level description.
package muon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/optlab/optlab/plugins/compose"
	"github.com/optlab/optlab/sdk/hparams"
	"github.com/optlab/optlab/sdk/optim"
)

// Config holds Muon's hyperparameters; the defaults are muon.py's
// (SingleDeviceMuonWithAuxAdam: Muon's momentum 0.95, AdamW's lr 3e-4,
// betas 0.9, 0.95 and ε 1e-10).
type Config struct {
	Momentum    float64 `hp:"momentum" range:"[0,1)" doc:"Muon's momentum μ"`
	Nesterov    bool    `hp:"nesterov" doc:"Nesterov momentum: orthogonalise (1−μ)·g + μ·buf instead of buf"`
	NSSteps     int     `hp:"ns_steps" range:"[1,100]" doc:"Newton–Schulz iterations"`
	WeightDecay float64 `hp:"weight_decay" range:"[0,)" doc:"Muon's decoupled weight decay: θ ← θ·(1 − lr·wd)"`
	AdamWLR     float64 `hp:"adamw_lr" range:"[0,)" doc:"AdamW's learning rate (non-matrix tensors) at the schedule's peak"`
	LRPeak      float64 `hp:"lr_peak" doc:"the schedule's peak learning rate, which adamw_lr is relative to; -1: the first step's"`
	AdamWBeta1  float64 `hp:"adamw_beta1" range:"[0,1)" doc:"AdamW's β1"`
	AdamWBeta2  float64 `hp:"adamw_beta2" range:"[0,1)" doc:"AdamW's β2"`
	AdamWEps    float64 `hp:"adamw_eps" range:"(0,)" doc:"AdamW's ε"`
	AdamWWD     float64 `hp:"adamw_weight_decay" range:"[0,)" doc:"AdamW's decoupled weight decay"`
}

func defaults() Config {
	return Config{Momentum: 0.95, Nesterov: true, NSSteps: optim.NS5Steps, AdamWLR: 3e-4, LRPeak: -1,
		AdamWBeta1: 0.9, AdamWBeta2: 0.95, AdamWEps: 1e-10}
}

// Rule is Muon as an update rule (compose.Rule): SAM-Muon is plugin "sam"
// with update = "muon". Create it with NewRule.
type Rule struct {
	cfg  Config
	hs   *optim.Handles
	vecs []memberVecs
	// peak is the schedule's peak learning rate (Config.LRPeak, or the
	// first step's when that is −1; 0 until then); t is the current
	// step's number from 1 (AdamW's bias corrections).
	peak float64
	t    float64
}

// memberVecs are one member's handles: buf, m1 and m2 are its state, the
// masks are made by Configure, the rest is scratch.
type memberVecs struct {
	buf, m1, m2      optim.Vec // Muon's momentum, AdamW's moments
	mat, adam, scale optim.Vec // 1 on matrices; 1 elsewhere; max(1, rows/cols)^½ on matrices
	upd, adamUp      optim.Vec // Muon's and AdamW's updates
}

// NewRule returns the rule with the default hyperparameters.
func NewRule() compose.Rule { return &Rule{cfg: defaults()} }

// Momentum returns the handle of member m's momentum buffer. Valid after
// Configure.
func (r *Rule) Momentum(m int) optim.Vec { return r.vecs[m].buf }

// Moments returns the handles of member m's AdamW first and second moments.
func (r *Rule) Moments(m int) (first, second optim.Vec) { return r.vecs[m].m1, r.vecs[m].m2 }

// Info implements compose.Rule.
func (r *Rule) Info() optim.Info {
	return optim.Info{Name: "muon", Version: "0.1.0", Features: optim.Features{State: true},
		Params: hparams.MustSpecs(defaults())}
}

// Configure implements compose.Rule: zero state, and per member the masks
// of its matrix tensors (FillRange from the layout).
func (r *Rule) Configure(ctx context.Context, h optim.Host, cfg optim.Config) error {
	r.cfg, r.peak = defaults(), 0
	if err := hparams.Apply(&r.cfg, cfg.Params); err != nil {
		return fmt.Errorf("muon: %w", err)
	}
	if p := r.cfg.LRPeak; p != -1 && !(p > 0) {
		return fmt.Errorf("muon: lr_peak = %v: want a peak learning rate > 0, or -1 for the first step's", p)
	}
	if r.cfg.LRPeak > 0 {
		r.peak = r.cfg.LRPeak
	}
	l, err := h.Layout(ctx)
	if err != nil {
		return fmt.Errorf("muon: layout: %w", err)
	}
	members := cfg.MemberCount()
	if len(l.Members) < members {
		return fmt.Errorf("muon: %d members, the layout has %d", members, len(l.Members))
	}
	r.hs = cfg.Namespace("muon")
	r.vecs = make([]memberVecs, members)
	p := r.hs.Prog()
	for m := range r.vecs {
		vec := func(name string) optim.Vec { return r.hs.New(fmt.Sprintf("%s[%d]", name, m)) }
		v := memberVecs{buf: vec("buf"), m1: vec("m1"), m2: vec("m2"), mat: vec("mat"), adam: vec("adam"),
			scale: vec("scale"), upd: vec("u"), adamUp: vec("a")}
		for _, x := range []optim.Vec{v.buf, v.m1, v.m2, v.mat, v.adam, v.scale, v.upd, v.adamUp} {
			p.Alloc(x, m)
		}
		p.Fill(v.adam, optim.K(1))
		for _, mx := range l.Members[m].Matrices() {
			n := mx.Rows * mx.Cols
			p.FillRange(v.mat, mx.Offset, n, 1).FillRange(v.adam, mx.Offset, n, 0).
				FillRange(v.scale, mx.Offset, n, math.Sqrt(max(1, float64(mx.Rows)/float64(mx.Cols))))
		}
		r.vecs[m] = v
	}
	if _, err := h.Exec(ctx, p); err != nil {
		return fmt.Errorf("muon: configure: %w", err)
	}
	return nil
}

// Begin implements compose.Rule: the step's number and, with lr_peak =
// −1, the first step's rate as the schedule's peak.
func (r *Rule) Begin(in optim.StepInput) error {
	if r.peak == 0 {
		if !(in.LR > 0) {
			return fmt.Errorf("muon: lr_peak = -1 takes the first step's learning rate (%v) as the schedule's peak: set lr_peak", in.LR)
		}
		r.peak = in.LR
	}
	r.t = float64(in.Step + 1)
	return nil
}

// adamLR returns AdamW's rate at the step in: adamw_lr in proportion to
// the schedule.
func (r *Rule) adamLR(in optim.StepInput) float64 { return r.cfg.AdamWLR * in.LR / r.peak }

// Apply implements compose.Rule: Muon on member m's matrix tensors, AdamW
// on the others (see the package documentation); g is overwritten.
func (r *Rule) Apply(p *optim.Program, m int, th, g optim.Vec, in optim.StepInput) {
	c, v := r.cfg, r.vecs[m]
	lr, alr := in.LR, r.adamLR(in)
	bc1, bc2 := 1-math.Pow(c.AdamWBeta1, r.t), 1-math.Pow(c.AdamWBeta2, r.t)
	// Muon on the matrices.
	mu := c.Momentum
	p.LinComb(v.buf, optim.Term{Coef: optim.K(mu), X: v.buf}, optim.Term{Coef: optim.K(1 - mu), X: g})
	if c.Nesterov {
		p.LinComb(v.upd, optim.Term{Coef: optim.K(1 - mu), X: g}, optim.Term{Coef: optim.K(mu), X: v.buf})
	} else {
		p.Copy(v.upd, v.buf)
	}
	p.NewtonSchulz(v.upd, v.upd, c.NSSteps).Binary(v.upd, v.upd, v.scale, optim.Mul)
	// AdamW elsewhere.
	b1, b2 := c.AdamWBeta1, c.AdamWBeta2
	p.LinComb(v.m1, optim.Term{Coef: optim.K(b1), X: v.m1}, optim.Term{Coef: optim.K(1 - b1), X: g})
	p.Unary(v.adamUp, g, optim.Square)
	p.LinComb(v.m2, optim.Term{Coef: optim.K(b2), X: v.m2}, optim.Term{Coef: optim.K(1 - b2), X: v.adamUp})
	p.LinComb(v.adamUp, optim.Term{Coef: optim.K(1 / bc2), X: v.m2}).Unary(v.adamUp, v.adamUp, optim.Sqrt).
		AddConst(v.adamUp, optim.K(c.AdamWEps)).Binary(v.adamUp, v.m1, v.adamUp, optim.Div).
		Scale(v.adamUp, optim.K(1/bc1)).Binary(v.adamUp, v.adamUp, v.adam, optim.Mul)
	// Decoupled weight decay (the factors in g's vector, no longer
	// needed), then both updates.
	if c.WeightDecay != 0 || c.AdamWWD != 0 {
		p.LinComb(g, optim.Term{Coef: optim.K(1 - lr*c.WeightDecay), X: v.mat},
			optim.Term{Coef: optim.K(1 - alr*c.AdamWWD), X: v.adam})
		p.Binary(th, th, g, optim.Mul)
	}
	p.LinComb(th, optim.Term{Coef: optim.K(1), X: th}, optim.Term{Coef: optim.K(-lr), X: v.upd},
		optim.Term{Coef: optim.K(-alr), X: v.adamUp})
}

type state struct {
	Version int         `json:"version"`
	Peak    float64     `json:"peak"`
	Vecs    []optim.Vec `json:"vecs"`
}

// stateVecs lists every member's momentum and AdamW moments.
func (r *Rule) stateVecs() []optim.Vec {
	var vecs []optim.Vec
	for _, v := range r.vecs {
		vecs = append(vecs, v.buf, v.m1, v.m2)
	}
	return vecs
}

// SaveState implements compose.Rule: the vectors are every member's
// momentum and AdamW moments, the blob holds the peak learning rate
// (AdamW's step count is the step's).
func (r *Rule) SaveState(context.Context) ([]byte, []optim.Vec, error) {
	if len(r.vecs) == 0 {
		return nil, nil, errors.New("muon: save state before Configure")
	}
	b, err := json.Marshal(state{Version: 1, Peak: r.peak, Vecs: r.stateVecs()})
	if err != nil {
		return nil, nil, fmt.Errorf("muon: save state: %w", err)
	}
	return b, r.stateVecs(), nil
}

// LoadState implements compose.Rule; the host restores the vectors into
// the handles Configure allocated.
func (r *Rule) LoadState(_ context.Context, blob []byte) error {
	var s state
	if err := json.Unmarshal(blob, &s); err != nil {
		return fmt.Errorf("muon: load state: %w", err)
	}
	if want := r.stateVecs(); s.Version != 1 || !slices.Equal(s.Vecs, want) {
		return fmt.Errorf("muon: load state: unsupported state %+v (want version 1, vecs %v)", s, want)
	}
	if r.cfg.LRPeak == -1 {
		r.peak = s.Peak
	}
	return nil
}

// Metrics implements compose.Metered: AdamW's rate at the step, as
// "adamw_lr".
func (r *Rule) Metrics(in optim.StepInput) map[string]float64 {
	return map[string]float64{"adamw_lr": r.adamLR(in)}
}

// New returns the Muon plugin with the default hyperparameters: every
// member's gradient, then the rule (compose.Alone); it reports AdamW's
// rate as "adamw_lr".
func New() optim.Optimizer { return compose.NewAlone(&Rule{cfg: defaults()}) }
