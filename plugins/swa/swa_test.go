package swa_test

import (
	"context"
	"flag"
	"math"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/optlab/optlab/plugins/bsam"
	"github.com/optlab/optlab/plugins/builtin"
	"github.com/optlab/optlab/plugins/compose"
	"github.com/optlab/optlab/plugins/otmdr"
	"github.com/optlab/optlab/plugins/sam"
	"github.com/optlab/optlab/plugins/sgd"
	"github.com/optlab/optlab/plugins/swa"
	"github.com/optlab/optlab/sdk/hparams"
	"github.com/optlab/optlab/sdk/optim"
	"github.com/optlab/optlab/sdk/optimtest"
)

func hp(params map[string]any) optimtest.RunOption { return optimtest.WithHParams(params) }

// newSWA returns the built-in swa method, with the built-in members.
func newSWA() optim.Optimizer { return swa.New(builtin.MemberOptions()) }

// mlp has 64 samples: 4 steps per epoch with batches of 16.
func mlp() optimtest.Problem {
	return optimtest.NewMLP(optimtest.MLPConfig{Hidden: 6, Samples: 64, Seed: 2})
}

// bnMLP is the toy MLP with its first bias called a BatchNorm tensor, so
// that SWA sees a model with BatchNorm in its Layout.
type bnMLP struct{ *optimtest.MLP }

func (m bnMLP) Tensors() []optim.Tensor {
	ts := m.MLP.Tensors()
	ts[1].Kind = "bn"
	return ts
}

func bnProblem() optimtest.Problem {
	return bnMLP{optimtest.NewMLP(optimtest.MLPConfig{Hidden: 6, Samples: 64, Seed: 2})}
}

const spe = 4 // steps per epoch of mlp with batches of 16

func host(t *testing.T, p optimtest.Problem, opts ...optimtest.HostOption) *optimtest.Host {
	t.Helper()
	return optimtest.MustHost(t, p, append([]optimtest.HostOption{optimtest.WithBatchSize(16)}, opts...)...)
}

