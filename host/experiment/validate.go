package experiment

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode"

	"github.com/optlab/optlab/host/corrupt"
	"github.com/optlab/optlab/internal/suggest"
)

// Validate checks every value of exp: ranges, enums and consistency
// between keys and sections. knownArchs lists the architecture names the
// model package can build; arch names in model.archs must be among them
// (with a did-you-mean suggestion otherwise). If knownArchs is empty, arch
// specs are only checked for syntax.
//
// Keys that apply only to another choice than the one made (train.optimizer
// .betas with sgd, train.schedule.milestones with cosine, data.dir with
// uci-digits, [model.variational_opts] without variational = true, …) are
// errors when they are written in the file with a value other than their
// default; the values of keys that do not apply are not checked otherwise.
//
// All problems are returned together as an ErrorList sorted by line; each
// names the key and cites its line when exp came from Parse or Load.
func Validate(exp *Experiment, knownArchs []string) error {
	if exp == nil {
		return fmt.Errorf("experiment: nil experiment")
	}
	v := &validator{errs: errs{file: exp.File, sets: exp.sets, names: methodNames(exp)}, e: exp, method: -1}
	v.top()
	v.data()
	v.model(knownArchs)
	v.train()
	v.sweeps()
	v.eval()
	v.methods()
	return v.err()
}

// sweeps validates [train] and [data.label_noise] for every combination
// of the values of the swept keys (the values' ranges and how they combine
// with the other keys, e.g. min_lr < lr), reporting each problem once, and
// checks the number of settings of each method.
func (v *validator) sweeps() {
	seen := map[string]bool{}
	for _, e := range v.list {
		seen[e.Error()] = true
	}
	for _, combo := range sweepCombos(v.e) {
		w := &validator{errs: errs{file: v.file, sets: v.sets, names: v.names}, e: withSettings(v.e, combo), method: -1}
		w.train()
		w.labelNoise()
		for _, e := range w.list {
			if !seen[e.Error()] {
				seen[e.Error()] = true
				v.list = append(v.list, e)
			}
		}
	}
	// Each method's own optimizer and schedule, with every combination of
	// the swept [train] values its runs see.
	combos := sweepCombos(v.e)
	if combos == nil {
		combos = [][]Setting{nil}
	}
	for i, m := range v.e.Methods {
		if !m.Overrides() {
			continue
		}
		for _, combo := range combos {
			e := methodView(withSettings(v.e, combo), m)
			w := &validator{errs: errs{file: v.file, sets: v.sets, names: v.names}, e: e, method: i}
			w.budget()
			w.optimizer()
			w.schedule()
			for _, e := range w.list {
				if !seen[e.Error()] {
					seen[e.Error()] = true
					v.list = append(v.list, e)
				}
			}
		}
	}
	for i, m := range v.e.Methods {
		if _, n := settings(v.e, m); n > MaxSettings {
			v.add(m.Line, fmt.Sprintf("method[%d]", i), "method %q: its lists of values make more than %d settings; sweep fewer values", m.Name, MaxSettings)
		}
	}
}

type validator struct {
	errs
	e *Experiment
	// method is the index of the method whose optimizer and schedule
	// (Method.Train) v.e.Train holds, or -1 for the experiment's own.
	method int
}

// fail records a problem about key, citing the key's line; a method's
// key that is not written (its table names another optimizer, whose
// defaults it gets) cites the nearest table above it that is.
func (v *validator) fail(key, format string, args ...any) {
	line := v.e.Line(key)
	for k := key; line == 0 && strings.HasPrefix(k, "method["); {
		i := strings.LastIndexAny(k, ".[")
		if i <= 0 {
			break
		}
		k = k[:i]
		line = v.e.Line(k)
	}
	v.add(line, key, "%s %s", key, fmt.Sprintf(format, args...))
}

// notFor reports key as not applicable when it is written in the file
// with a value other than its default (so that a template listing every
// key with its default stays valid).
func (v *validator) notFor(key string, isDefault bool, why string) {
	if v.e.has(key) && !isDefault {
		v.fail(key, "applies only %s", why)
	}
}

func (v *validator) top() {
	e := v.e
	switch {
	case e.Name == "":
		v.fail("name", "is required")
	case !isSafeName(e.Name):
		v.fail("name", "must be a single directory name of letters, digits, '.', '_' and '-' (got %q)", e.Name)
	}
	if strings.TrimSpace(e.ResultsDir) == "" {
		v.fail("results_dir", "must not be empty (got %q)", e.ResultsDir)
	}
}

