package bench

import (
	"context"
	"errors"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/optlab/optlab/host/data/devset"
	"github.com/optlab/optlab/host/engine"
	"github.com/optlab/optlab/host/experiment"
	"github.com/optlab/optlab/host/model"
	"github.com/optlab/optlab/host/train"
	"github.com/optlab/optlab/sdk/hparams"
)

// trainStepTOML is BenchmarkTrainStep's experiment: CIFAR-shaped synthetic
// data (3×32×32, 10 classes) with CIFAR's augmentation, 20 steps of 128 per
// epoch, the base optimizer of every benchmark (SGD, momentum 0.9, weight
// decay 5e-4, lr 0.05, constant), no evaluation before the end and no
// TensorBoard. ARCH and PLUGIN are filled in.
const trainStepTOML = `
name = "bench-train-step"
[data]
dataset = "synthetic"
augment = ["crop", "flip"]
[data.synthetic]
train = 2560
test = 128
[model]
archs = ["ARCH"]
[train]
epochs = 100000
batch_size = 128
seeds = [1]
precision = "PRECISION"
tf32 = TF32
[train.optimizer]
name = "sgd"
lr = 0.05
momentum = 0.9
weight_decay = 5e-4
[train.schedule]
kind = "constant"
[eval]
temperature = "none"
tensorboard = false
[[method]]
name = "M"
plugin = "PLUGIN"
`

// trainStepWarmup is the number of untimed steps first.
const trainStepWarmup = 3

// BenchmarkTrainStep times what a training step costs a user: host/train's
// own loop (train.Runner.Run) driving the optimizer's real plugin process
// (sgd; sam with ρ 0.05), each step fed a fresh batch cut from the
// device-resident training set with random crop and flip (the epoch's data
// orders and augmentations copied to the device once per epoch), then
// BeginStep, the plugin's Step (its program, one Exec), TakeReports, and
// the reading of the step before's reports, one step late. One b.Loop
// iteration is one step (use -benchtime Nx); the time between the loop's
// StepHook calls is the step's. Metrics: ms/step (median), mean-ms/step
// (epoch boundaries included, one step in 20), h2d/step (host→device
// copies, engine.Counters().HostToDevice: one per epoch, so 0.05),
// h2d-steady/step (the same without the epochs' first steps: 0),
// exec/step and blocking/step (device→host reads the host waited for).
// bench/torch_step.py --feed is PyTorch's side (docs/BENCHMARKS.md, GPU).
// The environment chooses the cases: OPTLAB_BENCH_METHODS (plugins, default
// sgd,sam), OPTLAB_BENCH_ARCHS (default cnn,resnet18) and
// OPTLAB_BENCH_PRECISION (train.precision: fp32, the default, or bf16);
// OPTLAB_BENCH_TF32=1 sets train.tf32 = true (torch_step.py --tf32).
func BenchmarkTrainStep(b *testing.B) {
	precision := envOr("OPTLAB_BENCH_PRECISION", "fp32")
	tf32 := strconv.FormatBool(envOr("OPTLAB_BENCH_TF32", "0") == "1")
	for plugin := range strings.SplitSeq(envOr("OPTLAB_BENCH_METHODS", "sgd,sam"), ",") {
		for arch := range strings.SplitSeq(envOr("OPTLAB_BENCH_ARCHS", "cnn,resnet18"), ",") {
			b.Run(plugin+"/"+arch+"/bs128", func(b *testing.B) { trainStep(b, plugin, arch, precision, tf32) })
		}
	}
}

// envOr returns the environment variable key, or def when it is unset or
// empty.
func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

func trainStep(b *testing.B, plugin, arch, precision, tf32 string) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	exp, err := experiment.Parse([]byte(strings.NewReplacer("ARCH", arch, "PLUGIN", plugin, "PRECISION", precision, "TF32", tf32).Replace(trainStepTOML)), "bench-train-step.toml")
	if err != nil {
		b.Fatal(err)
	}
	if err := experiment.Validate(exp, model.Builtin().Names()); err != nil {
		b.Fatal(err)
	}
	exp.ResultsDir = b.TempDir()
	d, err := devset.Load(ctx, worker, device, exp.Data.Spec())
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = worker.Do(context.Background(), func() error { d.Drop(); return nil }) }()
	opt := launch(b, plugin).AsOptimizer()
	var given map[string]any
	if plugin == "sam" {
		given = map[string]any{"rho": 0.05}
	}
	params, err := hparams.Resolve(opt.Info().Params, given)
	if err != nil {
		b.Fatal(err)
	}
	r := &train.Runner{W: worker, Dev: device, Exp: exp, Data: d, Zoo: model.Builtin()}
	perEpoch, _ := r.Steps()

	var times, steady Timings
	var h2d, h2dSteady, execs, blocking int64
	var last time.Time
	var before engine.Counters
	r.StepHook = func(step int64, e *engine.Engine) {
		now, c := time.Now(), e.Counters()
		if step > trainStepWarmup {
			dt := now.Sub(last)
			times = append(times, dt)
			h2d += c.HostToDevice - before.HostToDevice
			execs += c.Execs - before.Execs
			blocking += c.BlockingReads - before.BlockingReads
			if step%perEpoch != 0 {
				steady = append(steady, dt)
				h2dSteady += c.HostToDevice - before.HostToDevice
			}
		}
		if step >= trainStepWarmup && !b.Loop() {
			cancel()
		}
		last, before = time.Now(), e.Counters()
	}
	run := experiment.Grid(exp)[0]
	_, err = r.Run(ctx, run, train.Optimizer{Optimizer: opt, Plugin: plugin, Params: params})
	if err != nil && !errors.Is(err, context.Canceled) {
		b.Fatal(err)
	}
	n := float64(len(times))
	if n == 0 {
		b.Fatal("no step was timed")
	}
	b.ReportMetric(steady.MedianMs(), "ms/step")
	b.ReportMetric(times.MeanMs(), "mean-ms/step")
	b.ReportMetric(float64(h2d)/n, "h2d/step")
	b.ReportMetric(float64(h2dSteady)/float64(max(len(steady), 1)), "h2d-steady/step")
	b.ReportMetric(float64(execs)/n, "exec/step")
	b.ReportMetric(float64(blocking)/n, "blocking/step")
	b.Logf("%s %s %s (tf32 %s) on %s: %d steps timed (%d per epoch), %d host→device copies", plugin, arch, precision, tf32, device, len(times), perEpoch, h2d)
}