func vec(t *testing.T, h *optimtest.Host, v optim.Vec) []float64 {
	t.Helper()
	d, err := h.Vec(v)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func predictive(t *testing.T, opt optim.Optimizer) optim.Predictive {
	t.Helper()
	p, err := opt.Predictive(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func average(opt optim.Optimizer) optim.Vec { return opt.(*swa.SWA).Average() }

// point is the predictive of the live parameters of a one-member run.
var point = optim.Predictive{Kind: optim.Members, Vecs: []optim.Vec{optim.Params}}

func averaged(opt optim.Optimizer) optim.Predictive {
	return optim.Predictive{Kind: optim.Members, Vecs: []optim.Vec{average(opt)}}
}

// record keeps what the host and the step said after every step.
type record struct {
	h      *optimtest.Host
	lr     []float64
	params [][]float64
	bn     []int
	out    []optim.StepOutput
}

func (r *record) after(_ optim.StepInput, out optim.StepOutput) error {
	r.lr = append(r.lr, r.h.LR(0))
	r.params = append(r.params, r.h.Params(0))
	bn, _ := r.h.BNStats(optim.Params)
	r.bn = append(r.bn, bn)
	r.out = append(r.out, out)
	return nil
}

// programs returns the programs the host ran in step s (Finalize's
// included after the last step).
func programs(h *optimtest.Host, s int64) []optim.Program {
	var out []optim.Program
	for _, e := range h.Execs() {
		if e.Step == s {
			out = append(out, e.Program)
		}
	}
	return out
}

// opsOf returns the ops of type T that the host ran, in order.
func opsOf[T optim.Op](h *optimtest.Host) []T {
	var out []T
	for _, e := range h.Execs() {
		for _, op := range e.Program.Ops {
			if o, ok := op.(T); ok {
				out = append(out, o)
			}
		}
	}
	return out
}

// mean is the arithmetic mean of the recorded parameters after the given
// steps.
func mean(rec *record, steps []int64) []float64 {
	out := make([]float64, len(rec.params[0]))
	for _, s := range steps {
		for i, x := range rec.params[s] {
			out[i] += x
		}
	}
	for i := range out {
		out[i] /= float64(len(steps))
	}
	return out
}

func near(a, b []float64, tol float64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if math.Abs(a[i]-b[i]) > tol*(1+math.Abs(b[i])) {
			return false
		}
	}
	return true
}

func TestInfo(t *testing.T) {
	info := newSWA().Info()
	if info.Name != "swa" || info.Features != (optim.Features{Predictive: true, State: true, Finalize: true}) {
		t.Errorf("info %+v", info)
	}
	byName := map[string]optim.ParamSpec{}
	for _, s := range info.Params {
		if _, dup := byName[s.Name]; dup {
			t.Errorf("parameter %q twice", s.Name)
		}
		byName[s.Name] = s
	}
	defaults, err := hparams.Resolve(info.Params, nil)
	if err != nil {
		t.Fatalf("schema does not resolve: %v", err)
	}
	want := map[string]any{"member": "sgd", "start_epoch": int64(-1), "start_fraction": 0.75, "freq": int64(1),
		"swa_lr": 0.0, "lr_schedule": "constant", "anneal_epochs": int64(5), "anneal_strategy": "cos", "lr_1": 0.0}
	for k, v := range want {
		if defaults[k] != v || byName[k].Doc == "" {
			t.Errorf("%s: default %v (doc %q), want %v", k, defaults[k], byName[k].Doc, v)
		}
	}
	for name, opt := range map[string]optim.Optimizer{"sgd": sgd.New(), "sam": sam.New(), "bsam": bsam.New(), "otmdr": otmdr.New()} {
		for _, s := range opt.Info().Params {
			if got, ok := byName[name+"_"+s.Name]; !ok || !reflect.DeepEqual(got.Default, s.Default) {
				t.Errorf("%s_%s: %+v, want the %s plugin's %+v", name, s.Name, got, name, s)
			}
		}
	}
	if _, ok := builtin.MemberOptions().Members.Lookup("swa"); ok {
		t.Error("swa is a member method")
	}
}

// The schedules' functions at known values.
func TestScheduleFunctions(t *testing.T) {
	cos := func(t float64) float64 { return (1 - math.Cos(math.Pi*t)) / 2 }
	tests := []struct {
		name      string
		got, want float64
	}{
		{"cos, k=0 of 2", swa.AnnealLR(0.28, 0.05, 0, 2, swa.Cos), 0.165},
		{"cos, k=1 of 2: annealed", swa.AnnealLR(0.28, 0.05, 1, 2, swa.Cos), 0.05},
		{"cos, k=7 of 2: held", swa.AnnealLR(0.28, 0.05, 7, 2, swa.Cos), 0.05},
		{"cos, k=0 of 4", swa.AnnealLR(0.28, 0.05, 0, 4, swa.Cos), 0.28 - 0.23*cos(0.25)},
		{"cos, k=2 of 4", swa.AnnealLR(0.28, 0.05, 2, 4, swa.Cos), 0.28 - 0.23*cos(0.75)},
		{"linear, k=0 of 4", swa.AnnealLR(0.28, 0.05, 0, 4, swa.Linear), 0.2225},
		{"linear, k=1 of 4", swa.AnnealLR(0.28, 0.05, 1, 4, swa.Linear), 0.165},
		{"linear, k=2 of 4", swa.AnnealLR(0.28, 0.05, 2, 4, swa.Linear), 0.1075},
		{"linear, k=3 of 4", swa.AnnealLR(0.28, 0.05, 3, 4, swa.Linear), 0.05},
		{"anneal_epochs 0", swa.AnnealLR(0.28, 0.05, 0, 0, swa.Cos), 0.05},
		{"α(0) cos", swa.AnnealFactor(swa.Cos, 0), 0},
		{"α(½) cos", swa.AnnealFactor(swa.Cos, 0.5), 0.5},
		{"α(1) cos", swa.AnnealFactor(swa.Cos, 1), 1},
		{"cyclic i=0 of 8", swa.CyclicLR(0.09, 0.01, 0, 8), 0.08},
		{"cyclic i=3 of 8", swa.CyclicLR(0.09, 0.01, 3, 8), 0.05},
		{"cyclic i=7 of 8: α2", swa.CyclicLR(0.09, 0.01, 7, 8), 0.01},
		{"cyclic i=8 of 8: next cycle", swa.CyclicLR(0.09, 0.01, 8, 8), 0.08},
		{"cyclic c=1: α2 always", swa.CyclicLR(0.09, 0.01, 5, 1), 0.01},
	}
	for _, tt := range tests {
		if math.Abs(tt.got-tt.want) > 1e-15 {
			t.Errorf("%s: %.17g, want %.17g", tt.name, tt.got, tt.want)
		}
	}
	// Once annealed, exactly swa_lr; at the end of a cycle, exactly α2.
	if swa.AnnealLR(0.1, 0.05, 3, 3, swa.Cos) != 0.05 || swa.AnnealLR(0.1, 0.05, 3, 3, swa.Linear) != 0.05 ||
		swa.CyclicLR(0.1, 0.03, 11, 12) != 0.03 {
		t.Error("the end rate is not exactly swa_lr")
	}
}

// schedule gives StepInput.LR = 0.2 + 0.01·step, so lr0 shows which step
// it was taken from.
func schedule(s int64, _ int) float64 { return 0.2 + 0.01*float64(s) }

// A run step by step: the rate the member's BaseStep used (and the metric
// "lr", only while SWA sets it), the steps after which an average is taken
// (one more Exec), and SetLR only in front of the first program.
func TestRunSchedules(t *testing.T) {
	const epochs = 6
	tests := []struct {
		name   string
		params map[string]any
		lr     func(step int64) float64 // SWA's rate; NaN: the schedule's
		avg    []int64                  // steps after which an average is due
	}{
		{"swa_lr 0: the schedule's rate", map[string]any{"start_epoch": 2},
			func(int64) float64 { return math.NaN() }, []int64{11, 15, 19, 23}},
		{"default start: floor(0.75·6) = 4", nil,
			func(int64) float64 { return math.NaN() }, []int64{19, 23}},
		{"constant cos over 2 epochs", map[string]any{"start_epoch": 2, "swa_lr": 0.05, "anneal_epochs": 2},
			func(s int64) float64 {
				if s < 8 {
					return math.NaN()
				}
				return []float64{0.165, 0.05, 0.05, 0.05}[s/spe-2]
			}, []int64{11, 15, 19, 23}},
		{"constant linear over 4 epochs, freq 2", map[string]any{"start_epoch": 2, "swa_lr": 0.05, "anneal_epochs": 4,
			"anneal_strategy": "linear", "freq": 2},
			func(s int64) float64 {
				if s < 8 {
					return math.NaN()
				}
				return []float64{0.2225, 0.165, 0.1075, 0.05}[s/spe-2]
			}, []int64{15, 23}},
		{"constant, anneal_epochs 0", map[string]any{"start_fraction": 0.5, "swa_lr": 0.05, "anneal_epochs": 0},
			func(s int64) float64 {
				if s < 12 {
					return math.NaN()
				}
				return 0.05
			}, []int64{15, 19, 23}},
		{"cyclic, cycles of 2 epochs", map[string]any{"start_epoch": 2, "swa_lr": 0.01, "lr_schedule": "cyclic", "freq": 2, "lr_1": 0.09},
			func(s int64) float64 {
				if s < 8 {
					return math.NaN()
				}
				return 0.08 - 0.01*float64((s-8)%8)
			}, []int64{15, 23}},
		{"cyclic, lr_1 = lr0", map[string]any{"start_epoch": 1, "swa_lr": 0.01, "lr_schedule": "cyclic"},
			func(s int64) float64 {
				if s < 4 {
					return math.NaN()
				}
				t := float64(s%4+1) / 4
				return (1-t)*0.24 + t*0.01
			}, []int64{7, 11, 15, 19, 23}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := host(t, mlp())
			rec := &record{h: h}
			opt := newSWA()
			optimtest.MustRun(t, opt, h, epochs*spe, optimtest.WithSchedule(schedule), optimtest.WithAfterStep(rec.after), hp(tt.params))
			for s := range int64(epochs * spe) {
				want, metric := tt.lr(s), true
				if math.IsNaN(want) {
					want, metric = schedule(s, 0), false
				}
				got, ok := rec.out[s].Metrics["lr"]
				if math.Abs(rec.lr[s]-want) > 1e-15 || ok != metric || ok && got != rec.lr[s] {
					t.Errorf("step %d: lr %.17g (metric %v %v), want %.17g (metric %v)", s, rec.lr[s], got, ok, want, metric)
				}
				progs := programs(h, s)
				n := 1
				if slices.Contains(tt.avg, s) {
					n++
				}
				if s == epochs*spe-1 {
					n++ // Finalize's UpdateBN
				}
				if len(progs) != n {
					t.Errorf("step %d: %d Exec calls, want %d", s, len(progs), n)
					continue
				}
				for i, p := range progs {
					for j, op := range p.Ops {
						if _, isSet := op.(optim.SetLR); isSet && (!metric || i > 0 || j > 0) {
							t.Errorf("step %d: SetLR at op %d of program %d", s, j, i)
						}
					}
				}
				if metric && !reflect.DeepEqual(progs[0].Ops[0], optim.SetLR{LR: rec.lr[s]}) {
					t.Errorf("step %d: first op %+v, want SetLR", s, progs[0].Ops[0])
				}
			}
			if got := opt.(*swa.SWA).Averaged(); got != len(tt.avg) {
				t.Errorf("%d averages, want %d", got, len(tt.avg))
			}
			if !near(vec(t, h, average(opt)), mean(rec, tt.avg), 1e-13) {
				t.Error("the average is not the mean of the parameters after the averaging steps")
			}
		})
	}
}

// The average is the arithmetic mean of the live parameters after the
// averaging steps, whatever the member; it carries the BatchNorm
// statistics of its first average until Finalize recomputes them.
func TestAverage(t *testing.T) {
	tests := []struct {
		name   string
		params map[string]any
		steps  []int64
	}{
		{"sgd, every epoch", map[string]any{"start_epoch": 1}, []int64{7, 11, 15, 19}},
		{"sgd, every 2nd epoch", map[string]any{"start_epoch": 0, "freq": 2}, []int64{7, 15}},
		{"sam", map[string]any{"member": "sam", "sam_rho": 0.1, "start_epoch": 2}, []int64{11, 15, 19}},
		{"otmdr", map[string]any{"member": "otmdr", "otmdr_particles": 2, "start_epoch": 3}, []int64{15, 19}},
		{"bsam: the means", map[string]any{"member": "bsam", "bsam_m": 2, "start_epoch": 3}, []int64{15, 19}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := host(t, mlp())
			rec := &record{h: h}
			opt := newSWA()
			r := optimtest.NewHarness(opt, h, optimtest.WithLR(0.1), optimtest.WithAfterStep(rec.after), hp(tt.params))
			ctx := context.Background()
			if err := r.Configure(ctx, 20); err != nil {
				t.Fatal(err)
			}
			if _, err := r.Run(ctx, 20); err != nil {
				t.Fatal(err)
			}
			avg := average(opt)
			if got := vec(t, h, avg); !near(got, mean(rec, tt.steps), 1e-13) {
				t.Errorf("average %v, want the mean %v", got[:3], mean(rec, tt.steps)[:3])
			}
			if bn, ok := h.BNStats(avg); !ok || bn != rec.bn[tt.steps[0]] {
				t.Errorf("average's statistics %d (%v), want those after step %d (%d)", bn, ok, tt.steps[0], rec.bn[tt.steps[0]])
			}
			if err := r.Finalize(ctx); err != nil {
				t.Fatal(err)
			}
			if bn, _ := h.BNStats(avg); bn == rec.bn[tt.steps[0]] || bn == rec.bn[19] {
				t.Errorf("average's statistics %d after Finalize, not recomputed", bn)
			}
		})
	}
}