// isSafeName reports whether s is usable as one path element everywhere.
func isSafeName(s string) bool {
	return isArchName(s) && s != "." && s != ".."
}

func (v *validator) data() {
	d := &v.e.Data
	def := Default()
	cifar := d.Dataset == DatasetCIFAR10 || d.Dataset == DatasetCIFAR100
	mnist := d.Dataset == DatasetFashionMNIST || d.Dataset == DatasetMNIST
	v.enum("data.dataset", d.Dataset, DatasetUCIDigits, DatasetCIFAR10, DatasetCIFAR100, DatasetFashionMNIST, DatasetMNIST, DatasetCSV, DatasetNumPy, DatasetSynthetic)

	if HasDir(d.Dataset) {
		v.nonBlank("data.dir", d.Dir, "data.dataset", "is required for dataset "+strconv.Quote(d.Dataset))
	} else {
		v.notFor("data.dir", d.Dir == def.Data.Dir, "to datasets cifar10, cifar100, fashion-mnist and mnist (use data.path for csv and npz)")
	}
	if d.Dataset == DatasetCSV || d.Dataset == DatasetNumPy {
		v.nonBlank("data.path", d.Path, "data.dataset", "is required for dataset "+strconv.Quote(d.Dataset))
		if d.Classes < 0 || d.Classes == 1 {
			v.fail("data.classes", "must be 0 (infer) or ≥ 2 (got %d)", d.Classes)
		}
	} else {
		v.notFor("data.path", d.Path == def.Data.Path, "to datasets csv and npz")
		v.notFor("data.classes", d.Classes == def.Data.Classes, "to datasets csv and npz (synthetic data uses data.synthetic.classes)")
	}
	if d.Dataset == DatasetNumPy {
		v.enum("data.layout", d.Layout, LayoutNCHW, LayoutNHWC)
	} else {
		v.notFor("data.layout", d.Layout == def.Data.Layout, "to dataset npz")
	}
	if d.Dataset == DatasetUCIDigits || d.Dataset == DatasetCSV {
		v.floatIn("data.test_fraction", d.TestFraction, 0, 1, false, false)
	} else {
		v.notFor("data.test_fraction", d.TestFraction == def.Data.TestFraction, "to datasets uci-digits and csv (CIFAR, the MNIST-format datasets and npz have a fixed test set; synthetic data uses data.synthetic.test)")
	}
	v.floatIn("data.validation", d.Validation, 0, 1, true, false)

	seen := map[string]bool{}
	for i, a := range d.Augment {
		key := fmt.Sprintf("data.augment[%d]", i)
		switch {
		case a != "crop" && a != "flip":
			v.add(v.line(key, "data.augment"), key, "data.augment: unknown augmentation %q (allowed: crop, flip)%s", a, suggest.DidYouMean(a, []string{"crop", "flip"}))
		case seen[a]:
			v.add(v.line(key, "data.augment"), key, "data.augment lists %q twice", a)
		}
		seen[a] = true
	}
	vectors := !imageInputs(*d)
	if vectors && len(d.Augment) > 0 {
		v.fail("data.augment", "must be empty for vector inputs (dataset %q)", d.Dataset)
	}

	synthUsed := d.Dataset == DatasetSynthetic || d.OOD == DatasetSynthetic
	if d.OOD != "" {
		v.enum("data.ood", d.OOD, DatasetCIFAR10, DatasetCIFAR100, DatasetFashionMNIST, DatasetMNIST, DatasetSynthetic)
		images := cifar || (d.Dataset == DatasetSynthetic && d.Synthetic.Features == 0)
		oodMNIST := d.OOD == DatasetFashionMNIST || d.OOD == DatasetMNIST
		switch {
		case d.OOD == d.Dataset:
			v.fail("data.ood", "must differ from data.dataset (both %q)", d.OOD)
		case oodMNIST && !mnist:
			v.fail("data.ood", "needs 1×28×28 inputs for ood %q: dataset fashion-mnist or mnist (dataset is %q)", d.OOD, d.Dataset)
		case !oodMNIST && !images:
			v.fail("data.ood", "needs 3×32×32 inputs: dataset cifar10, cifar100 or synthetic with features = 0 (dataset is %q)", d.Dataset)
		}
	}
	if HasDir(d.OOD) {
		v.nonBlank("data.ood_dir", d.OODDir, "data.ood", "is required for ood "+strconv.Quote(d.OOD))
	} else {
		v.notFor("data.ood_dir", d.OODDir == def.Data.OODDir, "when data.ood is cifar10, cifar100, fashion-mnist or mnist")
	}
	v.labelNoise()
	if !synthUsed {
		v.notFor("data.synthetic", d.Synthetic == def.Data.Synthetic, "when data.dataset or data.ood is \"synthetic\"")
		return
	}
	s := d.Synthetic
	v.intMin("data.synthetic.train", s.Train, 1)
	v.intMin("data.synthetic.test", s.Test, 1)
	v.intMin("data.synthetic.classes", s.Classes, 2)
	v.intMin("data.synthetic.features", s.Features, 0)
	if d.OOD == DatasetSynthetic && s.Features > 0 {
		v.fail("data.synthetic.features", "must be 0 (images) when synthetic data is the OOD set (got %d)", s.Features)
	}
}

