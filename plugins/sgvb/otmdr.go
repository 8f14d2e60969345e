package sgvb

import (
	"context"
	"errors"
	"fmt"

	"github.com/optlab/optlab/plugins/otmdr"
	"github.com/optlab/optlab/sdk/hparams"
	"github.com/optlab/optlab/sdk/optim"
)

// Auto as the value of rho2, noise_std or rho_weight_decay means "as the
// mode says" (see OTMDRConfig).
const Auto = -1.0

// OTMDRConfig holds otmdr-sgvb's hyperparameters. Values of "" or Auto are
// decided by the mode (see ParseOTMDRConfig). The OT-MDR options (rho1 to
// bn) mean what they mean in plugins/otmdr, applied to the means μ.
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
	Mode              string  `hp:"mode" doc:"\"paper\" (§4.2.3: κ once per iteration, ρ-gradient at the unperturbed sample) or \"reference\" (train_otmrd_BNN.py)"`
	Rho1              float64 `hp:"rho1" doc:"first ascent radius ρ₁ on μ (paper: 0.005 for BNNs)"`
	Rho2              float64 `hp:"rho2" doc:"second ascent radius ρ₂; -1: 2ρ₁ (paper: 0.01)"`
	NoiseStd          float64 `hp:"noise_std" doc:"std of the noise ε added to μ after each ascent; -1: 0.01 (the released BNN code's)"`
	Particles         int     `hp:"particles" doc:"particles K"`
	ParticleReduction string  `hp:"particle_reduction" doc:"\"mean\" or \"sum\" of the K gradients (also of the K ρ-gradients with rho_grad = perturbed); \"\": the mode's (paper mean, reference sum)"`
	MergeGrad         bool    `hp:"merge_grad" doc:"second ascent along g¹+g², divided by ‖g²‖ (forced on by mode = reference)"`
	MergeMean         bool    `hp:"merge_mean" doc:"with merge_grad: along (g¹+g²)/2"`
	Split             string  `hp:"split" doc:"\"random\" or \"loader\"-order halves; \"\": the mode's (paper random; reference loader for K = 1)"`
	BN                string  `hp:"bn" doc:"BatchNorm running statistics: \"first\" (updated in the B¹ pass only; released BNN code), \"halves\", \"all\"; \"\": first"`
	Kappa             string  `hp:"kappa" doc:"weight noise κ: \"once\" per iteration for every pass (paper) or \"twice\" (fresh for B¹, fresh for B² and reused by the full pass; released code); \"\": the mode's"`
	Norm              string  `hp:"norm" doc:"ascent norms over \"mu\" (the μ-gradient; paper) or \"all\" (μ- and ρ-gradients; released code); \"\": the mode's"`
	RhoGrad           string  `hp:"rho_grad" doc:"gradient of ρ's base step: \"full\" (extra full-batch pass at the unperturbed sample; paper), \"first\" (the B¹ pass of particle 1 at the unperturbed sample, free), \"perturbed\" (the full passes at the perturbed means, free; released code); \"\": the mode's"`
	RhoWeightDecay    float64 `hp:"rho_weight_decay" doc:"coupled L2 coefficient added to ρ's gradient before its base step; -1: the mode's (paper 0, reference 5e-4)"`
	MCSamples         int     `hp:"mc_samples" doc:"weight samples averaged by the predictive (Samples with Std = 0)"`
}

func otmdrDefaults() OTMDRConfig {
	return OTMDRConfig{Mode: "paper", Rho1: 0.005, Rho2: Auto, NoiseStd: Auto, Particles: 1,
		RhoWeightDecay: Auto, MCSamples: 30}
}

// ParseOTMDRConfig applies params (as Config.Params carries them) to
// otmdr-sgvb's defaults, resolves the mode's choices (the OT-MDR ones as
// otmdr.ParseConfig does) and validates the result.
func ParseOTMDRConfig(params map[string]any) (OTMDRConfig, error) {
	c := otmdrDefaults()
	if err := hparams.Apply(&c, params); err != nil {
		return OTMDRConfig{}, fmt.Errorf("otmdr-sgvb: %w", err)
	}
	ref := c.Mode == "reference"
	if !ref && c.Mode != "paper" {
		return OTMDRConfig{}, fmt.Errorf("otmdr-sgvb: mode %q: want \"paper\" or \"reference\"", c.Mode)
	}
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
	switch {
	case c.Kappa != "once" && c.Kappa != "twice":
		return OTMDRConfig{}, fmt.Errorf("otmdr-sgvb: kappa %q: want \"once\" or \"twice\"", c.Kappa)
	case c.Norm != "mu" && c.Norm != "all":
		return OTMDRConfig{}, fmt.Errorf("otmdr-sgvb: norm %q: want \"mu\" or \"all\"", c.Norm)
	case c.RhoGrad != "full" && c.RhoGrad != "first" && c.RhoGrad != "perturbed":
		return OTMDRConfig{}, fmt.Errorf("otmdr-sgvb: rho_grad %q: want \"full\", \"first\" or \"perturbed\"", c.RhoGrad)
	case c.RhoWeightDecay < 0:
		return OTMDRConfig{}, fmt.Errorf("otmdr-sgvb: rho_weight_decay %g: want ≥ 0 or -1", c.RhoWeightDecay)
	case c.MCSamples < 1:
		return OTMDRConfig{}, fmt.Errorf("otmdr-sgvb: mc_samples = %d: need at least 1", c.MCSamples)
	}
	oc, err := otmdr.ParseConfig(c.otmdrParams())
	if err != nil {
		return OTMDRConfig{}, fmt.Errorf("otmdr-sgvb: %w", err)
	}
	c.Rho2, c.ParticleReduction, c.MergeGrad, c.Split = oc.Rho2, oc.ParticleReduction, oc.MergeGrad, oc.Split
	return c, nil
}

