// Package otmdr is OT-MDR, optimal-transport model distributional
// robustness (Nguyen et al., NeurIPS 2023), for a single model and for
// ensembles, with the authors' released code (anh-ntv/OT_MDR) as a
// "reference" mode.
//
// Per step, member m and particle k = 1..K (paper §4.2, Algorithm 1):
//
//	[B¹ₖ, B²ₖ] = a fresh random split of the batch B into halves
//	g¹ = ∇L_B¹ₖ(θ);   θ¹ = θ  + ρ₁ g¹/(‖g¹‖+1e-12) + ε¹
//	g² = ∇L_B²ₖ(θ¹);  θ² = θ¹ + ρ₂ d/(‖g²‖+1e-12) + ε²,  d = g²
//	Gₖ = ∇L_B(θ²)
//
// then one base-optimizer step (BaseStep) from θ with (1/K) Σₖ Gₖ.
// Norms are global L2 norms over all parameters; the 1e-12 in the
// denominators (the paper has none) is the released code's and keeps a
// zero gradient finite. ε ~ N(0, σ²I) with σ = noise_std, default 0: the
// appendix's fixed N(0, 1e-4) (Algorithm 1 writes N(0, ρI)) read as σ =
// 0.01 or σ = 1e-4 made no measurable difference on the Fashion-MNIST
// benchmark (docs/RESULTS.md), the released code that produced the paper's
// numbers never adds noise, and σ = 0.01 on every weight is a perturbation
// of norm σ√d ≈ 60 on WRN-28-10 (600 ρ₂); set noise_std to use it. ρ₂ = 2ρ₁
// unless given, as in all of the paper's experiments.
//
// Reference mode (mode = "reference") is what the released code runs:
// merge_grad (d = g¹+g², still divided by ‖g²‖, so the second step has
// length about 2ρ₂), no noise (the scripts never pass noise_var), particles
// summed (the README's mode 1: an effective learning rate K× on the loss
// gradient, weight decay not scaled), loader-order halves for one particle
// and fresh random halves for more. Each of these is also its own option;
// merge_mean is the code's mode 1.1 with one particle (d = (g¹+g²)/2);
// with K > 1 particles that mode averages over the particles instead
// (particle_reduction = "mean"). See docs/METHODS.md.
//
// BatchNorm (bn): the paper is silent; the default in both modes is the
// released code's: running statistics updated in both half-batch passes
// (the second at θ¹) and frozen in the full-batch pass at θ².
//
// θ stays untouched until the base step: the particles live in one
// perturbed vector per member and every gradient is evaluated at it
// (Grad{At: pert}). Buffers per member: the perturbed vector and g¹, plus
// g² with merge_grad and an accumulator for K > 1; that is 2 to 4 vectors,
// whatever K. A step is one Exec for any number of members and particles,
// with no blocking read: the coefficients ρ₁/(‖g¹‖+1e-12) and
// ρ₂/(‖g²‖+1e-12) are registers computed on the device (protocol minor 5),
// and the metrics are reported to the host from there.
//
// Ensembles (Q uniform over M models) train every member of the run with
// its own particles, splits, noise and base step; the predictive averages
// the members' probabilities. joint = true is the released ensemble script
// instead: the ensemble is one model whose loss is the cross-entropy of the
// members' averaged probabilities. Each pass is one JointGrad (protocol
// minor 2) over all members on one split per particle, the ascent norms
// are global across members, √(Σₘ‖gₘ‖²), so every member moves by the
// shared coefficient ρ/‖g‖, noise is drawn per member, and each member's
// base step uses its own part of the joint gradient of the full-batch
// passes. Particles, reductions, merges and bn apply as for one model; the
// metrics are those of the joint passes (loss and accuracy of the averaged
// probabilities).
//
// Splits and noise draws take nonzero seeds from the plugin's PCG stream,
// seeded by the run seed; its position is the checkpointed state. For an
// odd batch the host's halves drop the last sample (the released code's
// B² = B[-⌊b/2⌋:] drops the middle one). Step reports loss and acc of the
// B¹ₖ passes at θ and loss_perturbed and acc_perturbed of the full-batch
// passes at θ²ₖ, averaged over members and particles.
//
// OT-MDR allocates every vector from its namespace, cfg.Namespace("otmdr"):
// otmdr/pert[m], otmdr/g[m] (g¹, then g² and Gₖ; with merge_grad
// otmdr/g1[m] and otmdr/g2[m]) and, for K > 1, otmdr/sum[m]. An optimizer
// that runs it inside itself passes its own Handles in Config.Handles, so
// their vectors never collide. NewFrom makes one from a typed Config, with
// Hooks that add ops at the start and end of a step, edit its Grad ops
// (e.g. their Eps and OutRho) and extend its ascent norms: plugins/sgvb's
// otmdr-sgvb embeds StepConfig in its own config and runs this step on the
// means of a variational member with the weight noise κ fixed for the
// iteration.
//
// The golden op traces in testdata are the op-level description:
// trace.golden (paper mode, two particles), trace_reference.golden and
// trace_joint.golden (two members).
package otmdr

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"

	"github.com/optlab/optlab/plugins/compose"
	"github.com/optlab/optlab/sdk/hparams"
	"github.com/optlab/optlab/sdk/optim"
)

