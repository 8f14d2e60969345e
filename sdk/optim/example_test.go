package optim_test

import (
	"context"
	"fmt"

	"github.com/optlab/optlab/sdk/hparams"
	"github.com/optlab/optlab/sdk/optim"
	"github.com/optlab/optlab/sdk/optimtest"
)

// SAM is plain sharpness-aware minimization (Foret et al., 2021) as an
// optlab optimizer: per member, g = ∇L(θ), θ + ρ·g/‖g‖, g' = ∇L there
// (BatchNorm frozen), back to θ, and the host's base step with g'. Served
// as a plugin, its main is `serve.Serve(func() optim.Optimizer { return
// &SAM{} })`. (plugins/sam is the full method: ASAM, m-sharpness.)
type SAM struct {
	optim.Defaults         // no predictive, state or finalizer of its own
	Rho            float64 `hp:"rho" range:"[0,)" doc:"neighbourhood radius ρ"`

	h        optim.Host
	hs       *optim.Handles
	g, saved []optim.Vec // per member: the gradient, θ before the ascent
}

// Info names the optimizer, declares its features and its hyperparameters.
func (o *SAM) Info() optim.Info {
	return optim.Info{Name: "sam", Version: "0.1.0", Features: optim.Features{Members: true, BaseStep: true},
		Params: hparams.MustSpecs(SAM{Rho: 0.05})}
}

// Configure keeps the host and allocates two vectors per member.
func (o *SAM) Configure(ctx context.Context, h optim.Host, cfg optim.Config) error {
	o.h, o.hs, o.Rho = h, cfg.Namespace("sam"), 0.05
	if err := hparams.Apply(o, cfg.Params); err != nil {
		return fmt.Errorf("sam: %w", err)
	}
	o.g, o.saved = o.hs.PerMember("g", cfg.MemberCount()), o.hs.PerMember("saved", cfg.MemberCount())
	p := o.hs.Prog()
	for m := range o.g {
		p.Alloc(o.g[m], m).Alloc(o.saved[m], m)
	}
	_, err := h.Exec(ctx, p)
	return err
}

// Step sends one program and reads nothing back: ρ/‖g‖ is a register on
// the device, and the loss and accuracy are reported from there.
func (o *SAM) Step(ctx context.Context, _ optim.StepInput) (optim.StepOutput, error) {
	p := o.hs.Prog()
	evs := make([]optim.Eval, len(o.g))
	for m, g := range o.g {
		th := optim.ParamsOf(m)
		evs[m] = p.Grad(g, th, optim.Batch{}, optim.BNUpdate)            // g = ∇L(θ)
		scale := p.Div(optim.K(o.Rho), p.Add(p.Norm(g), optim.K(1e-12))) // ρ/‖g‖
		p.Copy(o.saved[m], th).Axpy(th, scale, g)                        // θ ← θ + ρ·g/‖g‖
		p.Grad(g, th, optim.Batch{}, optim.BNFreeze)                     // g = ∇L(θ + e)
		p.Copy(th, o.saved[m]).BaseStep(th, g)                           // back to θ; base step
	}
	p.ReportMetrics(p.Mean(evs))
	if _, err := o.h.Exec(ctx, p); err != nil {
		return optim.StepOutput{}, fmt.Errorf("sam: step: %w", err)
	}
	return optim.StepOutput{}, nil
}

// A plain SAM, run against the exact float64 host of optimtest (a small
// MLP with SGD and momentum as the base optimizer) for 60 steps: the loss
// falls, every step is one Exec, and a bad hyperparameter is one message.
func Example() {
	ctx := context.Background()
	h, err := optimtest.NewHost(optimtest.NewMLP(optimtest.MLPConfig{Hidden: 8, Samples: 128}),
		optimtest.WithBatchSize(32), optimtest.WithBase(optimtest.BaseOptimizer{Momentum: 0.9}))
	if err != nil {
		panic(err)
	}
	outs, err := optimtest.Run(ctx, &SAM{}, h, 60, optimtest.WithLR(0.1),
		optimtest.WithHParams(map[string]any{"rho": 0.05}))
	if err != nil {
		panic(err)
	}
	first, last := outs[0].Metrics["loss"], outs[len(outs)-1].Metrics["loss"]
	fmt.Println("loss decreased:", last < first/2)
	fmt.Println("Exec calls in step 5:", h.ExecCount(5), "blocking reads:", h.ReadCount(5))
	fmt.Println(optimtest.NewHarness(&SAM{}, h, optimtest.WithHParams(map[string]any{"rho": -1.0})).Configure(ctx, 1))
	// Output:
	// loss decreased: true
	// Exec calls in step 5: 1 blocking reads: 0
	// optimtest: sam: hparams: "rho": -1 is out of range [0,): want ≥ 0
}

// A program's scalars live in registers on the device: Norm reduces a
// vector into one, register arithmetic combines them, a register can be
// an op's coefficient, and only Read brings a value back. Here a
// normalized gradient step on L(θ) = ½(θ₀² + 4θ₁²) from θ = (1, 1).
func ExampleProgram_registers() {
	ctx := context.Background()
	q := optimtest.DiagQuadratic(1, 4)
	q.X0 = []float64{1, 1}
	h, err := optimtest.NewHost(q)
	if err != nil {
		panic(err)
	}
	hs := optim.NewHandles().Sub("demo")
	g := hs.New("g")
	if _, err := h.Exec(ctx, hs.Prog().Alloc(g, 0)); err != nil {
		panic(err)
	}
	p := hs.Prog()
	ev := p.Grad(g, optim.Params, optim.Batch{}, optim.BNUpdate) // g = (1, 4); ev.Loss is a register
	n := p.Norm(g)                                               // ‖g‖ = √17, a register
	p.Axpy(optim.Params, p.Div(optim.K(-0.5), n), g)             // θ ← θ − 0.5·g/‖g‖
	p.Read(ev.Loss, n)                                           // the only values sent back
	r, err := h.Exec(ctx, p)
	if err != nil {
		panic(err)
	}
	fmt.Printf("loss %.2f, ‖g‖² %.2f, θ = (%.4f, %.4f)\n", r.Get(ev.Loss), r.Get(n)*r.Get(n), h.Params(0)[0], h.Params(0)[1])
	// Output:
	// loss 2.50, ‖g‖² 17.00, θ = (0.8787, 0.5149)
}