// otmdrParams returns the wrapped OT-MDR's hyperparameters.
func (c OTMDRConfig) otmdrParams() map[string]any {
	return map[string]any{
		"mode": c.Mode, "rho1": c.Rho1, "rho2": c.Rho2, "noise_std": c.NoiseStd, "particles": int64(c.Particles),
		"particle_reduction": c.ParticleReduction, "merge_grad": c.MergeGrad, "merge_mean": c.MergeMean,
		"split": c.Split, "bn": c.BN,
	}
}

// Handles of otmdr-sgvb's own vectors, above the wrapped OT-MDR's 1..4.
const (
	hGradRho optim.Vec = 1 << 20      // gρ for ρ's base step
	hScratch           = hGradRho + 1 // ρ-gradients of the ascents (norm = "all")
	hKappa             = hGradRho + 2 // κ; with kappa = "twice" κ¹ₖ, κ²ₖ at hKappa+2k, +2k+1
)

// OTMDRSGVB is OT-MDR on a BNN. Create it with NewOTMDR.
type OTMDRSGVB struct {
	cfg   OTMDRConfig
	inner *otmdr.OTMDR
	seeds *seeds
	last  optim.Result // the last Exec's result of the current step
}

// NewOTMDR returns an otmdr-sgvb optimizer with the default
// hyperparameters.
func NewOTMDR() optim.Optimizer {
	o := &OTMDRSGVB{cfg: otmdrDefaults()}
	o.inner = otmdr.NewWithHooks(otmdr.Hooks{Begin: o.begin, Grad: o.grad, Norm: o.norm, End: o.end})
	return o
}

// Info implements optim.Optimizer.
func (o *OTMDRSGVB) Info() optim.Info {
	return optim.Info{Name: "otmdr-sgvb", Version: "0.1.0", ProtocolMinor: optim.ProtocolMinor,
		Capabilities: []string{"state", "predictive"}, Params: hparams.MustSpecs(otmdrDefaults())}
}

// kappa returns the κ handle of particle k's pass.
func (o *OTMDRSGVB) kappa(k, pass int) optim.Vec {
	if o.cfg.Kappa == "once" {
		return hKappa
	}
	if pass == otmdr.PassB1 {
		return hKappa + optim.Vec(2*k)
	}
	return hKappa + optim.Vec(2*k+1)
}

// particleRho returns the buffer of particle k's ρ-gradient with
// rho_grad = "perturbed" (gρ itself for one particle).
func (o *OTMDRSGVB) particleRho(k int) optim.Vec {
	if o.cfg.Particles == 1 {
		return hGradRho
	}
	return hKappa + optim.Vec(2*o.cfg.Particles+k)
}

// outRho returns the OutRho of particle k's pass (0 for none).
func (o *OTMDRSGVB) outRho(k, pass int) optim.Vec {
	switch {
	case pass == otmdr.PassFull:
		if o.cfg.RhoGrad == "perturbed" {
			return o.particleRho(k)
		}
		return 0
	case pass == otmdr.PassB1 && k == 0 && o.cfg.RhoGrad == "first":
		return hGradRho
	case o.cfg.Norm == "all":
		return hScratch
	}
	return 0
}

// Configure implements optim.Optimizer: it checks that the run has one
// variational member, configures the wrapped OT-MDR, seeds the κ stream
// with the run seed and allocates gρ, κ and the scratch vectors (2 Exec
// calls).
func (o *OTMDRSGVB) Configure(ctx context.Context, h optim.Host, cfg optim.Config) error {
	c, err := ParseOTMDRConfig(cfg.Params)
	if err != nil {
		return err
	}
	if err := checkVariational(ctx, h, cfg, "otmdr-sgvb"); err != nil {
		return err
	}
	o.cfg, o.seeds = c, newSeeds(cfg.Seed)
	inner := cfg
	inner.Params = c.otmdrParams()
	if err := o.inner.Configure(ctx, h, inner); err != nil {
		return fmt.Errorf("otmdr-sgvb: %w", err)
	}
	p := optim.Prog().Alloc(hGradRho)
	if c.Norm == "all" {
		p.Alloc(hScratch)
	}
	n := 1
	if c.Kappa == "twice" {
		n = 2 * c.Particles
	}
	for i := range n {
		p.Alloc(hKappa + optim.Vec(i))
	}
	if c.RhoGrad == "perturbed" && c.Particles > 1 {
		for k := range c.Particles {
			p.Alloc(o.particleRho(k))
		}
	}
	if _, err := h.Exec(ctx, p); err != nil {
		return fmt.Errorf("otmdr-sgvb: configure: %w", err)
	}
	return nil
}

