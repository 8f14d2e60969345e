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
// merge_mean is the code's mode 1.1 (d = (g¹+g²)/2). See docs/METHODS.md.
//
// BatchNorm (bn): the paper is silent; the default in both modes is the
// released code's: running statistics updated in both half-batch passes
// (the second at θ¹) and frozen in the full-batch pass at θ².
//
// θ stays untouched until the base step: the particles live in one
// perturbed vector per member and every gradient is evaluated at it
// (Grad{At: pert}). Buffers per member: the perturbed vector and g¹, plus
// g² with merge_grad and an accumulator for K > 1; that is 2 to 4 vectors,
// whatever K. A step costs 2K+1 Exec calls for any number of members: the
// coefficients ρ₁/‖g¹‖ and ρ₂/‖g²‖ each need a round trip, and particle
// k's full-batch pass shares an Exec with particle k+1's first pass (the
// last one with the base step).
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
// NewWithHooks lets another optimizer reuse this step unchanged, adding ops
// at its start and end, editing its Grad ops (e.g. their Eps and OutRho)
// and extending its ascent norms: plugins/sgvb runs it on the means of a
// variational member with the weight noise κ fixed for the iteration.
package otmdr

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/optlab/optlab/sdk/hparams"
	"github.com/optlab/optlab/sdk/optim"
)

// Auto as the value of rho2 or noise_std means "as the mode says": 2ρ₁,
// and σ = 0 in both modes (see the package doc for why paper mode has no
// noise by default).
const Auto = -1.0

// Config holds OT-MDR's hyperparameters. Values of "" or Auto are
// decided by the mode (see ParseConfig).
type Config struct {
	Mode              string  `hp:"mode" doc:"\"paper\" (Algorithm 1) or \"reference\" (released code: merge_grad, no noise, particles summed, loader-order halves for K = 1)"`
	Rho1              float64 `hp:"rho1" doc:"first ascent radius ρ₁ (paper: 0.05 on CIFAR-10, 0.1 on CIFAR-100)"`
	Rho2              float64 `hp:"rho2" doc:"second ascent radius ρ₂; -1: 2ρ₁ (the paper's setting)"`
	NoiseStd          float64 `hp:"noise_std" doc:"std σ of the noise ε added after each ascent; -1: the mode's (0 in both: docs/RESULTS.md; the appendix's N(0, 1e-4) is 0.01)"`
	Particles         int     `hp:"particles" doc:"particles K per member"`
	ParticleReduction string  `hp:"particle_reduction" doc:"\"mean\" or \"sum\" of the K gradients; \"\": the mode's (paper mean, reference sum)"`
	MergeGrad         bool    `hp:"merge_grad" doc:"second ascent along g¹+g², divided by ‖g²‖ (released --merge_grad; forced on by mode = reference)"`
	MergeMean         bool    `hp:"merge_mean" doc:"with merge_grad: along (g¹+g²)/2 (released mode 1.1)"`
	Split             string  `hp:"split" doc:"\"random\" halves per particle or \"loader\"-order halves; \"\": the mode's (paper random; reference loader for K = 1, random for K > 1)"`
	BN                string  `hp:"bn" doc:"BatchNorm running statistics: \"halves\" (updated in both half-batch passes, frozen in the full pass; released code), \"first\" (updated only at θ), \"all\""`
	Joint             bool    `hp:"joint" doc:"train the members as one model, as the released ensemble script: one loss on their averaged probabilities (JointGrad), one gradient norm across members; needs ≥ 2 members"`
}

func defaults() Config {
	return Config{Mode: "paper", Rho1: 0.05, Rho2: Auto, NoiseStd: Auto, Particles: 1, BN: "halves"}
}

