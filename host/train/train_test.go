package train

import (
	"context"
	"math"
	"strings"
	"testing"

	"github.com/optlab/optlab/host/data/devset"
	"github.com/optlab/optlab/host/experiment"
	"github.com/optlab/optlab/host/model"
	"github.com/optlab/optlab/host/observe"
	"github.com/optlab/optlab/host/results"
	"github.com/optlab/optlab/host/tensor"
	"github.com/optlab/optlab/plugins/otmdr"
	"github.com/optlab/optlab/plugins/sam"
	"github.com/optlab/optlab/plugins/sgd"
	"github.com/optlab/optlab/sdk/hparams"
	"github.com/optlab/optlab/sdk/optim"
)

const digitsTOML = `
name = "test-digits"
[data]
dataset = "uci-digits"
[model]
archs = ["cnn"]
[train]
epochs = 3
batch_size = 64
seeds = [1]
threads = 2
[train.optimizer]
name = "sgd"
lr = 0.05
momentum = 0.9
weight_decay = 5e-4
[train.schedule]
kind = "cosine"
[eval]
temperature = "test-halves"
[[method]]
name = "SGD"
plugin = "sgd"
`

func newRunner(t *testing.T, w *tensor.Worker, src string) (*Runner, *experiment.Experiment) {
	t.Helper()
	exp, err := experiment.Parse([]byte(src), "test.toml")
	if err != nil {
		t.Fatal(err)
	}
	if err := experiment.Validate(exp, model.Builtin().Names()); err != nil {
		t.Fatal(err)
	}
	exp.ResultsDir = t.TempDir()
	d, err := devset.Load(context.Background(), w, tensor.CPU, exp.Data.Spec())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.Drop)
	obs := observe.Standard(exp, results.NewLayout(exp.ResultsDir, exp.Name), observe.Progress{})
	return &Runner{W: w, Dev: tensor.CPU, Exp: exp, Data: d, Zoo: model.Builtin(), Observers: obs}, exp
}

func method(t *testing.T, opt optim.Optimizer, given map[string]any) Optimizer {
	t.Helper()
	p, err := hparams.Resolve(opt.Info().Params, given)
	if err != nil {
		t.Fatal(err)
	}
	return Optimizer{Optimizer: opt, Plugin: opt.Info().Name, Params: p}
}

func runOnce(t *testing.T, r *Runner, exp *experiment.Experiment, opt optim.Optimizer, given map[string]any) results.Record {
	t.Helper()
	run := experiment.Grid(exp)[0]
	rec, err := r.Run(context.Background(), run, method(t, opt, given))
	if err != nil {
		t.Fatal(err)
	}
	return rec
}

func TestSGDTrainsOnDigits(t *testing.T) {
	w := tensor.NewWorker(2)
	defer w.Close()
	r, exp := newRunner(t, w, digitsTOML)
	rec := runOnce(t, r, exp, sgd.New(), nil)
	if rec.Status != results.StatusOK {
		t.Fatalf("status %q", rec.Status)
	}
	if acc := rec.Metrics["acc"]; acc < 0.85 {
		t.Errorf("test accuracy %.3f after 3 epochs, want ≥ 0.85", acc)
	}
	for _, k := range []string{"acc", "nll", "brier", "ece", "aac", "cal_nll", "train_loss"} {
		if v, ok := rec.Metrics[k]; !ok || math.IsNaN(v) {
			t.Errorf("metric %s missing or NaN: %v", k, v)
		}
	}
	if rec.Steps != int64(3*(r.Data.TrainSize/64)) {
		t.Errorf("steps %d", rec.Steps)
	}
	if files := checkRunTB(t, r, experiment.Grid(exp)[0], rec); files != 1 {
		t.Errorf("%d TensorBoard event files, want 1", files)
	}
}

// Same seed on the CPU gives bitwise identical results, and SAM with ρ = 0
// equals SGD bitwise on a model with BatchNorm.
func TestReproducibleAndSAMZeroRho(t *testing.T) {
	w := tensor.NewWorker(2)
	defer w.Close()
	r, exp := newRunner(t, w, digitsTOML)
	a := runOnce(t, r, exp, sgd.New(), nil)
	b := runOnce(t, r, exp, sgd.New(), nil)
	c := runOnce(t, r, exp, sam.New(), map[string]any{"rho": 0.0})
	for _, k := range []string{"acc", "nll", "brier", "train_loss"} {
		if a.Metrics[k] != b.Metrics[k] {
			t.Errorf("%s differs between two runs with the same seed: %v vs %v", k, a.Metrics[k], b.Metrics[k])
		}
		if a.Metrics[k] != c.Metrics[k] {
			t.Errorf("%s: SAM(ρ=0) %v ≠ SGD %v", k, c.Metrics[k], a.Metrics[k])
		}
	}
}

