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
// schedule plays the role of α·lrfactor. One Exec per step. The predictive
// is the Gaussian: test_mc samples of w + ξ ⊙ √(1/(N s)). bSAM trains a
// single member (a mixture of Gaussians is not expressible as a
// Predictive). The reported loss and accuracy are the means over the noisy
// samples θ_j.
package bsam

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

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
	DAFactor       float64 `hp:"dafactor" doc:"data-augmentation factor: N = TrainSize·dafactor"`
	Damping        float64 `hp:"damping" doc:"γ added to s"`
	SInit          float64 `hp:"s_init" doc:"initial value of s"`
	M              int     `hp:"m" doc:"batch split (m-sharpness), as --batchsplit"`
	TestMC         int     `hp:"test_mc" doc:"MC samples of the predictive"`
	UpdateOrder    string  `hp:"update_order" doc:"\"code\": w uses the old s (released code); \"paper\": s first"`
	FreezeBNSecond bool    `hp:"freeze_bn_second" doc:"freeze BatchNorm statistics at w+ε (the released code updates them)"`
}

func defaults() Config {
	return Config{Rho: 0.1, Beta1: 0.9, Beta2: 0.999, PriorPrec: 25, DAFactor: 1, Damping: 0.1,
		SInit: 1, M: 8, TestMC: 32, UpdateOrder: "code"}
}

// Vector handles (member 0). S, Momentum and Std are state; the rest scratch.
const (
	S optim.Vec = iota + 1
	Momentum
	Std
	point
	grad
	tmp
	sqrtS
	gSum
	hSum
)

// BSAM is the optimizer. Create it with New.
type BSAM struct {
	cfg      Config
	n, delta float64
	seed     int64
}

// New returns a bSAM optimizer with the default hyperparameters.
func New() optim.Optimizer { return &BSAM{cfg: defaults()} }

// Info implements optim.Optimizer.
func (o *BSAM) Info() optim.Info {
	return optim.Info{Name: "bsam", Version: "0.1.0", ProtocolMinor: optim.ProtocolMinor,
		Capabilities: []string{"state", "predictive"}, Params: hparams.MustSpecs(defaults())}
}

// Configure implements optim.Optimizer: s = s_init, g_m = 0.
func (o *BSAM) Configure(ctx context.Context, h optim.Host, cfg optim.Config) error {
	o.cfg, o.seed = defaults(), cfg.Seed
	if err := hparams.Apply(&o.cfg, cfg.Params); err != nil {
		return fmt.Errorf("bsam: %w", err)
	}
	c := o.cfg
	if c.M < 1 || c.TestMC < 1 || c.SInit <= 0 || c.DAFactor <= 0 || (c.UpdateOrder != "code" && c.UpdateOrder != "paper") {
		return fmt.Errorf("bsam: invalid hyperparameters %+v", c)
	}
	if cfg.Members > 1 {
		return fmt.Errorf("bsam: trains one member, got %d", cfg.Members)
	}
	l, err := h.Layout(ctx)
	if err != nil {
		return fmt.Errorf("bsam: layout: %w", err)
	}
	if l.TrainSize <= 0 {
		return fmt.Errorf("bsam: needs the train size, layout has %d", l.TrainSize)
	}
	o.n = float64(l.TrainSize) * c.DAFactor
	o.delta = c.PriorPrec / o.n
	p := optim.Prog()
	for v := S; v <= hSum; v++ {
		p.Alloc(v)
	}
	if _, err := h.Exec(ctx, o.updateStd(p.Fill(S, c.SInit))); err != nil {
		return fmt.Errorf("bsam: configure: %w", err)
	}
	return nil
}

// updateStd appends Std = √(1/(N s)).
func (o *BSAM) updateStd(p *optim.Program) *optim.Program {
	return p.Unary(Std, S, optim.Reciprocal).Scale(Std, 1/o.n).Unary(Std, Std, optim.Sqrt)
}

