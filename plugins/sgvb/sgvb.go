// Package sgvb trains a mean-field Gaussian Bayesian neural network, a
// variational member of protocol minor 1, with two optimizers:
//
//   - "sgvb" (New): plain SGVB / Bayes by backprop (Blundell et al. 2015,
//     Kingma et al. 2015). Per step: draw κ ~ N(0, I) once, one full-batch
//     pass at W = μ + σ⊙κ giving gμ and gρ of the host's loss (mean NLL +
//     β·KL/N), then the base step of μ with gμ and of ρ with gρ.
//   - "otmdr-sgvb" (NewOTMDR): OT-MDR on the BNN (Nguyen et al., NeurIPS
//     2023, §4.2.3): the OT-MDR step of plugins/otmdr runs on the means μ
//     with the weight noise κ held fixed, and σ is updated with the
//     ρ-gradient at the unperturbed sample (see OTMDRConfig for the choices
//     and docs/METHODS.md for the released code's departures). It is
//     composed of plain Go values: OTMDRConfig embeds otmdr.StepConfig, the
//     inner step is otmdr.NewFrom of it with otmdr.Hooks that set the
//     passes' κ and ρ-gradients, and the inner step allocates its vectors
//     in a sub-namespace of otmdr-sgvb's (otmdr-sgvb/otmdr/pert[0] beside
//     otmdr-sgvb/g_rho).
//
// The host owns the variational model: σ = softplus(ρ), the prior, β, the
// KL direction and the loss are the experiment's [model.variational_opts];
// the base optimizer (the paper: Adam, lr 1e-3, a plateau schedule) is the
// experiment's [train.optimizer], not the plugins' business. Both plugins
// train one member, which must be variational, and predict with the
// host's variational predictive: Samples{Std: 0, N: mc_samples}, the
// probabilities averaged over mc_samples draws of the weights.
//
// κ is drawn with RandN from nonzero seeds of the plugin's PCG stream,
// seeded by the run seed; its position is the checkpointed state, so a
// resumed run draws what an uninterrupted one would.
//
// The golden op traces in testdata are the op-level description:
// trace.golden (sgvb), trace_otmdr.golden (otmdr-sgvb, paper mode, two
// particles) and trace_otmdr_reference.golden (reference mode).
package sgvb

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"

	"github.com/optlab/optlab/sdk/hparams"
	"github.com/optlab/optlab/sdk/optim"
)

// Config holds SGVB's hyperparameters.
type Config struct {
	MCSamples      int     `hp:"mc_samples" range:"[1,)" doc:"weight samples averaged by the predictive (Samples with Std = 0); keep it equal to the experiment's variational_opts.mc_samples"`
	RhoWeightDecay float64 `hp:"rho_weight_decay" range:"[0,)" doc:"coupled L2 coefficient added to ρ's gradient (gρ += c·ρ) before its base step, which applies no weight decay to ρ; the released code's Adam applies its 5e-4 to ρ too"`
}

func defaults() Config { return Config{MCSamples: 30} }

// ParseConfig applies params (as Config.Params carries them) to SGVB's
// defaults, checking them against the tags.
func ParseConfig(params map[string]any) (Config, error) {
	c := defaults()
	if err := hparams.Apply(&c, params); err != nil {
		return Config{}, fmt.Errorf("sgvb: %w", err)
	}
	return c, nil
}

// SGVB is plain SGVB (Bayes by backprop). Create it with New.
type SGVB struct {
	optim.Defaults
	h     optim.Host
	cfg   Config
	seeds *seeds
	hs    *optim.Handles
	// κ, ∂loss/∂μ and ∂loss/∂ρ.
	kappa, gradMu, gradRho optim.Vec
}

// New returns an SGVB optimizer with the default hyperparameters.
func New() optim.Optimizer { return &SGVB{cfg: defaults()} }

// Info implements optim.Optimizer.
func (o *SGVB) Info() optim.Info {
	return optim.Info{Name: "sgvb", Version: "0.1.0", Features: optim.Features{Predictive: true, State: true},
		Params: hparams.MustSpecs(defaults())}
}

// Configure implements optim.Optimizer: it checks that the run has one
// variational member, seeds the plugin's stream with the run seed and
// allocates κ, gμ and gρ (sgvb/kappa, sgvb/g_mu, sgvb/g_rho).
func (o *SGVB) Configure(ctx context.Context, h optim.Host, cfg optim.Config) error {
	c, err := ParseConfig(cfg.Params)
	if err != nil {
		return err
	}
	if err := checkVariational(ctx, h, cfg, "sgvb"); err != nil {
		return err
	}
	o.h, o.cfg, o.seeds, o.hs = h, c, newSeeds(cfg.Seed), cfg.Namespace("sgvb")
	o.kappa, o.gradMu, o.gradRho = o.hs.New("kappa"), o.hs.New("g_mu"), o.hs.New("g_rho")
	if _, err := h.Exec(ctx, o.hs.Prog().Alloc(o.kappa, 0).Alloc(o.gradMu, 0).Alloc(o.gradRho, 0)); err != nil {
		return fmt.Errorf("sgvb: configure: %w", err)
	}
	return nil
}

