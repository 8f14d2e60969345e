// Package experiment decodes, validates and expands optlab experiment files.
//
// An experiment file is TOML (see docs/EXPERIMENTS.md for the full
// reference). Load or Parse decode it strictly: unknown keys, keys that
// differ from the schema only in case, duplicate keys that differ only in
// case and values of the wrong TOML type are errors that cite the line.
// Validate then checks every value (ranges, enums, consistency between
// sections), ValidateParams checks a method's [method.params] against its
// plugin's hyperparameter schema, and Grid expands the file into the runs
// to train: methods × settings × archs × seeds, where a method's settings
// are the combinations of the values of the keys written as lists (sweeps:
// its parameters, the numbers of [train] and the rate and seed of
// [data.label_noise]; see sweep.go). Load and
// Parse also apply --set KEY=VALUE overrides (see set.go). Data.Spec hands
// the [data] table to package data in that package's terms (data.Spec),
// and CheckSplit checks the keys that only the loaded data can answer.
//
// The struct fields below document each key and its default; the defaults
// are those of Default.
//
// Paths in an experiment file (data.dir, data.ood_dir, data.path,
// model.init_from, results_dir, a method's path) are relative to the file's
// folder: Load resolves them, so the fields of the Experiment it returns
// hold paths usable from the current directory. Parse, which has no file
// location, keeps them as written.
package experiment

import (
	"cmp"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/optlab/optlab/host/data"
)

// Dataset names accepted in data.dataset (and, for some, data.ood): the
// names package data loads (Data.Spec hands them over as they are).
const (
	DatasetUCIDigits = data.UCIDigitsName
	DatasetCIFAR10   = data.CIFAR10
	DatasetCIFAR100  = data.CIFAR100
	DatasetCSV       = data.CSVName
	DatasetSynthetic = data.SyntheticName
	// DatasetNumPy reads NumPy arrays from data.path: an .npz archive
	// (np.savez) or a folder of .npy files, holding x_train, y_train,
	// x_test and y_test, and optionally x_val and y_val.
	DatasetNumPy = data.NumPyName
	// DatasetFashionMNIST and DatasetMNIST read the four canonical IDX files
	// (gzip-compressed or not) from data.dir.
	DatasetFashionMNIST = data.FashionMNIST
	DatasetMNIST        = data.MNIST
)

// HasDir reports whether the named dataset is read from files in a folder
// (data.dir or data.ood_dir): CIFAR and the MNIST-format datasets.
func HasDir(dataset string) bool {
	switch dataset {
	case DatasetCIFAR10, DatasetCIFAR100, DatasetFashionMNIST, DatasetMNIST:
		return true
	}
	return false
}

// Axis orders of 4-D image arrays accepted in data.layout (dataset npz).
const (
	// LayoutNCHW is samples × channels × height × width (PyTorch's).
	LayoutNCHW = data.LayoutNCHW
	// LayoutNHWC is samples × height × width × channels (TensorFlow's,
	// and that of most image libraries).
	LayoutNHWC = data.LayoutNHWC
)

// Optimizer names accepted in train.optimizer.name.
const (
	OptimizerSGD  = "sgd"
	OptimizerAdam = "adam"
)

// Learning-rate schedule kinds accepted in train.schedule.kind.
const (
	ScheduleConstant = "constant"
	ScheduleStep     = "step"
	ScheduleCosine   = "cosine"
	SchedulePlateau  = "plateau"
	ScheduleCyclic   = "cyclic"
)

// Temperature-scaling modes accepted in eval.temperature.
const (
	// TemperatureValidation fits the temperature on the held-out
	// validation split (needs data.validation > 0).
	TemperatureValidation = "validation"
	// TemperatureTestHalves fits the temperature on one half of the test
	// set and reports metrics on the other half, and vice versa.
	TemperatureTestHalves = "test-halves"
	// TemperatureNone disables temperature scaling.
	TemperatureNone = "none"
)

// KL directions accepted in model.variational_opts.kl.
const (
	// KLqp is KL(q‖p), the usual ELBO term.
	KLqp = "qp"
	// KLpq is KL(p‖q).
	KLpq = "pq"
)

// Experiment is a decoded experiment file.
type Experiment struct {
	// File is the name messages cite: the path given to Load or the name
	// given to Parse.
	File string
	// Name (key "name", required) names the experiment; results go to
	// <results_dir>/<name>/runs.jsonl. It must be a single path element
	// made of letters, digits, '.', '_' and '-'.
	Name string
	// Description (key "description", optional) is free text.
	Description string
	// ResultsDir (key "results_dir", default "results") is the directory
	// that holds one subdirectory per experiment. When written in the file
	// it is relative to the file's folder (see Load); the default is
	// relative to the current directory.
	ResultsDir string
	// Data is the [data] table.
	Data Data
	// Model is the [model] table.
	Model Model
	// Train is the [train] table.
	Train Train
	// Eval is the [eval] table.
	Eval Eval
	// Methods are the [[method]] tables, in file order (at least one).
	Methods []Method
	// Sweeps are the keys of SweepKeys ([train] numbers, the rate and seed
	// of [data.label_noise]) written as lists of two values or more, in
	// file order; Train and Data hold the first value of each, and Grid
	// gives every run its own (Run.Experiment).
	Sweeps []Sweep
	// Notes are informational messages produced while decoding, e.g. a
	// default that was adjusted to the rest of the file. They are not
	// errors; a CLI may print them.
	Notes []string

	// lines maps keyPath.String() to the line the key is written on.
	lines map[string]int
	// defined holds the keys the TOML decoder saw (toml.Key.String()).
	defined map[string]bool
	// sets maps the keys --set overrides set (keyPath strings) to the
	// override.
	sets map[string]string
}

