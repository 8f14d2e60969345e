// Package sam is Sharpness-Aware Minimization (Foret et al.) as in the
// de-facto PyTorch reference davda54/sam, with ASAM (Kwon et al.) and
// m-sharpness as options.
//
// Per step and member: g = ∇L(θ) (BatchNorm update), n = ‖g‖ (global),
// e = ρ·g/(n+1e-12), g' = ∇L(θ+e) (BatchNorm frozen unless
// freeze_bn_second = false), θ restored by copying a saved copy (bitwise
// exact, as davda54; not by subtracting e), then the host's BaseStep with g'.
// The step is one Exec with no blocking read: ρ/(‖g‖+1e-12) is a register
// on the device (protocol minor 5).
//
// With adaptive = true (ASAM) T = |θ|+η, n = ‖T⊙g‖ and e = ρ·T²⊙g/(n+1e-12).
// With adaptive_scope = "all" (the default) T applies to every parameter,
// biases and BatchNorm included, as in davda54. With "weights" it applies,
// as in official ASAM (SamsungLabs/ASAM), only to tensors whose name
// contains "weight" (conv and linear weights and BatchNorm γ), and the
// others get T = 1, plain SAM (davda54 issue #81): T = M⊙(|θ|+η) + (1−M)
// with a 0/1 mask M built once in Configure from Layout with FillRange ops
// (protocol minor 4), and its complement: two more vectors per member. eta
// defaults to official ASAM's 0.01; set eta = 0 for davda54's T = |θ|.
//
// With m > 1 the batch is cut into m parts in loader order and part j is
// perturbed with its own gradient (m-sharpness); the m perturbed gradients
// are averaged for the base step.
//
// The golden op traces in testdata are the op-level description, with the
// handles by name: trace.golden (SAM, two members), trace_asam_weights.golden
// (ASAM with adaptive_scope = "weights") and trace_m2.golden (m = 2).
package sam

import (
	"context"
	"fmt"
	"strings"

	"github.com/optlab/optlab/plugins/compose"
	"github.com/optlab/optlab/sdk/hparams"
	"github.com/optlab/optlab/sdk/optim"
)

// Config holds SAM's hyperparameters.
type Config struct {
	Rho            float64 `hp:"rho" range:"[0,)" doc:"neighbourhood radius ρ (davda54 example: 0.05 for SAM, 2.0 for ASAM)"`
	Adaptive       bool    `hp:"adaptive" doc:"ASAM: scale the ascent elementwise by T = |θ|+η on all parameters"`
	Eta            float64 `hp:"eta" range:"[0,)" doc:"ASAM offset η (official ASAM 0.01, davda54 0)"`
	AdaptiveScope  string  `hp:"adaptive_scope" enum:"all|weights" doc:"ASAM: \"all\" parameters (davda54) or \"weights\": tensors whose name contains \"weight\", as official ASAM"`
	FreezeBNSecond bool    `hp:"freeze_bn_second" doc:"freeze BatchNorm running statistics in the perturbed pass"`
	M              int     `hp:"m" range:"[1,batch]" doc:"m-sharpness: sub-batches perturbed separately (1 = plain SAM)"`
}

func defaults() Config {
	return Config{Rho: 0.05, Eta: 0.01, AdaptiveScope: "all", FreezeBNSecond: true, M: 1}
}

// SAM is the optimizer. Create it with New. Its vectors are per-step
// scratch and the base optimizer's state belongs to the host, so it keeps
// every optional method's default.
type SAM struct {
	optim.Defaults
	// rules are the update rules its "update" may name (none: the host's
	// base step only, and no "update" hyperparameter); update is the
	// chosen one, configured.
	rules  compose.Rules
	update *compose.Update
	h      optim.Host
	cfg    Config
	hs     *optim.Handles
	vecs   []memberVecs // per member
}

// memberVecs holds one member's handles.
type memberVecs struct {
	g       []optim.Vec // g[j]: the gradient of batch part j < m
	saved   optim.Vec   // θ before the perturbation, restored bitwise
	t       optim.Vec   // ASAM's T (adaptive only)
	scratch optim.Vec   // T⊙g, then T²⊙g (ASAM); the mean gradient (m > 1); else none
	mask    optim.Vec   // adaptive_scope "weights": 1 on weight tensors, else 0
	rest    optim.Vec   // 1 − mask
}

// New returns a SAM optimizer with the default hyperparameters.
func New() optim.Optimizer { return &SAM{cfg: defaults()} }

// NewWith returns a SAM optimizer that takes its update from the rule its
// "update" hyperparameter names among rules (plugins/builtin gives every
// built-in rule): "base", the default, is the host's base step, as New's;
// "adamw" makes SAM-AdamW. Its state is then the rule's.
func NewWith(rules compose.Rules) optim.Optimizer { return &SAM{cfg: defaults(), rules: rules} }

