// Package protocoltest holds a toy optimizer and a fake host for the tests of
// the plugin protocol (sdk/serve, host/plugin). The host's toyplugin command serves
// the toy optimizer as a real plugin binary.
package protocoltest

import (
	"context"
	"encoding/json"
	"fmt"

	"sync"
	"time"

	"github.com/optlab/optlab/sdk/optim"
	"github.com/optlab/optlab/sdk/optimtest"
)

// Modes of the toy optimizer's Step, chosen with the "mode" hyperparameter.
const (
	// ModeNormal runs a gradient step: Exec [Grad, Norm], then Exec [Axpy].
	ModeNormal = "normal"
	// ModePanic panics inside Step (recovered by sdk/serve).
	ModePanic = "panic"
	// ModeCrash panics in a new goroutine, which kills the plugin process.
	ModeCrash = "crash"
	// ModeHang sleeps for an hour, ignoring its context.
	ModeHang = "hang"
	// ModeBadOp sends an op kind the host does not know.
	ModeBadOp = "badop"
)

// GradVec is the handle of the toy optimizer's gradient: the first handle
// of its namespace (Configure checks it), named here for the tests that
// look at the programs it sends.
const GradVec optim.Vec = 1

// Toy is a toy optimizer: normalized gradient descent, g = ∇L(θ),
// θ ← θ − lr·scale·g/‖g‖. It declares every behaviour of optim.Features
// (Predictive, State, Finalize) and resolves a scale of -1 to 1.
type Toy struct {
	h         optim.Host
	scale     float64
	resolved  map[string]any
	mode      string
	bigTerms  int64
	steps     int64
	blob      []byte
	configure optim.Config
	hs        *optim.Handles
}

// New returns a Toy (as optim.Optimizer for serve.Serve).
func New() optim.Optimizer { return &Toy{} }

// NewPlain returns an optimizer that declares no feature and keeps every
// default (optim.Defaults): a Toy's Info, Configure and Step alone.
func NewPlain() optim.Optimizer { return plain{t: &Toy{}} }

type plain struct {
	optim.Defaults
	t *Toy
}

func (p plain) Info() optim.Info {
	info := p.t.Info()
	info.Name = "plain"
	info.Features = optim.Features{}
	return info
}

func (p plain) Configure(ctx context.Context, h optim.Host, cfg optim.Config) error {
	return p.t.Configure(ctx, h, cfg)
}

func (p plain) Step(ctx context.Context, in optim.StepInput) (optim.StepOutput, error) {
	return p.t.Step(ctx, in)
}

// NewFuture returns a Toy that claims a protocol minor version newer than
// this SDK's, which a host must refuse.
func NewFuture() optim.Optimizer { return future{&Toy{}} }

type future struct{ *Toy }

func (f future) Info() optim.Info {
	info := f.Toy.Info()
	info.Name = "future"
	info.ProtocolMinor = optim.ProtocolMinor + 1
	return info
}

// Info implements optim.Optimizer.
func (t *Toy) Info() optim.Info {
	return optim.Info{
		Name:     "toy",
		Version:  "0.1.0",
		Features: optim.Features{Members: true, Predictive: true, State: true, Finalize: true},
		Params: []optim.ParamSpec{
			{Name: "scale", Type: optim.Float, Default: 1, Doc: "step size multiplier; -1: 1 (reported by Resolved)"},
			{Name: "mode", Type: optim.String, Default: ModeNormal, Doc: "test behaviour of Step"},
			{Name: "big_terms", Type: optim.Int, Default: 0, Doc: "terms of an extra LinComb per step (message size tests)"},
			{Name: "verbose", Type: optim.Bool, Default: false},
		},
	}
}

// Configure implements optim.Optimizer: it reads the layout and allocates
// the gradient vector.
func (t *Toy) Configure(ctx context.Context, h optim.Host, cfg optim.Config) error {
	t.h, t.configure = h, cfg
	t.scale, t.mode, t.bigTerms = 1, ModeNormal, 0
	if v, ok := cfg.Params["scale"].(float64); ok {
		t.scale = v
	}
	t.resolved = nil
	if t.scale == -1 {
		t.scale = 1
		t.resolved = map[string]any{"scale": t.scale}
	}
	if v, ok := cfg.Params["mode"].(string); ok {
		t.mode = v
	}
	if v, ok := cfg.Params["big_terms"].(int64); ok {
		t.bigTerms = v
	}
	l, err := h.Layout(ctx)
	if err != nil {
		return fmt.Errorf("toy: layout: %w", err)
	}
	if len(l.Members) == 0 {
		return fmt.Errorf("toy: layout has no members")
	}
	t.hs = cfg.Namespace("toy")
	if g := t.hs.New("grad"); g != GradVec {
		return fmt.Errorf("toy: gradient handle %d, want %d: Configure with a fresh namespace", g, GradVec)
	}
	if _, err := h.Exec(ctx, t.hs.Prog().Alloc(GradVec, 0)); err != nil {
		return fmt.Errorf("toy: alloc: %w", err)
	}
	return nil
}

// Resolved implements optim.Optimizer: the scale used for a scale of -1.
func (t *Toy) Resolved() map[string]any { return t.resolved }