// ParseConfig applies params (as Config.Params carries them) to the
// defaults, resolves the mode's choices and validates the result.
func ParseConfig(params map[string]any) (Config, error) {
	c := defaults()
	if err := hparams.Apply(&c, params); err != nil {
		return Config{}, fmt.Errorf("otmdr: %w", err)
	}
	ref := c.Mode == "reference"
	switch {
	case c.Mode != "paper" && !ref:
		return Config{}, fmt.Errorf("otmdr: mode %q: want \"paper\" or \"reference\"", c.Mode)
	case c.Particles < 1:
		return Config{}, fmt.Errorf("otmdr: particles = %d: need at least 1", c.Particles)
	case c.Rho1 < 0 || (c.Rho2 < 0 && c.Rho2 != Auto) || (c.NoiseStd < 0 && c.NoiseStd != Auto):
		return Config{}, fmt.Errorf("otmdr: need rho1 ≥ 0, rho2 ≥ 0 or -1, noise_std ≥ 0 or -1; got %g, %g, %g",
			c.Rho1, c.Rho2, c.NoiseStd)
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
		return Config{}, errors.New("otmdr: merge_mean = true averages g¹ and g², which needs merge_grad = true (or mode = \"reference\")")
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
	if c.ParticleReduction != "mean" && c.ParticleReduction != "sum" {
		return Config{}, fmt.Errorf("otmdr: particle_reduction %q: want \"mean\" or \"sum\"", c.ParticleReduction)
	}
	if c.Split != "random" && c.Split != "loader" {
		return Config{}, fmt.Errorf("otmdr: split %q: want \"random\" or \"loader\"", c.Split)
	}
	if _, ok := bnPasses(c.BN); !ok {
		return Config{}, fmt.Errorf("otmdr: bn %q: want \"halves\", \"first\" or \"all\"", c.BN)
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

// OTMDR is the optimizer. Create it with New (or NewWithHooks).
type OTMDR struct {
	cfg     Config
	bn      [3]optim.BNMode
	members int
	rng     *rand.PCG
	hooks   Hooks
}

// New returns an OT-MDR optimizer with the default hyperparameters.
func New() optim.Optimizer { return &OTMDR{cfg: defaults()} }

// Passes of a particle, as Hooks name them.
const (
	PassB1   = 0 // g¹ on B¹ₖ at θ
	PassB2   = 1 // g² on B²ₖ at θ¹
	PassFull = 2 // Gₖ on B at θ²ₖ
)

// Hooks let another optimizer reuse OT-MDR's step (plugins/sgvb runs it on
// the means μ of a variational member with the weight noise κ held fixed).
// Nil fields change nothing. Grad and Norm act on per-member Grad passes,
// so joint = true rejects them. The wrapping optimizer's own vectors must use
// handles above 4·members, which OT-MDR's occupy.
type Hooks struct {
	// Begin appends ops at the start of every step's first program. They
	// must emit no scalars.
	Begin func(p *optim.Program)
	// Grad edits every Grad op before it is appended (e.g. sets Eps and
	// OutRho): member m, particle k, pass PassB1, PassB2 or PassFull.
	Grad func(m, k, pass int, g *optim.Grad)
	// Norm returns, for passes PassB1 and PassB2, a vector that the pass
	// fills (e.g. its OutRho) whose norm joins the ascent's denominator,
	// √(‖g‖² + ‖v‖²); 0 for none.
	Norm func(m, k, pass int) optim.Vec
	// End appends ops to every step's last program after the last
	// full-batch passes and before the base steps, while θ is unchanged.
	// Scalars they emit follow OT-MDR's and are ignored by it.
	End func(p *optim.Program)
}

// NewWithHooks returns an OT-MDR optimizer with the default
// hyperparameters and the hooks, as the concrete type, for optimizers that
// wrap it.
func NewWithHooks(hk Hooks) *OTMDR { return &OTMDR{cfg: defaults(), hooks: hk} }

// grad appends a Grad op of pass of particle k of member m, edited by the
// Grad hook.
func (o *OTMDR) grad(p *optim.Program, m, k, pass int, g optim.Grad) {
	if o.hooks.Grad != nil {
		o.hooks.Grad(m, k, pass, &g)
	}
	p.Ops = append(p.Ops, g)
}

// norm appends ‖x‖ and, if the Norm hook gives a vector, its norm.
func (o *OTMDR) norm(p *optim.Program, m, k, pass int, x optim.Vec) {
	p.Norm(x)
	if v := o.extraNorm(m, k, pass); v != 0 {
		p.Norm(v)
	}
}

func (o *OTMDR) extraNorm(m, k, pass int) optim.Vec {
	if o.hooks.Norm == nil {
		return 0
	}
	return o.hooks.Norm(m, k, pass)
}

// readNorm reads the norm(s) that norm appended.
func (o *OTMDR) readNorm(s *scalars, m, k, pass int) float64 {
	n := s.next()
	if o.extraNorm(m, k, pass) != 0 {
		n = math.Hypot(n, s.next())
	}
	return n
}

// Info implements optim.Optimizer.
func (o *OTMDR) Info() optim.Info {
	return optim.Info{Name: "otmdr", Version: "0.1.0", ProtocolMinor: optim.ProtocolMinor,
		Capabilities: []string{"members", "state", "predictive"}, Params: hparams.MustSpecs(defaults())}
}

// Handles of member m: the perturbed vector, g¹, g² (g¹'s buffer unless
// merge_grad needs both) and the accumulator of Σₖ Gₖ (g¹'s buffer when
// K = 1).
func (o *OTMDR) pert(m int) optim.Vec { return optim.Vec(1 + 4*m) }
func (o *OTMDR) g1(m int) optim.Vec   { return o.pert(m) + 1 }

func (o *OTMDR) g2(m int) optim.Vec {
	if o.cfg.MergeGrad {
		return o.pert(m) + 2
	}
	return o.g1(m)
}

func (o *OTMDR) sum(m int) optim.Vec {
	if o.cfg.Particles > 1 {
		return o.pert(m) + 3
	}
	return o.g1(m)
}

// Configure implements optim.Optimizer: it seeds the plugin's stream with
// the run seed and allocates the members' buffers.
func (o *OTMDR) Configure(ctx context.Context, h optim.Host, cfg optim.Config) error {
	c, err := ParseConfig(cfg.Params)
	if err != nil {
		return err
	}
	o.cfg, o.members, o.rng = c, max(cfg.Members, 1), rand.NewPCG(uint64(cfg.Seed), 0x6f746d6472)
	o.bn, _ = bnPasses(c.BN)
	l, err := h.Layout(ctx)
	if err != nil {
		return fmt.Errorf("otmdr: layout: %w", err)
	}
	if l.BatchSize == 1 {
		return errors.New("otmdr: a batch of 1 sample cannot be split into halves")
	}
	if c.Joint && o.members < 2 {
		return fmt.Errorf("otmdr: joint = true trains the members as one ensemble model and needs at least 2 members, got %d", o.members)
	}
	if c.Joint && (o.hooks.Grad != nil || o.hooks.Norm != nil) {
		return errors.New("otmdr: joint = true: the Grad and Norm hooks edit per-member Grad passes, which joint mode does not use")
	}
	p := optim.Prog()
	for m := range o.members {
		p.AllocFor(o.pert(m), m).AllocFor(o.g1(m), m)
		if o.g2(m) != o.g1(m) {
			p.AllocFor(o.g2(m), m)
		}
		if o.sum(m) != o.g1(m) {
			p.AllocFor(o.sum(m), m)
		}
	}
	if _, err := h.Exec(ctx, p); err != nil {
		return fmt.Errorf("otmdr: configure: %w", err)
	}
	return nil
}

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
	d := make([][]draw, o.members)
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
		p.RandN(tmp, o.cfg.NoiseStd, seed).Axpy(dst, 1, tmp)
	}
}

// joint appends one JointGrad of all members at at(m) into out(m) and, with
// norms, ‖out(m)‖ per member (loss, acc, then M norms).
func (o *OTMDR) joint(p *optim.Program, out, at func(int) optim.Vec, b optim.Batch, bn optim.BNMode, norms bool) {
	outs, ats := make([]optim.Vec, o.members), make([]optim.Vec, o.members)
	for m := range o.members {
		outs[m], ats[m] = out(m), at(m)
	}
	p.JointGrad(outs, ats, b, bn)
	if norms {
		for _, g := range outs {
			p.Norm(g)
		}
	}
}

// ascent1 appends, per member, g¹ = ∇L_B¹ₖ(θ) and ‖g¹‖ (loss, acc, norm);
// joint: one pass of all members on particle k's B¹ (loss, acc, M norms).
func (o *OTMDR) ascent1(p *optim.Program, d [][]draw, k int) *optim.Program {
	if o.cfg.Joint {
		o.joint(p, o.g1, optim.ParamsOf, o.half(0, d[0][k]), o.bn[0], true)
		return p
	}
	for m := range o.members {
		o.grad(p, m, k, PassB1, optim.Grad{Out: o.g1(m), At: optim.ParamsOf(m), Batch: o.half(0, d[m][k]), BN: o.bn[0]})
		o.norm(p, m, k, PassB1, o.g1(m))
	}
	return p
}

// ascent2 appends, per member, θ¹ = θ + ρ₁g¹/‖g¹‖ + ε¹ (into pert), then
// g² = ∇L_B²ₖ(θ¹) and ‖g²‖ (loss, acc, norm); joint: one pass of all
// members after all θ¹ (loss, acc, M norms). n holds ‖g¹‖ (joint: the
// global norm, for every member).
func (o *OTMDR) ascent2(p *optim.Program, d [][]draw, k int, n []float64) *optim.Program {
	for m := range o.members {
		th, pert := optim.ParamsOf(m), o.pert(m)
		p.LinComb(pert, optim.Term{Coef: 1, X: th}, optim.Term{Coef: o.cfg.Rho1 / (n[m] + 1e-12), X: o.g1(m)})
		o.noise(p, pert, o.g2(m), d[m][k].noise1)
		if !o.cfg.Joint {
			o.grad(p, m, k, PassB2, optim.Grad{Out: o.g2(m), At: pert, Batch: o.half(1, d[m][k]), BN: o.bn[1]})
			o.norm(p, m, k, PassB2, o.g2(m))
		}
	}
	if o.cfg.Joint {
		o.joint(p, o.g2, o.pert, o.half(1, d[0][k]), o.bn[1], true)
	}
	return p
}

// descent appends, per member, θ² = θ¹ + ρ₂d/‖g²‖ + ε², then Gₖ = ∇L_B(θ²)
// (loss, acc) added to the accumulator; joint: one pass of all members
// after all θ² (loss, acc). n holds ‖g²‖ (joint: the global norm).
func (o *OTMDR) descent(p *optim.Program, d [][]draw, k int, n []float64) *optim.Program {
	for m := range o.members {
		pert, s := o.pert(m), o.cfg.Rho2/(n[m]+1e-12)
		if !o.cfg.MergeGrad {
			p.Axpy(pert, s, o.g2(m))
		} else {
			if o.cfg.MergeMean {
				s /= 2
			}
			p.LinComb(pert, optim.Term{Coef: 1, X: pert}, optim.Term{Coef: s, X: o.g1(m)}, optim.Term{Coef: s, X: o.g2(m)})
		}
		o.noise(p, pert, o.g1(m), d[m][k].noise2)
		switch {
		case o.cfg.Joint: // one JointGrad after the loop
		case k == 0:
			o.grad(p, m, k, PassFull, optim.Grad{Out: o.sum(m), At: pert, BN: o.bn[2]})
		default:
			o.grad(p, m, k, PassFull, optim.Grad{Out: o.g1(m), At: pert, BN: o.bn[2]})
			p.Axpy(o.sum(m), 1, o.g1(m))
		}
	}
	if o.cfg.Joint {
		if k == 0 {
			o.joint(p, o.sum, o.pert, optim.Batch{}, o.bn[2], false)
			return p
		}
		o.joint(p, o.g1, o.pert, optim.Batch{}, o.bn[2], false)
		for m := range o.members {
			p.Axpy(o.sum(m), 1, o.g1(m))
		}
	}
	return p
}

// baseStep appends, per member, the base step with (1/K or 1)·Σₖ Gₖ.
func (o *OTMDR) baseStep(p *optim.Program) *optim.Program {
	for m := range o.members {
		if o.cfg.Particles > 1 && o.cfg.ParticleReduction == "mean" {
			p.Scale(o.sum(m), 1/float64(o.cfg.Particles))
		}
		p.BaseStep(optim.ParamsOf(m), o.sum(m))
	}
	return p
}

// metrics averages (loss, acc) pairs over members and particles.
type metrics struct{ loss, acc, lossP, accP float64 }

// scalars reads a Result's scalars in emission order.
type scalars struct {
	r optim.Result
	i int
}

func (s *scalars) next() float64 { s.i++; return s.r.Scalar(s.i - 1) }

// readAscent reads an ascent's scalars: the norms into n, and w·loss and
// w·acc of its passes into mt. Joint: one pass, and n[m] is the global norm
// √(Σₘ‖gₘ‖²) for every member.
func (o *OTMDR) readAscent(s *scalars, k, pass int, n []float64, mt *metrics, w float64) {
	if !o.cfg.Joint {
		for m := range o.members {
			mt.loss, mt.acc = mt.loss+w*s.next(), mt.acc+w*s.next()
			n[m] = o.readNorm(s, m, k, pass)
		}
		return
	}
	mt.loss, mt.acc = mt.loss+w*s.next(), mt.acc+w*s.next()
	var sq float64
	for range o.members {
		v := s.next()
		sq += v * v
	}
	for m := range n {
		n[m] = math.Sqrt(sq)
	}
}

// Step implements optim.Optimizer with 2K+1 Exec calls. Its metrics are
// loss and acc on B¹ₖ at θ and loss_perturbed and acc_perturbed on B at
// θ²ₖ, averaged over members (joint: of the joint passes) and particles.
func (o *OTMDR) Step(ctx context.Context, h optim.Host, _ optim.StepInput) (optim.StepOutput, error) {
	passes := o.members // gradient passes per phase: one per member, or one joint pass
	if o.cfg.Joint {
		passes = 1
	}
	d, n, w := o.draws(), make([]float64, o.members), 1/float64(passes*o.cfg.Particles)
	var mt metrics
	full := func(s *scalars) { // read the full-batch passes of the previous particle
		for range passes {
			mt.lossP, mt.accP = mt.lossP+w*s.next(), mt.accP+w*s.next()
		}
	}
	p := optim.Prog()
	if o.hooks.Begin != nil {
		o.hooks.Begin(p)
	}
	for k := range o.cfg.Particles {
		r, err := h.Exec(ctx, o.ascent1(p, d, k))
		if err != nil {
			return optim.StepOutput{}, fmt.Errorf("otmdr: particle %d: first ascent: %w", k, err)
		}
		s := &scalars{r: r}
		if k > 0 {
			full(s)
		}
		o.readAscent(s, k, PassB1, n, &mt, w)
		if r, err = h.Exec(ctx, o.ascent2(optim.Prog(), d, k, n)); err != nil {
			return optim.StepOutput{}, fmt.Errorf("otmdr: particle %d: second ascent: %w", k, err)
		}
		o.readAscent(&scalars{r: r}, k, PassB2, n, &metrics{}, w) // B² metrics are not reported
		p = o.descent(optim.Prog(), d, k, n)
	}
	if o.hooks.End != nil {
		o.hooks.End(p)
	}
	r, err := h.Exec(ctx, o.baseStep(p))
	if err != nil {
		return optim.StepOutput{}, fmt.Errorf("otmdr: descent: %w", err)
	}
	full(&scalars{r: r})
	return optim.StepOutput{Metrics: map[string]float64{
		"loss": mt.loss, "acc": mt.acc, "loss_perturbed": mt.lossP, "acc_perturbed": mt.accP,
	}}, nil
}

// Predictive implements optim.Predictor: the average of the members'
// probabilities (Q uniform over the members).
func (o *OTMDR) Predictive(context.Context) (optim.Predictive, error) {
	if o.members == 0 {
		return optim.Predictive{}, errors.New("otmdr: predictive: not configured")
	}
	vecs := make([]optim.Vec, o.members)
	for m := range vecs {
		vecs[m] = optim.ParamsOf(m)
	}
	return optim.Predictive{Kind: optim.Members, Vecs: vecs}, nil
}

// state is the checkpointed blob: the position of the seed stream.
type state struct {
	Version int    `json:"version"`
	RNG     []byte `json:"rng"`
}

// SaveState implements optim.Stateful. The vectors are per-step scratch
// and the base optimizer's state belongs to the host, so the state is the
// seed stream's position alone.
func (o *OTMDR) SaveState(context.Context) ([]byte, []optim.Vec, error) {
	if o.rng == nil {
		return nil, nil, errors.New("otmdr: save state: not configured")
	}
	r, err := o.rng.MarshalBinary()
	if err != nil {
		return nil, nil, fmt.Errorf("otmdr: save state: %w", err)
	}
	b, err := json.Marshal(state{Version: 1, RNG: r})
	if err != nil {
		return nil, nil, fmt.Errorf("otmdr: save state: %w", err)
	}
	return b, nil, nil
}

// LoadState implements optim.Stateful: it restores the seed stream, so the
// resumed run draws the splits and noise that an uninterrupted one would.
func (o *OTMDR) LoadState(_ context.Context, blob []byte) error {
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
	o.rng = rng
	return nil
}
