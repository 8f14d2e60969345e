// Package swa is Stochastic Weight Averaging (Izmailov et al., 2018,
// "Averaging Weights Leads to Wider Optima and Better Generalization") with
// the semantics of torch.optim.swa_utils (AveragedModel, SWALR, update_bn),
// on top of any built-in method by composition: the hyperparameter member
// names the method that does every step ("sgd", the default; "sam" gives
// SWA-SAM, "otmdr" SWA-OT-MDR, "bsam"), made by the Options.Members
// registry and configured with its own hyperparameters, passed as
// <member>_<name> (sam_rho, otmdr_rho1, …), in a namespace inside SWA's
// ("swa/sam/…"). SWA trains one member.
//
// The SWA phase is the epochs e ≥ start (0-based StepInput.Epoch), start =
// start_epoch, or floor(start_fraction × run epochs) when start_epoch is
// −1 (0.75: epoch 150 of 200; 1 of a 2-epoch smoke run). At the end of
// every freq-th epoch of the phase (the last step of epoch e with
// (e − start + 1) mod freq = 0) the live parameters θ join the running
// average, as AveragedModel.update_parameters does: the first average is
// a copy with the BatchNorm running statistics (CopyState), the n-th after
// it avg ← avg·n/(n+1) + θ/(n+1) (a LinComb whose coefficients the plugin
// knows, so no read-back). That costs one extra Exec at such an epoch end
// and none elsewhere: the member's programs are its own (which of them is
// a step's last is not known to SWA), and the average must be complete
// when the host evaluates or checkpoints after the step.
//
// The rate: with swa_lr = 0 (the default) SWA sets none, and the member
// steps on the experiment's schedule throughout (StepInput.LR), exactly as
// the member alone. With swa_lr > 0 the member must follow SetLR
// (a member whose Info declares optim.Features.BaseStep; bsam does its own update and is refused), and
// during the SWA phase SWA sets the step's rate with SetLR in front of the
// member's first program (no extra round trip), passes it as
// StepInput.LR and reports it as the step metric "lr"; lr0 is the
// schedule's StepInput.LR at the first step of the phase (kept in the
// state). lr_schedule chooses:
//
//   - "constant": torch's SWALR(optimizer, swa_lr, anneal_epochs,
//     anneal_strategy), per epoch: SWA epoch k (k = e − start) trains at
//     swa_lr·α + lr0·(1 − α), α = α(min(1, (k+1)/anneal_epochs)),
//     α(t) = (1 − cos πt)/2 ("cos") or t ("linear"), and at swa_lr from the
//     start with anneal_epochs = 0. That is SWALR constructed at the start
//     of the phase on lr0 and stepped once at the start of every SWA epoch
//     (k+1 steps in SWA epoch k, SWALR's own first step being its
//     construction). torch's tutorial steps it at the end of every epoch
//     after the first average instead, so its first SWA epoch still runs
//     at the schedule's rate and its annealing ends one epoch later; here
//     every epoch of the phase is SWA's.
//   - "cyclic": Izmailov et al.'s Algorithm 1: per step,
//     lr = (1 − t)·lr_1 + t·swa_lr with t = (i mod c + 1)/c, i the step
//     since the start of the phase and c = freq × steps per epoch, so
//     each cycle of freq epochs ends at α2 = swa_lr, where the average is
//     taken; lr_1 = 0 is lr0.
//
// Finalize (Features.Finalize, after the run's last step; the member's own
// Finalize first, if it has one) recomputes the average's BatchNorm
// statistics over the whole training set, as update_bn does, with one
// UpdateBN program, if anything was averaged (a no-op on a model without
// BatchNorm, on the real host). The predictive is, before the first
// average, the member's (its Predictive when it declares one, else the point estimate);
// after Finalize the average (a Members predictive over the one vector);
// between them the average if the model has no BatchNorm (no tensor of
// Kind "bn"), else still the member's, since the average's statistics are
// those of the live model at the first average until Finalize makes them
// exact. The host evaluates and saves after Finalize, so a run's result is
// the average with exact statistics. For member = "bsam", whose own
// predictive samples a Gaussian around its mean, the average is of the
// live parameters (the means) and SWA's predictive is that point average.
//
// The average is a vector allocated in Configure after the member's
// (named swa/avg), so that a resumed run's Configure recreates it and the
// host restores its contents and statistics. Hyperparameters that the
// settings do not use must keep their defaults: setting one is an error
// rather than a silent no-op.
//
// testdata/trace_swa.golden (sgd, the constant schedule) and
// trace_cyclic.golden are the op-level description, with the handles by
// name.
package swa

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

