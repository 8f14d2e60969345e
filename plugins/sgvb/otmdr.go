package sgvb

import (
	"context"
	"errors"
	"fmt"
	"maps"

	"github.com/optlab/optlab/plugins/otmdr"
	"github.com/optlab/optlab/sdk/hparams"
	"github.com/optlab/optlab/sdk/optim"
)

// Auto as the value of rho2, noise_std or rho_weight_decay means "as the
// mode says" (see OTMDRConfig).
const Auto = otmdr.Auto

// OTMDRConfig holds otmdr-sgvb's hyperparameters: OT-MDR's step
// (otmdr.StepConfig, rho1 to bn, applied to the means μ) and the BNN's own.
// Values of "" or Auto are decided by the mode (see ParseOTMDRConfig).
//
// Paper mode (§4.2.3 and its appendix) draws one κ per iteration for every
// pass and particle (kappa = "once"), normalizes the ascents by the
// μ-gradient alone (norm = "mu"; the paper writes per-layer norms, which
// whole-vector ops cannot express, so the norm is global as in the
// released code and the paper's single-model case) and updates σ with
// ∇ρ L_B(μ + σ⊙κ), the ρ-gradient at the unperturbed sample on the whole
// batch (rho_grad = "full": one extra full-batch pass per step, in the
// step's last program, BatchNorm frozen).
//
// Reference mode is train_otmrd_BNN.py: κ drawn twice (kappa = "twice":
// fresh for the B¹ pass, fresh for the B² pass, reused by the full pass),
// the ρ-gradients of the half-batch passes counted in the ascent norms
// (norm = "all", √(‖gμ‖² + ‖gρ‖²)), ρ updated with the ρ-gradient of the
// full pass at the perturbed means (rho_grad = "perturbed"), Adam's
// coupled weight decay 5e-4 applied to ρ too (rho_weight_decay), plus
// otmdr's reference options (merge_grad, particles summed, loader-order
// halves). Both modes use the released BNN code's noise std 0.01 on μ and
// its BatchNorm handling (bn = "first": updated in the B¹ pass only).
type OTMDRConfig struct {
	otmdr.StepConfig
	Kappa          string  `hp:"kappa" doc:"weight noise κ: \"once\" per iteration for every pass (paper) or \"twice\" (fresh for B¹, fresh for B² and reused by the full pass; released code); \"\": the mode's"`
	Norm           string  `hp:"norm" doc:"ascent norms over \"mu\" (the μ-gradient; paper) or \"all\" (μ- and ρ-gradients; released code); \"\": the mode's"`
	RhoGrad        string  `hp:"rho_grad" doc:"gradient of ρ's base step: \"full\" (extra full-batch pass at the unperturbed sample; paper), \"first\" (the B¹ pass of particle 1 at the unperturbed sample, free), \"perturbed\" (the full passes at the perturbed means, free; released code); \"\": the mode's"`
	RhoWeightDecay float64 `hp:"rho_weight_decay" doc:"coupled L2 coefficient added to ρ's gradient before its base step; -1: the mode's (paper 0, reference 5e-4)"`
	MCSamples      int     `hp:"mc_samples" range:"[1,)" doc:"weight samples averaged by the predictive (Samples with Std = 0)"`
}

func otmdrDefaults() OTMDRConfig {
	return OTMDRConfig{StepConfig: otmdr.StepConfig{Mode: "paper", Rho1: 0.005, Rho2: Auto, NoiseStd: Auto, Particles: 1},
		RhoWeightDecay: Auto, MCSamples: 30}
}

// otmdrDocs returns the docs of the OT-MDR hyperparameters whose meaning on
// a BNN differs from plain OT-MDR's (defaults, what Auto and "" stand for),
// which replace otmdr.StepConfig's in otmdr-sgvb's Info.
func otmdrDocs() map[string]string {
	return map[string]string{
		"mode":               `"paper" (§4.2.3: κ once per iteration, ρ-gradient at the unperturbed sample) or "reference" (train_otmrd_BNN.py)`,
		"rho1":               "first ascent radius ρ₁ on μ (paper: 0.005 for BNNs)",
		"rho2":               "second ascent radius ρ₂; -1: 2ρ₁ (paper: 0.01)",
		"noise_std":          "std of the noise ε added to μ after each ascent; -1: 0.01 (the released BNN code's)",
		"particles":          "particles K",
		"particle_reduction": `"mean" or "sum" of the K gradients (also of the K ρ-gradients with rho_grad = perturbed); "": the mode's (paper mean, reference sum)`,
		"merge_grad":         "second ascent along g¹+g², divided by ‖g²‖ (forced on by mode = reference)",
		"merge_mean":         "with merge_grad: along (g¹+g²)/2",
		"split":              `"random" or "loader"-order halves; "": the mode's (paper random; reference loader for K = 1)`,
		"bn":                 `BatchNorm running statistics: "first" (updated in the B¹ pass only; released BNN code), "halves", "all"; "": first`,
	}
}

