// Package testplugin holds a toy optimizer and a fake host for the tests of
// the plugin protocol (sdk/serve, host/plugin). The toyplugin command serves
// the toy optimizer as a real plugin binary.
package testplugin

import (
	"context"
	"encoding/json"
	"fmt"

	"sync"
	"time"

	"github.com/optlab/optlab/sdk/optim"
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

// GradVec is the handle the toy optimizer allocates for its gradient.
const GradVec optim.Vec = 1

// Toy is a toy optimizer: normalized gradient descent, g = ∇L(θ),
// θ ← θ − lr·scale·g/‖g‖. It implements optim.Predictor and optim.Stateful.
type Toy struct {
	scale     float64
	mode      string
	bigTerms  int64
	steps     int64
	blob      []byte
	configure optim.Config
}

// New returns a Toy (as optim.Optimizer for serve.Serve).
func New() optim.Optimizer { return &Toy{} }

// NewPlain returns an optimizer that implements neither optim.Predictor nor
// optim.Stateful: a Toy hidden behind the bare interface.
func NewPlain() optim.Optimizer { return plain{&Toy{}} }

type plain struct{ t *Toy }

func (p plain) Info() optim.Info {
	info := p.t.Info()
	info.Name = "plain"
	info.Capabilities = nil
	return info
}

func (p plain) Configure(ctx context.Context, h optim.Host, cfg optim.Config) error {
	return p.t.Configure(ctx, h, cfg)
}

func (p plain) Step(ctx context.Context, h optim.Host, in optim.StepInput) (optim.StepOutput, error) {
	return p.t.Step(ctx, h, in)
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
		Name:          "toy",
		Version:       "0.1.0",
		ProtocolMinor: optim.ProtocolMinor,
		Capabilities:  []string{"state"},
		Params: []optim.ParamSpec{
			{Name: "scale", Type: optim.Float, Default: 1, Doc: "step size multiplier"},
			{Name: "mode", Type: optim.String, Default: ModeNormal, Doc: "test behaviour of Step"},
			{Name: "big_terms", Type: optim.Int, Default: 0, Doc: "terms of an extra LinComb per step (message size tests)"},
			{Name: "verbose", Type: optim.Bool, Default: false},
		},
	}
}