// labelNoise checks [data.label_noise].
func (v *validator) labelNoise() {
	n := v.e.Data.LabelNoise
	const table = "data.label_noise"
	if n.Kind == "" {
		if v.e.has(table) {
			v.add(v.line(table+".kind", table), table+".kind", "%s.kind is required when [%s] is written (symmetric, pairflip or asymmetric)", table, table)
		}
		return
	}
	v.enum(table+".kind", n.Kind, NoiseSymmetric, NoisePairflip, NoiseAsymmetric)
	if !v.e.has(table + ".rate") {
		v.add(v.line(table+".rate", table), table+".rate", "%s.rate is required with %s.kind", table, table)
	} else {
		v.floatIn(table+".rate", n.Rate, 0, 1, true, false)
	}
	if n.Kind != NoiseAsymmetric {
		if len(n.Map) > 0 {
			v.fail(table+".map", "applies only to kind \"asymmetric\" (kind is %q)", n.Kind)
		}
		return
	}
	if len(n.Map) == 0 {
		v.add(v.line(table+".map", table), table+".map", "%s.map is required for kind \"asymmetric\": a table of class = class, e.g. {9 = 1, 2 = 0}", table)
		return
	}
	classes := knownClasses(v.e.Data)
	keys := make([]string, 0, len(n.Map))
	for k := range n.Map {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		key := table + ".map." + k
		to := n.Map[k]
		from, ok := classKey(k)
		switch {
		case !ok:
			v.add(v.line(key, table+".map"), key, "%s: key %q is not a class (a decimal integer ≥ 0, without leading zeros)", table+".map", k)
		case classes > 0 && from >= classes:
			v.add(v.line(key, table+".map"), key, "%s: class %d is out of range%s", table+".map", from, classRange(v.e.Data.Dataset, classes))
		case to < 0 || (classes > 0 && to >= classes):
			v.add(v.line(key, table+".map"), key, "%s: class %d maps to %d, out of range%s", table+".map", from, to, classRange(v.e.Data.Dataset, classes))
		case to == from:
			v.add(v.line(key, table+".map"), key, "%s: class %d maps to itself", table+".map", from)
		}
	}
}

// classRange describes the class ids of a dataset with the given number of
// classes (0: not known before loading it) for a message.
func classRange(dataset string, classes int) string {
	if classes == 0 {
		return " (classes are ≥ 0)"
	}
	return fmt.Sprintf(": dataset %q has %d classes (0..%d)", dataset, classes, classes-1)
}

// knownClasses returns the number of classes of the dataset d names, or 0
// when only loading it tells (csv with classes = 0).
func knownClasses(d Data) int {
	switch d.Dataset {
	case DatasetUCIDigits, DatasetCIFAR10, DatasetFashionMNIST, DatasetMNIST:
		return 10
	case DatasetCIFAR100:
		return 100
	case DatasetSynthetic:
		return d.Synthetic.Classes
	case DatasetCSV, DatasetNumPy:
		return d.Classes
	}
	return 0
}

// imageInputs tells whether the dataset's inputs are images (C×H×W), not
// flat feature vectors (csv, synthetic with features > 0). npz counts as
// images: only loading its arrays tells, and it refuses what needs images
// (data.augment) when they are not (CheckSplit the rest).
func imageInputs(d Data) bool {
	return d.Dataset != DatasetCSV && !(d.Dataset == DatasetSynthetic && d.Synthetic.Features > 0)
}