// begin draws the step's κ (one, or two per particle) at the start of its
// first program.
func (o *OTMDRSGVB) begin(p *optim.Program) {
	n := 1
	if o.cfg.Kappa == "twice" {
		n = 2 * o.cfg.Particles
	}
	for i := range n {
		p.RandN(hKappa+optim.Vec(i), 1, o.seeds.next())
	}
}

// grad gives every OT-MDR pass its κ and, where needed, a ρ-gradient.
func (o *OTMDRSGVB) grad(_, k, pass int, g *optim.Grad) {
	g.Eps, g.OutRho = o.kappa(k, pass), o.outRho(k, pass)
}

// norm counts the ascents' ρ-gradients in their norms (norm = "all").
func (o *OTMDRSGVB) norm(_, k, pass int) optim.Vec {
	if o.cfg.Norm != "all" {
		return 0
	}
	return o.outRho(k, pass)
}

// end appends, before OT-MDR's base step of μ (μ still unperturbed), the
// ρ-gradient's completion and ρ's base step.
func (o *OTMDRSGVB) end(p *optim.Program) {
	switch o.cfg.RhoGrad {
	case "full":
		p.VarGrad(0, hGradRho, optim.Params, o.kappa(0, otmdr.PassB1), optim.Batch{}, optim.BNFreeze)
	case "perturbed":
		if k := o.cfg.Particles; k > 1 {
			c := 1.0
			if o.cfg.ParticleReduction == "mean" {
				c = 1 / float64(k)
			}
			terms := make([]optim.Term, k)
			for j := range terms {
				terms[j] = optim.Term{Coef: c, X: o.particleRho(j)}
			}
			p.LinComb(hGradRho, terms...)
		}
	}
	stepRho(p, hGradRho, o.cfg.RhoWeightDecay)
}

// recorder keeps the last Exec's result, so that Step can read the
// scalars of the ops that end appended.
type recorder struct {
	optim.Host
	o *OTMDRSGVB
}

// Exec implements optim.Host.
func (r recorder) Exec(ctx context.Context, p *optim.Program) (optim.Result, error) {
	res, err := r.Host.Exec(ctx, p)
	r.o.last = res
	return res, err
}

// Step implements optim.Optimizer with OT-MDR's 2K+1 Exec calls. Its
// metrics are OT-MDR's (loss and acc of the B¹ₖ passes at μ,
// loss_perturbed and acc_perturbed of the full passes at the perturbed
// means; losses include β·KL/N) plus, with rho_grad = "full",
// loss_unperturbed and acc_unperturbed of the extra full-batch pass.
func (o *OTMDRSGVB) Step(ctx context.Context, h optim.Host, in optim.StepInput) (optim.StepOutput, error) {
	if o.seeds == nil {
		return optim.StepOutput{}, errors.New("otmdr-sgvb: step: not configured")
	}
	out, err := o.inner.Step(ctx, recorder{Host: h, o: o}, in)
	if err != nil {
		return optim.StepOutput{}, fmt.Errorf("otmdr-sgvb: %w", err)
	}
	if o.cfg.RhoGrad == "full" { // after the last full pass's loss and accuracy
		out.Metrics["loss_unperturbed"], out.Metrics["acc_unperturbed"] = o.last.Scalar(2), o.last.Scalar(3)
	}
	return out, nil
}

// Predictive implements optim.Predictor: the host's variational
// predictive over mc_samples weight samples.
func (o *OTMDRSGVB) Predictive(context.Context) (optim.Predictive, error) {
	return predictive(o.cfg.MCSamples), nil
}

// SaveState implements optim.Stateful: the positions of the κ stream and
// of OT-MDR's stream (every vector is per-step scratch).
func (o *OTMDRSGVB) SaveState(ctx context.Context) ([]byte, []optim.Vec, error) {
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

// LoadState implements optim.Stateful.
func (o *OTMDRSGVB) LoadState(ctx context.Context, blob []byte) error {
	s, inner, err := loadSeeds(blob)
	if err != nil {
		return fmt.Errorf("otmdr-sgvb: load state: %w", err)
	}
	if err := o.inner.LoadState(ctx, inner); err != nil {
		return fmt.Errorf("otmdr-sgvb: %w", err)
	}
	o.seeds = s
	return nil
}