// Config holds SWA's own hyperparameters. The member optimizers' are in
// the schema too, prefixed with "<member>_".
type Config struct {
	Member         string  `hp:"member" doc:"method that does every step and whose weights are averaged: \"sgd\", \"sam\" (SWA-SAM), \"otmdr\" (SWA-OT-MDR) or \"bsam\"; its hyperparameters are <member>_<name>"`
	StartEpoch     int     `hp:"start_epoch" range:"[-1,)" doc:"first epoch (0-based) of the SWA phase; -1: floor(start_fraction × run epochs)"`
	StartFraction  float64 `hp:"start_fraction" range:"[0,1)" doc:"share of the run's epochs before the SWA phase when start_epoch = -1 (0.75: epoch 150 of 200)"`
	Freq           int     `hp:"freq" range:"[1,)" doc:"average at the end of every freq-th epoch of the SWA phase (cyclic: the cycle length in epochs)"`
	SWALR          float64 `hp:"swa_lr" range:"[0,)" doc:"rate of the SWA phase (SWALR's swa_lr, Algorithm 1's α2); 0: keep the experiment's schedule, no SetLR"`
	LRSchedule     string  `hp:"lr_schedule" enum:"constant|cyclic" doc:"with swa_lr > 0: \"constant\" (torch SWALR: anneal to swa_lr, then hold) or \"cyclic\" (Izmailov et al.'s Algorithm 1: lr_1 down to swa_lr in every cycle of freq epochs)"`
	AnnealEpochs   int     `hp:"anneal_epochs" range:"[0,)" doc:"constant: epochs of annealing from the rate at the start of the SWA phase to swa_lr; 0: swa_lr at once"`
	AnnealStrategy string  `hp:"anneal_strategy" enum:"cos|linear" doc:"constant: annealing α(t) = (1 − cos πt)/2 (\"cos\") or t (\"linear\")"`
	LR1            float64 `hp:"lr_1" range:"[0,)" doc:"cyclic: α1, the rate a cycle starts from; 0: the experiment's rate at the first step of the SWA phase"`
}

func defaults() Config {
	return Config{Member: compose.DefaultMember, StartEpoch: -1, StartFraction: 0.75, Freq: 1,
		LRSchedule: Constant, AnnealEpochs: 5, AnnealStrategy: Cos}
}

// unused returns why c does not use its hyperparameter name ("" when it
// does).
func unused(c Config, name string) string {
	switch name {
	case "start_fraction":
		if c.StartEpoch >= 0 {
			return fmt.Sprintf("start_epoch = %d", c.StartEpoch)
		}
	case "lr_schedule", "anneal_epochs", "anneal_strategy", "lr_1":
		if c.SWALR == 0 {
			return "swa_lr = 0 (the experiment's schedule)"
		}
		if want := map[string]string{"anneal_epochs": Constant, "anneal_strategy": Constant, "lr_1": Cyclic}[name]; want != "" && c.LRSchedule != want {
			return fmt.Sprintf("lr_schedule = %q", c.LRSchedule)
		}
	}
	return ""
}

// parseConfig splits params (as Config.Params carries them) into SWA's
// configuration and the member optimizer's hyperparameters (unprefixed),
// and validates what SWA itself can check.
func parseConfig(o compose.Options, params map[string]any) (Config, map[string]any, error) {
	c := defaults()
	_, inner, own, err := o.Split("swa", params)
	if err != nil {
		return Config{}, nil, err
	}
	if err := hparams.Apply(&c, own); err != nil {
		return Config{}, nil, fmt.Errorf("swa: %w", err)
	}
	for _, s := range hparams.MustSpecs(defaults()) {
		if v, given := own[s.Name]; given && !compose.IsDefault(s, v) {
			if why := unused(c, s.Name); why != "" {
				return Config{}, nil, fmt.Errorf("swa: %s = %v is not used with %s", s.Name, v, why)
			}
		}
	}
	if c.SWALR > 0 {
		if err := o.RequireSetLR("swa", fmt.Sprintf("swa_lr = %v", c.SWALR), c.Member); err != nil {
			return Config{}, nil, err
		}
	}
	return c, inner, nil
}