func (v *validator) model(knownArchs []string) {
	m := &v.e.Model
	def := Default()
	if len(m.Archs) == 0 {
		v.fail("model.archs", "must list at least one arch spec")
	}
	first := map[string]string{}
	for i, spec := range m.Archs {
		key := fmt.Sprintf("model.archs[%d]", i)
		line := v.line(key, "model.archs")
		canon, members, err := ParseArch(spec)
		if err != nil {
			v.add(line, key, "%s: %v", key, err)
			continue
		}
		if prev, dup := first[canon]; dup {
			v.add(line, key, "%s: arch spec %q is the same as %q", key, spec, prev)
			continue
		}
		first[canon] = spec
		if len(knownArchs) == 0 {
			continue
		}
		bad := map[string]bool{}
		for _, a := range members {
			if _, script := TorchScriptPath(a); script || bad[a] || slices.Contains(knownArchs, a) {
				continue
			}
			bad[a] = true
			v.add(line, key, "%s: unknown arch %q%s", key, a, suggestion(a, knownArchs, "archs"))
		}
	}
	if s := m.InitFrom; s != "" && strings.TrimSpace(s) == "" {
		v.fail("model.init_from", "must not be blank (use \"\" for random initialisation)")
	}
	v.enum("model.memory_format", m.MemoryFormat, MemoryContiguous, MemoryChannelsLast)
	v.enum("model.torchscript_init", m.TorchScriptInit, TorchScriptInitFile, TorchScriptInitReset)
	if !slices.ContainsFunc(m.Archs, func(spec string) bool { return strings.Contains(spec, TorchScriptPrefix) }) {
		v.notFor("model.torchscript_init", m.TorchScriptInit == def.Model.TorchScriptInit, "when model.archs has a \""+TorchScriptPrefix+"\" arch")
	}
	if d := v.e.Data; m.MemoryFormat == MemoryChannelsLast && !imageInputs(d) {
		v.fail("model.memory_format", "channels_last needs image inputs (dataset %q has flat feature vectors); use %q", d.Dataset, MemoryContiguous)
	}
	if !m.Variational {
		v.notFor("model.variational_opts", m.VariationalOpts == def.Model.VariationalOpts, "when model.variational = true")
		return
	}
	o := m.VariationalOpts
	v.floatIn("model.variational_opts.prior_sigma", o.PriorSigma, 0, math.Inf(1), false, false)
	v.floatIn("model.variational_opts.rho_init", o.RhoInit, math.Inf(-1), math.Inf(1), false, false)
	v.enum("model.variational_opts.kl", o.KL, KLqp, KLpq)
	v.enum("model.variational_opts.kl_reduction", o.KLReduction, "sum", "layers")
	v.floatIn("model.variational_opts.beta", o.Beta, 0, math.Inf(1), true, false)
	v.intMin("model.variational_opts.mc_samples", o.MCSamples, 1)
}

func (v *validator) train() {
	t := &v.e.Train
	v.intMin("train.epochs", t.Epochs, 1)
	v.budget()
	v.intMin("train.batch_size", t.BatchSize, 1)
	v.intMin("train.eval_batch_size", t.EvalBatchSize, 1)
	if len(t.Seeds) == 0 {
		v.fail("train.seeds", "must list at least one seed")
	}
	seen := map[int64]bool{}
	for i, s := range t.Seeds {
		key := fmt.Sprintf("train.seeds[%d]", i)
		switch {
		case s < 0:
			v.add(v.line(key, "train.seeds"), key, "%s must be ≥ 0 (got %d)", key, s)
		case seen[s]:
			v.add(v.line(key, "train.seeds"), key, "train.seeds lists %d twice", s)
		}
		seen[s] = true
	}
	v.floatIn("train.label_smoothing", t.LabelSmoothing, 0, 1, true, false)
	v.intMin("train.max_steps", t.MaxSteps, 0)
	if !validDevice(t.Device) {
		v.fail("train.device", "must be auto, cpu, cuda or cuda:N with N ≥ 0 (got %q)", t.Device)
	}
	v.intMin("train.threads", t.Threads, 0)
	v.intMin("train.dump_params_every", t.DumpParamsEvery, 0)
	v.intMin("train.micro_batches", t.MicroBatches, 0)
	if t.BatchSize > 0 && t.MicroBatches > t.BatchSize {
		v.fail("train.micro_batches", "must be at most train.batch_size (%d): a micro-batch has at least one sample (got %d)", t.BatchSize, t.MicroBatches)
	}
	if t.Deterministic && t.CudnnBenchmark {
		v.fail("train.cudnn_benchmark", "must be false with train.deterministic = true (benchmarking picks convolution algorithms by their timings, which differ from run to run)")
	}
	v.enum("train.precision", t.Precision, PrecisionFP32, PrecisionBF16)

	v.optimizer()
	v.schedule()
}

