package train

import (
	"context"
	"strings"
	"testing"

	"github.com/optlab/optlab/host/curves"
	"github.com/optlab/optlab/host/experiment"
	"github.com/optlab/optlab/host/model"
	"github.com/optlab/optlab/host/results"
	"github.com/optlab/optlab/host/tensor"
	"github.com/optlab/optlab/plugins/sgd"
	"github.com/optlab/optlab/sdk/optim"
)

// digitsConfigHash is the hash of the configuration of digitsTOML's run,
// as optlab recorded it before [method.optimizer] existed: a method
// without [method.optimizer] and [method.schedule] keeps it, so that no
// finished run is trained again.
const digitsConfigHash = "74904dd5e99651e2"

// configOf is the recorded configuration of run of exp with optimizer m,
// built without training.
func configOf(t *testing.T, src string, run int, m Optimizer) map[string]any {
	t.Helper()
	exp, err := experiment.Parse([]byte(src), "test.toml")
	if err != nil {
		t.Fatal(err)
	}
	if err := experiment.Validate(exp, model.Builtin().Names()); err != nil {
		t.Fatal(err)
	}
	r := &Runner{Exp: exp}
	return r.Config(experiment.Grid(exp)[run], m).Map()
}

// A method without its own optimizer records the configuration (and hash)
// it recorded before per-method optimizers existed, also beside a method
// that has one.
func TestConfigWithoutMethodTablesUnchanged(t *testing.T) {
	m := Optimizer{Plugin: "sgd", Params: map[string]any{}}
	if h := results.HashConfig(configOf(t, digitsTOML, 0, m)); h != digitsConfigHash {
		t.Errorf("digitsTOML's configuration hash is %s, want %s: records of runs without [method.optimizer] would be trained again", h, digitsConfigHash)
	}
	two := digitsTOML + "[[method]]\nname = \"Adam\"\nplugin = \"sgd\"\n[method.optimizer]\nname = \"adam\"\nlr = 1e-3\n"
	if h := results.HashConfig(configOf(t, two, 0, m)); h != digitsConfigHash {
		t.Errorf("beside a method with [method.optimizer], the hash is %s, want %s", h, digitsConfigHash)
	}
	if h := results.HashConfig(configOf(t, two, 1, m)); h == digitsConfigHash {
		t.Errorf("the Adam method has the SGD method's configuration")
	}
}

// Two methods of one file, on the same plugin, train with their own base
// optimizers: the records, the curves' lr and the training differ, and the
// Adam method's run is the run of a file whose [train.optimizer] is its.
func TestMethodOptimizersInOneGrid(t *testing.T) {
	w := tensor.NewWorker(2)
	defer w.Close()
	one := strings.Replace(digitsTOML, "epochs = 3", "epochs = 1", 1)
	src := one + "[[method]]\nname = \"Adam\"\nplugin = \"sgd\"\n[method.optimizer]\nname = \"adam\"\nlr = 1e-3\n"
	r, exp := newRunner(t, w, src)
	runs := experiment.Grid(exp)
	if len(runs) != 2 {
		t.Fatalf("%d runs, want 2", len(runs))
	}
	var recs []results.Record
	for _, run := range runs {
		rec, err := r.Run(context.Background(), run, method(t, sgd.New(), nil))
		if err != nil {
			t.Fatal(err)
		}
		recs = append(recs, rec)
	}
	want := []struct {
		summary, name string
		lr            float64
	}{
		{"sgd lr=0.05 mom=0.9 nesterov=false wd=0.0005", "sgd", 0.05},
		{"adam lr=0.001 mom=0.9 nesterov=false wd=0.0005", "adam", 1e-3},
	}
	for i, rec := range recs {
		w := want[i]
		if got := rec.Config["train.optimizer"]; got != w.summary {
			t.Errorf("%s: train.optimizer = %q, want %q", rec.Method, got, w.summary)
		}
		if got := rec.Config["train.optimizer.name"]; got != w.name {
			t.Errorf("%s: train.optimizer.name = %v, want %s", rec.Method, got, w.name)
		}
		if got := rec.Config["train.optimizer.lr"]; got != w.lr {
			t.Errorf("%s: train.optimizer.lr = %v, want %v", rec.Method, got, w.lr)
		}
		rows, err := curves.Read(results.NewLayout(exp.ResultsDir, exp.Name).Curve(runs[i].Key))
		if err != nil {
			t.Fatal(err)
		}
		if len(rows) != 1 || rows[0].LR != w.lr {
			t.Errorf("%s: curve %+v, want one row with lr %v", rec.Method, rows, w.lr)
		}
	}
	if recs[0].Metrics["train_loss"] == recs[1].Metrics["train_loss"] {
		t.Errorf("both methods trained alike (train_loss %v)", recs[0].Metrics["train_loss"])
	}
	adamFile := strings.Replace(one, "name = \"sgd\"\nlr = 0.05\nmomentum = 0.9\n", "name = \"adam\"\nlr = 1e-3\n", 1)
	r2, exp2 := newRunner(t, w, adamFile)
	plain := runOnce(t, r2, exp2, sgd.New(), nil)
	if plain.Metrics["train_loss"] != recs[1].Metrics["train_loss"] || plain.Metrics["acc"] != recs[1].Metrics["acc"] {
		t.Errorf("the Adam method's run (train_loss %v, acc %v) differs from the run of a file with its optimizer (%v, %v)",
			recs[1].Metrics["train_loss"], recs[1].Metrics["acc"], plain.Metrics["train_loss"], plain.Metrics["acc"])
	}
}