// Line returns the 1-based line on which key is written in the file, or 0
// if the key is absent or the Experiment was not decoded from a file. Keys
// are written as in messages: "train.batch_size", "method[0].params.rho"
// (method indices are 0-based).
func (e *Experiment) Line(key string) int { return e.lines[key] }

// has reports whether key is written in the file (or set by --set):
// a key outside [[method]], or a key of a method's [method.optimizer] or
// [method.schedule] ("method[1].optimizer.lr").
func (e *Experiment) has(key string) bool {
	if rest, ok := strings.CutPrefix(key, "method["); ok {
		n, rest, _ := strings.Cut(rest, "]")
		i, err := strconv.Atoi(n)
		table, k, _ := strings.Cut(strings.TrimPrefix(rest, "."), ".")
		return err == nil && i >= 0 && i < len(e.Methods) && slices.Contains(e.Methods[i].keys(table), k)
	}
	return e.defined[key]
}

// Data is the [data] table.
type Data struct {
	// Dataset (default "uci-digits") is one of uci-digits, cifar10,
	// cifar100, fashion-mnist, mnist, csv, npz, synthetic.
	Dataset string `toml:"dataset"`
	// Dir is the dataset directory; required for cifar10, cifar100,
	// fashion-mnist and mnist and not allowed for the others. Like every
	// path in the file, it is relative to the file's folder (see Load).
	Dir string `toml:"dir"`
	// Path is the data file; required for csv and npz and not allowed
	// otherwise. For csv, each row is the features followed by an
	// integer class label. For npz, it is an .npz archive or a folder of
	// .npy files (see DatasetNumPy). Relative to the file's folder (see
	// Load).
	Path string `toml:"path"`
	// Classes (csv and npz only, default 0) is the number of classes; 0
	// infers it from the labels, otherwise it must be ≥ 2.
	Classes int `toml:"classes"`
	// Layout (npz only, default "nchw") is the axis order of 4-D x
	// arrays: "nchw" or "nhwc" (transposed to C×H×W when loaded). It does
	// not apply to 2-D arrays (N×features) or 3-D ones (N×H×W, one
	// channel).
	Layout string `toml:"layout"`
	// TestFraction (default 0.2) is the fraction of samples held out as the
	// test set, in (0, 1). It applies to uci-digits and csv only: CIFAR,
	// the MNIST-format datasets and npz have a fixed test set and
	// synthetic data sets its sizes in [data.synthetic].
	TestFraction float64 `toml:"test_fraction"`
	// Validation (default 0) is the fraction of the training set held out
	// for validation (temperature scaling, plateau schedule), in [0, 1).
	// It must be 0 for an npz file that holds its own validation split
	// (x_val and y_val), which loading checks.
	Validation float64 `toml:"validation"`
	// Augment lists training augmentations: "crop" (pad-and-crop) and/or
	// "flip" (horizontal). Default ["crop", "flip"] for cifar10/cifar100
	// and [] otherwise. Not allowed for csv or for vector synthetic data;
	// for npz, loading refuses it unless the samples are images (C×H×W).
	Augment []string `toml:"augment"`
	// Normalize (default true) standardises inputs with training-set
	// statistics.
	Normalize bool `toml:"normalize"`
	// Shuffle (default true) reshuffles the training set every epoch.
	Shuffle bool `toml:"shuffle"`
	// OOD (default "", none) names an out-of-distribution test set: cifar10,
	// cifar100 or synthetic for 3×32×32 inputs (dataset cifar10, cifar100 or
	// image synthetic data), mnist or fashion-mnist for 1×28×28 inputs
	// (dataset fashion-mnist or mnist). It must differ from the dataset.
	OOD string `toml:"ood"`
	// OODDir is the directory of the OOD dataset; required when ood is
	// cifar10, cifar100, mnist or fashion-mnist and not allowed otherwise.
	// Relative to the file's folder (see Load).
	OODDir string `toml:"ood_dir"`
	// Synthetic is the [data.synthetic] table; it may be written only when
	// dataset or ood is "synthetic".
	Synthetic Synthetic `toml:"synthetic"`
	// LabelNoise is the [data.label_noise] table: noise added to the
	// training labels (and so to the validation split drawn from them).
	LabelNoise LabelNoise `toml:"label_noise"`
}

