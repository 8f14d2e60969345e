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

// Muon is the optimizer. Create it with New.
type Muon struct {
	optim.Defaults
	h    optim.Host
	cfg  Config
	hs   *optim.Handles
	vecs []memberVecs
	// peak is the schedule's peak learning rate (Config.LRPeak, or the
	// first step's when that is −1; 0 until then).
	peak float64
}

// memberVecs are one member's handles: buf, m1 and m2 are its state, the
// masks are made by Configure, the rest is scratch.
type memberVecs struct {
	buf, m1, m2       optim.Vec // Muon's momentum, AdamW's moments
	mat, adam, scale  optim.Vec // 1 on matrices; 1 elsewhere; max(1, rows/cols)^½ on matrices
	grad, upd, adamUp optim.Vec // g (then the decay factors), Muon's and AdamW's updates
}

// New returns a Muon optimizer with the default hyperparameters.
func New() optim.Optimizer { return &Muon{cfg: defaults()} }

// Momentum returns the handle of member m's momentum buffer; Moments those
// of its AdamW moments. Valid after Configure.
func (o *Muon) Momentum(m int) optim.Vec { return o.vecs[m].buf }

// Moments returns the handles of member m's AdamW first and second moments.
func (o *Muon) Moments(m int) (first, second optim.Vec) { return o.vecs[m].m1, o.vecs[m].m2 }

// Info implements optim.Optimizer.
func (o *Muon) Info() optim.Info {
	return optim.Info{Name: "muon", Version: "0.1.0", Features: optim.Features{Members: true, OwnsUpdate: true, State: true},
		Params: hparams.MustSpecs(defaults())}
}

// Configure implements optim.Optimizer: zero state, and per member the
// masks of its matrix tensors (FillRange from the layout).
func (o *Muon) Configure(ctx context.Context, h optim.Host, cfg optim.Config) error {
	o.h, o.cfg, o.peak = h, defaults(), 0
	if err := hparams.Apply(&o.cfg, cfg.Params); err != nil {
		return fmt.Errorf("muon: %w", err)
	}
	if p := o.cfg.LRPeak; p != -1 && !(p > 0) {
		return fmt.Errorf("muon: lr_peak = %v: want a peak learning rate > 0, or -1 for the first step's", p)
	}
	if o.cfg.LRPeak > 0 {
		o.peak = o.cfg.LRPeak
	}
	l, err := h.Layout(ctx)
	if err != nil {
		return fmt.Errorf("muon: layout: %w", err)
	}
	members := cfg.MemberCount()
	if len(l.Members) < members {
		return fmt.Errorf("muon: %d members, the layout has %d", members, len(l.Members))
	}
	o.hs = cfg.Namespace("muon")
	o.vecs = make([]memberVecs, members)
	p := o.hs.Prog()
	for m := range o.vecs {
		vec := func(name string) optim.Vec { return o.hs.New(fmt.Sprintf("%s[%d]", name, m)) }
		v := memberVecs{buf: vec("buf"), m1: vec("m1"), m2: vec("m2"), mat: vec("mat"), adam: vec("adam"),
			scale: vec("scale"), grad: vec("g"), upd: vec("u"), adamUp: vec("a")}
		for _, x := range []optim.Vec{v.buf, v.m1, v.m2, v.mat, v.adam, v.scale, v.grad, v.upd, v.adamUp} {
			p.Alloc(x, m)
		}
		p.Fill(v.adam, optim.K(1))
		for _, mx := range l.Members[m].Matrices() {
			n := mx.Rows * mx.Cols
			p.FillRange(v.mat, mx.Offset, n, 1).FillRange(v.adam, mx.Offset, n, 0).
				FillRange(v.scale, mx.Offset, n, math.Sqrt(max(1, float64(mx.Rows)/float64(mx.Cols))))
		}
		o.vecs[m] = v
	}
	if _, err := h.Exec(ctx, p); err != nil {
		return fmt.Errorf("muon: configure: %w", err)
	}
	return nil
}

