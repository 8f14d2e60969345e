package identity

// The configuration rules of optlab before identity versions, verbatim
// (host/train/config.go's Config.Map and results.OmittedDefaults at commit
// 0896d8e), which version 1 must reproduce exactly.

import (
	"fmt"
	"reflect"
	"strconv"
	"strings"

	"github.com/optlab/optlab/host/experiment"
)

// legacyOmittedDefaults is results.OmittedDefaults before versions.
func legacyOmittedDefaults() map[string]any {
	return map[string]any{
		"train.precision":             "fp32",
		"model.memory_format":         "contiguous",
		"train.deterministic":         false,
		"train.cudnn_benchmark":       false,
		"train.tf32":                  false,
		"data.label_noise.kind":       "",
		"data.label_noise.rate":       0.0,
		"data.label_noise.seed":       int64(0),
		"data.label_noise.map":        "",
		"eval.best_epoch":             "",
		"eval.corruptions.families":   "",
		"eval.corruptions.severities": "",
		"eval.corruptions.seed":       int64(0),
		"data.layout":                 "nchw",
		"model.torchscript_init":      "file",
	}
}

// legacyMap is Config.Map before versions.
func legacyMap(c Config) map[string]any {
	cfg := map[string]any{}
	for k, v := range c.Params {
		cfg["params."+k] = v
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
		legacyAddTable(cfg, "data.synthetic", d.Synthetic)
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
	legacyAddTable(cfg, "train.schedule", tr.Schedule)
	legacyAddTable(cfg, "train.optimizer", tr.Optimizer)
	if c.OwnsUpdate {
		cfg["train.optimizer"] = NoBaseOptimizer
		for _, k := range experiment.BaseOptimizerKeys() {
			delete(cfg, "train.optimizer."+k)
		}
	}
	cfg["model.variational"] = c.Model.Variational
	if c.Model.Variational {
		legacyAddTable(cfg, "model.variational_opts", c.Model.VariationalOpts)
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
	legacyAddTable(cfg, "eval", c.Eval)
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

// legacyAddTable is addTable before versions: it adds the fields of an experiment table (a struct with toml
// tags) to a run's configuration as prefix.<toml key> entries, nested
// tables flattened the same way.
func legacyAddTable(cfg map[string]any, prefix string, v any) {
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
			legacyAddTable(cfg, prefix+"."+key, fv.Interface())
			continue
		}
		cfg[prefix+"."+key] = fv.Interface()
	}
}