// Info implements optim.Optimizer.
func (o *SAM) Info() optim.Info {
	ruled := len(o.rules) > 0
	return optim.Info{Name: "sam", Version: "0.1.0",
		Features: optim.Features{Members: true, BaseStep: true, UpdateRule: ruled, State: ruled},
		Params:   append(hparams.MustSpecs(defaults()), o.rules.Params()...)}
}

// weightsOnly tells whether ASAM's T applies to weight tensors only.
func (o *SAM) weightsOnly() bool { return o.cfg.Adaptive && o.cfg.AdaptiveScope == "weights" }

func (o *SAM) batch(j int) optim.Batch {
	if o.cfg.M == 1 {
		return optim.Batch{}
	}
	return optim.Batch{Part: int32(j), Of: int32(o.cfg.M)}
}

// batchBound is the "batch" range bound of a layout (none when the host
// does not say its batch size).
func batchBound(l optim.Layout) hparams.Bounds {
	if l.BatchSize <= 0 {
		return nil
	}
	return hparams.Bounds{"batch": float64(l.BatchSize)}
}

// Configure implements optim.Optimizer.
func (o *SAM) Configure(ctx context.Context, h optim.Host, cfg optim.Config) error {
	o.h, o.cfg = h, defaults()
	// m is bounded by the batch it splits: check it before allocating a
	// vector per sub-batch (m = 2⁶³−1 would allocate without end).
	l, err := h.Layout(ctx)
	if err != nil {
		return fmt.Errorf("sam: layout: %w", err)
	}
	rule, ruleParams, own, err := o.rules.Split("sam", cfg.Params)
	if err != nil {
		return err
	}
	if err := hparams.ApplyIn(&o.cfg, own, batchBound(l)); err != nil {
		return fmt.Errorf("sam: %w", err)
	}
	if o.cfg.AdaptiveScope != "all" && !o.cfg.Adaptive {
		return fmt.Errorf("sam: adaptive_scope %q applies to ASAM only: set adaptive = true", o.cfg.AdaptiveScope)
	}
	members := cfg.MemberCount()
	o.hs = cfg.Namespace("sam")
	o.vecs = make([]memberVecs, members)
	for j := range o.cfg.M {
		name := "g"
		if o.cfg.M > 1 {
			name = fmt.Sprintf("g%d", j)
		}
		for m, g := range o.hs.PerMember(name, members) {
			o.vecs[m].g = append(o.vecs[m].g, g)
		}
	}
	saved := o.hs.PerMember("saved", members)
	var t, scratch []optim.Vec // only the modes that use them
	if o.cfg.Adaptive {
		t = o.hs.PerMember("t", members)
	}
	if o.cfg.Adaptive || o.cfg.M > 1 {
		scratch = o.hs.PerMember("scratch", members)
	}
	p := o.hs.Prog()
	for m := range o.vecs {
		v := &o.vecs[m]
		v.saved = saved[m]
		for _, g := range v.g {
			p.Alloc(g, m)
		}
		p.Alloc(v.saved, m)
		if t != nil {
			v.t = t[m]
			p.Alloc(v.t, m)
		}
		if scratch != nil {
			v.scratch = scratch[m]
			p.Alloc(v.scratch, m)
		}
	}
	if o.weightsOnly() {
		if err := o.buildMasks(l, p); err != nil {
			return err
		}
	}
	if _, err := h.Exec(ctx, p); err != nil {
		return fmt.Errorf("sam: configure: %w", err)
	}
	// The rule allocates after SAM's own vectors, so that these keep
	// their handles whatever the rule.
	o.update, err = o.rules.NewUpdate(ctx, h, "sam", rule, ruleParams, cfg, o.hs)
	return err
}

// SaveState implements optim.Optimizer (Features.State, with an update
// rule): the rule's state; SAM's own vectors are per-step scratch.
func (o *SAM) SaveState(ctx context.Context) ([]byte, []optim.Vec, error) {
	return o.update.SaveState(ctx)
}

// LoadState implements optim.Optimizer (Features.State), after Configure.
func (o *SAM) LoadState(ctx context.Context, blob []byte) error { return o.update.LoadState(ctx, blob) }

// buildMasks appends to p the ops that make every member's weight mask (1
// on the tensors whose name contains "weight", 0 elsewhere) and its
// complement, so that a step forms T with two elementwise ops.
func (o *SAM) buildMasks(l optim.Layout, p *optim.Program) error {
	if len(l.Members) < len(o.vecs) {
		return fmt.Errorf("sam: layout has %d members, want %d", len(l.Members), len(o.vecs))
	}
	masks, rests := o.hs.PerMember("mask", len(o.vecs)), o.hs.PerMember("rest", len(o.vecs))
	for m := range o.vecs {
		v := &o.vecs[m]
		v.mask, v.rest = masks[m], rests[m]
		p.Alloc(v.mask, m)
		weights := 0
		for _, t := range l.Members[m].Tensors {
			if strings.Contains(t.Name, "weight") {
				p.FillRange(v.mask, t.Offset, t.Numel(), 1)
				weights++
			}
		}
		if weights == 0 {
			return fmt.Errorf("sam: adaptive_scope \"weights\": member %d (%s) has no tensor named *weight*", m, l.Members[m].Arch)
		}
		p.Alloc(v.rest, m).Fill(v.rest, optim.K(1)).Axpy(v.rest, optim.K(-1), v.mask)
	}
	return nil
}

