// Package bench holds optlab's speed and memory benchmarks and what they
// share with bench/cmd/optlabstep: a Rig is one model on an engine with a
// synthetic CIFAR-shaped batch (3×32×32, 10 classes), trained with the base
// optimizer that bench/torch_step.py uses for PyTorch (SGD, momentum 0.9,
// weight decay 5e-4). docs/BENCHMARKS.md has the commands and the figures.
package bench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/optlab/optlab/host/data"
	"github.com/optlab/optlab/host/data/devset"
	"github.com/optlab/optlab/host/engine"
	"github.com/optlab/optlab/host/model"
	"github.com/optlab/optlab/host/tensor"
	"github.com/optlab/optlab/sdk/hparams"
	"github.com/optlab/optlab/sdk/optim"
)

// Base is the base optimizer of every benchmark; bench/torch_step.py
// configures torch.optim.SGD the same way.
var Base = engine.BaseConfig{Name: "sgd", Momentum: 0.9, WeightDecay: 5e-4}

// LR is the learning rate of every benchmark step (torch_step.py's LR).
const LR = 0.05

// InShape is the per-sample input shape: CIFAR's.
var InShape = []int64{3, 32, 32}

// Classes is the number of classes.
const Classes = 10

// Rig is one member of one architecture on an engine.
type Rig struct {
	Eng     *engine.Engine
	Model   *model.Model
	Dev     tensor.Device
	Batch   int
	step    int64
	members int
}

// Device parses a device name ("cpu", "cuda", "cuda:N", "auto") on w and
// sets libtorch's numerics to a run's defaults (tensor.Numerics{}: no cuDNN
// autotuning, no TensorFloat-32), as host/train does for a run that leaves
// train.tf32 and train.cudnn_benchmark unset. Without it a benchmark would
// run with libtorch's own defaults, which allow TF32 in cuDNN's
// convolutions: not what a run does, nor what bench/torch_step.py sets.
func Device(ctx context.Context, w *tensor.Worker, spec string) (tensor.Device, error) {
	var d tensor.Device
	err := w.Do(ctx, func() (err error) {
		if d, err = tensor.ParseDevice(spec); err != nil {
			return err
		}
		return tensor.SetNumerics(tensor.Numerics{})
	})
	return d, err
}

// NewRig builds arch on an engine driven by w on device dev, initialized
// from seed, and sets a fixed batch of n samples (N(0,1) inputs, uniform
// labels, both from seed) as its current batch. Two rigs with the same
// arguments start identical. Every step returns its loss to Go, which waits
// for the device, so step times are complete on a GPU too.
func NewRig(ctx context.Context, w *tensor.Worker, dev tensor.Device, arch string, n int, seed int64) (*Rig, error) {
	return NewMembersRig(ctx, w, dev, []string{arch}, n, seed)
}

// NewRigIn is NewRig with samples of shape in instead of InShape (e.g.
// 1×28×28 for Fashion-MNIST-sized steps).
func NewRigIn(ctx context.Context, w *tensor.Worker, dev tensor.Device, arch string, in []int64, n int, seed int64) (*Rig, error) {
	return buildRig(ctx, w, dev, []string{arch}, in, n, seed, nil)
}

// NewMembersRig is NewRig with one member per arch, all sharing the batch.
func NewMembersRig(ctx context.Context, w *tensor.Worker, dev tensor.Device, archs []string, n int, seed int64) (*Rig, error) {
	return buildRig(ctx, w, dev, archs, InShape, n, seed, nil)
}

// NewVariationalRig is NewRig with a variational member (mean-field
// Gaussian weights with the OT-MDR code's prior and ρ initialization),
// trained with the local reparameterization when local is set.
func NewVariationalRig(ctx context.Context, w *tensor.Worker, dev tensor.Device, arch string, n int, seed int64, local bool) (*Rig, error) {
	return buildRig(ctx, w, dev, []string{arch}, InShape, n, seed, &engine.Variational{PriorSigma: 0.1, RhoInit: -5, RhoInitStd: 0.1,
		KL: "qp", KLReduction: "sum", Beta: 1, LocalReparam: local})
}