// optKey returns the full key of the optimizer key k ("lr") being
// validated: "train.optimizer.lr", or for a method's runs the key that
// sets it (Experiment.methodKey).
// budget checks train.budget, or a method's (v.method): ≥ 0, and not
// with train.epochs written, which it replaces.
func (v *validator) budget() {
	key := "train.budget"
	if v.method >= 0 {
		key = v.e.methodKey(v.method, "train", "budget")
	}
	t := &v.e.Train
	v.intMin(key, t.Budget, 0)
	if t.Budget > 0 && v.e.has("train.epochs") {
		v.fail(key, "replaces train.epochs, which the file sets too (%d): a run with a budget trains until it has spent it; set one of the two", t.Epochs)
	}
}

func (v *validator) optKey(k string) string {
	if v.method < 0 {
		return "train.optimizer." + k
	}
	return v.e.methodKey(v.method, "optimizer", k)
}

// schedKey is optKey for the schedule's keys.
func (v *validator) schedKey(k string) string {
	if v.method < 0 {
		return "train.schedule." + k
	}
	return v.e.methodKey(v.method, "schedule", k)
}

// optimizer checks the optimizer of v.e.Train: [train.optimizer], or a
// method's (v.method).
func (v *validator) optimizer() {
	o := &v.e.Train.Optimizer
	def := Default()
	v.enum(v.optKey("name"), o.Name, OptimizerSGD, OptimizerAdam)
	v.floatIn(v.optKey("lr"), o.LR, 0, math.Inf(1), false, false)
	v.floatIn(v.optKey("weight_decay"), o.WeightDecay, 0, math.Inf(1), true, false)
	switch o.Name {
	case OptimizerSGD:
		v.floatIn(v.optKey("momentum"), o.Momentum, 0, 1, true, false)
		if o.Nesterov && !(o.Momentum > 0) {
			v.fail(v.optKey("nesterov"), "needs %s > 0 (got %s)", v.optKey("momentum"), formatFloat(o.Momentum))
		}
		v.notFor(v.optKey("betas"), slices.Equal(o.Betas, def.Train.Optimizer.Betas), "to optimizer adam")
		v.notFor(v.optKey("eps"), o.Eps == def.Train.Optimizer.Eps, "to optimizer adam")
	case OptimizerAdam:
		betas := v.optKey("betas")
		if len(o.Betas) != 2 {
			v.fail(betas, "must have 2 elements (got %d)", len(o.Betas))
		}
		for i, b := range o.Betas {
			key := fmt.Sprintf("%s[%d]", betas, i)
			if !(b >= 0 && b < 1) {
				v.add(v.line(key, betas), key, "%s must be in [0, 1) (got %s)", key, formatFloat(b))
			}
		}
		v.floatIn(v.optKey("eps"), o.Eps, 0, math.Inf(1), false, false)
		v.notFor(v.optKey("momentum"), o.Momentum == def.Train.Optimizer.Momentum, "to optimizer sgd")
		v.notFor(v.optKey("nesterov"), o.Nesterov == def.Train.Optimizer.Nesterov, "to optimizer sgd")
	}
}