// Auto as the value of rho2 or noise_std means "as the mode says": 2ρ₁,
// and σ = 0 in both modes (see the package doc for why paper mode has no
// noise by default).
const Auto = -1.0

// StepConfig holds the hyperparameters of OT-MDR's step on one model, which
// methods built on it reuse by embedding (hparams flattens it). Values of ""
// or Auto are decided by the mode (see Resolve).
type StepConfig struct {
	Mode              string  `hp:"mode" enum:"paper|reference" doc:"\"paper\" (Algorithm 1) or \"reference\" (released code: merge_grad, no noise, particles summed, loader-order halves for K = 1)"`
	Rho1              float64 `hp:"rho1" range:"[0,)" doc:"first ascent radius ρ₁ (paper: 0.05 on CIFAR-10, 0.1 on CIFAR-100)"`
	Rho2              float64 `hp:"rho2" doc:"second ascent radius ρ₂; -1: 2ρ₁ (the paper's setting)"`
	NoiseStd          float64 `hp:"noise_std" doc:"std σ of the noise ε added after each ascent; -1: the mode's (0 in both: docs/RESULTS.md; the appendix's N(0, 1e-4) is 0.01)"`
	Particles         int     `hp:"particles" range:"[1,)" doc:"particles K per member"`
	ParticleReduction string  `hp:"particle_reduction" doc:"\"mean\" or \"sum\" of the K gradients; \"\": the mode's (paper mean, reference sum)"`
	MergeGrad         bool    `hp:"merge_grad" doc:"second ascent along g¹+g², divided by ‖g²‖ (released --merge_grad; forced on by mode = reference)"`
	MergeMean         bool    `hp:"merge_mean" doc:"with merge_grad: along (g¹+g²)/2 (released mode 1.1)"`
	Split             string  `hp:"split" doc:"\"random\" halves per particle or \"loader\"-order halves; \"\": the mode's (paper random; reference loader for K = 1, random for K > 1)"`
	BN                string  `hp:"bn" doc:"BatchNorm running statistics: \"halves\" (updated in both half-batch passes, frozen in the full pass; released code), \"first\" (updated only at θ), \"all\""`
}

// Config holds OT-MDR's hyperparameters: the step's and the ensemble
// option joint.
type Config struct {
	StepConfig
	Joint bool `hp:"joint" doc:"train the members as one model, as the released ensemble script: one loss on their averaged probabilities (JointGrad), one gradient norm across members; needs ≥ 2 members"`
}

// DefaultConfig returns OT-MDR's default hyperparameters (unresolved: rho2
// and noise_std Auto, particle_reduction and split "").
func DefaultConfig() Config {
	return Config{StepConfig: StepConfig{Mode: "paper", Rho1: 0.05, Rho2: Auto, NoiseStd: Auto, Particles: 1, BN: "halves"}}
}

// ParseConfig applies params (as Config.Params carries them) to the
// defaults, resolves the mode's choices and validates the result.
func ParseConfig(params map[string]any) (Config, error) {
	c, err := givenConfig(params)
	if err != nil {
		return Config{}, err
	}
	return c.resolve()
}

// givenConfig applies params to the defaults, unresolved.
func givenConfig(params map[string]any) (Config, error) {
	c := DefaultConfig()
	if err := hparams.Apply(&c, params); err != nil {
		return Config{}, fmt.Errorf("otmdr: %w", err)
	}
	return c, nil
}