// SWA is the optimizer. Create it with New.
type SWA struct {
	optim.Defaults
	opts compose.Options
	cfg  Config
	h    optim.Host
	// lr is the host the member drives: SWA's SetLR goes in front of its
	// first program of a step whose rate SWA sets.
	lr    *compose.LRHost
	hs    *optim.Handles
	inner optim.Optimizer
	spe   int64
	// start is the first epoch of the SWA phase.
	start int64
	// hasBN says whether the model has BatchNorm (a tensor of Kind "bn").
	hasBN bool
	// avg is the average's vector, of which n averages have been taken.
	avg optim.Vec
	n   int
	// lr0 is StepInput.LR at the first step of the SWA phase, once seen
	// (haveLR0).
	lr0     float64
	haveLR0 bool
	// finalized: the average's BatchNorm statistics were recomputed after
	// its last update.
	finalized bool
}

var (
	_ optim.Optimizer = (*SWA)(nil)
	_ optim.Wrapper   = (*SWA)(nil)
)

// New returns an SWA optimizer with the default hyperparameters whose
// steps are done by one of o.Members.
func New(o compose.Options) optim.Optimizer { return &SWA{opts: o.Clone(), cfg: defaults()} }

// Info implements optim.Optimizer. The schema is SWA's own hyperparameters
// followed by every member optimizer's, prefixed. SWA trains one member
// (no Features.Members); it has a predictive, state and a finalizer of its
// own, and forwards each of them to its member.
func (s *SWA) Info() optim.Info {
	return optim.Info{Name: "swa", Version: "0.1.0", Features: optim.Features{Predictive: true, State: true, Finalize: true},
		Params: append(hparams.MustSpecs(defaults()), s.opts.Prefixed()...)}
}

// Unwrap implements optim.Wrapper: the member optimizer that Configure
// made (nil before).
func (s *SWA) Unwrap() optim.Optimizer { return s.inner }

// Average returns the handle of the average's vector (named swa/avg),
// valid after Configure.
func (s *SWA) Average() optim.Vec { return s.avg }

// Averaged returns the number of averages taken so far.
func (s *SWA) Averaged() int { return s.n }

// Configure implements optim.Optimizer: it plans the SWA phase, configures
// the member optimizer and allocates the average.
func (s *SWA) Configure(ctx context.Context, h optim.Host, cfg optim.Config) error {
	c, inner, err := parseConfig(s.opts, cfg.Params)
	if err != nil {
		return err
	}
	*s = SWA{opts: s.opts, cfg: c, h: h, lr: compose.NewLRHost(h), hs: cfg.Namespace("swa"), spe: cfg.StepsPerEpoch}
	if err := s.plan(cfg); err != nil {
		return err
	}
	l, err := h.Layout(ctx)
	if err != nil {
		return fmt.Errorf("swa: layout: %w", err)
	}
	for _, m := range l.Members {
		s.hasBN = s.hasBN || slices.ContainsFunc(m.Tensors, func(t optim.Tensor) bool { return t.Kind == "bn" })
	}
	// The member takes its handles first, from a namespace inside SWA's
	// (swa/<its name>/…).
	opt, err := s.opts.NewMember(ctx, s.lr, "swa", c.Member, optim.Config{Params: inner, Seed: cfg.Seed,
		TotalSteps: cfg.TotalSteps, StepsPerEpoch: cfg.StepsPerEpoch, Members: cfg.Members, Handles: s.hs})
	if err != nil {
		return err
	}
	s.inner, s.avg = opt, s.hs.New("avg")
	if _, err := h.Exec(ctx, s.hs.Prog().Alloc(s.avg, 0)); err != nil {
		return fmt.Errorf("swa: allocate the average: %w", err)
	}
	return nil
}

