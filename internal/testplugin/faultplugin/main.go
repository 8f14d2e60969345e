// Command faultplugin is an optlab plugin for the end-to-end tests of the
// host command: plain SGD (one gradient and the host's base step per
// member) that misbehaves at a chosen step, picked by its hyperparameters:
//
//	crash_at = k   write a line to stderr and exit with status 3 at step k
//	hang_at = k    sleep for an hour at step k, ignoring the call's deadline
//	nan_at = k     report a NaN loss at step k
//	fail_at = k    return an error from Step at step k
//
// A negative value (the default) turns a fault off. Steps count from 0 and
// restart with every run.
package main

import (
	"context"
	"fmt"
	"math"
	"os"
	"time"

	"github.com/optlab/optlab/sdk/hparams"
	"github.com/optlab/optlab/sdk/optim"
	"github.com/optlab/optlab/sdk/serve"
)

// rawStderr is file descriptor 2 itself (go-plugin replaces os.Stderr).
var rawStderr = os.NewFile(2, "stderr")

// config holds the fault switches; see the package comment.
type config struct {
	CrashAt int `hp:"crash_at" doc:"exit with status 3 at this step (-1: never)"`
	HangAt  int `hp:"hang_at" doc:"sleep for an hour at this step (-1: never)"`
	NaNAt   int `hp:"nan_at" doc:"report a NaN loss at this step (-1: never)"`
	FailAt  int `hp:"fail_at" doc:"return an error from Step at this step (-1: never)"`
}

func defaults() config { return config{CrashAt: -1, HangAt: -1, NaNAt: -1, FailAt: -1} }

// faulty is the optimizer.
type faulty struct {
	optim.Defaults
	h     optim.Host
	cfg   config
	hs    *optim.Handles
	grads []optim.Vec // one gradient per member
}

// Info implements optim.Optimizer.
func (o *faulty) Info() optim.Info {
	return optim.Info{Name: "faulty", Version: "0.0.1", Features: optim.Features{Members: true, BaseStep: true},
		Params: hparams.MustSpecs(defaults())}
}

// Configure implements optim.Optimizer.
func (o *faulty) Configure(ctx context.Context, h optim.Host, cfg optim.Config) error {
	o.h, o.cfg = h, defaults()
	if err := hparams.Apply(&o.cfg, cfg.Params); err != nil {
		return fmt.Errorf("faulty: %w", err)
	}
	o.hs = cfg.Namespace("faulty")
	o.grads = o.hs.PerMember("g", cfg.MemberCount())
	p := o.hs.Prog()
	for m, g := range o.grads {
		p.Alloc(g, m)
	}
	if _, err := h.Exec(ctx, p); err != nil {
		return fmt.Errorf("faulty: configure: %w", err)
	}
	return nil
}

// Step implements optim.Optimizer.
func (o *faulty) Step(ctx context.Context, in optim.StepInput) (optim.StepOutput, error) {
	k := int(in.Step)
	switch k {
	case o.cfg.CrashAt:
		// Straight to file descriptor 2, as a dying runtime or C library
		// would: go-plugin forwards writes to os.Stderr asynchronously,
		// and they would be lost with the process.
		fmt.Fprintf(rawStderr, "faulty: simulated crash at step %d\n", k)
		os.Exit(3)
	case o.cfg.HangAt:
		fmt.Fprintf(rawStderr, "faulty: hanging at step %d\n", k)
		time.Sleep(time.Hour)
	case o.cfg.FailAt:
		return optim.StepOutput{}, fmt.Errorf("faulty: simulated failure at step %d", k)
	}
	p := o.hs.Prog()
	evs := make([]optim.Eval, len(o.grads))
	for m, g := range o.grads {
		evs[m] = p.Grad(g, optim.ParamsOf(m), optim.Batch{}, optim.BNUpdate)
		p.BaseStep(optim.ParamsOf(m), g)
	}
	loss, acc := p.Mean(evs)
	if k == o.cfg.NaNAt {
		loss = p.Mul(loss, optim.K(math.NaN()))
	}
	p.ReportMetrics(loss, acc)
	if _, err := o.h.Exec(ctx, p); err != nil {
		return optim.StepOutput{}, fmt.Errorf("faulty: step: %w", err)
	}
	return optim.StepOutput{}, nil
}

func main() { serve.Serve(func() optim.Optimizer { return &faulty{} }) }