// resolve returns c with its StepConfig resolved.
func (c Config) resolve() (Config, error) {
	s, err := c.StepConfig.Resolve()
	if err != nil {
		return Config{}, err
	}
	c.StepConfig = s
	return c, nil
}

// Resolve validates c (its enum and range tags, then the choices they cannot
// express) and returns it with the mode's choices made: rho2 = 2ρ₁ and
// noise_std = 0 where Auto, merge_grad forced on by mode = reference, and
// particle_reduction and split where "". Resolving a resolved StepConfig
// changes nothing.
func (c StepConfig) Resolve() (StepConfig, error) {
	if err := hparams.Validate(c); err != nil {
		return StepConfig{}, fmt.Errorf("otmdr: %w", err)
	}
	ref := c.Mode == "reference"
	if (c.Rho2 < 0 && c.Rho2 != Auto) || (c.NoiseStd < 0 && c.NoiseStd != Auto) {
		return StepConfig{}, fmt.Errorf("otmdr: need rho2 ≥ 0 or -1 and noise_std ≥ 0 or -1; got %g and %g", c.Rho2, c.NoiseStd)
	}
	if c.Rho2 == Auto {
		c.Rho2 = 2 * c.Rho1
	}
	if c.NoiseStd == Auto {
		// Both modes: see the package doc (decided by the Fashion-MNIST
		// benchmark, docs/RESULTS.md).
		c.NoiseStd = 0
	}
	c.MergeGrad = c.MergeGrad || ref
	if c.MergeMean && !c.MergeGrad {
		return StepConfig{}, errors.New("otmdr: merge_mean = true averages g¹ and g², which needs merge_grad = true (or mode = \"reference\")")
	}
	if c.ParticleReduction == "" {
		c.ParticleReduction = "mean"
		if ref {
			c.ParticleReduction = "sum"
		}
	}
	if c.Split == "" {
		c.Split = "random"
		if ref && c.Particles == 1 {
			c.Split = "loader"
		}
	}
	// Plain enums, but "" (the mode's) is no value of them before resolution.
	if c.ParticleReduction != "mean" && c.ParticleReduction != "sum" {
		return StepConfig{}, fmt.Errorf("otmdr: particle_reduction %q: want \"mean\" or \"sum\"", c.ParticleReduction)
	}
	if c.Split != "random" && c.Split != "loader" {
		return StepConfig{}, fmt.Errorf("otmdr: split %q: want \"random\" or \"loader\"", c.Split)
	}
	if _, ok := bnPasses(c.BN); !ok { // otmdr-sgvb takes "" for its own default
		return StepConfig{}, fmt.Errorf("otmdr: bn %q: want \"halves\", \"first\" or \"all\"", c.BN)
	}
	return c, nil
}

// bnPasses returns the BatchNorm modes of the B¹, B² and full-batch passes.
func bnPasses(bn string) ([3]optim.BNMode, bool) {
	u, f := optim.BNUpdate, optim.BNFreeze
	switch bn {
	case "halves":
		return [3]optim.BNMode{u, u, f}, true
	case "first":
		return [3]optim.BNMode{u, f, f}, true
	case "all":
		return [3]optim.BNMode{u, u, u}, true
	}
	return [3]optim.BNMode{}, false
}

// Phase is one of the three gradient passes of a particle.
type Phase int

// Phases of a particle.
const (
	PhaseB1   Phase = iota // g¹ on B¹ₖ at θ
	PhaseB2                // g² on B²ₖ at θ¹
	PhaseFull              // Gₖ on B at θ²ₖ
)

// Pass names one gradient pass of a step for the Hooks: the pass of phase
// Phase of member Member's particle Particle.
type Pass struct {
	Member, Particle int
	Phase            Phase
}