// With swa_lr = 0 SWA does not touch the member's trajectory: the live
// parameters and metrics after every step are the member plugin's alone,
// bitwise, and so are its programs, beside the averages' and UpdateBN.
func TestMemberTrajectory(t *testing.T) {
	momentum := optimtest.WithBase(optimtest.BaseOptimizer{Momentum: 0.9, Nesterov: true, WeightDecay: 5e-4})
	tests := []struct {
		member string
		opt    optim.Optimizer
		params map[string]any
	}{
		{"sgd", sgd.New(), nil},
		{"sam", sam.New(), map[string]any{"rho": 0.1, "m": 2}},
		{"otmdr", otmdr.New(), map[string]any{"particles": 2, "rho1": 0.03}},
		{"bsam", bsam.New(), map[string]any{"m": 2}},
	}
	for _, tt := range tests {
		t.Run(tt.member, func(t *testing.T) {
			const steps = 12
			alone := host(t, mlp(), momentum)
			want := &record{h: alone}
			optimtest.MustRun(t, tt.opt, alone, steps, optimtest.WithSchedule(schedule), optimtest.WithAfterStep(want.after), hp(tt.params))
			params := map[string]any{"member": tt.member, "start_epoch": 1}
			for k, v := range tt.params {
				params[tt.member+"_"+k] = v
			}
			h := host(t, mlp(), momentum)
			got := &record{h: h}
			opt := newSWA()
			optimtest.MustRun(t, opt, h, steps, optimtest.WithSchedule(schedule), optimtest.WithAfterStep(got.after), hp(params))
			for s := range steps {
				if !slices.Equal(got.params[s], want.params[s]) || !reflect.DeepEqual(got.out[s], want.out[s]) {
					t.Fatalf("step %d: parameters or metrics differ from the %s plugin's (%v vs %v)", s, tt.member, got.out[s], want.out[s])
				}
			}
			avg := average(opt)
			var mine []optim.Program
			for _, e := range h.Execs() {
				if ops := e.Program.Ops; len(ops) == 1 && slices.Contains([]optim.Op{optim.Alloc{ID: avg},
					optim.Copy{Dst: avg, Src: optim.Params, BN: true}, optim.UpdateBN{X: avg}}, ops[0]) {
					continue
				}
				if l, ok := e.Program.Ops[0].(optim.LinComb); ok && l.Dst == avg {
					continue
				}
				mine = append(mine, e.Program)
			}
			var theirs []optim.Program
			for _, e := range alone.Execs() {
				theirs = append(theirs, e.Program)
			}
			if !reflect.DeepEqual(mine, theirs) {
				t.Errorf("programs differ from the %s plugin's", tt.member)
			}
		})
	}
}