// schedule checks the schedule of v.e.Train: [train.schedule], or a
// method's (v.method).
func (v *validator) schedule() {
	t := &v.e.Train
	s := &t.Schedule
	v.enum(v.schedKey("kind"), s.Kind, ScheduleConstant, ScheduleStep, ScheduleCosine, SchedulePlateau, ScheduleCyclic)
	v.intMin(v.schedKey("warmup_epochs"), s.WarmupEpochs, 0)
	if h := t.Horizon(); h > 0 && s.WarmupEpochs >= h {
		v.fail(v.schedKey("warmup_epochs"), "must be < %s = %d (got %d)", t.HorizonKey(), h, s.WarmupEpochs)
	}
	def := Default().Train.Schedule
	uses := func(key string, isDefault bool, kinds ...string) bool {
		if slices.Contains(kinds, s.Kind) {
			return true
		}
		v.notFor(v.schedKey(key), isDefault, "to schedule kind "+strings.Join(kinds, " and "))
		return false
	}
	if uses("milestones", slices.Equal(s.Milestones, def.Milestones), ScheduleStep) {
		v.milestones(s.Milestones, t.Horizon(), t.HorizonKey())
	}
	if uses("gamma", s.Gamma == def.Gamma, ScheduleStep) {
		v.floatIn(v.schedKey("gamma"), s.Gamma, 0, 1, false, true)
	}
	if uses("patience", s.Patience == def.Patience, SchedulePlateau) {
		v.intMin(v.schedKey("patience"), s.Patience, 1)
	}
	if uses("factor", s.Factor == def.Factor, SchedulePlateau) {
		v.floatIn(v.schedKey("factor"), s.Factor, 0, 1, false, false)
	}
	if uses("min_lr", s.MinLR == def.MinLR, ScheduleCosine, SchedulePlateau) {
		v.floatIn(v.schedKey("min_lr"), s.MinLR, 0, math.Inf(1), true, false)
		if lr := t.Optimizer.LR; s.MinLR >= lr && lr > 0 {
			v.fail(v.schedKey("min_lr"), "must be < %s = %s (got %s)", v.optKey("lr"), formatFloat(lr), formatFloat(s.MinLR))
		}
	}
	if uses("cycle_epochs", s.CycleEpochs == def.CycleEpochs, ScheduleCyclic) {
		v.intMin(v.schedKey("cycle_epochs"), s.CycleEpochs, 1)
		if h := t.Horizon(); h > 0 && s.CycleEpochs > h {
			v.fail(v.schedKey("cycle_epochs"), "must be ≤ %s = %d (got %d)", t.HorizonKey(), h, s.CycleEpochs)
		}
	}
	lrMin := uses("lr_min", s.LRMin == def.LRMin, ScheduleCyclic)
	if uses("lr_max", s.LRMax == def.LRMax, ScheduleCyclic) && lrMin {
		v.floatIn(v.schedKey("lr_min"), s.LRMin, 0, math.Inf(1), false, false)
		v.floatIn(v.schedKey("lr_max"), s.LRMax, 0, math.Inf(1), false, false)
		if s.LRMax <= s.LRMin {
			v.fail(v.schedKey("lr_max"), "must be > %s = %s (got %s)", v.schedKey("lr_min"), formatFloat(s.LRMin), formatFloat(s.LRMax))
		}
	}
}

// milestones checks step milestones: all fractions in (0, 1) or all whole
// epoch numbers in [1, epochs], strictly increasing; epochsKey is the key
// that sets epochs (train.epochs or train.budget).
func (v *validator) milestones(ms []float64, epochs int, epochsKey string) {
	key := v.schedKey("milestones")
	if len(ms) == 0 {
		v.fail(key, "must list at least one milestone for schedule kind step")
		return
	}
	fractions, whole := 0, 0
	for i, m := range ms {
		ek := fmt.Sprintf("%s[%d]", key, i)
		line := v.line(ek, key)
		switch {
		case !(m > 0) || math.IsInf(m, 1):
			v.add(line, ek, "%s must be > 0 (got %s)", ek, formatFloat(m))
			continue
		case m < 1:
			fractions++
		case m != math.Trunc(m):
			v.add(line, ek, "%s must be a whole epoch number when ≥ 1 (got %s)", ek, formatFloat(m))
			continue
		case epochs > 0 && m > float64(epochs):
			v.add(line, ek, "%s must be ≤ %s = %d (got %s)", ek, epochsKey, epochs, formatFloat(m))
			continue
		default:
			whole++
		}
		if i > 0 && !(m > ms[i-1]) {
			v.add(line, ek, "%s must be strictly increasing (%s after %s)", key, formatFloat(m), formatFloat(ms[i-1]))
		}
	}
	if fractions > 0 && whole > 0 {
		v.fail(key, "mixes fractions of %s (< 1) with epoch numbers (≥ 1); use one form", epochsKey)
	}
}