// Hooks let another optimizer reuse OT-MDR's step (plugins/sgvb runs it on
// the means μ of a variational member with the weight noise κ held fixed).
// Nil fields change nothing. Grad and Norm act on per-member Grad passes,
// so NewFrom rejects them with joint = true. The hooks use vectors of the
// wrapping optimizer's own namespace, and read what their ops emit through
// the registers the Program builder returns.
type Hooks struct {
	// Begin appends ops at the start of every step's first program.
	Begin func(p *optim.Program)
	// Grad edits the Grad op of every pass before it is appended (e.g. sets
	// Eps and OutRho).
	Grad func(at Pass, g *optim.Grad)
	// Norm returns, for passes of phases PhaseB1 and PhaseB2, a vector that
	// the pass fills (e.g. its OutRho) whose norm joins the ascent's
	// denominator, √(‖g‖² + ‖v‖²); 0 for none.
	Norm func(at Pass) optim.Vec
	// End appends ops to the step's program after the last full-batch
	// passes and before the base steps, while θ is unchanged; metrics of its
	// own it reports with Report ops.
	End func(p *optim.Program)
}

// OTMDR is the optimizer. Create it with New, or NewFrom to run it inside
// another optimizer.
type OTMDR struct {
	optim.Defaults
	// rules are the update rules its "update" may name (none: the host's
	// base step only); update is the chosen one, configured.
	rules  compose.Rules
	update *compose.Update
	h      optim.Host
	cfg    Config
	typed  bool // made by NewFrom: cfg is resolved and Configure reads no params
	hooks  Hooks
	bn     [3]optim.BNMode
	hs     *optim.Handles
	vecs   []memberVecs // per member
	rng    *rand.PCG
	// resolved is what resolving cfg changed (Resolved).
	resolved map[string]any
}

// memberVecs holds one member's handles: the perturbed vector, g¹, g² (g¹'s
// buffer unless merge_grad needs both) and the accumulator of Σₖ Gₖ (g¹'s
// buffer when K = 1).
type memberVecs struct{ pert, g1, g2, sum optim.Vec }

// Member m's handles, as functions of m for joint.
func (o *OTMDR) pert(m int) optim.Vec { return o.vecs[m].pert }
func (o *OTMDR) g1(m int) optim.Vec   { return o.vecs[m].g1 }
func (o *OTMDR) g2(m int) optim.Vec   { return o.vecs[m].g2 }
func (o *OTMDR) sum(m int) optim.Vec  { return o.vecs[m].sum }

// New returns an OT-MDR optimizer with the default hyperparameters, which
// Configure replaces with its params.
func New() optim.Optimizer { return &OTMDR{cfg: DefaultConfig()} }

// NewWith returns an OT-MDR optimizer that takes its update from the rule
// its "update" hyperparameter names among rules ("base", the default, is
// the host's base step, as New's).
func NewWith(rules compose.Rules) optim.Optimizer { return &OTMDR{cfg: DefaultConfig(), rules: rules} }

// NewFrom returns an OT-MDR optimizer with the hyperparameters c (resolved
// and validated here) and the hooks, as the concrete type, for optimizers
// that run it inside themselves. Its Configure takes no params: pass it a
// Config with Params nil and Handles set to the wrapper's namespace.
func NewFrom(c Config, hk Hooks) (*OTMDR, error) {
	r, err := c.resolve()
	if err != nil {
		return nil, err
	}
	if c.Joint && (hk.Grad != nil || hk.Norm != nil) {
		return nil, errors.New("otmdr: joint = true: the Grad and Norm hooks edit per-member Grad passes, which joint mode does not use")
	}
	return &OTMDR{cfg: r, typed: true, hooks: hk, resolved: hparams.Changed(c, r)}, nil
}

// grad appends the Grad op of pass at, edited by the Grad hook.
func (o *OTMDR) grad(p *optim.Program, at Pass, g optim.Grad) optim.Eval {
	if o.hooks.Grad != nil {
		o.hooks.Grad(at, &g)
	}
	return p.GradOp(g)
}

// norm appends ‖x‖ and returns its register; if the Norm hook gives a
// vector v, √(‖x‖² + ‖v‖²).
func (o *OTMDR) norm(p *optim.Program, at Pass, x optim.Vec) optim.Reg {
	n := p.Norm(x)
	if o.hooks.Norm != nil {
		if v := o.hooks.Norm(at); v != 0 {
			e := p.Norm(v)
			n = p.Sqrt(p.Add(p.Mul(n, n), p.Mul(e, e)))
		}
	}
	return n
}