// Spec is the data package's description of the data d names: what
// data.Load, data.LoadOOD and devset.Load read, with the label noise's class
// map as class numbers (ClassMap). The dataset, layout and noise names are
// handed over as they are: this package's constants are data's.
func (d Data) Spec() data.Spec {
	n := d.LabelNoise
	return data.Spec{
		Dataset: d.Dataset, Dir: d.Dir, Path: d.Path, Classes: d.Classes, Layout: d.Layout,
		TestFraction: d.TestFraction, Validation: d.Validation,
		Augment: d.Augment, Normalize: d.Normalize,
		OOD: d.OOD, OODDir: d.OODDir,
		Synthetic:  data.SyntheticSpec{Train: d.Synthetic.Train, Test: d.Synthetic.Test, Classes: d.Synthetic.Classes, Features: d.Synthetic.Features},
		LabelNoise: data.NoiseOptions{Kind: n.Kind, Rate: n.Rate, Seed: n.Seed, Map: n.ClassMap()},
	}
}

// Label-noise kinds accepted in data.label_noise.kind.
const (
	// NoiseSymmetric moves a label to one of the other classes, chosen
	// uniformly.
	NoiseSymmetric = data.NoiseSymmetric
	// NoisePairflip moves a label of class c to class (c+1) mod K.
	NoisePairflip = data.NoisePairflip
	// NoiseAsymmetric moves a label of a class the map lists to the class
	// it maps to.
	NoiseAsymmetric = data.NoiseAsymmetric
)

// Best-epoch criteria accepted in eval.best_epoch.
const (
	BestAcc = "acc"
	BestNLL = "nll"
)

// Corruptions is the [eval.corruptions] table: the final model of every
// run is also scored on corrupted copies of the (clean) test set, made on
// the device at evaluation time (host/corrupt: CIFAR-10-C's definitions).
// Image datasets only.
type Corruptions struct {
	// Families lists the corruption families (host/corrupt's names), or
	// ["all"]. Empty (the default) means no corrupted evaluation.
	Families []string `toml:"families"`
	// Severities (default [1, 2, 3, 4, 5]) lists the severities, each in
	// 1..5.
	Severities []int `toml:"severities"`
	// Seed (default 0) seeds the random corruptions (noise, rotations);
	// the corrupted images are a pure function of it and the test set.
	Seed int64 `toml:"seed"`
}

// Active reports whether the table asks for corrupted evaluation.
func (c Corruptions) Active() bool { return len(c.Families) > 0 }

// LabelNoise is the [data.label_noise] table: each training label is
// replaced, with probability Rate and independently of the others, by a
// wrong one chosen by Kind, deterministically from Seed. It applies to the
// training set before the validation split is held out of it (so
// validation labels are noisy too); the test set stays clean. Absent (Kind
// ""), or with Rate 0, it means no noise (see Active). Rate and Seed may
// be swept (SweepKeys).
type LabelNoise struct {
	// Kind (required when the table is written) is symmetric, pairflip or
	// asymmetric.
	Kind string `toml:"kind"`
	// Rate (required when the table is written) is the probability, in
	// [0, 1), that a sample's label is flipped: any sample for symmetric
	// and pairflip, a sample of a mapped class for asymmetric (so the
	// realised fraction of the whole training set is about Rate times the
	// share of the mapped classes).
	Rate float64 `toml:"rate"`
	// Seed (default 0) selects which labels flip and, for symmetric, to
	// what.
	Seed int64 `toml:"seed"`
	// Map (asymmetric only, required there) maps a class, written as a
	// decimal key, to the class its flipped labels get: {9 = 1, 2 = 0} in
	// CIFAR-10's convention (truck → automobile, bird → airplane, …).
	// Classes are 0-based and below the dataset's number of classes; no
	// class maps to itself. Classes the map does not list keep their
	// labels.
	Map map[string]int `toml:"map"`
}

// Active reports whether label noise is asked for: a kind and a rate
// above 0. Rate 0 (a value of a rate sweep, rate = [0, 0.2, 0.4]) is no
// noise: such a run trains on the clean labels, and its configuration is
// that of a run without [data.label_noise].
func (n LabelNoise) Active() bool { return n.Kind != "" && n.Rate > 0 }

// String describes the noise as host check and the logs name it:
// "pairflip, rate 0.25, seed 3", with ", map {9 = 1}" for asymmetric
// noise, or "none" when it is not Active.
func (n LabelNoise) String() string {
	if !n.Active() {
		return "none"
	}
	s := fmt.Sprintf("%s, rate %g, seed %d", n.Kind, n.Rate, n.Seed)
	if m := n.MapString(); m != "" {
		s += ", map " + m
	}
	return s
}

// ClassMap returns Map with its keys as class numbers; keys that are not
// decimal integers (which Validate rejects) are left out.
func (n LabelNoise) ClassMap() map[int]int {
	if n.Map == nil {
		return nil
	}
	out := make(map[int]int, len(n.Map))
	for k, v := range n.Map {
		if c, ok := classKey(k); ok {
			out[c] = v
		}
	}
	return out
}

