package optimtest

import (
	"context"
	"fmt"
	"io"

	"github.com/optlab/optlab/sdk/hparams"
	"github.com/optlab/optlab/sdk/optim"
)

// StepBeginner is implemented by hosts that must be told when a training
// step begins (to load the minibatch and set the schedule's learning rate).
// *Host implements it; the harness calls it before every Optimizer.Step.
type StepBeginner interface {
	BeginStep(in optim.StepInput)
}

// Reporter is implemented by hosts that collect the metrics of Report ops;
// the harness merges them into each step's output, as the host's training
// loop does. *Host implements it.
type Reporter interface {
	TakeReports() map[string]float64
}

// RunOption configures a Harness.
type RunOption func(*runConfig)

type runConfig struct {
	params        map[string]any
	seed          int64
	schedule      func(step int64, epoch int) float64
	stepsPerEpoch int64
	totalSteps    int64
	start         int64
	after         func(in optim.StepInput, out optim.StepOutput) error
	trace         io.Writer
}

// WithHParams sets the optimizer's hyperparameters as an experiment's TOML
// would; they are validated against Info().Params and defaults are filled
// in, as the real host does.
func WithHParams(p map[string]any) RunOption { return func(c *runConfig) { c.params = p } }

// WithRunSeed sets Config.Seed (default 1).
func WithRunSeed(seed int64) RunOption { return func(c *runConfig) { c.seed = seed } }

// WithLR sets a constant learning rate (StepInput.LR).
func WithLR(lr float64) RunOption {
	return func(c *runConfig) { c.schedule = func(int64, int) float64 { return lr } }
}

// WithSchedule sets StepInput.LR from the step and epoch.
func WithSchedule(f func(step int64, epoch int) float64) RunOption {
	return func(c *runConfig) { c.schedule = f }
}

// WithStepsPerEpoch sets Config.StepsPerEpoch (default: the host's loader
// value when it has one, else TrainSize/BatchSize from Layout, else 1).
func WithStepsPerEpoch(n int64) RunOption { return func(c *runConfig) { c.stepsPerEpoch = n } }

// WithTotalSteps sets Config.TotalSteps (default: the steps Run is asked for).
func WithTotalSteps(n int64) RunOption { return func(c *runConfig) { c.totalSteps = n } }

// WithStartStep makes the first step index n, for resuming from a
// checkpoint (default 0).
func WithStartStep(n int64) RunOption { return func(c *runConfig) { c.start = n } }

// WithAfterStep calls f after every step; an error from f stops the run.
func WithAfterStep(f func(in optim.StepInput, out optim.StepOutput) error) RunOption {
	return func(c *runConfig) { c.after = f }
}

// WithTrace makes the optimizer see the host through optim.Trace (without
// timings), writing every Layout and Exec call to w: what golden op-trace
// tests compare (see Golden).
func WithTrace(w io.Writer) RunOption { return func(c *runConfig) { c.trace = w } }

// Harness drives an optim.Optimizer against an optim.Host the way the real
// host's training loop does. The optimizer may be an in-process value or a
// client of a plugin process; the host is typically a *Host.
type Harness struct {
	Opt  optim.Optimizer
	Host optim.Host
	cfg  runConfig
	next int64
	conf optim.Config
	view optim.Host // Host as the optimizer sees it (traced by WithTrace)
}

// NewHarness returns a harness; call Configure before Step.
func NewHarness(opt optim.Optimizer, h optim.Host, opts ...RunOption) *Harness {
	c := runConfig{seed: 1, schedule: func(int64, int) float64 { return 0 }}
	for _, o := range opts {
		o(&c)
	}
	r := &Harness{Opt: opt, Host: h, cfg: c, next: c.start, view: h}
	if c.trace != nil {
		r.view = optim.Trace(h, c.trace, false)
	}
	return r
}

// Config returns the optim.Config that Configure passed (zero before).
func (r *Harness) Config() optim.Config { return r.conf }