func (v *validator) eval() {
	ev := &v.e.Eval
	v.enum("eval.temperature", ev.Temperature, TemperatureValidation, TemperatureTestHalves, TemperatureNone)
	// An npz file may hold its own validation split (x_val, y_val), which
	// only loading it tells (CheckSplit).
	ownVal := v.e.Data.Dataset == DatasetNumPy
	if ev.Temperature == TemperatureValidation && !(v.e.Data.Validation > 0) && !ownVal {
		v.fail("eval.temperature", "= \"validation\" needs data.validation > 0 (got %s); use \"test-halves\" or hold out a validation split",
			formatFloat(v.e.Data.Validation))
	}
	v.intMin("eval.aac_steps", ev.AACSteps, 2)
	v.intMin("eval.mc_samples", ev.MCSamples, 1)
	v.intMin("eval.every_epochs", ev.EveryEpochs, 0)
	v.intMin("eval.tensorboard_every_steps", ev.TensorBoardEverySteps, 0)
	if ev.BestEpoch != "" {
		v.enum("eval.best_epoch", ev.BestEpoch, BestAcc, BestNLL)
		switch {
		case !(v.e.Data.Validation > 0) && !ownVal:
			v.fail("eval.best_epoch", "needs a validation split to choose on: set data.validation > 0")
		case ev.EveryEpochs < 1:
			v.fail("eval.best_epoch", "needs evaluations during training to choose among: set eval.every_epochs ≥ 1")
		}
	}
	v.corruptions()
	if !ev.TensorBoard {
		v.notFor("eval.tensorboard_every_steps", ev.TensorBoardEverySteps == Default().Eval.TensorBoardEverySteps, "when eval.tensorboard = true")
	}
}

// corruptions checks [eval.corruptions].
func (v *validator) corruptions() {
	c := v.e.Eval.Corruptions
	const table = "eval.corruptions"
	if !c.Active() {
		if v.e.has(table) {
			v.add(v.line(table+".families", table), table+".families", "%s.families is required when [%s] is written: a list of %s, or [\"all\"]", table, table, strings.Join(corrupt.Names(), ", "))
		}
		return
	}
	seenFamily := map[string]bool{}
	for _, n := range c.Families {
		switch _, err := corrupt.Lookup(n); {
		case err != nil && n != "all":
			v.fail(table+".families", "names an unknown corruption %q (the families are %s; \"all\" names every one)", n, strings.Join(corrupt.Names(), ", "))
		case seenFamily[n]:
			// as a severity listed twice: one family's rows would be
			// evaluated and averaged twice
			v.fail(table+".families", "lists %q twice", n)
		case n == "all" && len(c.Families) > 1:
			v.fail(table+".families", "lists \"all\" with other families, which \"all\" already names")
		}
		seenFamily[n] = true
	}
	if len(c.Severities) == 0 {
		v.fail(table+".severities", "must list at least one severity in 1..%d", corrupt.Severities)
	}
	seen := map[int]bool{}
	for _, s := range c.Severities {
		switch {
		case s < 1 || s > corrupt.Severities:
			v.fail(table+".severities", "severity %d is not in 1..%d", s, corrupt.Severities)
		case seen[s]:
			v.fail(table+".severities", "lists severity %d twice", s)
		}
		seen[s] = true
	}
	switch v.e.Data.Dataset {
	case DatasetCIFAR10, DatasetCIFAR100, DatasetFashionMNIST, DatasetMNIST:
	case DatasetNumPy:
		// Loading tells whether its samples are uint8 images
		// (CheckSplit).
	default:
		v.fail(table, "needs 8-bit images (cifar10, cifar100, fashion-mnist, mnist, or npz with uint8 images); dataset %q is not", v.e.Data.Dataset)
	}
}