// MapString writes Map as a TOML inline table with its classes in
// numerical order, "{2 = 0, 9 = 1}"; "" when Map is empty.
func (n LabelNoise) MapString() string {
	if len(n.Map) == 0 {
		return ""
	}
	keys := slices.SortedFunc(maps.Keys(n.Map), func(a, b string) int {
		ca, okA := classKey(a)
		cb, okB := classKey(b)
		if okA && okB {
			return cmp.Compare(ca, cb)
		}
		return cmp.Compare(a, b)
	})
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s = %d", k, n.Map[k])
	}
	return "{" + strings.Join(parts, ", ") + "}"
}

// classKey parses a class id written as a map key: a decimal integer ≥ 0
// without sign or leading zeros.
func classKey(k string) (int, bool) {
	c, err := strconv.Atoi(k)
	if err != nil || c < 0 || strconv.Itoa(c) != k {
		return 0, false
	}
	return c, true
}

// Synthetic is the [data.synthetic] table: random class-conditional
// Gaussian data, for tests and smoke runs.
type Synthetic struct {
	// Train (default 512) is the number of training samples (> 0).
	Train int `toml:"train"`
	// Test (default 256) is the number of test samples (> 0); when
	// synthetic data is the OOD set it is the OOD set's size.
	Test int `toml:"test"`
	// Classes (default 10) is the number of classes (≥ 2).
	Classes int `toml:"classes"`
	// Features (default 0) is the input size: 0 means 3×32×32 images
	// (CIFAR-shaped); n > 0 means flat vectors of n features.
	Features int `toml:"features"`
}

// Model is the [model] table.
type Model struct {
	// Archs (default ["cnn"]) is a grid dimension: each entry is a member
	// spec, "arch", "a+b+c" (one member of each) or "arch*N" (N members
	// of arch); terms combine, e.g. "resnet18*2+mobilenet". See ParseArch.
	Archs []string `toml:"archs"`
	// Variational (default false) uses mean-field Gaussian (Bayes by
	// backprop) layers.
	Variational bool `toml:"variational"`
	// InitFrom (default "", random init) is a safetensors file to
	// initialise every member from, relative to the file's folder (see
	// Load).
	InitFrom string `toml:"init_from"`
	// VariationalOpts is the [model.variational_opts] table; it may be
	// written only when variational = true.
	VariationalOpts VariationalOpts `toml:"variational_opts"`
	// MemoryFormat (default "contiguous") is how image batches and
	// convolution weights are laid out in memory: "contiguous" (NCHW) or
	// "channels_last" (NHWC strides, same shapes), which oneDNN and cuDNN
	// convolutions run faster on, especially in bf16. Only for image
	// inputs and architectures with convolutions.
	MemoryFormat string `toml:"memory_format"`
	// TorchScriptInit (default "file") is where a TorchScript arch's
	// initial parameters come from: "file", the weights saved in it, for
	// every member and seed; or "reset", drawn per member and seed as
	// torch.nn's reset_parameters() draws them (convolution and linear
	// weights and biases U(±1/√fan_in), BatchNorm weight 1 and bias 0),
	// other parameters from the file.
	TorchScriptInit string `toml:"torchscript_init"`
}

// Initial parameters of TorchScript archs (model.torchscript_init).
const (
	TorchScriptInitFile  = "file"
	TorchScriptInitReset = "reset"
)

// Memory formats (model.memory_format).
const (
	MemoryContiguous   = "contiguous"
	MemoryChannelsLast = "channels_last"
)

// Precisions (train.precision).
const (
	PrecisionFP32 = "fp32"
	PrecisionBF16 = "bf16"
)

// VariationalOpts is the [model.variational_opts] table.
type VariationalOpts struct {
	// PriorSigma (default 0.1) is the std of the zero-mean Gaussian prior
	// (> 0).
	PriorSigma float64 `toml:"prior_sigma"`
	// RhoInit (default -5.0) initialises ρ, where σ = softplus(ρ).
	RhoInit float64 `toml:"rho_init"`
	// KL (default "qp") is the KL direction: "qp" for KL(q‖p), "pq" for
	// KL(p‖q).
	KL string `toml:"kl"`
	// KLReduction (default "sum") is how the per-weight KL terms are
	// reduced: "sum" (the ELBO), or "layers": the sum divided by the number
	// of variational layers + 1, as the OT-MDR reference code does.
	KLReduction string `toml:"kl_reduction"`
	// Beta (default 1.0) scales the KL term (≥ 0).
	Beta float64 `toml:"beta"`
	// MCSamples (default 30) is the number of weight samples averaged by
	// the variational model's predictive at evaluation (≥ 1).
	MCSamples int `toml:"mc_samples"`
	// LocalReparam (default false) trains with the local reparameterization
	// trick (Kingma et al., 2015): convolution and linear layers sample
	// their outputs, with noise independent per sample, instead of one
	// weight sample per pass. Plugins' shared weight noise (Eps) then has
	// no effect. The published OT-MDR BNN code samples weights.
	LocalReparam bool `toml:"local_reparam"`
}