// otmdrSpecs returns otmdr-sgvb's hyperparameter schema: OTMDRConfig's,
// with the BNN docs of otmdrDocs.
func otmdrSpecs() []optim.ParamSpec {
	specs, docs := hparams.MustSpecs(otmdrDefaults()), otmdrDocs()
	for i, s := range specs {
		if d, ok := docs[s.Name]; ok {
			specs[i].Doc = d
			delete(docs, s.Name)
		}
	}
	if len(docs) > 0 {
		panic(fmt.Sprintf("sgvb: docs of unknown hyperparameters %v", docs))
	}
	return specs
}

// ParseOTMDRConfig applies params (as Config.Params carries them) to
// otmdr-sgvb's defaults, resolves the mode's choices (the OT-MDR ones with
// otmdr.StepConfig.Resolve) and validates the result.
func ParseOTMDRConfig(params map[string]any) (OTMDRConfig, error) {
	c, err := givenOTMDRConfig(params)
	if err != nil {
		return OTMDRConfig{}, err
	}
	return c.resolve()
}

// givenOTMDRConfig applies params to otmdr-sgvb's defaults, unresolved.
func givenOTMDRConfig(params map[string]any) (OTMDRConfig, error) {
	c := otmdrDefaults()
	if err := hparams.Apply(&c, params); err != nil {
		return OTMDRConfig{}, fmt.Errorf("otmdr-sgvb: %w", err)
	}
	return c, nil
}

// resolve makes the mode's choices and validates the result.
func (c OTMDRConfig) resolve() (OTMDRConfig, error) {
	ref := c.Mode == "reference"
	pick := func(v *string, paper, reference string) {
		if *v == "" {
			*v = paper
			if ref {
				*v = reference
			}
		}
	}
	pick(&c.Kappa, "once", "twice")
	pick(&c.Norm, "mu", "all")
	pick(&c.RhoGrad, "full", "perturbed")
	pick(&c.BN, "first", "first")
	if c.NoiseStd == Auto {
		c.NoiseStd = 0.01
	}
	if c.RhoWeightDecay == Auto {
		c.RhoWeightDecay = 0
		if ref {
			c.RhoWeightDecay = 5e-4
		}
	}
	// Plain enums, but "" (the mode's) is no value of them before resolution.
	switch {
	case c.Kappa != "once" && c.Kappa != "twice":
		return OTMDRConfig{}, fmt.Errorf("otmdr-sgvb: kappa %q: want \"once\" or \"twice\"", c.Kappa)
	case c.Norm != "mu" && c.Norm != "all":
		return OTMDRConfig{}, fmt.Errorf("otmdr-sgvb: norm %q: want \"mu\" or \"all\"", c.Norm)
	case c.RhoGrad != "full" && c.RhoGrad != "first" && c.RhoGrad != "perturbed":
		return OTMDRConfig{}, fmt.Errorf("otmdr-sgvb: rho_grad %q: want \"full\", \"first\" or \"perturbed\"", c.RhoGrad)
	case c.RhoWeightDecay < 0:
		return OTMDRConfig{}, fmt.Errorf("otmdr-sgvb: rho_weight_decay %g: want ≥ 0 or -1", c.RhoWeightDecay)
	}
	s, err := c.StepConfig.Resolve()
	if err != nil {
		return OTMDRConfig{}, fmt.Errorf("otmdr-sgvb: %w", err)
	}
	c.StepConfig = s
	return c, nil
}

// OTMDRSGVB is OT-MDR on a BNN. Create it with NewOTMDR.
type OTMDRSGVB struct {
	optim.Defaults
	cfg   OTMDRConfig
	inner *otmdr.OTMDR
	seeds *seeds
	hs    *optim.Handles
	// gradRho is gρ for ρ's base step; ascentRho receives the ascents'
	// ρ-gradients (norm = "all" only).
	gradRho, ascentRho optim.Vec
	kappa              []particleKappa // per particle; all the same with kappa = "once"
	// particleRho[k] is particle k's ρ-gradient with rho_grad = "perturbed"
	// (gρ itself for one particle).
	particleRho []optim.Vec
	// resolved is what resolving the configuration changed (Resolved).
	resolved map[string]any
}