// finalizing is a member optimizer with a Finalize of its own, which sends
// one program (a Norm of the parameters).
type finalizing struct {
	optim.Optimizer
	h     optim.Host
	calls *int
}

func (f *finalizing) Info() optim.Info {
	i := f.Optimizer.Info()
	i.Features.Finalize = true
	return i
}

func (f *finalizing) Configure(ctx context.Context, h optim.Host, cfg optim.Config) error {
	f.h = h
	return f.Optimizer.Configure(ctx, h, cfg)
}

func (f *finalizing) Finalize(ctx context.Context) error {
	*f.calls++
	p := optim.Prog()
	p.Norm(optim.Params)
	_, err := f.h.Exec(ctx, p)
	return err
}

// Finalize sends exactly one UpdateBN, of the average, after the member's
// own Finalize; nothing when nothing was averaged.
func TestFinalize(t *testing.T) {
	ctx := context.Background()
	h := host(t, mlp())
	opt := newSWA()
	optimtest.MustRun(t, opt, h, 12, optimtest.WithLR(0.1))
	updates := opsOf[optim.UpdateBN](h)
	if len(updates) != 1 || updates[0].X != average(opt) || h.Stats(0).BNRecomputed != 1 {
		t.Errorf("UpdateBN ops %+v (recomputed %d), want one of the average %d", updates, h.Stats(0).BNRecomputed, average(opt))
	}
	if last := h.Execs()[len(h.Execs())-1].Program.Ops; len(last) != 1 {
		t.Errorf("Finalize's program %+v, want the UpdateBN alone", last)
	}

	// Before the SWA phase: nothing averaged, nothing sent.
	h = host(t, mlp())
	opt = newSWA()
	r := optimtest.NewHarness(opt, h, optimtest.WithLR(0.1))
	if err := r.Configure(ctx, 12); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Run(ctx, 5); err != nil {
		t.Fatal(err)
	}
	n := len(h.Execs())
	if err := r.Finalize(ctx); err != nil || len(h.Execs()) != n || !reflect.DeepEqual(predictive(t, opt), point) {
		t.Errorf("Finalize with nothing averaged: err %v, %d programs sent", err, len(h.Execs())-n)
	}

	// The member's Finalize first.
	calls := 0
	reg := &optim.Registry{}
	if err := reg.Add(optim.Entry{Name: "fin", New: func() optim.Optimizer { return &finalizing{Optimizer: sgd.New(), calls: &calls} }}); err != nil {
		t.Fatal(err)
	}
	h = host(t, mlp())
	opt = swa.New(compose.Options{Members: reg})
	optimtest.MustRun(t, opt, h, 8, optimtest.WithLR(0.1), hp(map[string]any{"member": "fin"}))
	execs := h.Execs()
	if calls != 1 || len(execs) < 2 {
		t.Fatalf("member's Finalize called %d times", calls)
	}
	if _, ok := execs[len(execs)-2].Program.Ops[0].(optim.Norm); !ok {
		t.Errorf("the member's Finalize program is not before SWA's: %+v", execs[len(execs)-2].Program)
	}
	if _, ok := execs[len(execs)-1].Program.Ops[0].(optim.UpdateBN); !ok {
		t.Errorf("SWA's last program %+v, want UpdateBN", execs[len(execs)-1].Program)
	}
}