// Info implements optim.Optimizer.
func (o *OTMDR) Info() optim.Info {
	return optim.Info{Name: "otmdr", Version: "0.1.0",
		Features: optim.Features{Members: true, BaseStep: true, UpdateRule: len(o.rules) > 0, Predictive: true, State: true},
		Params:   append(hparams.MustSpecs(DefaultConfig()), o.rules.Params()...)}
}

// Configure implements optim.Optimizer: it seeds the plugin's stream with
// the run seed and allocates the members' buffers in cfg.Namespace("otmdr").
func (o *OTMDR) Configure(ctx context.Context, h optim.Host, cfg optim.Config) error {
	c, resolved := o.cfg, o.resolved
	rule, ruleParams, own, err := o.rules.Split("otmdr", cfg.Params)
	if err != nil {
		return err
	}
	switch {
	case !o.typed:
		given, err := givenConfig(own)
		if err != nil {
			return err
		}
		if c, err = given.resolve(); err != nil {
			return err
		}
		resolved = hparams.Changed(given, c)
	case len(cfg.Params) > 0:
		return fmt.Errorf("otmdr: made by NewFrom with its hyperparameters, Configure takes no params (got %d)", len(cfg.Params))
	}
	members := cfg.MemberCount()
	o.h, o.cfg, o.resolved, o.rng = h, c, resolved, rand.NewPCG(uint64(cfg.Seed), 0x6f746d6472)
	o.bn, _ = bnPasses(c.BN)
	l, err := h.Layout(ctx)
	if err != nil {
		return fmt.Errorf("otmdr: layout: %w", err)
	}
	if l.BatchSize == 1 {
		return errors.New("otmdr: a batch of 1 sample cannot be split into halves")
	}
	if c.Joint && members < 2 {
		return fmt.Errorf("otmdr: joint = true trains the members as one ensemble model and needs at least 2 members, got %d", members)
	}
	o.hs = cfg.Namespace("otmdr")
	g1Name := "g" // g¹, then g² and Gₖ
	if c.MergeGrad {
		g1Name = "g1" // g¹, then Gₖ
	}
	pert, g1 := o.hs.PerMember("pert", members), o.hs.PerMember(g1Name, members)
	var g2, sum []optim.Vec // only when g¹'s buffer cannot serve
	if c.MergeGrad {
		g2 = o.hs.PerMember("g2", members)
	}
	if c.Particles > 1 {
		sum = o.hs.PerMember("sum", members)
	}
	p := o.hs.Prog()
	o.vecs = make([]memberVecs, members)
	for m := range o.vecs {
		v := memberVecs{pert: pert[m], g1: g1[m], g2: g1[m], sum: g1[m]}
		p.Alloc(v.pert, m).Alloc(v.g1, m)
		if g2 != nil {
			v.g2 = g2[m]
			p.Alloc(v.g2, m)
		}
		if sum != nil {
			v.sum = sum[m]
			p.Alloc(v.sum, m)
		}
		o.vecs[m] = v
	}
	if _, err := h.Exec(ctx, p); err != nil {
		return fmt.Errorf("otmdr: configure: %w", err)
	}
	// The rule allocates after OT-MDR's own vectors, which keep their
	// handles whatever the rule.
	o.update, err = o.rules.NewUpdate(ctx, h, "otmdr", rule, ruleParams, cfg, o.hs)
	return err
}

// Resolved implements optim.Optimizer: the hyperparameters whose values the
// mode decided in Configure (or NewFrom), with those values: rho2 = 2ρ₁
// and noise_std = 0 for -1, particle_reduction and split for "", and
// merge_grad forced on by mode = reference.
func (o *OTMDR) Resolved() map[string]any { return maps.Clone(o.resolved) }

// draw holds the seeds of one particle of one member.
type draw struct{ split, noise1, noise2 int64 }

// seed returns the next nonzero seed of the plugin's stream.
func (o *OTMDR) seed() int64 {
	for {
		if s := int64(o.rng.Uint64()); s != 0 {
			return s
		}
	}
}

// draws takes the step's seeds, [member][particle], always 3·M·K of them.
func (o *OTMDR) draws() [][]draw {
	d := make([][]draw, len(o.vecs))
	for m := range d {
		d[m] = make([]draw, o.cfg.Particles)
		for k := range d[m] {
			d[m][k] = draw{o.seed(), o.seed(), o.seed()}
		}
	}
	return d
}