// particleKappa holds the κ of a particle's B¹ pass and of its B² and full
// passes (one vector with kappa = "once").
type particleKappa struct{ b1, b2 optim.Vec }

// NewOTMDR returns an otmdr-sgvb optimizer with the default
// hyperparameters.
func NewOTMDR() optim.Optimizer { return &OTMDRSGVB{cfg: otmdrDefaults()} }

// Info implements optim.Optimizer.
func (o *OTMDRSGVB) Info() optim.Info {
	return optim.Info{Name: "otmdr-sgvb", Version: "0.1.0", Features: optim.Features{Predictive: true, State: true},
		Params: otmdrSpecs()}
}

// kappaOf returns the κ of pass at.
func (o *OTMDRSGVB) kappaOf(at otmdr.Pass) optim.Vec {
	if at.Phase == otmdr.PhaseB1 {
		return o.kappa[at.Particle].b1
	}
	return o.kappa[at.Particle].b2
}

// outRho returns the OutRho of pass at (0 for none).
func (o *OTMDRSGVB) outRho(at otmdr.Pass) optim.Vec {
	switch {
	case at.Phase == otmdr.PhaseFull:
		if o.cfg.RhoGrad == "perturbed" {
			return o.particleRho[at.Particle]
		}
		return 0
	case at.Phase == otmdr.PhaseB1 && at.Particle == 0 && o.cfg.RhoGrad == "first":
		return o.gradRho
	case o.cfg.Norm == "all":
		return o.ascentRho
	}
	return 0
}

// Configure implements optim.Optimizer: it checks that the run has one
// variational member, configures the wrapped OT-MDR in its namespace
// otmdr-sgvb/otmdr, seeds the κ stream with the run seed and allocates gρ,
// κ and the scratch vectors (2 Exec calls).
func (o *OTMDRSGVB) Configure(ctx context.Context, h optim.Host, cfg optim.Config) error {
	given, err := givenOTMDRConfig(cfg.Params)
	if err != nil {
		return err
	}
	c, err := given.resolve()
	if err != nil {
		return err
	}
	if err := checkVariational(ctx, h, cfg, "otmdr-sgvb"); err != nil {
		return err
	}
	inner, err := otmdr.NewFrom(otmdr.Config{StepConfig: c.StepConfig},
		otmdr.Hooks{Begin: o.begin, Grad: o.grad, Norm: o.norm, End: o.end})
	if err != nil {
		return fmt.Errorf("otmdr-sgvb: %w", err)
	}
	o.cfg, o.resolved, o.seeds, o.hs = c, hparams.Changed(given, c), newSeeds(cfg.Seed), cfg.Namespace("otmdr-sgvb")
	innerCfg := cfg
	innerCfg.Params, innerCfg.Handles = nil, o.hs
	if err := inner.Configure(ctx, h, innerCfg); err != nil {
		return fmt.Errorf("otmdr-sgvb: %w", err)
	}
	o.inner = inner
	o.gradRho, o.ascentRho = o.hs.New("g_rho"), 0
	p := o.hs.Prog().Alloc(o.gradRho, 0)
	if c.Norm == "all" {
		o.ascentRho = o.hs.New("g_rho_ascent")
		p.Alloc(o.ascentRho, 0)
	}
	o.kappa = make([]particleKappa, c.Particles)
	if c.Kappa == "once" {
		kappa := o.hs.New("kappa")
		p.Alloc(kappa, 0)
		for k := range o.kappa {
			o.kappa[k] = particleKappa{b1: kappa, b2: kappa}
		}
	} else {
		for k := range o.kappa {
			b1, b2 := o.hs.New(fmt.Sprintf("kappa_b1[%d]", k)), o.hs.New(fmt.Sprintf("kappa_b2[%d]", k))
			p.Alloc(b1, 0).Alloc(b2, 0)
			o.kappa[k] = particleKappa{b1: b1, b2: b2}
		}
	}
	o.particleRho = nil
	if c.RhoGrad == "perturbed" {
		o.particleRho = []optim.Vec{o.gradRho}
		if c.Particles > 1 {
			o.particleRho = make([]optim.Vec, c.Particles)
			for k := range o.particleRho {
				o.particleRho[k] = o.hs.New(fmt.Sprintf("g_rho_particle[%d]", k))
				p.Alloc(o.particleRho[k], 0)
			}
		}
	}
	if _, err := h.Exec(ctx, p); err != nil {
		return fmt.Errorf("otmdr-sgvb: configure: %w", err)
	}
	return nil
}