// The predictive: the member's before the first average; the average
// after Finalize, and before it only for a model without BatchNorm.
func TestPredictive(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name    string
		problem optimtest.Problem
		params  map[string]any
		before  func(opt optim.Optimizer) optim.Predictive // before the first average
		between func(opt optim.Optimizer) optim.Predictive // after it, before Finalize
	}{
		{"no BatchNorm", mlp(), nil,
			func(optim.Optimizer) optim.Predictive { return point }, averaged},
		{"BatchNorm", bnProblem(), nil,
			func(optim.Optimizer) optim.Predictive { return point },
			func(optim.Optimizer) optim.Predictive { return point }},
		{"otmdr", mlp(), map[string]any{"member": "otmdr"},
			func(optim.Optimizer) optim.Predictive { return point }, averaged},
		{"bsam, BatchNorm: its Gaussian until Finalize", bnProblem(), map[string]any{"member": "bsam", "bsam_m": 2},
			bsamGaussian, bsamGaussian},
		{"bsam", mlp(), map[string]any{"member": "bsam", "bsam_m": 2}, bsamGaussian, averaged},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := host(t, tt.problem)
			opt := newSWA()
			if _, err := opt.Predictive(ctx); err == nil {
				t.Error("predictive before configure")
			}
			r := optimtest.NewHarness(opt, h, optimtest.WithLR(0.1), hp(tt.params))
			if err := r.Configure(ctx, 8); err != nil {
				t.Fatal(err)
			}
			check := func(when string, want optim.Predictive) {
				t.Helper()
				got := predictive(t, opt)
				if !reflect.DeepEqual(got, want) {
					t.Errorf("%s: predictive %+v, want %+v", when, got, want)
				}
				if _, err := h.Evaluate(ctx, got); err != nil {
					t.Errorf("%s: %v", when, err)
				}
			}
			check("after configure", tt.before(opt))
			if _, err := r.Run(ctx, 7); err != nil {
				t.Fatal(err)
			}
			check("before the first average", tt.before(opt))
			if _, err := r.Run(ctx, 1); err != nil {
				t.Fatal(err)
			}
			check("after the first average", tt.between(opt))
			if err := r.Finalize(ctx); err != nil {
				t.Fatal(err)
			}
			check("after Finalize", averaged(opt))
		})
	}
}