// Train is the [train] table.
type Train struct {
	// Epochs (default 10) is the number of training epochs (> 0). An
	// experiment sets it or Budget, not both.
	Epochs int `toml:"epochs"`
	// Budget (default 0: off; ≥ 0) sets the length of training in
	// gradient evaluations instead of epochs: a run trains until it has
	// evaluated Budget epochs' worth of gradients, Budget × steps per
	// epoch × batch_size samples of forward-backward passes, whatever
	// each of its steps costs. SGD (one gradient a step) then trains
	// Budget epochs, SAM (two) Budget/2, so that methods compare at equal
	// compute. The schedule (its epochs, warm-up, milestones and cycles)
	// runs over the budget: its epoch is the number of budget epochs
	// spent when a step starts, so that SGD with budget = N follows the
	// schedule of epochs = N step for step. A run stops at the first step
	// that ends with the budget spent (the last epoch may be cut short).
	// A method may set its own in [method.train] (SGD at twice the
	// others' budget).
	Budget int `toml:"budget"`
	// BatchSize (default 128) is the training minibatch size (> 0).
	BatchSize int `toml:"batch_size"`
	// EvalBatchSize (default 1000) is the evaluation batch size (> 0).
	EvalBatchSize int `toml:"eval_batch_size"`
	// Seeds (default [1]) is a grid dimension: one run per seed. Seeds
	// must be distinct and ≥ 0.
	Seeds []int64 `toml:"seeds"`
	// LabelSmoothing (default 0) is the label-smoothing ε, in [0, 1).
	LabelSmoothing float64 `toml:"label_smoothing"`
	// MaxSteps (default 0) caps the number of optimizer steps of a run;
	// 0 means no cap (smoke runs set it).
	MaxSteps int `toml:"max_steps"`
	// Device (default "auto") is auto, cpu, cuda or cuda:N (N ≥ 0).
	Device string `toml:"device"`
	// Threads (default 0) is the number of CPU threads; 0 means the number
	// of CPU cores.
	Threads int `toml:"threads"`
	// Checkpoint (default false) saves a checkpoint at the end of every
	// epoch so that an interrupted run can resume.
	Checkpoint bool `toml:"checkpoint"`
	// Spill (default false) keeps an optimizer's vector that does not fit
	// on the device in host memory, with a line in the log, instead of
	// failing the run; ops on such vectors are slower.
	Spill bool `toml:"spill"`
	// MicroBatches (default 1; ≥ 0, 0 and 1 meaning the whole batch at
	// once) computes every gradient pass of a batch as that many
	// micro-batches, one after the other, and sums their gradients
	// (weighted by their sizes: the full batch's mean gradient), as
	// gradient accumulation in PyTorch does: BatchNorm normalizes each
	// micro-batch with its own statistics and updates its running
	// statistics once per micro-batch. The activations of one micro-batch
	// live at a time, so a batch larger than memory allows trains, and
	// SAM's, OT-MDR's and bSAM's perturbations use the accumulated
	// gradient. At most batch_size; a part of the batch that a method
	// selects (Batch.Of) is cut the same way.
	MicroBatches int `toml:"micro_batches"`
	// DumpParamsEvery (default 0: off; ≥ 0) writes every member's live
	// parameters and BatchNorm statistics, as a PyTorch state dict, before
	// the first optimizer step and after every DumpParamsEvery-th, to the
	// run's folder of results.Layout.ParamsDir, for step-by-step
	// comparisons with other code. It changes nothing a run computes.
	DumpParamsEvery int `toml:"dump_params_every"`
	// Deterministic (default false) makes cuDNN use deterministic
	// algorithms and turns on torch's deterministic algorithms (an op that
	// has none then fails the run, naming itself). Needs CudnnBenchmark
	// false.
	Deterministic bool `toml:"deterministic"`
	// CudnnBenchmark (default false) lets cuDNN time its convolution
	// algorithms for each input shape and keep the fastest.
	CudnnBenchmark bool `toml:"cudnn_benchmark"`
	// TF32 (default false) allows TensorFloat-32 in cuBLAS matrix products
	// and cuDNN convolutions (Ampere and later GPUs).
	TF32 bool `toml:"tf32"`
	// Precision (default "fp32") is the arithmetic of forward and backward
	// passes: "fp32", or "bf16", mixed precision by libtorch's autocast
	// (bfloat16 convolutions and matrix products; parameters, optimizer
	// vectors, losses and the base step stay float32). Evaluation uses it
	// too.
	Precision string `toml:"precision"`
	// Optimizer is the [train.optimizer] table: the base optimizer that
	// the methods' plugins drive.
	Optimizer Optimizer `toml:"optimizer"`
	// Schedule is the [train.schedule] table.
	Schedule Schedule `toml:"schedule"`
}

