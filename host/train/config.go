package train

import (
	"fmt"
	"reflect"
	"strconv"
	"strings"

	"github.com/optlab/optlab/host/experiment"
	"github.com/optlab/optlab/sdk/optim"
)

// Config is what makes a run the run it is, for its record: the method's
// plugin and hyperparameters and the experiment's settings that change
// what the run trains or how it is scored. A run whose Config changed is
// another run (results.ConfigDiff; host run supersedes the old result).
// Runner.Config builds it once per run; Map renders it as the flat
// configuration a record holds.
type Config struct {
	Plugin string
	// Params are the validated hyperparameters, defaults filled in.
	Params map[string]any
	Train  experiment.Train
	Data   experiment.Data
	Model  experiment.Model
	Eval   experiment.Eval
	// DataContent and InitFromContent identify the files behind data.path
	// (a CSV or npz file, or a folder of .npy files) and model.init_from by content (FileIdentity): another
	// file under the same name, or the same one edited, is another run.
	// "" when there is none or it cannot be read.
	DataContent, InitFromContent string
	// ArchContent identifies the TorchScript files of the run's arch
	// ("torchscript:…" members) by content, one FileIdentity per distinct
	// file in member order, joined by "+"; "" when it has none.
	ArchContent string
	// OwnsUpdate says that the optimizer applies its own update
	// (optim.CapOwnsUpdate): Train.Optimizer's base optimizer is not used,
	// only its lr (StepInput.LR).
	OwnsUpdate bool
}

// Config is run's configuration with method m.
func (r *Runner) Config(run experiment.Run, m Optimizer) Config {
	e := run.Experiment(r.Exp)
	c := Config{Plugin: m.Plugin, Params: m.Params, Train: e.Train, Data: e.Data, Model: e.Model, Eval: e.Eval, OwnsUpdate: m.ownsUpdate()}
	if d := e.Data; d.Path != "" {
		switch d.Dataset {
		case experiment.DatasetCSV:
			if id, ok := FileIdentity(d.Path); ok {
				c.DataContent = id
			}
		case experiment.DatasetNumPy:
			c.DataContent = filesIdentity(d.Path)
		}
	}
	if e.Model.InitFrom != "" {
		if id, ok := FileIdentity(e.Model.InitFrom); ok {
			c.InitFromContent = id
		}
	}
	c.ArchContent = archIdentity(run.Members)
	return c
}

// archIdentity identifies the TorchScript files among members by content
// (Config.ArchContent).
func archIdentity(members []string) string {
	var ids []string
	seen := map[string]bool{}
	for _, a := range members {
		path, ok := experiment.TorchScriptPath(a)
		if !ok || seen[path] {
			continue
		}
		seen[path] = true
		id, ok := FileIdentity(path)
		if !ok {
			id = "unreadable"
		}
		ids = append(ids, id)
	}
	return strings.Join(ids, "+")
}