func bsamGaussian(opt optim.Optimizer) optim.Predictive {
	b := opt.(*swa.SWA).Unwrap().(*bsam.BSAM)
	return optim.Predictive{Kind: optim.Samples, Mean: optim.Params, Std: b.Std(0), N: 32}
}

// Smoke runs are 2 epochs of 2 steps: with the defaults SWA starts at
// epoch 1 and averages once, after the last step.
func TestSmoke(t *testing.T) {
	for _, params := range []map[string]any{nil, {"swa_lr": 0.05}, {"member": "sam", "swa_lr": 0.05, "lr_schedule": "cyclic"}} {
		h := host(t, mlp())
		rec := &record{h: h}
		opt := newSWA()
		optimtest.MustRun(t, opt, h, 4, optimtest.WithStepsPerEpoch(2), optimtest.WithLR(0.1), optimtest.WithAfterStep(rec.after), hp(params))
		if got := opt.Resolved(); got["start_epoch"] != int64(1) {
			t.Errorf("%v: resolved %v", params, got)
		}
		if opt.(*swa.SWA).Averaged() != 1 || !slices.Equal(vec(t, h, average(opt)), rec.params[3]) {
			t.Errorf("%v: %d averages", params, opt.(*swa.SWA).Averaged())
		}
		if !reflect.DeepEqual(predictive(t, opt), averaged(opt)) || h.Stats(0).BNRecomputed != 1 {
			t.Errorf("%v: predictive %+v, %d UpdateBN", params, predictive(t, opt), h.Stats(0).BNRecomputed)
		}
	}
}

// SWA-SAM and SWA-OT-MDR with SWA's rate: the SetLR in front of the
// member's first program holds for its BaseStep; the member's metrics and
// resolved values come through.
func TestComposition(t *testing.T) {
	for _, member := range []string{"sam", "otmdr"} {
		t.Run(member, func(t *testing.T) {
			h := host(t, mlp())
			rec := &record{h: h}
			opt := newSWA()
			params := map[string]any{"member": member, "start_epoch": 1, "swa_lr": 0.02, "anneal_epochs": 1}
			optimtest.MustRun(t, opt, h, 12, optimtest.WithLR(0.3), optimtest.WithAfterStep(rec.after), hp(params))
			for s := range 12 {
				want := 0.3
				if s >= spe {
					want = 0.02
				}
				if rec.lr[s] != want || rec.out[s].Metrics["loss"] == 0 {
					t.Errorf("step %d: lr %v, want %v; metrics %v", s, rec.lr[s], want, rec.out[s].Metrics)
				}
			}
			if member == "otmdr" && rec.out[11].Metrics["loss_perturbed"] == 0 {
				t.Errorf("otmdr's metrics missing: %v", rec.out[11].Metrics)
			}
			if !near(vec(t, h, average(opt)), mean(rec, []int64{7, 11}), 1e-13) {
				t.Error("average differs from the mean")
			}
			res := opt.Resolved()
			if _, ok := res["otmdr_rho2"]; ok != (member == "otmdr") || res["start_epoch"] != nil {
				t.Errorf("resolved %v", res)
			}
		})
	}
}

// A run cut by SaveState, a fresh Configure on a fresh host, the host's
// restore of the saved vectors and LoadState ends bitwise where the
// uninterrupted run does: parameters, average, rates and predictive.
func TestResume(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name   string
		params map[string]any
		cut    int
	}{
		{"before the phase", map[string]any{"start_epoch": 2, "swa_lr": 0.05, "anneal_epochs": 2}, 6},
		{"annealing, mid-epoch", map[string]any{"start_epoch": 1, "swa_lr": 0.05, "anneal_epochs": 3}, 10},
		{"after averages", map[string]any{"start_epoch": 1, "swa_lr": 0.05, "anneal_epochs": 3}, 16},
		{"sam, cyclic", map[string]any{"member": "sam", "start_epoch": 1, "swa_lr": 0.01, "lr_schedule": "cyclic", "freq": 2}, 13},
		{"otmdr", map[string]any{"member": "otmdr", "otmdr_particles": 2, "start_epoch": 2}, 14},
		{"bsam", map[string]any{"member": "bsam", "bsam_m": 2, "start_epoch": 2}, 13},
	}
	const total = 24
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			straight := host(t, mlp())
			want := &record{h: straight}
			full := newSWA()
			optimtest.MustRun(t, full, straight, total, optimtest.WithSchedule(schedule), optimtest.WithAfterStep(want.after), hp(tt.params))

			first := host(t, mlp())
			a := newSWA()
			optimtest.MustRun(t, a, first, tt.cut, optimtest.WithSchedule(schedule), hp(tt.params), optimtest.WithTotalSteps(total))
			blob, vecs, err := a.SaveState(ctx)
			if err != nil {
				t.Fatal(err)
			}
			h := host(t, mlp(), optimtest.WithParams(0, first.Params(0)))
			got := &record{h: h}
			b := newSWA()
			r := optimtest.NewHarness(b, h, optimtest.WithSchedule(schedule), optimtest.WithAfterStep(got.after), hp(tt.params),
				optimtest.WithStartStep(int64(tt.cut)))
			if err := r.Configure(ctx, total); err != nil {
				t.Fatal(err)
			}
			for _, v := range vecs {
				if err := h.SetVec(v, vec(t, first, v)); err != nil {
					t.Fatal(err)
				}
			}
			if err := b.LoadState(ctx, blob); err != nil {
				t.Fatal(err)
			}
			if _, err := r.Run(ctx, total-tt.cut); err != nil {
				t.Fatal(err)
			}
			if err := r.Finalize(ctx); err != nil {
				t.Fatal(err)
			}
			for s := tt.cut; s < total; s++ {
				if !slices.Equal(got.params[s-tt.cut], want.params[s]) || got.lr[s-tt.cut] != want.lr[s] {
					t.Fatalf("step %d: parameters or rate differ from the uninterrupted run", s)
				}
			}
			if !slices.Equal(vec(t, h, average(b)), vec(t, straight, average(full))) {
				t.Error("resumed average differs")
			}
			if pb, pf := predictive(t, b), predictive(t, full); !reflect.DeepEqual(pb, pf) {
				t.Errorf("resumed predictive %+v, uninterrupted %+v", pb, pf)
			}
		})
	}
}