func buildRig(ctx context.Context, w *tensor.Worker, dev tensor.Device, archs []string, in []int64, n int, seed int64, vi *engine.Variational) (*Rig, error) {
	models := make([]*model.Model, len(archs))
	for i, a := range archs {
		m, err := model.Builtin().Make(ctx, w, dev, a, Classes, in)
		if err != nil {
			for _, m := range models[:i] {
				_ = w.Do(ctx, func() error { m.Release(); return nil })
			}
			return nil, err
		}
		models[i] = m
	}
	eng, err := engine.New(ctx, w, engine.Config{
		Device: dev, Seed: seed, Base: Base, TrainSize: int64(n), BatchSize: int64(n), Variational: vi,
	}, models)
	if err != nil {
		return nil, err
	}
	r := &Rig{Eng: eng, Model: models[0], Dev: dev, Batch: n, members: len(models)}
	err = w.Do(ctx, func() error {
		s := tensor.NewScope()
		defer s.Close()
		tensor.ManualSeed(seed + 17)
		x := s.Randn(append([]int64{int64(n)}, in...), tensor.Float32, dev)
		rng := rand.New(rand.NewPCG(uint64(seed), 17))
		labels := make([]int64, n)
		for i := range labels {
			labels[i] = rng.Int64N(Classes)
		}
		y := s.FromInt64(labels, []int64{int64(n)}, dev)
		if err := s.Err(); err != nil {
			return err
		}
		x, y = s.Keep(x), s.Keep(y)
		for m := range models {
			eng.SetBatch(m, x, y)
		}
		return nil
	})
	if err != nil {
		eng.Close()
		return nil, fmt.Errorf("synthetic batch: %w", err)
	}
	return r, nil
}

// Close frees the rig's tensors.
func (r *Rig) Close() { r.Eng.Close() }

// Step runs one training step of opt (configured on r.Eng) at learning
// rate LR and returns its loss: the one it reported from the device, or
// the one its StepOutput carries. (Reading the report right away costs a
// device sync on a GPU, which host/train avoids by reading a step late.)
func (r *Rig) Step(ctx context.Context, opt optim.Optimizer) (float64, error) {
	r.Eng.BeginStep(r.step, LR)
	out, err := opt.Step(ctx, optim.StepInput{Step: r.step, LR: LR})
	r.step++
	if err != nil {
		return 0, err
	}
	reps, err := r.Eng.TakeReports(ctx)
	if err != nil {
		return 0, err
	}
	vals, err := reps.Values(ctx)
	if err != nil {
		return 0, err
	}
	if loss, ok := vals["loss"]; ok {
		return loss, nil
	}
	return out.Metrics["loss"], nil
}

// Configure configures opt on the rig's engine with default
// hyperparameters for total steps.
func (r *Rig) Configure(ctx context.Context, opt optim.Optimizer, total int64) error {
	return r.ConfigureWith(ctx, opt, total, nil)
}

// ConfigureWith configures opt with the given hyperparameters (the others
// at their defaults).
func (r *Rig) ConfigureWith(ctx context.Context, opt optim.Optimizer, total int64, params map[string]any) error {
	p, err := hparams.Resolve(opt.Info().Params, params)
	if err != nil {
		return err
	}
	return opt.Configure(ctx, r.Eng, optim.Config{Params: p, Seed: 1, TotalSteps: total, StepsPerEpoch: total, Members: max(r.members, 1)})
}

// Feeder cuts fresh batches out of a device-resident synthetic dataset with
// CIFAR's augmentation (4-pixel random crop, flips), as host/train does:
// each epoch's order and augmentations are drawn at its start and copied to
// the device at once (devset.NewEpoch), and every batch is cut there. It
// hands them to a rig (the engine drops the previous batch).
type Feeder struct {
	w    *tensor.Worker
	ds   *devset.Set
	rng  *rand.Rand
	ep   *devset.Epoch
	next int
}

