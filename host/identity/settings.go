package identity

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/optlab/optlab/host/experiment"
)

// A Setting classifies one field of Config, named by Path: part of a run's
// identity, recorded in the configuration under Key, or not part of it, and
// Excluded says why. A setting may also name a table (a struct field) for a
// key that sums the table up (train.optimizer's summary string); every
// field of the table is classified by a setting of its own all the same.
type Setting struct {
	// Path names the field: the keys of the experiment file for its
	// tables ("train.optimizer.lr"), Config's toml tags for its other
	// fields ("plugin", "data_content").
	Path string
	// Key is the configuration key the value is recorded under; "" when
	// the setting is not part of the identity.
	Key string
	// Excluded, for a setting that is not part of the identity (Key ""),
	// says why it changes nothing that a record reports, or where else
	// the run's identity has it.
	Excluded string
	// When, unless nil, says when the setting is recorded: only for a
	// configuration it holds for (a table that applies to some runs only,
	// [data.synthetic] for synthetic data).
	When func(Config) bool
	// Encode, unless nil, converts the field's value to the recorded one
	// (data.augment as text).
	Encode func(any) any
	// Default, unless nil, is the value that a configuration without Key
	// stands for (Defaults): that of every run before the setting existed.
	Default any
	// OmitDefault leaves the key out when the (encoded) value is its
	// type's zero value or Default, so that runs at the default keep the
	// configuration and hash that they had before the setting existed.
	OmitDefault bool
	// PerEntry records a map as one key per entry, Key.<entry's key>.
	PerEntry bool
}

// Settings returns, in a new slice, the declaration of identity version
// Version: every field of Config, classified once.
func Settings() []Setting { return settingsV2() }

// settingsV2 is the declaration of identity version 2: version 1's, with
// data.test_fraction recorded only for data that it splits (not npz).
func settingsV2() []Setting {
	out := settingsV1()
	for i, s := range out {
		if s.Path == "data.test_fraction" {
			out[i].When = splitsTest
		}
	}
	// Settings added since, recorded only off their default (no change of
	// the rules: earlier runs had the default).
	at := slices.IndexFunc(out, func(s Setting) bool { return s.Path == "train.precision" }) + 1
	out = slices.Insert(out, at,
		// Micro-batches change BatchNorm's statistics (and a gradient's
		// rounding): another run. The whole batch at once is 1 (0 the
		// same).
		Setting{Path: "train.micro_batches", Key: "train.micro_batches", Encode: asMicroBatches, Default: int64(1), OmitDefault: true},
	)
	// A gradient budget replaces train.epochs, which the run then does
	// not use (its default would be recorded as if it did).
	for i, s := range out {
		if s.Path == "train.epochs" {
			out[i].When = noBudget
		}
	}
	at = slices.IndexFunc(out, func(s Setting) bool { return s.Path == "train.epochs" }) + 1
	return slices.Insert(out, at,
		Setting{Path: "train.budget", Key: "train.budget", Encode: asInt64, Default: int64(0), OmitDefault: true})
}

// noBudget tells whether a run trains for train.epochs: it has no
// gradient budget (train.budget).
func noBudget(c Config) bool { return c.Train.Budget <= 0 }

// asMicroBatches records train.micro_batches as an int64, 0 (the default
// in the file) as 1: the same runs.
func asMicroBatches(v any) any {
	n := asInt64(v).(int64)
	return max(n, 1)
}

// splitsTest tells whether data.test_fraction applies: every dataset but
// npz, which brings its own test split.
func splitsTest(c Config) bool { return c.Data.Dataset != experiment.DatasetNumPy }