// Map renders the configuration as a record's Config: "params.<name>"
// for each hyperparameter and "<table>.<key>" for each setting, nested
// tables flattened the same way. Some keys keep the form of the first
// records (train.optimizer also as one summary string, data.augment as
// text) and settings added later appear only when not at their default
// (results.OmittedDefaults), so that every earlier record keeps its
// configuration and hash, and nothing finished is trained again. The
// optimizer and schedule are the run's method's (experiment.Method.Train,
// through Runner.Config). An optimizer that owns its update has no base
// optimizer: train.optimizer says so (NoBaseOptimizer) and only
// train.optimizer.lr of its keys is recorded.
func (c Config) Map() map[string]any {
	cfg := map[string]any{}
	for k, v := range c.Params {
		cfg[paramKey(k)] = v
	}
	tr := c.Train
	cfg["train.epochs"] = int64(tr.Epochs)
	cfg["train.batch_size"] = int64(tr.BatchSize)
	cfg["train.optimizer"] = fmt.Sprintf("%s lr=%g mom=%g nesterov=%v wd=%g", tr.Optimizer.Name, tr.Optimizer.LR, tr.Optimizer.Momentum, tr.Optimizer.Nesterov, tr.Optimizer.WeightDecay)
	cfg["train.schedule"] = tr.Schedule.Kind
	cfg["train.label_smoothing"] = tr.LabelSmoothing
	cfg["train.max_steps"] = int64(tr.MaxSteps)
	cfg["data.augment"] = fmt.Sprint(c.Data.Augment)
	cfg["plugin"] = c.Plugin
	// Everything else that changes what a run trains or how it is scored
	// (ConfigDiff ignores keys that records of older versions lack).
	d := c.Data
	cfg["data.dataset"] = d.Dataset
	cfg["data.validation"] = d.Validation
	cfg["data.test_fraction"] = d.TestFraction
	cfg["data.normalize"] = d.Normalize
	cfg["data.shuffle"] = d.Shuffle
	cfg["data.classes"] = int64(d.Classes)
	if d.Dataset == experiment.DatasetSynthetic || d.OOD == experiment.DatasetSynthetic {
		addTable(cfg, "data.synthetic", d.Synthetic)
	}
	// Label noise: only when asked for, so that the configuration (and
	// hash) of a run without it stays that of the records written before
	// it existed (results.OmittedDefaults).
	if n := d.LabelNoise; n.Active() {
		cfg["data.label_noise.kind"] = n.Kind
		cfg["data.label_noise.rate"] = n.Rate
		cfg["data.label_noise.seed"] = n.Seed
		if n.Kind == experiment.NoiseAsymmetric {
			cfg["data.label_noise.map"] = n.MapString()
		}
	}
	cfg["data.ood"] = d.OOD
	if d.Layout != "" && d.Layout != experiment.LayoutNCHW {
		cfg["data.layout"] = d.Layout // npz only; absent at the default
	}
	addTable(cfg, "train.schedule", tr.Schedule)
	addTable(cfg, "train.optimizer", tr.Optimizer)
	if c.OwnsUpdate {
		cfg["train.optimizer"] = NoBaseOptimizer
		for _, k := range experiment.BaseOptimizerKeys() {
			delete(cfg, "train.optimizer."+k)
		}
	}
	cfg["model.variational"] = c.Model.Variational
	if c.Model.Variational {
		addTable(cfg, "model.variational_opts", c.Model.VariationalOpts)
	}
	cfg["model.init_from"] = c.Model.InitFrom
	// Numerics: recorded only when not the default, so that records of
	// float32 runs keep the configuration (and hash) they had before these
	// keys existed (results.OmittedDefaults compares a missing key as its
	// default).
	if p := tr.Precision; p != "" && p != experiment.PrecisionFP32 {
		cfg["train.precision"] = p
	}
	if f := c.Model.MemoryFormat; f != "" && f != experiment.MemoryContiguous {
		cfg["model.memory_format"] = f
	}
	if i := c.Model.TorchScriptInit; i != "" && i != experiment.TorchScriptInitFile {
		cfg["model.torchscript_init"] = i
	}
	// The files behind data.path, init_from and TorchScript archs, by
	// content: another file
	// under the same name (or the same one edited) is another run.
	if c.DataContent != "" {
		cfg["data.path.content"] = c.DataContent
	}
	if c.InitFromContent != "" {
		cfg["model.init_from.content"] = c.InitFromContent
	}
	if c.ArchContent != "" {
		cfg["model.archs.content"] = c.ArchContent
	}
	addTable(cfg, "eval", c.Eval)
	// Determinism and precision: only when on, so that a run at the
	// defaults keeps the configuration (and hash) of the records written
	// before these keys existed; Record.Numerics has all three.
	for k, on := range map[string]bool{"train.deterministic": tr.Deterministic, "train.cudnn_benchmark": tr.CudnnBenchmark, "train.tf32": tr.TF32} {
		if on {
			cfg[k] = true
		}
	}
	// What TensorBoard logs changes no result: turning it off or on must
	// neither supersede finished runs nor retire saved states.
	delete(cfg, "eval.tensorboard")
	delete(cfg, "eval.tensorboard_every_steps")
	// Best epoch and corruptions: only when asked for, like label noise
	// (results.OmittedDefaults); the lists as comma-separated strings.
	if c.Eval.BestEpoch == "" {
		delete(cfg, "eval.best_epoch")
	}
	delete(cfg, "eval.corruptions.families")
	delete(cfg, "eval.corruptions.severities")
	delete(cfg, "eval.corruptions.seed")
	if cr := c.Eval.Corruptions; cr.Active() {
		cfg["eval.corruptions.families"] = strings.Join(cr.Families, ",")
		sev := make([]string, len(cr.Severities))
		for i, v := range cr.Severities {
			sev[i] = strconv.Itoa(v)
		}
		cfg["eval.corruptions.severities"] = strings.Join(sev, ",")
		cfg["eval.corruptions.seed"] = cr.Seed
	}
	return cfg
}

// NoBaseOptimizer is the train.optimizer of the configuration of a run
// whose optimizer applies its own update (optim.CapOwnsUpdate).
const NoBaseOptimizer = "none (the plugin's own update)"

// paramKey is the key of hyperparameter name in a record's Config (and
// Resolved).
func paramKey(name string) string { return "params." + name }

// resolvedOf returns what opt chose in Configure for the hyperparameters
// that left it the choice (Optimizer.Resolved), under the keys of the
// record's Config, for the record's Resolved; nil for none.
func resolvedOf(opt optim.Optimizer) map[string]any {
	var out map[string]any
	for k, v := range opt.Resolved() {
		if out == nil {
			out = map[string]any{}
		}
		out[paramKey(k)] = v
	}
	return out
}

// addTable adds the fields of an experiment table (a struct with toml
// tags) to a run's configuration as prefix.<toml key> entries, nested
// tables flattened the same way.
func addTable(cfg map[string]any, prefix string, v any) {
	rv := reflect.ValueOf(v)
	rt := rv.Type()
	for i := range rt.NumField() {
		f := rt.Field(i)
		key, _, _ := strings.Cut(f.Tag.Get("toml"), ",")
		if key == "" || key == "-" || !f.IsExported() {
			continue
		}
		fv := rv.Field(i)
		if fv.Kind() == reflect.Struct {
			addTable(cfg, prefix+"."+key, fv.Interface())
			continue
		}
		cfg[prefix+"."+key] = fv.Interface()
	}
}