// plan checks the run's shape and works out the start of the SWA phase; a
// run in which nothing would be averaged is an error.
func (s *SWA) plan(cfg optim.Config) error {
	c := s.cfg
	switch {
	case cfg.Members > 1:
		return fmt.Errorf("swa: averages the weights of one model; the run has %d members "+
			"(for an ensemble use plugin = \"ensembles\")", cfg.Members)
	case cfg.TotalSteps < 1 || s.spe < 1:
		return fmt.Errorf("swa: needs the run's total steps and steps per epoch, got %d and %d", cfg.TotalSteps, s.spe)
	}
	epochs := cfg.TotalSteps / s.spe // complete epochs, whose ends can be averaged
	s.start = int64(c.StartEpoch)
	from := fmt.Sprintf("start_epoch = %d", c.StartEpoch)
	if c.StartEpoch < 0 {
		s.start = int64(math.Floor(c.StartFraction*float64(cfg.TotalSteps)/float64(s.spe) + 1e-9))
		from = fmt.Sprintf("start_epoch = floor(start_fraction × run epochs) = %d", s.start)
	}
	switch {
	case s.start >= epochs:
		return fmt.Errorf("swa: %s, but the run has %d complete epochs (0 to %d): nothing would be averaged",
			from, epochs, epochs-1)
	case (epochs-s.start)/int64(c.Freq) == 0:
		return fmt.Errorf("swa: freq = %d, but the SWA phase (%s) has %d epochs: nothing would be averaged",
			c.Freq, from, epochs-s.start)
	}
	return nil
}

// Step implements optim.Optimizer: the member optimizer's step, at SWA's
// rate during the SWA phase when swa_lr > 0, then an average at the end of
// every freq-th epoch of the phase. The metrics are the member's, plus
// "lr" when SWA set the rate.
func (s *SWA) Step(ctx context.Context, in optim.StepInput) (optim.StepOutput, error) {
	if s.inner == nil {
		return optim.StepOutput{}, errors.New("swa: step before configure")
	}
	epoch := int64(in.Epoch)
	i := in.Step - epoch*s.spe
	if epoch < 0 || i < 0 || i >= s.spe {
		return optim.StepOutput{}, fmt.Errorf("swa: step %d is not in epoch %d of %d steps", in.Step, in.Epoch, s.spe)
	}
	phase := epoch >= s.start
	if phase && !s.haveLR0 {
		s.lr0, s.haveLR0 = in.LR, true
	}
	scheduled := phase && s.cfg.SWALR > 0
	if scheduled {
		in.LR = s.rate(in)
		s.lr.Before(s.hs.Prog().SetLR(0, in.LR))
	}
	out, err := s.inner.Step(ctx, in)
	if err != nil {
		return out, fmt.Errorf("swa: %w", err)
	}
	if phase && i == s.spe-1 && (epoch-s.start+1)%int64(s.cfg.Freq) == 0 {
		if err := s.average(ctx); err != nil {
			return out, fmt.Errorf("swa: step %d: %w", in.Step, err)
		}
	}
	if scheduled {
		if out.Metrics == nil {
			out.Metrics = map[string]float64{}
		}
		out.Metrics["lr"] = in.LR
	}
	return out, nil
}

// rate returns SWA's rate for a step of the SWA phase.
func (s *SWA) rate(in optim.StepInput) float64 {
	c := s.cfg
	if c.LRSchedule == Cyclic {
		lr1 := c.LR1
		if lr1 == 0 {
			lr1 = s.lr0
		}
		return CyclicLR(lr1, c.SWALR, in.Step-s.start*s.spe, int64(c.Freq)*s.spe)
	}
	return AnnealLR(s.lr0, c.SWALR, int64(in.Epoch)-s.start, c.AnnealEpochs, c.AnnealStrategy)
}

// average adds the live parameters to the running average: a copy with
// the BatchNorm statistics the first time, then avg·n/(n+1) + θ/(n+1).
func (s *SWA) average(ctx context.Context) error {
	p := s.hs.Prog()
	if s.n == 0 {
		p.CopyState(s.avg, optim.Params)
	} else {
		n := float64(s.n)
		p.LinComb(s.avg, optim.Term{Coef: optim.K(n / (n + 1)), X: s.avg}, optim.Term{Coef: optim.K(1 / (n + 1)), X: optim.Params})
	}
	if _, err := s.h.Exec(ctx, p); err != nil {
		return fmt.Errorf("average %d: %w", s.n+1, err)
	}
	s.n++
	s.finalized = false
	return nil
}

// Finalize implements optim.Optimizer (Features.Finalize): the member's
// Finalize, then the average's BatchNorm statistics recomputed over the
// whole training set (UpdateBN), if anything was averaged.
func (s *SWA) Finalize(ctx context.Context) error {
	if s.inner == nil {
		return errors.New("swa: finalize before configure")
	}
	if err := s.inner.Finalize(ctx); err != nil {
		return fmt.Errorf("swa: %s: %w", s.cfg.Member, err)
	}
	if s.n == 0 {
		return nil
	}
	if _, err := s.h.Exec(ctx, s.hs.Prog().UpdateBN(s.avg)); err != nil {
		return fmt.Errorf("swa: finalize: BatchNorm statistics of the average: %w", err)
	}
	s.finalized = true
	return nil
}