// settingsV1 is the declaration of identity version 1: the rules of every
// record written before versions were recorded.
func settingsV1() []Setting {
	// The settings' order is the structs'; a key recorded by two settings
	// needs exclusive conditions (train.optimizer).
	return []Setting{
		{Path: "plugin", Key: "plugin"},
		{Path: paramsKey, Key: paramsKey, PerEntry: true},

		// [train]
		{Path: "train.epochs", Key: "train.epochs", Encode: asInt64},
		{Path: "train.batch_size", Key: "train.batch_size", Encode: asInt64},
		{Path: "train.eval_batch_size", Excluded: "how evaluation is batched, not what is evaluated"},
		{Path: "train.seeds", Excluded: "a grid dimension: each seed is a run of its own, named by its key and record (Seed); the configuration is what the seeds pooled into one table cell share"},
		{Path: "train.label_smoothing", Key: "train.label_smoothing"},
		{Path: "train.max_steps", Key: "train.max_steps", Encode: asInt64},
		{Path: "train.device", Excluded: "where the run trains, which its record keeps (Device): a run finished on another device is not trained again"},
		{Path: "train.threads", Excluded: "CPU threads: how fast, not what, a run trains"},
		{Path: "train.checkpoint", Excluded: "saving training states to resume from changes no result"},
		{Path: "train.spill", Excluded: "where the vectors that do not fit on the device live: how fast, not what, a run trains"},
		{Path: "train.dump_params_every", Excluded: "writing the parameters after every N-th step for comparisons changes no result: it reads them and trains the same steps"},
		// Added after records existed: recorded only when on (every
		// record's Numerics has all three).
		{Path: "train.deterministic", Key: "train.deterministic", Default: false, OmitDefault: true},
		{Path: "train.cudnn_benchmark", Key: "train.cudnn_benchmark", Default: false, OmitDefault: true},
		{Path: "train.tf32", Key: "train.tf32", Default: false, OmitDefault: true},
		{Path: "train.precision", Key: "train.precision", Default: experiment.PrecisionFP32, OmitDefault: true},
		// [train.optimizer]: also one summary string, the first records'
		// form; only lr for a plugin that applies its own update.
		{Path: "owns_update", Key: "train.optimizer", When: ownsUpdate, Encode: func(any) any { return NoBaseOptimizer }},
		{Path: "train.optimizer", Key: "train.optimizer", When: baseOptimizer, Encode: optimizerSummary},
		{Path: "train.optimizer.name", Key: "train.optimizer.name", When: baseOptimizer},
		{Path: "train.optimizer.lr", Key: "train.optimizer.lr"},
		{Path: "train.optimizer.momentum", Key: "train.optimizer.momentum", When: baseOptimizer},
		{Path: "train.optimizer.nesterov", Key: "train.optimizer.nesterov", When: baseOptimizer},
		{Path: "train.optimizer.weight_decay", Key: "train.optimizer.weight_decay", When: baseOptimizer},
		{Path: "train.optimizer.betas", Key: "train.optimizer.betas", When: baseOptimizer},
		{Path: "train.optimizer.eps", Key: "train.optimizer.eps", When: baseOptimizer},
		// [train.schedule]: also its kind alone, the first records' form.
		{Path: "train.schedule", Key: "train.schedule", Encode: func(v any) any { return v.(experiment.Schedule).Kind }},
		{Path: "train.schedule.kind", Key: "train.schedule.kind"},
		{Path: "train.schedule.milestones", Key: "train.schedule.milestones"},
		{Path: "train.schedule.gamma", Key: "train.schedule.gamma"},
		{Path: "train.schedule.warmup_epochs", Key: "train.schedule.warmup_epochs"},
		{Path: "train.schedule.patience", Key: "train.schedule.patience"},
		{Path: "train.schedule.factor", Key: "train.schedule.factor"},
		{Path: "train.schedule.min_lr", Key: "train.schedule.min_lr"},
		{Path: "train.schedule.cycle_epochs", Key: "train.schedule.cycle_epochs"},
		{Path: "train.schedule.lr_max", Key: "train.schedule.lr_max"},
		{Path: "train.schedule.lr_min", Key: "train.schedule.lr_min"},

		// [data]
		{Path: "data.dataset", Key: "data.dataset"},
		{Path: "data.dir", Excluded: "where the dataset's files are: data.dataset names the data (a folder moved is the same run)"},
		{Path: "data.path", Excluded: "identified by content instead (data_content): the same file elsewhere is the same run, another file under the same name another"},
		{Path: "data.classes", Key: "data.classes", Encode: asInt64},
		{Path: "data.layout", Key: "data.layout", Default: experiment.LayoutNCHW, OmitDefault: true},
		{Path: "data.test_fraction", Key: "data.test_fraction"},
		{Path: "data.validation", Key: "data.validation"},
		{Path: "data.augment", Key: "data.augment", Encode: asText},
		{Path: "data.normalize", Key: "data.normalize"},
		{Path: "data.shuffle", Key: "data.shuffle"},
		{Path: "data.ood", Key: "data.ood"},
		{Path: "data.ood_dir", Excluded: "where the OOD dataset's files are: data.ood names the data"},
		{Path: "data.synthetic.train", Key: "data.synthetic.train", When: synthetic},
		{Path: "data.synthetic.test", Key: "data.synthetic.test", When: synthetic},
		{Path: "data.synthetic.classes", Key: "data.synthetic.classes", When: synthetic},
		{Path: "data.synthetic.features", Key: "data.synthetic.features", When: synthetic},
		// Added after records existed: recorded only when label noise is
		// on, every key then.
		{Path: "data.label_noise.kind", Key: "data.label_noise.kind", When: labelNoise, Default: ""},
		{Path: "data.label_noise.rate", Key: "data.label_noise.rate", When: labelNoise, Default: 0.0},
		{Path: "data.label_noise.seed", Key: "data.label_noise.seed", When: labelNoise, Default: int64(0)},
		{Path: "data.label_noise.map", Key: "data.label_noise.map", When: asymmetricNoise, Encode: classMap, Default: ""},

		// [model]
		{Path: "model.archs", Excluded: "a grid dimension: each entry is a run of its own, named by its key and record (Arch); TorchScript files are identified by content (arch_content)"},
		{Path: "model.variational", Key: "model.variational"},
		{Path: "model.init_from", Key: "model.init_from"},
		{Path: "model.variational_opts.prior_sigma", Key: "model.variational_opts.prior_sigma", When: variational},
		{Path: "model.variational_opts.rho_init", Key: "model.variational_opts.rho_init", When: variational},
		{Path: "model.variational_opts.kl", Key: "model.variational_opts.kl", When: variational},
		{Path: "model.variational_opts.kl_reduction", Key: "model.variational_opts.kl_reduction", When: variational},
		{Path: "model.variational_opts.beta", Key: "model.variational_opts.beta", When: variational},
		{Path: "model.variational_opts.mc_samples", Key: "model.variational_opts.mc_samples", When: variational},
		{Path: "model.variational_opts.local_reparam", Key: "model.variational_opts.local_reparam", When: variational},
		{Path: "model.memory_format", Key: "model.memory_format", Default: experiment.MemoryContiguous, OmitDefault: true},
		{Path: "model.torchscript_init", Key: "model.torchscript_init", Default: experiment.TorchScriptInitFile, OmitDefault: true},

		// [eval]
		{Path: "eval.temperature", Key: "eval.temperature"},
		{Path: "eval.aac_steps", Key: "eval.aac_steps"},
		{Path: "eval.mc_samples", Key: "eval.mc_samples"},
		{Path: "eval.every_epochs", Key: "eval.every_epochs"},
		{Path: "eval.best_epoch", Key: "eval.best_epoch", Default: "", OmitDefault: true},
		// Added after records existed: recorded only when asked for, the
		// lists as comma-separated text.
		{Path: "eval.corruptions.families", Key: "eval.corruptions.families", When: corruptions, Encode: joinList, Default: ""},
		{Path: "eval.corruptions.severities", Key: "eval.corruptions.severities", When: corruptions, Encode: joinList, Default: ""},
		{Path: "eval.corruptions.seed", Key: "eval.corruptions.seed", When: corruptions, Default: int64(0)},
		{Path: "eval.tensorboard", Excluded: "what TensorBoard logs changes no result: turning it off or on neither supersedes finished runs nor retires saved states"},
		{Path: "eval.tensorboard_every_steps", Excluded: "what TensorBoard logs changes no result"},

		// The files behind paths, by content (see Config): absent when
		// there is none.
		{Path: "data_content", Key: "data.path.content", OmitDefault: true},
		{Path: "init_from_content", Key: "model.init_from.content", OmitDefault: true},
		{Path: "arch_content", Key: "model.archs.content", OmitDefault: true},
	}
}