// half selects B¹ (part 0) or B² (part 1) of a particle's split.
func (o *OTMDR) half(part int32, d draw) optim.Batch {
	if o.cfg.Split == "loader" {
		return optim.Batch{Part: part, Of: 2}
	}
	return optim.Batch{Part: part, Of: 2, Shuffle: d.split}
}

// noise appends dst += ε, ε ~ N(0, σ²I), drawn into the free buffer tmp.
func (o *OTMDR) noise(p *optim.Program, dst, tmp optim.Vec, seed int64) {
	if o.cfg.NoiseStd > 0 {
		p.RandN(tmp, o.cfg.NoiseStd, seed).Axpy(dst, optim.K(1), tmp)
	}
}

// ascentSlots holds the registers of one ascent phase: the passes' loss and
// accuracy (per member, or the one joint pass) and every member's norm
// (joint: of its part of the joint gradient).
type ascentSlots struct {
	evals []optim.Eval
	norms []optim.Reg
}

// joint appends one JointGrad of all members at at(m) into out(m) and
// returns its slots, with ‖out(m)‖ per member if norms.
func (o *OTMDR) joint(p *optim.Program, out, at func(int) optim.Vec, b optim.Batch, bn optim.BNMode, norms bool) ascentSlots {
	outs, ats := make([]optim.Vec, len(o.vecs)), make([]optim.Vec, len(o.vecs))
	for m := range o.vecs {
		outs[m], ats[m] = out(m), at(m)
	}
	s := ascentSlots{evals: []optim.Eval{p.JointGrad(outs, ats, b, bn)}}
	if norms {
		for _, g := range outs {
			s.norms = append(s.norms, p.Norm(g))
		}
	}
	return s
}

// ascent1 appends, per member, g¹ = ∇L_B¹ₖ(θ) and ‖g¹‖; joint: one pass of
// all members on particle k's B¹ and every member's norm.
func (o *OTMDR) ascent1(p *optim.Program, d [][]draw, k int) ascentSlots {
	if o.cfg.Joint {
		return o.joint(p, o.g1, optim.ParamsOf, o.half(0, d[0][k]), o.bn[0], true)
	}
	var s ascentSlots
	for m, v := range o.vecs {
		at := Pass{Member: m, Particle: k, Phase: PhaseB1}
		s.evals = append(s.evals, o.grad(p, at, optim.Grad{Out: v.g1, At: optim.ParamsOf(m), Batch: o.half(0, d[m][k]), BN: o.bn[0]}))
		s.norms = append(s.norms, o.norm(p, at, v.g1))
	}
	return s
}

// ascent2 appends, per member, θ¹ = θ + ρ₁g¹/‖g¹‖ + ε¹ (into pert), then
// g² = ∇L_B²ₖ(θ¹) and ‖g²‖; joint: one pass of all members after all θ¹.
// n holds the registers of ‖g¹‖ (joint: the global norm, for every
// member).
func (o *OTMDR) ascent2(p *optim.Program, d [][]draw, k int, n []optim.Reg) ascentSlots {
	var s ascentSlots
	for m, v := range o.vecs {
		c := p.Div(optim.K(o.cfg.Rho1), p.Add(n[m], optim.K(1e-12)))
		p.LinComb(v.pert, optim.Term{Coef: optim.K(1), X: optim.ParamsOf(m)}, optim.Term{Coef: c, X: v.g1})
		o.noise(p, v.pert, v.g2, d[m][k].noise1)
		if !o.cfg.Joint {
			at := Pass{Member: m, Particle: k, Phase: PhaseB2}
			s.evals = append(s.evals, o.grad(p, at, optim.Grad{Out: v.g2, At: v.pert, Batch: o.half(1, d[m][k]), BN: o.bn[1]}))
			s.norms = append(s.norms, o.norm(p, at, v.g2))
		}
	}
	if o.cfg.Joint {
		return o.joint(p, o.g2, o.pert, o.half(1, d[0][k]), o.bn[1], true)
	}
	return s
}