// Official ASAM's weights-only scope builds its masks from the real
// engine's layout (FillRange over PyTorch-named tensors) and trains.
func TestASAMWeightsOnlyOnEngine(t *testing.T) {
	w := tensor.NewWorker(2)
	defer w.Close()
	r, exp := newRunner(t, w, digitsTOML)
	rec := runOnce(t, r, exp, sam.New(), map[string]any{"rho": 0.5, "adaptive": true, "adaptive_scope": "weights"})
	if acc := rec.Metrics["acc"]; acc < 0.85 {
		t.Errorf("ASAM (weights only) test accuracy %.3f, want ≥ 0.85", acc)
	}
}

// OT-MDR's joint ensemble mode (one loss on the averaged probabilities,
// JointGrad) trains a two-member ensemble on the real engine.
func TestOTMDRJointEnsemble(t *testing.T) {
	w := tensor.NewWorker(2)
	defer w.Close()
	r, exp := newRunner(t, w, strings.Replace(digitsTOML, `archs = ["cnn"]`, `archs = ["cnn*2"]`, 1))
	rec := runOnce(t, r, exp, otmdr.New(), map[string]any{"joint": true})
	if acc := rec.Metrics["acc"]; acc < 0.85 {
		t.Errorf("joint OT-MDR ensemble test accuracy %.3f, want ≥ 0.85", acc)
	}
}

// A run of a sweep trains with its own [train] values, records its label,
// setting and values, and the validation split's metrics; it equals bitwise
// the run of a file that writes its values without a sweep.
func TestSweepRunAndValidationMetrics(t *testing.T) {
	w := tensor.NewWorker(2)
	defer w.Close()
	one := strings.NewReplacer("epochs = 3", "epochs = 1", `dataset = "uci-digits"`, "dataset = \"uci-digits\"\nvalidation = 0.1").Replace(digitsTOML)
	swept := strings.Replace(one, "lr = 0.05", "lr = [0.02, 0.05]", 1)
	r, exp := newRunner(t, w, swept)
	runs := experiment.Grid(exp)
	if len(runs) != 2 {
		t.Fatalf("%d runs, want 2", len(runs))
	}
	rec, err := r.Run(context.Background(), runs[1], method(t, sgd.New(), nil))
	if err != nil {
		t.Fatal(err)
	}
	if rec.Method != "SGD lr=0.05" || rec.Base != "SGD" || rec.Setting != "lr=0.05" || rec.Key != "method=SGD lr=0.05/arch=cnn/seed=1" {
		t.Errorf("record names %q %q %q %q", rec.Method, rec.Base, rec.Setting, rec.Key)
	}
	if lr := rec.Config["train.optimizer.lr"]; lr != 0.05 {
		t.Errorf("config lr %v, want 0.05", lr)
	}
	if exp.Train.Optimizer.LR != 0.02 || r.Exp != exp {
		t.Errorf("the run changed the runner's experiment (lr %v)", exp.Train.Optimizer.LR)
	}
	for _, k := range []string{"val_acc", "val_nll", "val_brier", "val_ece"} {
		if v, ok := rec.Metrics[k]; !ok || math.IsNaN(v) {
			t.Errorf("metric %s missing or NaN: %v", k, v)
		}
	}
	if acc := rec.Metrics["val_acc"]; acc < 0.5 {
		t.Errorf("validation accuracy %.3f after an epoch, want ≥ 0.5", acc)
	}
	r2, exp2 := newRunner(t, w, one)
	plain := runOnce(t, r2, exp2, sgd.New(), nil)
	for _, k := range []string{"acc", "nll", "train_loss", "val_acc", "val_nll"} {
		if plain.Metrics[k] != rec.Metrics[k] {
			t.Errorf("%s: swept run %v ≠ unswept run %v", k, rec.Metrics[k], plain.Metrics[k])
		}
	}
	if plain.ConfigHash != "" || results.HashConfig(plain.Config) != results.HashConfig(rec.Config) {
		t.Errorf("the swept run's config differs from the unswept run's: %v", results.ConfigDiff(plain.Config, rec.Config))
	}
}
