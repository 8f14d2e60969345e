package optimtest_test

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/optlab/optlab/sdk/hparams"
	"github.com/optlab/optlab/sdk/optim"
	"github.com/optlab/optlab/sdk/optimtest"
)

// gd is a minimal optimizer: θ ← θ − scale·lr·∇L via Grad + Axpy.
type gd struct {
	optim.Defaults
	Scale float64 `hp:"scale" doc:"step multiplier"`
	Tag   string  `hp:"tag"`
	minor int
	h     optim.Host
	cfg   optim.Config
	ins   []optim.StepInput
}

func (o *gd) Info() optim.Info {
	return optim.Info{Name: "gd", ProtocolMinor: o.minor, Params: hparams.MustSpecs(gd{Scale: 1, Tag: "x"})}
}

func (o *gd) Configure(ctx context.Context, h optim.Host, cfg optim.Config) error {
	o.h, o.cfg, o.Scale, o.Tag = h, cfg, 1, "x"
	if err := hparams.Apply(o, cfg.Params); err != nil {
		return err
	}
	_, err := h.Exec(ctx, optim.Prog().Alloc(1, 0))
	return err
}

func (o *gd) Step(ctx context.Context, in optim.StepInput) (optim.StepOutput, error) {
	h := o.h
	o.ins = append(o.ins, in)
	p := optim.Prog()
	ev := p.Grad(1, optim.Params, optim.Batch{}, optim.BNUpdate)
	r, err := h.Exec(ctx, p.Axpy(optim.Params, optim.K(-o.Scale*in.LR), 1).Read(ev.Loss))
	if err != nil {
		return optim.StepOutput{}, err
	}
	return optim.StepOutput{Metrics: map[string]float64{"loss": r.Get(ev.Loss)}}, nil
}

func TestRun(t *testing.T) {
	h := optimtest.MustHost(t, optimtest.NewMLP(optimtest.MLPConfig{Samples: 40}), optimtest.WithBatchSize(10), optimtest.WithMembers(2))
	opt := &gd{}
	var after []int64
	outs, err := optimtest.Run(context.Background(), opt, h, 6,
		optimtest.WithHParams(map[string]any{"scale": int64(2)}),
		optimtest.WithRunSeed(9),
		optimtest.WithSchedule(func(s int64, e int) float64 { return 0.1 * float64(e+1) }),
		optimtest.WithAfterStep(func(in optim.StepInput, _ optim.StepOutput) error { after = append(after, in.Step); return nil }))
	if err != nil {
		t.Fatal(err)
	}
	wantCfg := optim.Config{Params: map[string]any{"scale": 2.0, "tag": "x"}, Seed: 9, TotalSteps: 6, StepsPerEpoch: 4, Members: 2}
	if !reflect.DeepEqual(opt.cfg, wantCfg) {
		t.Errorf("config %+v, want %+v", opt.cfg, wantCfg)
	}
	if len(outs) != 6 || len(after) != 6 || opt.ins[5] != (optim.StepInput{Step: 5, Epoch: 1, LR: 0.2}) {
		t.Errorf("outs %d, after %v, last input %+v", len(outs), after, opt.ins[5])
	}
	if outs[5].Metrics["loss"] >= outs[0].Metrics["loss"] {
		t.Errorf("loss did not decrease: %v → %v", outs[0].Metrics, outs[5].Metrics)
	}
	if h.ExecCount(-1) != 1 || h.ExecCount(3) != 1 {
		t.Errorf("exec counts: configure %d, step 3 %d", h.ExecCount(-1), h.ExecCount(3))
	}
}

func TestRunErrors(t *testing.T) {
	stop := errors.New("stop")
	tests := []struct {
		name string
		opt  *gd
		opts []optimtest.RunOption
		want string
	}{
		{"unknown param", &gd{}, []optimtest.RunOption{optimtest.WithHParams(map[string]any{"scal": 1.0})}, "unknown hyperparameter"},
		{"wrong type", &gd{}, []optimtest.RunOption{optimtest.WithHParams(map[string]any{"tag": 1.0})}, "not a valid string"},
		{"newer protocol", &gd{minor: optim.ProtocolMinor + 1}, nil, "protocol minor"},
		{"after step", &gd{}, []optimtest.RunOption{optimtest.WithAfterStep(func(optim.StepInput, optim.StepOutput) error { return stop })}, "stop"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := optimtest.MustHost(t, &optimtest.Linear{C: []float64{1}})
			_, err := optimtest.Run(context.Background(), tt.opt, h, 2, tt.opts...)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want containing %q", err, tt.want)
			}
		})
	}
}

func TestHarnessResume(t *testing.T) {
	ctx := context.Background()
	h := optimtest.MustHost(t, &optimtest.Linear{C: []float64{1, -1}}, optimtest.WithBatchSize(4), optimtest.WithTrainSize(40))
	opt := &gd{}
	r := optimtest.NewHarness(opt, h, optimtest.WithLR(0.5), optimtest.WithStartStep(7), optimtest.WithTotalSteps(10))
	if err := r.Configure(ctx, 3); err != nil {
		t.Fatal(err)
	}
	if c := r.Config(); c.TotalSteps != 10 || c.StepsPerEpoch != 10 {
		t.Errorf("config %+v", c)
	}
	if _, err := r.Run(ctx, 3); err != nil {
		t.Fatal(err)
	}
	if opt.ins[0].Step != 7 || opt.ins[2].Step != 9 {
		t.Errorf("steps %+v", opt.ins)
	}
	if got := h.Params(0); got[0] != -1.5 || got[1] != 1.5 {
		t.Errorf("params %v", got)
	}
}

// owner is gd declaring that it owns its update; base makes it send a
// BaseStep anyway.
type owner struct {
	gd
	base bool
}

func (o *owner) Info() optim.Info {
	i := o.gd.Info()
	i.Features.OwnsUpdate = true
	return i
}

func (o *owner) Step(ctx context.Context, in optim.StepInput) (optim.StepOutput, error) {
	if !o.base {
		return o.gd.Step(ctx, in)
	}
	h := o.h
	p := optim.Prog()
	ev := p.Grad(1, optim.Params, optim.Batch{}, optim.BNUpdate)
	_, err := h.Exec(ctx, p.BaseStep(optim.Params, 1).Read(ev.Loss))
	return optim.StepOutput{}, err
}

// The test host, like the real one, refuses BaseStep from an optimizer
// that declared it owns its update, and lets it run otherwise.
func TestHarnessOwnsUpdate(t *testing.T) {
	for _, base := range []bool{false, true} {
		h := optimtest.MustHost(t, &optimtest.Linear{C: []float64{1}})
		_, err := optimtest.Run(context.Background(), &owner{base: base}, h, 2)
		if base && (err == nil || !strings.Contains(err.Error(), `"owns-update" feature`)) {
			t.Errorf("BaseStep from an owns-update optimizer: %v, want an error naming the feature", err)
		}
		if !base && err != nil {
			t.Errorf("its own update: %v", err)
		}
	}
}