// SaveState lists the average once something was averaged; a finalized
// state predicts with the average after LoadState.
func TestSaveState(t *testing.T) {
	ctx := context.Background()
	h := host(t, bnProblem())
	opt := newSWA()
	optimtest.MustRun(t, opt, h, 8, optimtest.WithLR(0.1), hp(map[string]any{"start_epoch": 1}))
	blob, vecs, err := opt.SaveState(ctx)
	if err != nil || !slices.Contains(vecs, average(opt)) || !strings.Contains(string(blob), `"finalized":true`) {
		t.Fatalf("state %s, vecs %v, err %v", blob, vecs, err)
	}
	b := newSWA()
	r := optimtest.NewHarness(b, host(t, bnProblem()), optimtest.WithLR(0.1), hp(map[string]any{"start_epoch": 1}))
	if err := r.Configure(ctx, 8); err != nil {
		t.Fatal(err)
	}
	if err := b.LoadState(ctx, blob); err != nil {
		t.Fatal(err)
	}
	if got := predictive(t, b); !reflect.DeepEqual(got, averaged(b)) {
		t.Errorf("finalized state's predictive %+v", got)
	}
	_, vecs, err = newConfigured(t).SaveState(ctx)
	if err != nil || len(vecs) != 0 {
		t.Errorf("nothing averaged: vecs %v, err %v", vecs, err)
	}
}

func newConfigured(t *testing.T) optim.Optimizer {
	t.Helper()
	opt := newSWA()
	if err := optimtest.NewHarness(opt, host(t, mlp())).Configure(context.Background(), 8); err != nil {
		t.Fatal(err)
	}
	return opt
}

func TestLoadStateErrors(t *testing.T) {
	ctx := context.Background()
	if err := newSWA().LoadState(ctx, nil); err == nil {
		t.Error("load state before configure")
	}
	opt := newConfigured(t)
	tests := []struct{ blob, want string }{
		{`{"version":2}`, "version"},
		{`{"version":1,"member":"sam"}`, `saved by member "sam"`},
		{`{"version":1,"member":"sgd","averaged":-1}`, "-1 averages"},
		{`{"version":1,"member":"sgd","finalized":true}`, "0 averages (finalized true)"},
		{`{"version":1,"member":"sgd","inner":"eA=="}`, "sgd: unexpected"},
		{`not json`, "load state"},
	}
	for _, tt := range tests {
		if err := opt.LoadState(ctx, []byte(tt.blob)); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("LoadState(%s) = %v, want containing %q", tt.blob, err, tt.want)
		}
	}
}

