package optimtest_test

import (
	"context"
	"fmt"
	"math"

	"github.com/optlab/optlab/sdk/hparams"
	"github.com/optlab/optlab/sdk/optim"
	"github.com/optlab/optlab/sdk/optimtest"
)

// Config holds GNSGD's hyperparameters.
type Config struct {
	Eta   float64 `hp:"eta" range:"[0,)" doc:"noise variance at step 0"`
	Gamma float64 `hp:"gamma" range:"[0,)" doc:"annealing exponent: variance eta/(1+t)^gamma"`
}

func defaults() Config { return Config{Eta: 0.01, Gamma: 0.55} }

// GNSGD is SGD with annealed Gaussian gradient noise (Neelakantan et al.,
// 2015): the base step gets g + N(0, η/(1+t)^γ). Its state lives on the
// host, so it declares no feature and embeds optim.Defaults.
type GNSGD struct {
	optim.Defaults
	h           optim.Host
	cfg         Config
	hs          *optim.Handles
	grad, noise optim.Vec
}

// New returns the optimizer with its default hyperparameters.
func New() optim.Optimizer { return &GNSGD{cfg: defaults()} }

// Info describes the plugin; the schema comes from Config's tags.
func (o *GNSGD) Info() optim.Info {
	return optim.Info{Name: "gnsgd", Version: "0.1.0", Params: hparams.MustSpecs(defaults())}
}

// Configure decodes the hyperparameters and allocates two vectors.
func (o *GNSGD) Configure(ctx context.Context, h optim.Host, cfg optim.Config) error {
	o.h, o.cfg = h, defaults()
	if err := hparams.Apply(&o.cfg, cfg.Params); err != nil {
		return fmt.Errorf("gnsgd: %w", err)
	}
	o.hs = cfg.Namespace("gnsgd")
	o.grad, o.noise = o.hs.New("grad"), o.hs.New("noise")
	if _, err := h.Exec(ctx, o.hs.Prog().Alloc(o.grad, 0).Alloc(o.noise, 0)); err != nil {
		return fmt.Errorf("gnsgd: configure: %w", err)
	}
	return nil
}

// Step sends one program: gradient, noise, base step.
func (o *GNSGD) Step(ctx context.Context, in optim.StepInput) (optim.StepOutput, error) {
	std := math.Sqrt(o.cfg.Eta / math.Pow(1+float64(in.Step), o.cfg.Gamma))
	p := o.hs.Prog()
	ev := p.Grad(o.grad, optim.Params, optim.Batch{}, optim.BNUpdate) // registers of loss, acc
	p.RandN(o.noise, std, 0)                                          // seed 0: the run's host stream
	p.Axpy(o.grad, optim.K(1), o.noise).BaseStep(optim.Params, o.grad)
	p.ReportMetrics(ev.Loss, ev.Acc) // to the host's logs, without a blocking read
	if _, err := o.h.Exec(ctx, p); err != nil {
		return optim.StepOutput{}, fmt.Errorf("gnsgd: step: %w", err)
	}
	return optim.StepOutput{}, nil
}

// Example_gradientNoise runs the GNSGD optimizer of this file (the worked
// example of docs/PLUGINS.md) on the toy MLP host.
func Example_gradientNoise() {
	ctx := context.Background()
	h, err := optimtest.NewHost(optimtest.NewMLP(optimtest.MLPConfig{Hidden: 8, Samples: 128}),
		optimtest.WithBatchSize(32), optimtest.WithBase(optimtest.BaseOptimizer{Momentum: 0.9}))
	if err != nil {
		panic(err)
	}
	outs, err := optimtest.Run(ctx, New(), h, 60, optimtest.WithLR(0.1),
		optimtest.WithHParams(map[string]any{"eta": 0.001}))
	if err != nil {
		panic(err)
	}
	first, last := outs[0].Metrics["loss"], outs[len(outs)-1].Metrics["loss"]
	fmt.Println("loss decreased:", last < first/2)
	fmt.Println("Exec calls in step 0:", h.ExecCount(0))
	fmt.Println("eta rejected as string:", optimtest.NewHarness(New(), h,
		optimtest.WithHParams(map[string]any{"eta": "big"})).Configure(ctx, 1) != nil)
	fmt.Println(optimtest.NewHarness(New(), h,
		optimtest.WithHParams(map[string]any{"eta": -1.0})).Configure(ctx, 1))
	// Output:
	// loss decreased: true
	// Exec calls in step 0: 1
	// eta rejected as string: true
	// optimtest: gnsgd: hparams: "eta": -1 is out of range [0,): want ≥ 0
}