// Step implements optim.Optimizer: one Exec for every member, no read; it
// reports the mean loss and accuracy, and AdamW's rate as "adamw_lr".
func (o *Muon) Step(ctx context.Context, in optim.StepInput) (optim.StepOutput, error) {
	if o.peak == 0 {
		if !(in.LR > 0) {
			return optim.StepOutput{}, fmt.Errorf("muon: lr_peak = -1 takes the first step's learning rate (%v) as the schedule's peak: set lr_peak", in.LR)
		}
		o.peak = in.LR
	}
	c := o.cfg
	lr, alr := in.LR, c.AdamWLR*in.LR/o.peak
	t := float64(in.Step + 1)
	bc1, bc2 := 1-math.Pow(c.AdamWBeta1, t), 1-math.Pow(c.AdamWBeta2, t)
	p := o.hs.Prog()
	evs := make([]optim.Eval, len(o.vecs))
	for m, v := range o.vecs {
		th := optim.ParamsOf(m)
		evs[m] = p.Grad(v.grad, th, optim.Batch{}, optim.BNUpdate)
		// Muon on the matrices.
		mu := c.Momentum
		p.LinComb(v.buf, optim.Term{Coef: optim.K(mu), X: v.buf}, optim.Term{Coef: optim.K(1 - mu), X: v.grad})
		if c.Nesterov {
			p.LinComb(v.upd, optim.Term{Coef: optim.K(1 - mu), X: v.grad}, optim.Term{Coef: optim.K(mu), X: v.buf})
		} else {
			p.Copy(v.upd, v.buf)
		}
		p.NewtonSchulz(v.upd, v.upd, c.NSSteps).Binary(v.upd, v.upd, v.scale, optim.Mul)
		// AdamW elsewhere.
		b1, b2 := c.AdamWBeta1, c.AdamWBeta2
		p.LinComb(v.m1, optim.Term{Coef: optim.K(b1), X: v.m1}, optim.Term{Coef: optim.K(1 - b1), X: v.grad})
		p.Unary(v.adamUp, v.grad, optim.Square)
		p.LinComb(v.m2, optim.Term{Coef: optim.K(b2), X: v.m2}, optim.Term{Coef: optim.K(1 - b2), X: v.adamUp})
		p.LinComb(v.adamUp, optim.Term{Coef: optim.K(1 / bc2), X: v.m2}).Unary(v.adamUp, v.adamUp, optim.Sqrt).
			AddConst(v.adamUp, optim.K(c.AdamWEps)).Binary(v.adamUp, v.m1, v.adamUp, optim.Div).
			Scale(v.adamUp, optim.K(1/bc1)).Binary(v.adamUp, v.adamUp, v.adam, optim.Mul)
		// Decoupled weight decay (the factors in the gradient's vector, no
		// longer needed), then both updates.
		if c.WeightDecay != 0 || c.AdamWWD != 0 {
			p.LinComb(v.grad, optim.Term{Coef: optim.K(1 - lr*c.WeightDecay), X: v.mat},
				optim.Term{Coef: optim.K(1 - alr*c.AdamWWD), X: v.adam})
			p.Binary(th, th, v.grad, optim.Mul)
		}
		p.LinComb(th, optim.Term{Coef: optim.K(1), X: th}, optim.Term{Coef: optim.K(-lr), X: v.upd},
			optim.Term{Coef: optim.K(-alr), X: v.adamUp})
	}
	p.ReportMetrics(p.Mean(evs))
	if _, err := o.h.Exec(ctx, p); err != nil {
		return optim.StepOutput{}, fmt.Errorf("muon: step: %w", err)
	}
	return optim.StepOutput{Metrics: map[string]float64{"adamw_lr": alr}}, nil
}

type state struct {
	Version int         `json:"version"`
	Peak    float64     `json:"peak"`
	Vecs    []optim.Vec `json:"vecs"`
}

// stateVecs lists every member's momentum and AdamW moments.
func (o *Muon) stateVecs() []optim.Vec {
	var vecs []optim.Vec
	for _, v := range o.vecs {
		vecs = append(vecs, v.buf, v.m1, v.m2)
	}
	return vecs
}

// SaveState implements optim.Optimizer (Features.State): the vectors are
// every member's momentum and AdamW moments, the blob holds the peak
// learning rate (AdamW's step count is the step's).
func (o *Muon) SaveState(context.Context) ([]byte, []optim.Vec, error) {
	if len(o.vecs) == 0 {
		return nil, nil, errors.New("muon: save state before Configure")
	}
	b, err := json.Marshal(state{Version: 1, Peak: o.peak, Vecs: o.stateVecs()})
	if err != nil {
		return nil, nil, fmt.Errorf("muon: save state: %w", err)
	}
	return b, o.stateVecs(), nil
}

// LoadState implements optim.Optimizer (Features.State); the host restores
// the vectors into the handles Configure allocated.
func (o *Muon) LoadState(_ context.Context, blob []byte) error {
	var s state
	if err := json.Unmarshal(blob, &s); err != nil {
		return fmt.Errorf("muon: load state: %w", err)
	}
	if want := o.stateVecs(); s.Version != 1 || !slices.Equal(s.Vecs, want) {
		return fmt.Errorf("muon: load state: unsupported state %+v (want version 1, vecs %v)", s, want)
	}
	if o.cfg.LRPeak == -1 {
		o.peak = s.Peak
	}
	return nil
}