// descent appends, per member, θ² = θ¹ + ρ₂d/‖g²‖ + ε², then Gₖ = ∇L_B(θ²)
// added to the accumulator; joint: one pass of all members after all θ².
// n holds the registers of ‖g²‖ (joint: the global norm). It returns the
// registers of the full-batch passes.
func (o *OTMDR) descent(p *optim.Program, d [][]draw, k int, n []optim.Reg) []optim.Eval {
	var evals []optim.Eval
	for m, v := range o.vecs {
		s := p.Div(optim.K(o.cfg.Rho2), p.Add(n[m], optim.K(1e-12)))
		if !o.cfg.MergeGrad {
			p.Axpy(v.pert, s, v.g2)
		} else {
			if o.cfg.MergeMean {
				s = p.Div(s, optim.K(2))
			}
			p.LinComb(v.pert, optim.Term{Coef: optim.K(1), X: v.pert}, optim.Term{Coef: s, X: v.g1}, optim.Term{Coef: s, X: v.g2})
		}
		o.noise(p, v.pert, v.g1, d[m][k].noise2)
		at := Pass{Member: m, Particle: k, Phase: PhaseFull}
		switch {
		case o.cfg.Joint: // one JointGrad after the loop
		case k == 0:
			evals = append(evals, o.grad(p, at, optim.Grad{Out: v.sum, At: v.pert, BN: o.bn[2]}))
		default:
			evals = append(evals, o.grad(p, at, optim.Grad{Out: v.g1, At: v.pert, BN: o.bn[2]}))
			p.Axpy(v.sum, optim.K(1), v.g1)
		}
	}
	if o.cfg.Joint {
		if k == 0 {
			return o.joint(p, o.sum, o.pert, optim.Batch{}, o.bn[2], false).evals
		}
		evals = o.joint(p, o.g1, o.pert, optim.Batch{}, o.bn[2], false).evals
		for _, v := range o.vecs {
			p.Axpy(v.sum, optim.K(1), v.g1)
		}
	}
	return evals
}

// baseStep appends, per member, the update (the base step, or the update
// rule's) with (1/K or 1)·Σₖ Gₖ.
func (o *OTMDR) baseStep(p *optim.Program, in optim.StepInput) {
	for m, v := range o.vecs {
		if o.cfg.Particles > 1 && o.cfg.ParticleReduction == "mean" {
			p.Scale(v.sum, optim.K(1/float64(o.cfg.Particles)))
		}
		o.update.Apply(p, m, optim.ParamsOf(m), v.sum, in)
	}
}

// metrics averages the passes' losses and accuracies over members and
// particles, each weighted by w, in registers (the zero Reg before the
// first term).
type metrics struct {
	w                      float64
	loss, acc, lossP, accP optim.Reg
}

// add appends sum + w·x (w·x for the first term) and returns its register.
func (mt *metrics) add(p *optim.Program, sum, x optim.Reg) optim.Reg {
	wx := p.Mul(optim.K(mt.w), x)
	if sum.Index() == 0 {
		return wx
	}
	return p.Add(sum, wx)
}

// ascent adds the loss and accuracy of an ascent's passes.
func (mt *metrics) ascent(p *optim.Program, evals []optim.Eval) {
	for _, ev := range evals {
		mt.loss, mt.acc = mt.add(p, mt.loss, ev.Loss), mt.add(p, mt.acc, ev.Acc)
	}
}

// full adds the loss and accuracy of the full-batch passes at θ².
func (mt *metrics) full(p *optim.Program, evals []optim.Eval) {
	for _, ev := range evals {
		mt.lossP, mt.accP = mt.add(p, mt.lossP, ev.Loss), mt.add(p, mt.accP, ev.Acc)
	}
}

// ascentNorms returns the registers of an ascent's norms, per member.
// Joint: every member's is the global norm √(Σₘ‖gₘ‖²).
func (o *OTMDR) ascentNorms(p *optim.Program, s ascentSlots) []optim.Reg {
	if !o.cfg.Joint {
		return s.norms
	}
	var sq optim.Reg
	for i, g := range s.norms {
		if i == 0 {
			sq = p.Mul(g, g)
		} else {
			sq = p.Add(sq, p.Mul(g, g))
		}
	}
	n := make([]optim.Reg, len(o.vecs))
	global := p.Sqrt(sq)
	for m := range n {
		n[m] = global
	}
	return n
}