// Configure implements optim.Optimizer: it reads the layout and allocates
// the gradient vector.
func (t *Toy) Configure(ctx context.Context, h optim.Host, cfg optim.Config) error {
	t.configure = cfg
	t.scale, t.mode, t.bigTerms = 1, ModeNormal, 0
	if v, ok := cfg.Params["scale"].(float64); ok {
		t.scale = v
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
	if _, err := h.Exec(ctx, optim.Prog().Alloc(GradVec)); err != nil {
		return fmt.Errorf("toy: alloc: %w", err)
	}
	return nil
}

// Step implements optim.Optimizer.
func (t *Toy) Step(ctx context.Context, h optim.Host, in optim.StepInput) (optim.StepOutput, error) {
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
	r, err := h.Exec(ctx, optim.Prog().Grad(GradVec, optim.Params, optim.Batch{}, optim.BNUpdate).Norm(GradVec))
	if err != nil {
		return optim.StepOutput{}, fmt.Errorf("toy: gradient: %w", err)
	}
	gn := r.Scalar(2)
	p := optim.Prog().Axpy(optim.Params, -in.LR*t.scale/(gn+1e-12), GradVec)
	if t.bigTerms > 0 {
		terms := make([]optim.Term, t.bigTerms)
		for i := range terms {
			terms[i] = optim.Term{Coef: float64(i) + 0.5, X: GradVec}
		}
		p.LinComb(GradVec, terms...)
	}
	if _, err := h.Exec(ctx, p); err != nil {
		return optim.StepOutput{}, fmt.Errorf("toy: update: %w", err)
	}
	t.steps++
	return optim.StepOutput{Metrics: map[string]float64{"loss": r.Scalar(0), "acc": r.Scalar(1), "gnorm": gn}}, nil
}

// Predictive implements optim.Predictor: an even mix of the live
// parameters and the gradient vector (meaningless, but every field is set).
func (t *Toy) Predictive(context.Context) (optim.Predictive, error) {
	return optim.Predictive{Kind: optim.Members, Vecs: []optim.Vec{optim.Params, GradVec}, Weights: []float64{0.5, 0.5}}, nil
}

// SaveState implements optim.Stateful: the last loaded blob, or the step
// count as JSON, and the gradient vector.
func (t *Toy) SaveState(context.Context) ([]byte, []optim.Vec, error) {
	if t.blob != nil {
		return t.blob, []optim.Vec{GradVec}, nil
	}
	b, err := json.Marshal(map[string]int64{"steps": t.steps})
	return b, []optim.Vec{GradVec}, err
}

// LoadState implements optim.Stateful.
func (t *Toy) LoadState(_ context.Context, blob []byte) error {
	t.blob = blob
	return nil
}

// FakeHost is an optim.Host that records the programs it executes and
// answers with fixed scalars: Grad emits (1.5, 0.25), Norm 2, Dot 3. It
// checks handles: an op naming a vector that was never allocated (or a
// member it does not have) fails with a HandleError carrying the op index.
type FakeHost struct {
	// L is what Layout returns.
	L optim.Layout
	// Discard stops the recording of programs (for benchmarks).
	Discard bool

	mu        sync.Mutex
	programs  []*optim.Program
	deadlines []time.Duration
	live      map[optim.Vec]bool
}

// NewFakeHost returns a FakeHost with one member of n parameters.
func NewFakeHost(n int64) *FakeHost {
	return &FakeHost{L: optim.Layout{
		Members:   []optim.MemberLayout{{Arch: "toy", Numel: n, Tensors: []optim.Tensor{{Name: "w", Shape: []int64{n}, Kind: "weight"}}}},
		TrainSize: 1000,
		BatchSize: 10,
	}}
}

// HandleError reports an op that named an unknown vector.
type HandleError struct {
	Index int
	Vec   optim.Vec
}

// Error describes the error.
func (e *HandleError) Error() string {
	return fmt.Sprintf("op %d: unknown vector handle %d", e.Index, e.Vec)
}

// OpIndex returns the index of the failing op.
func (e *HandleError) OpIndex() int { return e.Index }

// Layout implements optim.Host.
func (h *FakeHost) Layout(ctx context.Context) (optim.Layout, error) {
	if err := ctx.Err(); err != nil {
		return optim.Layout{}, err
	}
	return h.L, nil
}

// Exec implements optim.Host.
func (h *FakeHost) Exec(ctx context.Context, p *optim.Program) (optim.Result, error) {
	if err := ctx.Err(); err != nil {
		return optim.Result{}, err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.Discard {
		var left time.Duration
		if d, ok := ctx.Deadline(); ok {
			left = time.Until(d)
		}
		h.programs = append(h.programs, p)
		h.deadlines = append(h.deadlines, left)
	}
	if h.live == nil {
		h.live = map[optim.Vec]bool{}
	}
	var res optim.Result
	for i, op := range p.Ops {
		var used []optim.Vec
		switch o := op.(type) {
		case optim.Alloc:
			h.live[o.ID] = true
		case optim.Free:
			used = append(used, o.ID)
			delete(h.live, o.ID)
		case optim.Axpy:
			used = append(used, o.Dst, o.X)
		case optim.LinComb:
			used = append(used, o.Dst)
		case optim.Grad:
			used = append(used, o.Out, o.At)
			res.Scalars = append(res.Scalars, 1.5, 0.25)
		case optim.Norm:
			used = append(used, o.X)
			res.Scalars = append(res.Scalars, 2)
		case optim.Dot:
			used = append(used, o.A, o.B)
			res.Scalars = append(res.Scalars, 3)
		}
		for _, v := range used {
			if m, ok := v.Member(); ok && m < len(h.L.Members) || h.live[v] {
				continue
			}
			return optim.Result{}, &HandleError{Index: i, Vec: v}
		}
	}
	return res, nil
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