// Predictive implements optim.Optimizer (Features.Predictive): the member's predictive before
// the first average; the average after Finalize, or before it if the model
// has no BatchNorm (see the package documentation).
func (s *SWA) Predictive(ctx context.Context) (optim.Predictive, error) {
	if s.inner == nil {
		return optim.Predictive{}, errors.New("swa: predictive before configure")
	}
	if s.n > 0 && (s.finalized || !s.hasBN) {
		return optim.Predictive{Kind: optim.Members, Vecs: []optim.Vec{s.avg}}, nil
	}
	pred, err := compose.Predictive(ctx, s.inner, 1)
	if err != nil {
		return pred, fmt.Errorf("swa: %w", err)
	}
	return pred, nil
}

// Resolved implements optim.Optimizer: start_epoch when -1 was given (the
// epoch floor(start_fraction × run epochs) gave), and what the member
// optimizer resolved, under its prefixed names. Nil before Configure.
func (s *SWA) Resolved() map[string]any {
	if s.inner == nil {
		return nil
	}
	var own map[string]any
	if s.cfg.StartEpoch < 0 {
		own = map[string]any{"start_epoch": s.start}
	}
	return compose.Resolved(own, s.cfg.Member, s.inner)
}

// state is the checkpointed blob.
type state struct {
	Version int    `json:"version"`
	Member  string `json:"member"`
	// Averaged is the number of averages taken.
	Averaged int `json:"averaged"`
	// LR0 is StepInput.LR at the first step of the SWA phase (nil before).
	LR0       *float64 `json:"lr0,omitempty"`
	Finalized bool     `json:"finalized,omitempty"`
	// Inner is the member optimizer's blob.
	Inner []byte `json:"inner"`
}

// SaveState implements optim.Optimizer (Features.State). The vectors are the member
// optimizer's and, once something was averaged, the average (with its
// BatchNorm statistics); the blob holds the number of averages, lr0, the
// finalized flag and the member optimizer's blob.
func (s *SWA) SaveState(ctx context.Context) ([]byte, []optim.Vec, error) {
	if s.inner == nil {
		return nil, nil, errors.New("swa: save state before configure")
	}
	st := state{Version: 1, Member: s.cfg.Member, Averaged: s.n, Finalized: s.finalized}
	if s.haveLR0 {
		st.LR0 = &s.lr0
	}
	inner, vecs, err := s.inner.SaveState(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("swa: save state: %s: %w", s.cfg.Member, err)
	}
	st.Inner = inner
	b, err := json.Marshal(st)
	if err != nil {
		return nil, nil, fmt.Errorf("swa: save state: %w", err)
	}
	if s.n > 0 {
		vecs = append(vecs, s.avg)
	}
	return b, vecs, nil
}

// LoadState implements optim.Optimizer (Features.State), after Configure: the host has
// restored the vectors' contents into the handles Configure allocated.
func (s *SWA) LoadState(ctx context.Context, blob []byte) error {
	if s.inner == nil {
		return errors.New("swa: load state before configure")
	}
	var st state
	if err := json.Unmarshal(blob, &st); err != nil {
		return fmt.Errorf("swa: load state: %w", err)
	}
	switch {
	case st.Version != 1:
		return fmt.Errorf("swa: load state: unsupported version %d", st.Version)
	case st.Member != s.cfg.Member:
		return fmt.Errorf("swa: load state: saved by member %q, configured as member %q", st.Member, s.cfg.Member)
	case st.Averaged < 0 || st.Finalized && st.Averaged == 0:
		return fmt.Errorf("swa: load state: %d averages (finalized %v)", st.Averaged, st.Finalized)
	}
	if err := s.inner.LoadState(ctx, st.Inner); err != nil {
		return fmt.Errorf("swa: load state: %s: %w", s.cfg.Member, err)
	}
	s.n, s.finalized, s.lr0, s.haveLR0 = st.Averaged, st.Finalized, 0, st.LR0 != nil
	if st.LR0 != nil {
		s.lr0 = *st.LR0
	}
	return nil
}