// ownGD is gradient descent that applies its own update (Features.OwnsUpdate):
// p ← p − lr·g at half the schedule's rate, which it reports as "lr"
// (unless silent). With baseStep or setLR it sends that op anyway.
type ownGD struct {
	optim.Defaults
	h                       optim.Host
	silent, baseStep, setLR bool
	hs                      *optim.Handles
	g                       optim.Vec
}

func (o *ownGD) Info() optim.Info {
	return optim.Info{Name: "own-gd", Features: optim.Features{OwnsUpdate: true}}
}

func (o *ownGD) Configure(ctx context.Context, h optim.Host, cfg optim.Config) error {
	o.h, o.hs = h, cfg.Namespace("own")
	o.g = o.hs.New("g")
	_, err := h.Exec(ctx, o.hs.Prog().Alloc(o.g, 0))
	return err
}

func (o *ownGD) Step(ctx context.Context, in optim.StepInput) (optim.StepOutput, error) {
	p := o.hs.Prog()
	ev := p.Grad(o.g, optim.Params, optim.Batch{}, optim.BNUpdate)
	lr := in.LR / 2
	if o.setLR {
		p.SetLR(0, lr)
	}
	if o.baseStep {
		p.BaseStep(optim.Params, o.g)
	} else {
		p.Axpy(optim.Params, optim.K(-lr), o.g)
	}
	p.ReportMetrics(ev.Loss, ev.Acc)
	if _, err := o.h.Exec(ctx, p); err != nil {
		return optim.StepOutput{}, err
	}
	if o.silent {
		return optim.StepOutput{}, nil
	}
	return optim.StepOutput{Metrics: map[string]float64{"lr": lr}}, nil
}