// Resolved implements optim.Optimizer: the hyperparameters whose values the
// mode decided in Configure, with those values (rho2, noise_std and
// rho_weight_decay for -1, kappa, norm, rho_grad, bn, particle_reduction
// and split for "", merge_grad forced on by mode = reference).
func (o *OTMDRSGVB) Resolved() map[string]any { return maps.Clone(o.resolved) }

// begin draws the step's κ (one, or two per particle) at the start of its
// first program.
func (o *OTMDRSGVB) begin(p *optim.Program) {
	if o.cfg.Kappa == "once" {
		p.RandN(o.kappa[0].b1, 1, o.seeds.next())
		return
	}
	for _, k := range o.kappa {
		p.RandN(k.b1, 1, o.seeds.next()).RandN(k.b2, 1, o.seeds.next())
	}
}

// grad gives every OT-MDR pass its κ and, where needed, a ρ-gradient.
func (o *OTMDRSGVB) grad(at otmdr.Pass, g *optim.Grad) {
	g.Eps, g.OutRho = o.kappaOf(at), o.outRho(at)
}

// norm counts the ascents' ρ-gradients in their norms (norm = "all").
func (o *OTMDRSGVB) norm(at otmdr.Pass) optim.Vec {
	if o.cfg.Norm != "all" {
		return 0
	}
	return o.outRho(at)
}

// end appends, before OT-MDR's base step of μ (μ still unperturbed), the
// ρ-gradient's completion and ρ's base step. With rho_grad = "full" it
// reports the extra pass's loss_unperturbed and acc_unperturbed.
func (o *OTMDRSGVB) end(p *optim.Program) {
	switch o.cfg.RhoGrad {
	case "full":
		ev := p.GradOp(optim.Grad{OutRho: o.gradRho, At: optim.Params, Eps: o.kappa[0].b1, BN: optim.BNFreeze})
		p.Report("loss_unperturbed", ev.Loss).Report("acc_unperturbed", ev.Acc)
	case "perturbed":
		if k := o.cfg.Particles; k > 1 {
			c := 1.0
			if o.cfg.ParticleReduction == "mean" {
				c = 1 / float64(k)
			}
			terms := make([]optim.Term, k)
			for j, g := range o.particleRho {
				terms[j] = optim.Term{Coef: optim.K(c), X: g}
			}
			p.LinComb(o.gradRho, terms...)
		}
	}
	stepRho(p, o.gradRho, o.cfg.RhoWeightDecay)
}

// Step implements optim.Optimizer with OT-MDR's one Exec. Its reported
// metrics are OT-MDR's (loss and acc of the B¹ₖ passes at μ,
// loss_perturbed and acc_perturbed of the full passes at the perturbed
// means; losses include β·KL/N) plus, with rho_grad = "full",
// loss_unperturbed and acc_unperturbed of the extra full-batch pass.
func (o *OTMDRSGVB) Step(ctx context.Context, in optim.StepInput) (optim.StepOutput, error) {
	if o.inner == nil {
		return optim.StepOutput{}, errors.New("otmdr-sgvb: step: not configured")
	}
	out, err := o.inner.Step(ctx, in)
	if err != nil {
		return optim.StepOutput{}, fmt.Errorf("otmdr-sgvb: %w", err)
	}
	return out, nil
}

// Predictive implements optim.Optimizer (Features.Predictive): the host's variational
// predictive over mc_samples weight samples.
func (o *OTMDRSGVB) Predictive(context.Context) (optim.Predictive, error) {
	return predictive(o.cfg.MCSamples), nil
}

// SaveState implements optim.Optimizer (Features.State): the positions of the κ stream and
// of OT-MDR's stream (every vector is per-step scratch).
func (o *OTMDRSGVB) SaveState(ctx context.Context) ([]byte, []optim.Vec, error) {
	if o.inner == nil {
		return nil, nil, errors.New("otmdr-sgvb: save state: not configured")
	}
	inner, _, err := o.inner.SaveState(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("otmdr-sgvb: %w", err)
	}
	b, err := o.seeds.save(inner)
	if err != nil {
		return nil, nil, fmt.Errorf("otmdr-sgvb: save state: %w", err)
	}
	return b, nil, nil
}

// LoadState implements optim.Optimizer (Features.State), after Configure.
func (o *OTMDRSGVB) LoadState(ctx context.Context, blob []byte) error {
	s, inner, err := loadSeeds(blob)
	if err != nil {
		return fmt.Errorf("otmdr-sgvb: load state: %w", err)
	}
	if o.inner == nil {
		return errors.New("otmdr-sgvb: load state: not configured")
	}
	if err := o.inner.LoadState(ctx, inner); err != nil {
		return fmt.Errorf("otmdr-sgvb: %w", err)
	}
	o.seeds = s
	return nil
}