// NewFeeder uploads a synthetic CIFAR-shaped set of n samples to dev.
func NewFeeder(ctx context.Context, w *tensor.Worker, dev tensor.Device, n int, seed int64) (*Feeder, error) {
	set, err := data.Synthetic(data.SyntheticOptions{N: n, Classes: Classes, Shape: []int{3, 32, 32}, Seed: seed})
	if err != nil {
		return nil, err
	}
	ds, err := devset.Upload(ctx, w, dev, set, false)
	if err != nil {
		return nil, err
	}
	return &Feeder{w: w, ds: ds, rng: rand.New(rand.NewPCG(uint64(seed), 3))}, nil
}

// Close frees the dataset.
func (f *Feeder) Close() {
	_ = f.w.Do(context.Background(), func() error { f.ep.Drop(); f.ds.Drop(); return nil })
}

// Feed sets the next batch of r's size (a new epoch, reshuffled, when the
// current one is used up) as r's current batch.
func (f *Feeder) Feed(ctx context.Context, r *Rig) error {
	n := int64(r.Batch)
	return f.w.Do(ctx, func() error {
		s := tensor.NewScope()
		defer s.Close()
		if f.ep == nil || f.next == f.ep.Steps() {
			f.ep.Drop()
			f.ep = nil
			perm := make([]int64, f.ds.N)
			for i := range perm {
				perm[i] = int64(i)
			}
			f.rng.Shuffle(len(perm), func(i, j int) { perm[i], perm[j] = perm[j], perm[i] })
			ep, err := f.ds.NewEpoch(s, [][]int64{perm}, n, int(f.ds.N/n), devset.Augment{Crop: 4, Flip: true}, f.rng, r.Dev)
			if err != nil {
				return err
			}
			f.ep, f.next = ep, 0
		}
		x, y := f.ep.Batch(s, 0, f.next)
		f.next++
		if err := s.Err(); err != nil {
			return err
		}
		r.Eng.SetBatch(0, s.Keep(x), s.Keep(y))
		return nil
	})
}

// Timings collects per-step wall times.
type Timings []time.Duration

// Time runs fn and records how long it took.
func (t *Timings) Time(fn func() error) error {
	start := time.Now()
	err := fn()
	*t = append(*t, time.Since(start))
	return err
}

// MedianMs is the median step time in milliseconds (0 when empty).
func (t Timings) MedianMs() float64 {
	if len(t) == 0 {
		return 0
	}
	s := slices.Clone(t)
	slices.Sort(s)
	m := s[len(s)/2]
	if len(s)%2 == 0 {
		m = (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return float64(m) / 1e6
}

// MeanMs is the mean step time in milliseconds (0 when empty).
func (t Timings) MeanMs() float64 {
	if len(t) == 0 {
		return 0
	}
	var sum time.Duration
	for _, d := range t {
		sum += d
	}
	return float64(sum) / float64(len(t)) / 1e6
}

// MinMs is the fastest step in milliseconds (0 when empty).
func (t Timings) MinMs() float64 {
	if len(t) == 0 {
		return 0
	}
	return float64(slices.Min(t)) / 1e6
}

// RSS returns the process's resident set size in bytes (VmRSS from
// /proc/self/status; Linux only).
func RSS() (int64, error) {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, err
	}
	for line := range strings.Lines(string(b)) {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			f := strings.Fields(rest)
			if len(f) != 2 || f[1] != "kB" {
				return 0, fmt.Errorf("unexpected VmRSS line %q", line)
			}
			kb, err := strconv.ParseInt(f[0], 10, 64)
			return kb * 1024, err
		}
	}
	return 0, fmt.Errorf("no VmRSS in /proc/self/status")
}

// CPUTime returns the CPU time (user + system) the process has used so far,
// all threads together.
func CPUTime() (time.Duration, error) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, err
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), nil
}