func (v *validator) methods() {
	if len(v.e.Methods) == 0 {
		v.add(0, "method", "at least one [[method]] table is required")
		return
	}
	first := map[string]int{}
	for i, m := range v.e.Methods {
		base := fmt.Sprintf("method[%d]", i)
		at := func(k string) int {
			if l := v.e.Line(base + "." + k); l > 0 {
				return l
			}
			return m.Line
		}
		switch {
		case m.Name == "":
			v.add(at("name"), base+".name", "%s.name is required", base)
		case !validMethodName(m.Name):
			v.add(at("name"), base+".name", "%s.name %+q must not contain '/', '=', control characters, invisible formatting characters (bidi overrides, zero-width spaces: tables would print it as another name) or surrounding blanks", base, m.Name)
		}
		if m.Name != "" {
			lower := strings.ToLower(m.Name)
			if j, dup := first[lower]; dup {
				v.add(at("name"), base+".name", "%s.name %q is already used by method[%d] (line %d); names must be unique, ignoring case",
					base, m.Name, j, v.e.Methods[j].Line)
			} else {
				first[lower] = i
			}
		}
		// The label, or where the name cannot be one the index.
		label, named := methodLabel(v.names, i)
		if !named {
			label = base
		}
		switch {
		case m.Plugin != "" && m.Path != "":
			v.add(at("path"), base+".path", "%s: set exactly one of plugin and path (both are set)", label)
		case m.Plugin == "" && m.Path == "" && named:
			v.add(m.Line, base, "%s: set exactly one of plugin (a built-in name) and path (a plugin binary)", label)
		case m.Plugin == "" && m.Path == "":
			v.add(m.Line, base, "%s (%q): set exactly one of plugin (a built-in name) and path (a plugin binary)", base, m.Name)
		case m.Plugin != "" && !isSafeName(m.Plugin):
			v.add(at("plugin"), base+".plugin", "%s.plugin %q must be a plugin name of letters, digits, '.', '_' and '-' (use path for a binary)", base, m.Plugin)
		case m.Plugin == "" && strings.TrimSpace(m.Path) == "":
			v.add(at("path"), base+".path", "%s.path must not be blank", base)
		}
	}
}

func validMethodName(s string) bool {
	if strings.TrimSpace(s) != s {
		return false
	}
	for _, r := range s {
		if r == '/' || r == '=' || unicode.IsControl(r) || unicode.Is(unicode.Cf, r) {
			return false
		}
	}
	return true
}

// validDevice reports whether s is auto, cpu, cuda or cuda:N.
func validDevice(s string) bool {
	switch s {
	case "auto", "cpu", "cuda":
		return true
	}
	n, ok := strings.CutPrefix(s, "cuda:")
	if !ok || n == "" || len(n) > 9 || (len(n) > 1 && n[0] == '0') {
		return false
	}
	for i := 0; i < len(n); i++ {
		if n[i] < '0' || n[i] > '9' {
			return false
		}
	}
	return true
}

// line returns the line of key, falling back to the line of parent (for
// array elements built in code or not found by the scanner).
func (v *validator) line(key, parent string) int {
	if l := v.e.Line(key); l > 0 {
		return l
	}
	return v.e.Line(parent)
}

func (v *validator) enum(key, got string, allowed ...string) {
	if slices.Contains(allowed, got) {
		return
	}
	v.fail(key, "must be one of %s (got %q)%s", strings.Join(allowed, ", "), got, suggest.DidYouMean(got, allowed))
}

// nonBlank requires got (the value of key) to be non-blank because of the
// value of the key named by cause, whose line is cited if key is absent.
func (v *validator) nonBlank(key, got, cause, msg string) {
	if strings.TrimSpace(got) == "" {
		v.add(v.line(key, cause), key, "%s %s", key, msg)
	}
}

func (v *validator) intMin(key string, got, lo int) {
	if got >= lo {
		return
	}
	if lo == 1 {
		v.fail(key, "must be > 0 (got %d)", got)
		return
	}
	v.fail(key, "must be ≥ %d (got %d)", lo, got)
}

// floatIn checks that x lies in the interval from lo to hi, closed at
// either end as asked; an infinite bound means unbounded (and excludes
// infinities). NaN always fails.
func (v *validator) floatIn(key string, x, lo, hi float64, loClosed, hiClosed bool) {
	okLo := x > lo || (loClosed && x == lo)
	okHi := x < hi || (hiClosed && x == hi)
	if okLo && okHi && !math.IsInf(x, 0) {
		return
	}
	var want string
	switch {
	case math.IsInf(lo, -1) && math.IsInf(hi, 1):
		want = "a finite number"
	case math.IsInf(hi, 1):
		want = map[bool]string{true: "≥ ", false: "> "}[loClosed] + formatFloat(lo)
	default:
		want = "in " + map[bool]string{true: "[", false: "("}[loClosed] + formatFloat(lo) + ", " +
			formatFloat(hi) + map[bool]string{true: "]", false: ")"}[hiClosed]
	}
	v.fail(key, "must be %s (got %s)", want, formatFloat(x))
}