func TestConfigErrors(t *testing.T) {
	tests := []struct {
		name    string
		params  map[string]any
		members int
		want    string
	}{
		{"start at the end", map[string]any{"start_epoch": 3}, 1, "start_epoch = 3, but the run has 3 complete epochs (0 to 2): nothing would be averaged"},
		{"freq longer than the phase", map[string]any{"start_epoch": 1, "freq": 3}, 1, "freq = 3, but the SWA phase (start_epoch = 1) has 2 epochs: nothing would be averaged"},
		{"fraction", map[string]any{"start_fraction": 1.0}, 1, `"start_fraction": 1 is out of range [0,1)`},
		{"freq 0", map[string]any{"freq": 0}, 1, `"freq": 0 is out of range [1,): want ≥ 1`},
		{"anneal_epochs", map[string]any{"swa_lr": 0.1, "anneal_epochs": -1}, 1, `"anneal_epochs": -1 is out of range [0,)`},
		{"start_epoch", map[string]any{"start_epoch": -2}, 1, `"start_epoch": -2 is out of range [-1,)`},
		{"swa_lr", map[string]any{"swa_lr": -0.1}, 1, `"swa_lr": -0.1 is out of range [0,)`},
		{"unknown schedule", map[string]any{"swa_lr": 0.1, "lr_schedule": "step"}, 1, `"lr_schedule": "step" is not one of "constant", "cyclic"`},
		{"unknown strategy", map[string]any{"swa_lr": 0.1, "anneal_strategy": "exp"}, 1, `"anneal_strategy": "exp" is not one of "cos", "linear"`},
		{"swa_lr with bsam", map[string]any{"member": "bsam", "swa_lr": 0.05}, 1,
			"swa: swa_lr = 0.05 needs a member optimizer that steps with the host's base optimizer, whose rate SetLR sets (sgd, sam, otmdr); bsam does its own update"},
		{"members", nil, 2, "averages the weights of one model; the run has 2 members"},
		{"unknown member", map[string]any{"member": "swa"}, 1, `swa: member "swa": want one of ["sgd" "sam" "bsam" "otmdr"]`},
		{"other member's parameter", map[string]any{"member": "sam", "otmdr_rho1": 0.1}, 1, `swa: otmdr_rho1 = 0.1 is set but member = "sam"`},
		{"member's own check", map[string]any{"member": "sam", "sam_m": 0}, 1, `"sam_m": 0 is out of range`},
		{"schedule without swa_lr", map[string]any{"lr_schedule": "cyclic"}, 1, "swa: lr_schedule = cyclic is not used with swa_lr = 0 (the experiment's schedule)"},
		{"anneal with cyclic", map[string]any{"swa_lr": 0.1, "lr_schedule": "cyclic", "anneal_epochs": 2}, 1, `anneal_epochs = 2 is not used with lr_schedule = "cyclic"`},
		{"lr_1 with constant", map[string]any{"swa_lr": 0.1, "lr_1": 0.2}, 1, `lr_1 = 0.2 is not used with lr_schedule = "constant"`},
		{"fraction with start_epoch", map[string]any{"start_epoch": 1, "start_fraction": 0.5}, 1, "start_fraction = 0.5 is not used with start_epoch = 1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := host(t, mlp(), optimtest.WithMembers(tt.members))
			_, err := optimtest.Run(context.Background(), newSWA(), h, 3*spe, hp(tt.params))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %v, want containing %q", err, tt.want)
			}
		})
	}
	// Values equal to the defaults of unused parameters are fine.
	h := host(t, mlp())
	optimtest.MustRun(t, newSWA(), h, 8, hp(map[string]any{"member": "sam", "otmdr_rho1": 0.05, "anneal_epochs": 5, "lr_1": 0, "start_epoch": 1, "start_fraction": 0.75}))
	// A step that does not fit the epochs is refused.
	opt := newConfigured(t)
	if _, err := opt.Step(context.Background(), optim.StepInput{Step: 5, Epoch: 0}); err == nil ||
		!strings.Contains(err.Error(), "step 5 is not in epoch 0 of 4 steps") {
		t.Errorf("step outside its epoch: %v", err)
	}
	for name, err := range map[string]error{
		"step":     func() error { _, err := newSWA().Step(context.Background(), optim.StepInput{}); return err }(),
		"finalize": newSWA().Finalize(context.Background()),
	} {
		if err == nil {
			t.Errorf("%s before configure", name)
		}
	}
	if newSWA().Resolved() != nil {
		t.Error("resolved before configure")
	}
}

var update = flag.Bool("update", false, "rewrite testdata/*.golden")

// TestTraceGolden pins the ops that Configure, the steps and Finalize send:
// the golden files document the algorithm, with the member optimizer's
// handles inside SWA's namespace.
func TestTraceGolden(t *testing.T) {
	optimtest.TestTraces(t, *update,
		// Two epochs of four steps, SWA from the first: a copy with the
		// statistics after step 3, a LinComb after step 7, the UpdateBN of
		// Finalize; SWALR annealing to 0.05 over two epochs (0.075, then
		// 0.05).
		optimtest.TraceCase{Golden: "testdata/trace_swa.golden", New: newSWA, Steps: 8,
			Params: map[string]any{"start_epoch": 0, "swa_lr": 0.05, "anneal_epochs": 2}},
		// Algorithm 1 with cycles of one epoch: the rate falls from lr_1 to
		// swa_lr over every epoch, an average at each epoch's end.
		optimtest.TraceCase{Golden: "testdata/trace_cyclic.golden", New: newSWA, Steps: 8,
			Params: map[string]any{"start_epoch": 0, "swa_lr": 0.01, "lr_schedule": "cyclic", "lr_1": 0.05}})
}