// Step implements optim.Optimizer with one Exec.
func (o *BSAM) Step(ctx context.Context, h optim.Host, in optim.StepInput) (optim.StepOutput, error) {
	c, w, bn, inv := o.cfg, optim.Params, optim.BNUpdate, 1/float64(o.cfg.M)
	if c.FreezeBNSecond {
		bn = optim.BNFreeze
	}
	p := optim.Prog().Unary(sqrtS, S, optim.Sqrt).Fill(gSum, 0).Fill(hSum, 0)
	for j := range c.M {
		b := optim.Batch{Part: int32(j), Of: int32(c.M)}
		p.RandN(point, 1, noiseSeed(o.seed, in.Step, j)).Binary(point, point, Std, optim.Mul).Axpy(point, 1, w).
			Grad(grad, point, b, optim.BNUpdate).
			Unary(tmp, grad, optim.Abs).Binary(tmp, tmp, sqrtS, optim.Mul).Axpy(hSum, inv, tmp).
			Binary(tmp, grad, S, optim.Div).LinComb(point, optim.Term{Coef: 1, X: w}, optim.Term{Coef: c.Rho, X: tmp}).
			Grad(grad, point, b, bn).Axpy(gSum, inv, grad)
	}
	p.LinComb(Momentum, optim.Term{Coef: c.Beta1, X: Momentum}, optim.Term{Coef: 1 - c.Beta1, X: gSum},
		optim.Term{Coef: (1 - c.Beta1) * o.delta, X: w})
	descend := func() { p.Binary(tmp, Momentum, S, optim.Div).Axpy(w, -in.LR, tmp) }
	if c.UpdateOrder == "code" {
		descend()
	}
	p.LinComb(S, optim.Term{Coef: c.Beta2, X: S}, optim.Term{Coef: 1 - c.Beta2, X: hSum}).
		AddConst(S, (1-c.Beta2)*(c.Damping+o.delta))
	if c.UpdateOrder == "paper" {
		descend()
	}
	r, err := h.Exec(ctx, o.updateStd(p))
	if err != nil {
		return optim.StepOutput{}, fmt.Errorf("bsam: step: %w", err)
	}
	var loss, acc float64
	for j := range c.M { // scalars per j: loss, acc at θ_j, then at w+ε_j
		loss, acc = loss+inv*r.Scalar(4*j), acc+inv*r.Scalar(4*j+1)
	}
	return optim.StepOutput{Metrics: map[string]float64{"loss": loss, "acc": acc}}, nil
}

// noiseSeed derives a nonzero RandN seed for sub-batch j of a step
// (splitmix64), so the draws depend only on the run seed and the step.
func noiseSeed(seed, step int64, j int) int64 {
	z := uint64(seed) + 0x9e3779b97f4a7c15*uint64(step+1) + 0xd1b54a32d192ed03*uint64(j+1)
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return int64((z^(z>>31))>>1) | 1
}

// Predictive implements optim.Predictor: test_mc samples of N(w, Std²).
func (o *BSAM) Predictive(context.Context) (optim.Predictive, error) {
	return optim.Predictive{Kind: optim.Samples, Mean: optim.Params, Std: Std, N: o.cfg.TestMC}, nil
}

type state struct {
	Version int         `json:"version"`
	Vecs    []optim.Vec `json:"vecs"`
}

func stateVecs() []optim.Vec { return []optim.Vec{S, Momentum, Std} }

// SaveState implements optim.Stateful. The vectors are s, g_m and the
// derived Std (saved too because LoadState has no Host to recompute it).
func (o *BSAM) SaveState(context.Context) ([]byte, []optim.Vec, error) {
	b, err := json.Marshal(state{Version: 1, Vecs: stateVecs()})
	if err != nil {
		return nil, nil, fmt.Errorf("bsam: save state: %w", err)
	}
	return b, stateVecs(), nil
}

// LoadState implements optim.Stateful. The host restores the vectors'
// contents into the handles that Configure allocated.
func (o *BSAM) LoadState(_ context.Context, blob []byte) error {
	var s state
	if err := json.Unmarshal(blob, &s); err != nil {
		return fmt.Errorf("bsam: load state: %w", err)
	}
	if want := stateVecs(); s.Version != 1 || !slices.Equal(s.Vecs, want) {
		return fmt.Errorf("bsam: load state: unsupported state %+v (want version 1, vecs %v)", s, want)
	}
	return nil
}