// Step implements optim.Optimizer with one Exec: κ ~ N(0, I), one
// full-batch pass at μ + σ⊙κ (BatchNorm updated), the base step of μ with
// gμ and of ρ with gρ (+ rho_weight_decay·ρ). It reports the pass's loss
// (mean NLL + β·KL/N) and accuracy.
func (o *SGVB) Step(ctx context.Context, _ optim.StepInput) (optim.StepOutput, error) {
	if o.seeds == nil {
		return optim.StepOutput{}, errors.New("sgvb: step: not configured")
	}
	p := o.hs.Prog().RandN(o.kappa, 1, o.seeds.next())
	ev := p.GradOp(optim.Grad{Out: o.gradMu, OutRho: o.gradRho, At: optim.Params, Eps: o.kappa, BN: optim.BNUpdate})
	p.BaseStep(optim.Params, o.gradMu)
	stepRho(p, o.gradRho, o.cfg.RhoWeightDecay)
	p.ReportMetrics(ev.Loss, ev.Acc)
	if _, err := o.h.Exec(ctx, p); err != nil {
		return optim.StepOutput{}, fmt.Errorf("sgvb: step: %w", err)
	}
	return optim.StepOutput{}, nil
}

// Predictive implements optim.Optimizer (Features.Predictive): the host's variational
// predictive over mc_samples weight samples.
func (o *SGVB) Predictive(context.Context) (optim.Predictive, error) {
	return predictive(o.cfg.MCSamples), nil
}

// SaveState implements optim.Optimizer (Features.State): the position of the seed stream
// (κ, gμ and gρ are per-step scratch; the base optimizer's state is the
// host's).
func (o *SGVB) SaveState(context.Context) ([]byte, []optim.Vec, error) {
	b, err := o.seeds.save(nil)
	if err != nil {
		return nil, nil, fmt.Errorf("sgvb: save state: %w", err)
	}
	return b, nil, nil
}

// LoadState implements optim.Optimizer (Features.State).
func (o *SGVB) LoadState(_ context.Context, blob []byte) error {
	s, _, err := loadSeeds(blob)
	if err != nil {
		return fmt.Errorf("sgvb: load state: %w", err)
	}
	o.seeds = s
	return nil
}

// predictive is the host's variational predictive of member 0.
func predictive(n int) optim.Predictive {
	return optim.Predictive{Kind: optim.Samples, Mean: optim.Params, Std: 0, N: n}
}

// stepRho appends ρ's base step with gradient g, plus wd·ρ when wd ≠ 0.
func stepRho(p *optim.Program, g optim.Vec, wd float64) {
	if wd != 0 {
		p.Axpy(g, optim.K(wd), optim.RhoOf(0))
	}
	p.BaseStep(optim.RhoOf(0), g)
}

// checkVariational checks that the run has exactly one member and that it
// is variational.
func checkVariational(ctx context.Context, h optim.Host, cfg optim.Config, name string) error {
	if cfg.Members > 1 {
		return fmt.Errorf("%s: trains one variational member, got %d members (the variational predictive, "+
			"Samples with Std = 0, samples one member's weights)", name, cfg.Members)
	}
	l, err := h.Layout(ctx)
	if err != nil {
		return fmt.Errorf("%s: layout: %w", name, err)
	}
	if len(l.Members) != 1 {
		return fmt.Errorf("%s: trains one variational member, the layout has %d", name, len(l.Members))
	}
	if !l.Members[0].Variational {
		return fmt.Errorf("%s: member 0 (%s) is not variational: set model.variational = true in the experiment "+
			"(the host must give it a ρ vector, RhoOf(0), protocol minor 1)", name, l.Members[0].Arch)
	}
	return nil
}

// seeds is a stream of nonzero RandN seeds.
type seeds struct{ rng *rand.PCG }

func newSeeds(runSeed int64) *seeds { return &seeds{rng: rand.NewPCG(uint64(runSeed), 0x73677662)} }

// next returns the next nonzero seed.
func (s *seeds) next() int64 {
	for {
		if v := int64(s.rng.Uint64()); v != 0 {
			return v
		}
	}
}

// state is the checkpointed blob of both optimizers.
type state struct {
	Version int    `json:"version"`
	RNG     []byte `json:"rng"`
	// OTMDR is the wrapped OT-MDR's own state (otmdr-sgvb only).
	OTMDR []byte `json:"otmdr,omitempty"`
}

func (s *seeds) save(inner []byte) ([]byte, error) {
	if s == nil {
		return nil, errors.New("not configured")
	}
	r, err := s.rng.MarshalBinary()
	if err != nil {
		return nil, err
	}
	return json.Marshal(state{Version: 1, RNG: r, OTMDR: inner})
}

func loadSeeds(blob []byte) (*seeds, []byte, error) {
	var st state
	if err := json.Unmarshal(blob, &st); err != nil {
		return nil, nil, err
	}
	if st.Version != 1 {
		return nil, nil, fmt.Errorf("unsupported version %d", st.Version)
	}
	rng := &rand.PCG{}
	if err := rng.UnmarshalBinary(st.RNG); err != nil {
		return nil, nil, err
	}
	return &seeds{rng: rng}, st.OTMDR, nil
}