// A plugin that owns its update records no base optimizer, its curve shows
// the rate it reports (else the schedule's), and a BaseStep or SetLR from
// it fails the run, naming the op.
func TestOwnsUpdate(t *testing.T) {
	w := tensor.NewWorker(2)
	defer w.Close()
	src := strings.NewReplacer("epochs = 3", "epochs = 1", `kind = "cosine"`, `kind = "constant"`).Replace(digitsTOML)
	r, exp := newRunner(t, w, src)
	run := experiment.Grid(exp)[0]
	curveLR := func() float64 {
		rows, err := curves.Read(results.NewLayout(exp.ResultsDir, exp.Name).Curve(run.Key))
		if err != nil || len(rows) != 1 {
			t.Fatalf("curve: %v (%d rows)", err, len(rows))
		}
		return rows[0].LR
	}

	rec := runOnce(t, r, exp, &ownGD{}, nil)
	if got := rec.Config["train.optimizer"]; got != NoBaseOptimizer {
		t.Errorf("train.optimizer = %q, want %q", got, NoBaseOptimizer)
	}
	for _, k := range experiment.BaseOptimizerKeys() {
		if v, ok := rec.Config["train.optimizer."+k]; ok {
			t.Errorf("the record has train.optimizer.%s = %v", k, v)
		}
	}
	if rec.Config["train.optimizer.lr"] != 0.05 || rec.Config["train.schedule"] != "constant" {
		t.Errorf("lr %v, schedule %v: want the schedule's 0.05, constant", rec.Config["train.optimizer.lr"], rec.Config["train.schedule"])
	}
	if acc := rec.Metrics["acc"]; acc < 0.3 {
		t.Errorf("test accuracy %.3f: the plugin's own update did not train", acc)
	}
	if lr := curveLR(); lr != 0.025 {
		t.Errorf("curve lr %v, want the reported 0.025", lr)
	}
	if files := checkRunTB(t, r, run, rec, "method/lr"); files != 1 {
		t.Errorf("%d TensorBoard event files, want 1", files)
	}

	runOnce(t, r, exp, &ownGD{silent: true}, nil)
	if lr := curveLR(); lr != 0.05 {
		t.Errorf("curve lr %v, want the schedule's 0.05 when the plugin reports none", lr)
	}

	for _, tc := range []struct {
		opt  *ownGD
		want string
	}{
		{&ownGD{baseStep: true}, "(BaseStep): base_step: the optimizer declared the \"owns-update\" feature"},
		{&ownGD{setLR: true}, "(SetLR): set_lr: the optimizer declared the \"owns-update\" feature"},
	} {
		_, err := r.Run(context.Background(), run, method(t, tc.opt, nil))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("run error %v, want one containing %q", err, tc.want)
		}
	}
}

// setLRGD steps with BaseStep after a SetLR to a third of the schedule's
// rate, reporting a misleading "lr" that the host must not show.
type setLRGD struct {
	optim.Defaults
	h  optim.Host
	hs *optim.Handles
	g  optim.Vec
}

func (o *setLRGD) Info() optim.Info {
	return optim.Info{Name: "setlr-gd"}
}

func (o *setLRGD) Configure(ctx context.Context, h optim.Host, cfg optim.Config) error {
	o.h, o.hs = h, cfg.Namespace("setlr")
	o.g = o.hs.New("g")
	_, err := h.Exec(ctx, o.hs.Prog().Alloc(o.g, 0))
	return err
}

func (o *setLRGD) Step(ctx context.Context, in optim.StepInput) (optim.StepOutput, error) {
	p := o.hs.Prog()
	ev := p.Grad(o.g, optim.Params, optim.Batch{}, optim.BNUpdate)
	p.SetLR(0, in.LR/4)
	p.BaseStep(optim.Params, o.g)
	p.ReportMetrics(ev.Loss, ev.Acc)
	_, err := o.h.Exec(ctx, p)
	return optim.StepOutput{Metrics: map[string]float64{"lr": 7}}, err
}

// The curve's and TensorBoard's lr of a plugin stepping with BaseStep is
// the rate its BaseStep used, SetLR's override included.
func TestCurveLRAfterSetLR(t *testing.T) {
	w := tensor.NewWorker(2)
	defer w.Close()
	src := strings.NewReplacer("epochs = 3", "epochs = 1", `kind = "cosine"`, `kind = "constant"`).Replace(digitsTOML)
	r, exp := newRunner(t, w, src)
	run := experiment.Grid(exp)[0]
	rec := runOnce(t, r, exp, &setLRGD{}, nil)
	rows, err := curves.Read(results.NewLayout(exp.ResultsDir, exp.Name).Curve(run.Key))
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 1 || rows[0].LR != 0.05/4 {
		t.Errorf("curve %+v, want one row with lr %v", rows, 0.05/4)
	}
	if rec.Config["train.optimizer"] == NoBaseOptimizer {
		t.Errorf("a plugin stepping with BaseStep records no base optimizer")
	}
	checkRunTB(t, r, run, rec, "method/lr")
}