// Step implements optim.Optimizer with one Exec and no blocking read: all
// K particles of every member in one program, the ascent coefficients
// ρ/(‖g‖+1e-12) in registers on the device. It reports loss and acc on
// B¹ₖ at θ and loss_perturbed and acc_perturbed on B at θ²ₖ, averaged over
// members (joint: of the joint passes) and particles.
func (o *OTMDR) Step(ctx context.Context, in optim.StepInput) (optim.StepOutput, error) {
	if o.rng == nil {
		return optim.StepOutput{}, errors.New("otmdr: step: not configured")
	}
	if err := o.update.Begin(in); err != nil {
		return optim.StepOutput{}, fmt.Errorf("otmdr: %w", err)
	}
	passes := len(o.vecs) // gradient passes per phase: one per member, or one joint pass
	if o.cfg.Joint {
		passes = 1
	}
	d := o.draws()
	mt := metrics{w: 1 / float64(passes*o.cfg.Particles)}
	p := o.hs.Prog()
	if o.hooks.Begin != nil {
		o.hooks.Begin(p)
	}
	for k := range o.cfg.Particles {
		a1 := o.ascent1(p, d, k)
		mt.ascent(p, a1.evals)
		a2 := o.ascent2(p, d, k, o.ascentNorms(p, a1)) // B² metrics are not reported
		mt.full(p, o.descent(p, d, k, o.ascentNorms(p, a2)))
	}
	if o.hooks.End != nil {
		o.hooks.End(p)
	}
	o.baseStep(p, in)
	p.ReportMetrics(mt.loss, mt.acc).Report("loss_perturbed", mt.lossP).Report("acc_perturbed", mt.accP)
	if _, err := o.h.Exec(ctx, p); err != nil {
		return optim.StepOutput{}, fmt.Errorf("otmdr: step: %w", err)
	}
	return optim.StepOutput{}, nil
}

// Predictive implements optim.Optimizer (Features.Predictive): the average of the members'
// probabilities (Q uniform over the members).
func (o *OTMDR) Predictive(context.Context) (optim.Predictive, error) {
	if len(o.vecs) == 0 {
		return optim.Predictive{}, errors.New("otmdr: predictive: not configured")
	}
	vecs := make([]optim.Vec, len(o.vecs))
	for m := range vecs {
		vecs[m] = optim.ParamsOf(m)
	}
	return optim.Predictive{Kind: optim.Members, Vecs: vecs}, nil
}

// state is the checkpointed blob: the position of the seed stream, and
// the update rule's state (none for the base step).
type state struct {
	Version int    `json:"version"`
	RNG     []byte `json:"rng"`
	Update  []byte `json:"update,omitempty"`
}

// SaveState implements optim.Optimizer (Features.State). OT-MDR's vectors
// are per-step scratch and the base optimizer's state belongs to the host,
// so its state is the seed stream's position, and the update rule's (its
// blob inside OT-MDR's, its vectors the state's vectors; none for the
// base step).
func (o *OTMDR) SaveState(ctx context.Context) ([]byte, []optim.Vec, error) {
	if o.rng == nil {
		return nil, nil, errors.New("otmdr: save state: not configured")
	}
	r, err := o.rng.MarshalBinary()
	if err != nil {
		return nil, nil, fmt.Errorf("otmdr: save state: %w", err)
	}
	u, vecs, err := o.update.SaveState(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("otmdr: save state: %w", err)
	}
	b, err := json.Marshal(state{Version: 1, RNG: r, Update: u})
	if err != nil {
		return nil, nil, fmt.Errorf("otmdr: save state: %w", err)
	}
	return b, vecs, nil
}

// LoadState implements optim.Optimizer (Features.State), after Configure: it restores the
// seed stream, so the resumed run draws the splits and noise that an
// uninterrupted one would.
func (o *OTMDR) LoadState(ctx context.Context, blob []byte) error {
	var s state
	if err := json.Unmarshal(blob, &s); err != nil {
		return fmt.Errorf("otmdr: load state: %w", err)
	}
	if s.Version != 1 {
		return fmt.Errorf("otmdr: load state: unsupported version %d", s.Version)
	}
	rng := &rand.PCG{}
	if err := rng.UnmarshalBinary(s.RNG); err != nil {
		return fmt.Errorf("otmdr: load state: %w", err)
	}
	if err := o.update.LoadState(ctx, s.Update); err != nil {
		return fmt.Errorf("otmdr: load state: %w", err)
	}
	o.rng = rng
	return nil
}