// Step implements optim.Optimizer with one Exec and no blocking read: the
// ascent coefficient ρ/(‖g‖+1e-12) is computed on the device in a register
// and scales the perturbation directly, and the loss and accuracy at θ are
// reported to the host's logs.
func (o *SAM) Step(ctx context.Context, in optim.StepInput) (optim.StepOutput, error) {
	if err := o.update.Begin(in); err != nil {
		return optim.StepOutput{}, fmt.Errorf("sam: %w", err)
	}
	p := o.hs.Prog()
	evs := make([]optim.Eval, 0, len(o.vecs)*o.cfg.M)
	norms := make([][]optim.Reg, len(o.vecs)) // per member and batch part
	for m, v := range o.vecs {
		th := optim.ParamsOf(m)
		switch {
		case o.weightsOnly(): // T = M⊙(|θ|+η) + (1−M), exact
			p.Unary(v.t, th, optim.Abs).AddConst(v.t, optim.K(o.cfg.Eta)).
				Binary(v.t, v.t, v.mask, optim.Mul).Binary(v.t, v.t, v.rest, optim.Add)
		case o.cfg.Adaptive:
			p.Unary(v.t, th, optim.Abs).AddConst(v.t, optim.K(o.cfg.Eta))
		}
		for j, g := range v.g {
			evs = append(evs, p.Grad(g, th, o.batch(j), optim.BNUpdate))
			x := g
			if o.cfg.Adaptive {
				p.Binary(v.scratch, v.t, g, optim.Mul)
				x = v.scratch
			}
			norms[m] = append(norms[m], p.Norm(x))
		}
	}
	bn := optim.BNUpdate
	if o.cfg.FreezeBNSecond {
		bn = optim.BNFreeze
	}
	for m, v := range o.vecs {
		th, avg := optim.ParamsOf(m), make([]optim.Term, len(v.g))
		p.Copy(v.saved, th)
		for j, g := range v.g {
			s, e := AscentScale(p, optim.K(o.cfg.Rho), norms[m][j]), g
			if o.cfg.Adaptive {
				p.Binary(v.scratch, v.t, e, optim.Mul).Binary(v.scratch, v.t, v.scratch, optim.Mul)
				e = v.scratch
			}
			Ascend(p, th, v.saved, s, e, g, o.batch(j), bn)
			avg[j] = optim.Term{Coef: optim.K(1 / float64(o.cfg.M)), X: g}
		}
		g := v.g[0]
		if o.cfg.M > 1 {
			g = v.scratch
			p.LinComb(g, avg...)
		}
		o.update.Apply(p, m, th, g, in)
	}
	p.ReportMetrics(p.Mean(evs))
	if _, err := o.h.Exec(ctx, p); err != nil {
		return optim.StepOutput{}, fmt.Errorf("sam: step: %w", err)
	}
	return optim.StepOutput{}, nil
}

// Eps guards SAM's ascent denominator: ρ/(‖e‖+Eps), as davda54.
const Eps = 1e-12

// AscentScale appends the register of SAM's ascent coefficient ρ/(n+Eps)
// for a direction of norm n: θ + ρ/(n+Eps)·e is the perturbed point.
func AscentScale(p *optim.Program, rho optim.Num, n optim.Reg) optim.Reg {
	return p.Div(rho, p.Add(n, optim.K(Eps)))
}

// Ascend appends SAM's perturbed pass of the parameters th, which the
// caller has copied into saved: θ += s·e, out = ∇L(θ) on batch b with
// BatchNorm mode bn, then θ = saved (restored by copy, bitwise, as
// davda54; not by subtracting s·e). out may be e. It returns the pass's
// loss and accuracy registers.
func Ascend(p *optim.Program, th, saved optim.Vec, s optim.Num, e, out optim.Vec, b optim.Batch, bn optim.BNMode) optim.Eval {
	p.Axpy(th, s, e)
	ev := p.Grad(out, th, b, bn)
	p.Copy(th, saved)
	return ev
}

// PerturbedGrad appends SAM's whole second pass of member parameters th
// along the direction e of norm n (a register): saved = θ, then Ascend
// with the coefficient AscentScale(ρ, n). out = ∇L(θ + ρ·e/(n+Eps)) and θ
// is bitwise unchanged after it; out may be e. The SAM variants
// (plugins/sam/variants) perturb with it.
func PerturbedGrad(p *optim.Program, th, saved, e, out optim.Vec, rho optim.Num, n optim.Reg, b optim.Batch, bn optim.BNMode) optim.Eval {
	p.Copy(saved, th)
	return Ascend(p, th, saved, AscentScale(p, rho, n), e, out, b, bn)
}