// Optimizer is the [train.optimizer] table.
type Optimizer struct {
	// Name (default "sgd") is sgd or adam.
	Name string `toml:"name"`
	// LR (default 0.1) is the base learning rate (> 0).
	LR float64 `toml:"lr"`
	// Momentum (sgd only, default 0.9) is in [0, 1).
	Momentum float64 `toml:"momentum"`
	// Nesterov (sgd only, default false) needs momentum > 0.
	Nesterov bool `toml:"nesterov"`
	// WeightDecay (default 5e-4) is the L2 coefficient (≥ 0).
	WeightDecay float64 `toml:"weight_decay"`
	// Betas (adam only, default [0.9, 0.999]) are two numbers in [0, 1).
	Betas []float64 `toml:"betas"`
	// Eps (adam only, default 1e-8) is > 0.
	Eps float64 `toml:"eps"`
}

// Schedule is the [train.schedule] table. Keys that belong to another kind
// than the chosen one are errors when written.
type Schedule struct {
	// Kind (default "constant") is constant, step, cosine, plateau or
	// cyclic.
	Kind string `toml:"kind"`
	// Milestones (step, default [0.3, 0.6, 0.8]) are where the LR is
	// multiplied by gamma, strictly increasing. If every milestone is < 1
	// they are fractions of train.epochs (each in (0, 1)); if every
	// milestone is ≥ 1 they are epoch numbers (integers ≤ train.epochs).
	// Mixing the two forms is an error. See MilestoneEpochs.
	Milestones []float64 `toml:"milestones"`
	// Gamma (step, default 0.2) is the decay factor, in (0, 1].
	Gamma float64 `toml:"gamma"`
	// WarmupEpochs (default 0) ramps the LR linearly from 0 over this many
	// epochs (any kind; < train.epochs).
	WarmupEpochs int `toml:"warmup_epochs"`
	// Patience (plateau, default 6) is the number of epochs without
	// improvement of the monitored loss before the LR is reduced (≥ 1).
	// The monitored loss is the validation loss if data.validation > 0,
	// else the test loss.
	Patience int `toml:"patience"`
	// Factor (plateau, default 0.1) multiplies the LR on a plateau, in
	// (0, 1).
	Factor float64 `toml:"factor"`
	// MinLR (cosine and plateau, default 0) is the LR floor: the end of
	// the cosine curve, the lower bound for plateau reductions. In
	// [0, train.optimizer.lr).
	MinLR float64 `toml:"min_lr"`
	// CycleEpochs (cyclic, default 4) is the length of one triangular
	// cycle in epochs (≥ 1). FGE-style: within each cycle the LR goes
	// linearly from lr_max down to lr_min over the first half and back up
	// over the second; train.optimizer.lr is not used.
	CycleEpochs int `toml:"cycle_epochs"`
	// LRMax (cyclic, default 0.05) is the cycle's upper LR (> lr_min).
	LRMax float64 `toml:"lr_max"`
	// LRMin (cyclic, default 1e-4) is the cycle's lower LR (> 0).
	LRMin float64 `toml:"lr_min"`
}

// Horizon returns the length of training the schedule runs over: Budget
// when set (in budget epochs, see Train.Budget), else Epochs.
func (t Train) Horizon() int {
	if t.Budget > 0 {
		return t.Budget
	}
	return t.Epochs
}

// HorizonKey returns the key that sets Horizon, for messages:
// "train.budget" or "train.epochs".
func (t Train) HorizonKey() string {
	if t.Budget > 0 {
		return "train.budget"
	}
	return "train.epochs"
}

// MilestoneEpochs returns the step milestones as (possibly fractional)
// epoch numbers for a run of the given number of epochs: fractions are
// multiplied by epochs, epoch numbers are returned as they are.
func (s Schedule) MilestoneEpochs(epochs int) []float64 {
	out := make([]float64, len(s.Milestones))
	fractions := true
	for _, m := range s.Milestones {
		if m >= 1 {
			fractions = false
		}
	}
	for i, m := range s.Milestones {
		if fractions {
			m *= float64(epochs)
		}
		out[i] = m
	}
	return out
}

// Eval is the [eval] table.
type Eval struct {
	// Temperature is validation, test-halves or none. When the key is not
	// written it defaults to "validation" if data.validation > 0 and to
	// "test-halves" otherwise (with a note in Experiment.Notes). Writing
	// "validation" while data.validation = 0 is an error.
	Temperature string `toml:"temperature"`
	// AACSteps (default 100) is the number of abstention thresholds on
	// the accuracy–abstention curve (≥ 2).
	AACSteps int `toml:"aac_steps"`
	// MCSamples (default 30) is the number of samples drawn for sampled
	// predictives (posterior methods) when the plugin does not choose
	// (≥ 1).
	MCSamples int `toml:"mc_samples"`
	// EveryEpochs (default 0) evaluates every N epochs as well as at the
	// end; 0 means only at the end.
	EveryEpochs int `toml:"every_epochs"`
	// BestEpoch (default "", off) names the validation metric that picks
	// each run's best epoch among those evaluated (every_epochs): "acc"
	// (highest) or "nll" (lowest). The record then also holds the test
	// metrics of that epoch (best_acc, best_nll, …, best_epoch): early
	// stopping on the validation split, which holds the training set's
	// (possibly noisy) labels. Needs data.validation > 0 and
	// every_epochs ≥ 1.
	BestEpoch string `toml:"best_epoch"`
	// Corruptions is the [eval.corruptions] table: the final model is also
	// scored on corrupted copies of the test set.
	Corruptions Corruptions `toml:"corruptions"`
	// TensorBoard (default true) writes TensorBoard event files of every
	// run to results/<experiment>/tb/<run>/ as it trains. It changes no
	// result, so it is not part of a run's recorded configuration.
	TensorBoard bool `toml:"tensorboard"`
	// TensorBoardEverySteps (default 10) writes the training loss of every
	// N-th step to the event files, as well as the per-epoch values; 0
	// writes per-epoch values only (≥ 0; applies only when TensorBoard is
	// on).
	TensorBoardEverySteps int `toml:"tensorboard_every_steps"`
}