// Configure validates the hyperparameters against the optimizer's Info and
// calls Optimizer.Configure. totalSteps fills Config.TotalSteps unless
// WithTotalSteps was given.
func (r *Harness) Configure(ctx context.Context, totalSteps int64) error {
	info := r.Opt.Info()
	if info.ProtocolMinor > optim.ProtocolMinor {
		return fmt.Errorf("optimtest: %s speaks protocol minor %d, harness %d", info.Name, info.ProtocolMinor, optim.ProtocolMinor)
	}
	params, err := hparams.Resolve(info.Params, r.cfg.params)
	if err != nil {
		return fmt.Errorf("optimtest: %s: %w", info.Name, err)
	}
	if h, ok := r.Host.(*Host); ok {
		// As the real host: an optimizer that owns its update may not send
		// BaseStep or SetLR.
		h.setOwnsUpdate(info.OwnsUpdateWith(params))
	}
	layout, err := r.Host.Layout(ctx)
	if err != nil {
		return fmt.Errorf("optimtest: layout: %w", err)
	}
	spe := r.cfg.stepsPerEpoch
	if h, ok := r.Host.(*Host); ok && spe == 0 {
		spe = h.StepsPerEpoch()
	}
	if spe == 0 && layout.BatchSize > 0 {
		spe = layout.TrainSize / layout.BatchSize
	}
	spe = max(spe, 1)
	total := totalSteps
	if r.cfg.totalSteps > 0 {
		total = r.cfg.totalSteps
	}
	r.conf = optim.Config{
		Params: params, Seed: r.cfg.seed, TotalSteps: total,
		StepsPerEpoch: spe, Members: len(layout.Members),
	}
	if err := r.Opt.Configure(ctx, r.view, r.conf); err != nil {
		return fmt.Errorf("optimtest: configure %s: %w", info.Name, err)
	}
	return nil
}

// Step runs the next training step.
func (r *Harness) Step(ctx context.Context) (optim.StepOutput, error) {
	epoch := int(r.next / max(r.conf.StepsPerEpoch, 1))
	in := optim.StepInput{Step: r.next, Epoch: epoch, LR: r.cfg.schedule(r.next, epoch)}
	if b, ok := r.Host.(StepBeginner); ok {
		b.BeginStep(in)
	}
	out, err := r.Opt.Step(ctx, in)
	if err != nil {
		return out, fmt.Errorf("optimtest: step %d: %w", in.Step, err)
	}
	if rep, ok := r.Host.(Reporter); ok {
		if out, err = mergeReports(out, rep.TakeReports()); err != nil {
			return out, fmt.Errorf("optimtest: step %d: %w", in.Step, err)
		}
	}
	r.next++
	if r.cfg.after != nil {
		if err := r.cfg.after(in, out); err != nil {
			return out, fmt.Errorf("optimtest: after step %d: %w", in.Step, err)
		}
	}
	return out, nil
}

// Run runs n steps and returns their outputs.
func (r *Harness) Run(ctx context.Context, n int) ([]optim.StepOutput, error) {
	outs := make([]optim.StepOutput, 0, n)
	for range n {
		out, err := r.Step(ctx)
		if err != nil {
			return outs, err
		}
		outs = append(outs, out)
	}
	return outs, nil
}

// Finalize calls the optimizer's Finalize (Features.Finalize) as the real
// host does after the run's last step, and drops what its programs
// reported; for an optimizer without the feature it does nothing.
func (r *Harness) Finalize(ctx context.Context) error {
	if !r.Opt.Info().Features.Finalize {
		return nil
	}
	if err := r.Opt.Finalize(ctx); err != nil {
		return fmt.Errorf("optimtest: finalize: %w", err)
	}
	if rep, ok := r.Host.(Reporter); ok {
		rep.TakeReports()
	}
	return nil
}

// Run configures opt against h and calls Step steps times, returning the
// step outputs. It is NewHarness + Configure(steps) + Run(steps), then
// Finalize when the steps reached the run's total (WithTotalSteps, else
// steps), as the host does after a run's last step.
func Run(ctx context.Context, opt optim.Optimizer, h optim.Host, steps int, opts ...RunOption) ([]optim.StepOutput, error) {
	r := NewHarness(opt, h, opts...)
	if err := r.Configure(ctx, int64(steps)); err != nil {
		return nil, err
	}
	outs, err := r.Run(ctx, steps)
	if err != nil || r.next < r.conf.TotalSteps {
		return outs, err
	}
	return outs, r.Finalize(ctx)
}

// mergeReports returns out with the reported metrics added; a name that the
// step both reported and returned is an error.
func mergeReports(out optim.StepOutput, reports map[string]float64) (optim.StepOutput, error) {
	if len(reports) == 0 {
		return out, nil
	}
	m := make(map[string]float64, len(out.Metrics)+len(reports))
	for k, v := range out.Metrics {
		m[k] = v
	}
	for k, v := range reports {
		if _, dup := m[k]; dup {
			return out, fmt.Errorf("metric %q both reported by the program and returned by Step", k)
		}
		m[k] = v
	}
	out.Metrics = m
	return out, nil
}