// Conditions of settings (Setting.When).

func ownsUpdate(c Config) bool    { return c.OwnsUpdate }
func baseOptimizer(c Config) bool { return !c.OwnsUpdate }
func synthetic(c Config) bool {
	return c.Data.Dataset == experiment.DatasetSynthetic || c.Data.OOD == experiment.DatasetSynthetic
}
func labelNoise(c Config) bool { return c.Data.LabelNoise.Active() }
func asymmetricNoise(c Config) bool {
	return labelNoise(c) && c.Data.LabelNoise.Kind == experiment.NoiseAsymmetric
}
func variational(c Config) bool { return c.Model.Variational }
func corruptions(c Config) bool { return c.Eval.Corruptions.Active() }

// Encodings of settings (Setting.Encode).

func asInt64(v any) any { return int64(v.(int)) }
func asText(v any) any  { return fmt.Sprint(v) }

// optimizerSummary is train.optimizer's summary string.
func optimizerSummary(v any) any {
	o := v.(experiment.Optimizer)
	return fmt.Sprintf("%s lr=%g mom=%g nesterov=%v wd=%g", o.Name, o.LR, o.Momentum, o.Nesterov, o.WeightDecay)
}

// joinList writes a list of strings or ints comma-separated.
func joinList(v any) any {
	switch l := v.(type) {
	case []string:
		return strings.Join(l, ",")
	case []int:
		s := make([]string, len(l))
		for i, n := range l {
			s[i] = strconv.Itoa(n)
		}
		return strings.Join(s, ",")
	}
	panic(fmt.Sprintf("identity: joinList of %T", v))
}

// classMap writes data.label_noise.map as LabelNoise.MapString does.
func classMap(v any) any { return experiment.LabelNoise{Map: v.(map[string]int)}.MapString() }