// Method is one [[method]] table: a row of the comparison.
type Method struct {
	// Name (required) is the row label; unique within the file (ignoring
	// case) and free of '/', '=' and control characters.
	Name string
	// Plugin is a built-in plugin name, looked up in the plugin directory
	// (letters, digits, '_', '-', '.'). Exactly one of Plugin and Path.
	Plugin string
	// Path is the path of a third-party plugin binary, relative to the
	// file's folder (see Load).
	Path string
	// Params holds [method.params] as decoded TOML values (string, int64,
	// float64, bool, time values, []any, map[string]any); ValidateParams
	// checks and converts them against the plugin's schema. A list ([]any
	// of two values or more after Parse) is a sweep: Grid gives each run
	// one of its values. Never nil after Parse.
	Params map[string]any
	// ParamLines maps each key of Params to its line (absent if unknown).
	ParamLines map[string]int
	// File is the file the method was read from, for messages.
	File string
	// Line is the line of the method's [[method]] header (0 if unknown).
	Line int
	// Optimizer is [method.optimizer]: the keys of [train.optimizer] this
	// method sets for itself, those named in OptimizerKeys (the other
	// fields are zero). See Train.
	Optimizer Optimizer
	// OptimizerKeys lists the keys written in [method.optimizer] (TOML
	// names, "lr", "momentum"), sorted; empty when the method keeps the
	// experiment's optimizer.
	OptimizerKeys []string
	// Schedule is [method.schedule], like Optimizer: the keys of
	// [train.schedule] named in ScheduleKeys.
	Schedule Schedule
	// ScheduleKeys lists the keys written in [method.schedule], sorted.
	ScheduleKeys []string
	// TrainTable is the method's [method.train]: the [train] keys it
	// sets for its own runs, those named in TrainKeys.
	TrainTable MethodTrain
	// TrainKeys lists the keys written in [method.train], sorted.
	TrainKeys []string

	// sets maps "params.<name>" to the --set override that set it.
	sets map[string]string
}

// BaseOptimizerKeys are the keys of [train.optimizer] that configure only
// the base optimizer (the BaseStep op): a plugin that applies its own
// update (optim.Features.OwnsUpdate) ignores them. lr is not among them: the
// schedule's learning rate reaches every plugin as StepInput.LR.
func BaseOptimizerKeys() []string {
	return []string{"name", "momentum", "nesterov", "weight_decay", "betas", "eps"}
}

// Overrides reports whether the method writes [method.optimizer] or
// [method.schedule] keys.
func (m Method) Overrides() bool {
	return len(m.OptimizerKeys) > 0 || len(m.ScheduleKeys) > 0 || len(m.TrainKeys) > 0
}

// MethodTrain is a method's [method.train] table: the keys of [train] a
// method may set for its own runs.
type MethodTrain struct {
	// Budget replaces train.budget (Train.Budget) for the method's runs:
	// SGD at twice the others' budget in an equal-compute comparison.
	Budget int `toml:"budget"`
}

// Train returns t, the experiment's [train] table (with a run's swept
// values), with the method's [method.train], [method.optimizer] and
// [method.schedule] applied: every key the method writes replaces the experiment's. When the
// method names another optimizer than t's (train.optimizer.name), its
// optimizer starts from that optimizer's defaults (Default) instead of
// t's other keys, so that no key of one optimizer leaks into another; the
// same goes for the schedule when it names another kind. t is returned
// as it is when the method writes neither table; otherwise the result
// shares no slice with t.
func (m Method) Train(t Train) Train {
	if !m.Overrides() {
		return t
	}
	def := Default().Train
	if slices.Contains(m.TrainKeys, "budget") {
		t.Budget = m.TrainTable.Budget
	}
	if len(m.OptimizerKeys) > 0 {
		base := t.Optimizer
		if slices.Contains(m.OptimizerKeys, "name") && m.Optimizer.Name != base.Name {
			base = def.Optimizer
		}
		base.Betas = slices.Clone(base.Betas)
		t.Optimizer = overlay(base, m.Optimizer, m.OptimizerKeys)
	}
	if len(m.ScheduleKeys) > 0 {
		base := t.Schedule
		if slices.Contains(m.ScheduleKeys, "kind") && m.Schedule.Kind != base.Kind {
			base = def.Schedule
		}
		base.Milestones = slices.Clone(base.Milestones)
		t.Schedule = overlay(base, m.Schedule, m.ScheduleKeys)
	}
	return t
}