// Step implements optim.Optimizer.
func (t *Toy) Step(ctx context.Context, in optim.StepInput) (optim.StepOutput, error) {
	h := t.h
	switch t.mode {
	case ModePanic:
		panic(fmt.Sprintf("toy optimizer exploded at step %d", in.Step))
	case ModeCrash:
		go func() { panic("toy optimizer crashed the whole process") }()
		time.Sleep(time.Minute)
	case ModeHang:
		time.Sleep(time.Hour)
	case ModeBadOp:
		// An op sdk/optim does not have cannot be built in Go; a nil op is
		// the closest thing the author API allows.
		_, err := h.Exec(ctx, &optim.Program{Ops: []optim.Op{optim.Norm{X: GradVec}, nil}})
		return optim.StepOutput{}, err
	}
	q := t.hs.Prog()
	ev := q.Grad(GradVec, optim.Params, optim.Batch{}, optim.BNUpdate)
	norm := q.Norm(GradVec)
	r, err := h.Exec(ctx, q.Read(ev.Loss, ev.Acc, norm)) // read back: the toy exercises blocking reads

	if err != nil {
		return optim.StepOutput{}, fmt.Errorf("toy: gradient: %w", err)
	}
	gn := r.Get(norm)
	p := t.hs.Prog().Axpy(optim.Params, optim.K(-in.LR*t.scale/(gn+1e-12)), GradVec)
	if t.bigTerms > 0 {
		terms := make([]optim.Term, t.bigTerms)
		for i := range terms {
			terms[i] = optim.Term{Coef: optim.K(float64(i) + 0.5), X: GradVec}
		}
		p.LinComb(GradVec, terms...)
	}
	if _, err := h.Exec(ctx, p); err != nil {
		return optim.StepOutput{}, fmt.Errorf("toy: update: %w", err)
	}
	t.steps++
	return optim.StepOutput{Metrics: map[string]float64{"loss": r.Get(ev.Loss), "acc": r.Get(ev.Acc), "gnorm": gn}}, nil
}

// Predictive implements optim.Optimizer (Features.Predictive): an even mix of the live
// parameters and the gradient vector (meaningless, but every field is set).
func (t *Toy) Predictive(context.Context) (optim.Predictive, error) {
	return optim.Predictive{Kind: optim.Members, Vecs: []optim.Vec{optim.Params, GradVec}, Weights: []float64{0.5, 0.5}}, nil
}

// SaveState implements optim.Optimizer (Features.State): the last loaded blob, or the step
// count as JSON, and the gradient vector.
func (t *Toy) SaveState(context.Context) ([]byte, []optim.Vec, error) {
	if t.blob != nil {
		return t.blob, []optim.Vec{GradVec}, nil
	}
	b, err := json.Marshal(map[string]int64{"steps": t.steps})
	return b, []optim.Vec{GradVec}, err
}

// LoadState implements optim.Optimizer (Features.State).
func (t *Toy) LoadState(_ context.Context, blob []byte) error {
	t.blob = blob
	return nil
}

// Finalize implements optim.Optimizer (Features.Finalize): one program
// that recomputes the live parameters' BatchNorm statistics (UpdateBN).
func (t *Toy) Finalize(ctx context.Context) error {
	_, err := t.h.Exec(ctx, t.hs.Prog().UpdateBN(optim.Params))
	return err
}

// FakeHost is the host of the protocol tests: optimtest's exact float64
// host on a quadratic, L(θ) = ½‖θ‖², from θ = 1 (so every op has its
// documented result; the conformance suite proves it), that also records
// the programs it is sent and the deadline each call had left.
type FakeHost struct {
	*optimtest.Host
	// Discard stops the recording of programs (for benchmarks).
	Discard bool

	mu        sync.Mutex
	programs  []*optim.Program
	deadlines []time.Duration
}

// NewFakeHost returns a FakeHost with one member of n parameters, a
// training set of 1,000 and batches of 10 (for Layout).
func NewFakeHost(n int64) *FakeHost {
	d := make([]float64, n)
	x0 := make([]float64, n)
	for i := range d {
		d[i], x0[i] = 1, 1
	}
	q := optimtest.DiagQuadratic(d...)
	q.X0 = x0
	h, err := optimtest.NewHost(q, optimtest.WithTrainSize(1000), optimtest.WithBatchSize(10))
	if err != nil {
		panic(err) // a quadratic with n > 0 parameters always builds
	}
	return &FakeHost{Host: h}
}

// Exec implements optim.Host.
func (h *FakeHost) Exec(ctx context.Context, p *optim.Program) (optim.Result, error) {
	h.mu.Lock()
	if !h.Discard {
		var left time.Duration
		if d, ok := ctx.Deadline(); ok {
			left = time.Until(d)
		}
		h.programs = append(h.programs, p)
		h.deadlines = append(h.deadlines, left)
	}
	h.mu.Unlock()
	return h.Host.Exec(ctx, p)
}

// Programs returns the programs executed so far.
func (h *FakeHost) Programs() []*optim.Program {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]*optim.Program(nil), h.programs...)
}

// Deadlines returns, for each executed program, the time its context had
// left when Exec was called (0 for no deadline).
func (h *FakeHost) Deadlines() []time.Duration {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]time.Duration(nil), h.deadlines...)
}