// methodKey returns the key that sets the value of the [train.optimizer]
// or [train.schedule] key table.key ("optimizer", "lr") in the runs of
// method i: "method[i].optimizer.lr" when the method writes that key, or
// names another optimizer (schedule kind) than the experiment's and so
// starts from its defaults; "train.optimizer.lr" otherwise.
func (e *Experiment) methodKey(i int, table, key string) string {
	m := e.Methods[i]
	if m.resets(table, e.Train) || slices.Contains(m.keys(table), key) {
		return fmt.Sprintf("method[%d].%s.%s", i, table, key)
	}
	if table == "train" {
		return "train." + key
	}
	return "train." + table + "." + key
}

// keys returns the keys the method writes in [method.<table>].
func (m Method) keys(table string) []string {
	switch table {
	case "optimizer":
		return m.OptimizerKeys
	case "schedule":
		return m.ScheduleKeys
	case "train":
		return m.TrainKeys
	}
	return nil
}

// resets reports whether the method's [method.<table>] names another
// optimizer (schedule kind) than t, so that its table starts from the
// defaults.
func (m Method) resets(table string, t Train) bool {
	switch table {
	case "optimizer":
		return slices.Contains(m.OptimizerKeys, "name") && m.Optimizer.Name != t.Optimizer.Name
	case "train":
		return false
	}
	return slices.Contains(m.ScheduleKeys, "kind") && m.Schedule.Kind != t.Schedule.Kind
}

// overrides reports whether the method's tables decide the value of the
// [train] key key ("train.optimizer.lr"), so that the experiment's value,
// or sweep, of it does not apply to the method's runs.
func (m Method) overrides(key string, t Train) bool {
	rest, ok := strings.CutPrefix(key, "train.")
	if !ok {
		return false
	}
	if slices.Contains(m.TrainKeys, rest) {
		return true
	}
	table, k, ok := strings.Cut(rest, ".")
	if !ok || (table != "optimizer" && table != "schedule") {
		return false
	}
	return m.resets(table, t) || slices.Contains(m.keys(table), k)
}

// overlay returns base with the fields of over named (by TOML key) in
// keys.
func overlay[T any](base, over T, keys []string) T {
	b := reflect.ValueOf(&base).Elem()
	o := reflect.ValueOf(over)
	for i := range b.NumField() {
		tag, _, _ := strings.Cut(b.Type().Field(i).Tag.Get("toml"), ",")
		if slices.Contains(keys, tag) {
			v := o.Field(i)
			if v.Kind() == reflect.Slice {
				v = reflect.AppendSlice(reflect.MakeSlice(v.Type(), 0, v.Len()), v)
			}
			b.Field(i).Set(v)
		}
	}
	return base
}

// Default returns an Experiment with every default applied and no methods;
// data.augment and eval.temperature are resolved as Parse would for a file
// that does not write them.
func Default() *Experiment {
	e := &Experiment{
		ResultsDir: "results",
		Data: Data{
			Dataset:      DatasetUCIDigits,
			Layout:       LayoutNCHW,
			TestFraction: 0.2,
			Augment:      []string{},
			Normalize:    true,
			Shuffle:      true,
			Synthetic:    Synthetic{Train: 512, Test: 256, Classes: 10},
		},
		Model: Model{
			Archs:           []string{"cnn"},
			MemoryFormat:    MemoryContiguous,
			TorchScriptInit: TorchScriptInitFile,
			VariationalOpts: VariationalOpts{
				PriorSigma: 0.1, RhoInit: -5.0, KL: KLqp, KLReduction: "sum", Beta: 1.0, MCSamples: 30,
			},
		},
		Train: Train{
			Epochs:        10,
			BatchSize:     128,
			EvalBatchSize: 1000,
			Seeds:         []int64{1},
			Device:        "auto",
			Precision:     PrecisionFP32,
			Optimizer: Optimizer{
				Name: OptimizerSGD, LR: 0.1, Momentum: 0.9, WeightDecay: 5e-4,
				Betas: []float64{0.9, 0.999}, Eps: 1e-8,
			},
			Schedule: Schedule{
				Kind:        ScheduleConstant,
				Milestones:  []float64{0.3, 0.6, 0.8},
				Gamma:       0.2,
				Patience:    6,
				Factor:      0.1,
				CycleEpochs: 4,
				LRMax:       0.05,
				LRMin:       1e-4,
			},
		},
		Eval: Eval{Temperature: TemperatureTestHalves, AACSteps: 100, MCSamples: 30, TensorBoard: true, TensorBoardEverySteps: 10,
			Corruptions: Corruptions{Severities: []int{1, 2, 3, 4, 5}}},
	}
	return e
}
