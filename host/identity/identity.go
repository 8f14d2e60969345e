// Package identity declares what identifies a run: the settings that make
// a run another run, the keys under which a record's configuration holds
// them (results.Record.Config, hashed into its ConfigHash and compared by
// results.ConfigDiff, which decide whether a finished run is skipped or
// superseded and trained again), and the settings that are not part of it,
// each with the reason.
//
// The declaration (Settings) classifies every field of Config exactly
// once, the experiment's [train], [data], [model] and [eval] tables
// included, field by field; the package's tests walk the structs and fail
// on a field that is not classified, so that a new setting cannot be
// forgotten and silently reuse the results of runs that did not have it.
//
// The rules are versioned: Version is the version of the configurations
// this optlab writes, recorded in each record (results.Record.Identity). A
// change of the rules for new runs is a new version with a migration of
// the configurations of the previous one to it (Migrate), so that records
// written before keep their meaning; records written before versions were
// recorded are version 1.
//
// A new setting whose default is what every run did before it existed is
// no change of the rules: it gets a Setting with that Default and
// OmitDefault, and the configurations of runs at the default keep their
// hash. Recording an existing setting differently is one: Version goes up,
// Settings returns the new declaration (the old one stays, for its tests),
// and migrations gains the function that rewrites a configuration of the
// previous version as the new one records it.
package identity

import (
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"

	"github.com/optlab/optlab/host/experiment"
)

// Version is the identity version of the configurations that Config.Map
// renders: that of every record this optlab writes.
//
// Version 1 is the rules of the records written before versions were
// recorded, which keep their configuration and hash: train.optimizer also
// as one summary string (NoBaseOptimizer for a plugin that owns its
// update), data.augment as text, and the settings added after records
// existed left out at their defaults (Defaults).
//
// Version 2 records data.test_fraction only for data that it splits: an
// npz file (or folder of .npy files) comes with its own test split, so the
// key said nothing about such a run, and two npz runs that differed only
// in it were two runs for nothing. Its migration drops the key from a
// version-1 npz configuration.
//
// Version 3 records the hyperparameters a method applies: not those of the
// update rules it does not use (optim.Info.Applied: with update = "adamw",
// sam's muon_… and shampoo_… are left out), which are at their defaults
// and said nothing about the run, but changed every such run's hash when a
// rule was added. Its migration drops them from a version-2 configuration
// (the rules of version 2 were adamw and muon).
//
// Version 4 is version 3 with the update rule of the SAM variants
// (plugins looksam, aesam, fsam, wsam, gsam and esam, which took none
// before): their configurations record params.update like sam's. Its
// migration adds params.update = "base", what every earlier run of them
// did, to a version-3 configuration of theirs that has none.
const Version = 4

// NoBaseOptimizer is the train.optimizer of the configuration of a run
// whose optimizer applies its own update (optim.Features.OwnsUpdate).
const NoBaseOptimizer = "none (the plugin's own update)"

// Config is what makes a run the run it is: the method's plugin and
// hyperparameters and the experiment's settings, the run's own (its swept
// values and its method's [method.optimizer] and [method.schedule]
// applied). Map renders it as the flat configuration a record holds.
//
// The toml tags name the fields in the declaration (Setting.Path): the
// experiment file's own keys for its tables ("train.optimizer.lr").
type Config struct {
	// Plugin is the method's plugin.
	Plugin string `toml:"plugin"`
	// Params are the validated hyperparameters, defaults filled in.
	Params map[string]any   `toml:"params"`
	Train  experiment.Train `toml:"train"`
	Data   experiment.Data  `toml:"data"`
	Model  experiment.Model `toml:"model"`
	Eval   experiment.Eval  `toml:"eval"`
	// DataContent identifies the files behind data.path (a CSV or npz
	// file, or a folder of .npy files) by content: another file under the
	// same name, or the same one edited, is another run. "" when there is
	// none or it cannot be read.
	DataContent string `toml:"data_content"`
	// InitFromContent identifies model.init_from's file by content, like
	// DataContent.
	InitFromContent string `toml:"init_from_content"`
	// ArchContent identifies the TorchScript files of the run's arch
	// ("torchscript:…" members) by content, one identity per distinct
	// file in member order, joined by "+"; "" when it has none.
	ArchContent string `toml:"arch_content"`
	// OwnsUpdate says that the optimizer applies its own update
	// (optim.Features.OwnsUpdate): Train.Optimizer's base optimizer is not used,
	// only its lr.
	OwnsUpdate bool `toml:"owns_update"`
}

// Map renders the configuration as a record's Config under the rules of
// Version (Settings): "params.<name>" for each hyperparameter (ParamKey),
// "<table>.<key>" for each setting that is part of the identity, nested
// tables flattened the same way, and the keys the declaration adds.
func (c Config) Map() map[string]any {
	return render(c, Settings())
}

// ParamKey is the key of hyperparameter name in a record's Config (and
// Resolved).
func ParamKey(name string) string { return paramsKey + "." + name }

// paramsKey is the prefix of the hyperparameters' keys.
const paramsKey = "params"

// Defaults returns, in a new map, the keys of the configuration that stand
// for a value when they are missing: settings added after records existed,
// which a configuration holds only when they are not at their default
// (the default being what every earlier run did), or only when a table
// that was added later is in use ([data.label_noise], [eval.corruptions]).
// results.ConfigDiff compares a missing one, on either side, as its value
// here: turning a setting on, or off again, is a difference.
func Defaults() map[string]any { return defaultsOf(Settings()) }

// defaultsOf is Defaults of a declaration.
func defaultsOf(settings []Setting) map[string]any {
	out := map[string]any{}
	for _, s := range settings {
		if s.Key != "" && s.Default != nil {
			out[s.Key] = s.Default
		}
	}
	return out
}

// Migrate returns cfg, a configuration recorded under identity version
// from, as Version records it, in a new map. Version 0 is that of records
// written before versions were recorded: version 1. A version above
// Version (a record of a newer optlab) is an error.
func Migrate(cfg map[string]any, from int) (map[string]any, error) {
	return migrate(cfg, from, Version, migrations())
}

// A migration takes a configuration of one identity version to the next.
// It must not modify its argument.
type migration func(map[string]any) map[string]any

// migrations returns the migrations of the identity versions:
// migrations()[i] takes version i+1 to version i+2.
func migrations() []migration { return []migration{v1ToV2, v2ToV3, v3ToV4} }

// v4Ruled are the plugins that took an update rule from version 4 on.
var v4Ruled = []string{"looksam", "aesam", "fsam", "wsam", "gsam", "esam"}

// v3ToV4 adds params.update = "base" to a version-3 configuration of a
// plugin of v4Ruled that records no update: the host's base step, the
// only update those plugins had.
func v3ToV4(cfg map[string]any) map[string]any {
	out := maps.Clone(cfg)
	plugin, _ := out["plugin"].(string)
	if _, ok := out[ParamKey("update")]; ok || !slices.Contains(v4Ruled, plugin) {
		return out
	}
	out[ParamKey("update")] = "base"
	return out
}

// v2Rules are the update rules a version-2 configuration may hold the
// hyperparameters of.
var v2Rules = []string{"adamw", "muon"}

// v2ToV3 drops the hyperparameters of the update rules a method does not
// use (params.<rule>_… for a rule other than params.update), which
// version 3 does not record.
func v2ToV3(cfg map[string]any) map[string]any {
	out := maps.Clone(cfg)
	chosen, ok := out[ParamKey("update")].(string)
	if !ok {
		return out
	}
	for _, rule := range v2Rules {
		if rule == chosen {
			continue
		}
		for k := range out {
			if strings.HasPrefix(k, ParamKey(rule+"_")) {
				delete(out, k)
			}
		}
	}
	return out
}

// v1ToV2 drops data.test_fraction from the configuration of a run on npz
// data, which version 2 does not record (it does not apply to them).
func v1ToV2(cfg map[string]any) map[string]any {
	out := maps.Clone(cfg)
	if out["data.dataset"] == experiment.DatasetNumPy {
		delete(out, "data.test_fraction")
	}
	return out
}

// migrate takes cfg from version from to version to with steps (see
// migrations).
func migrate(cfg map[string]any, from, to int, steps []migration) (map[string]any, error) {
	if from == 0 {
		from = 1
	}
	if len(steps) != to-1 {
		return nil, fmt.Errorf("identity: %d migrations for version %d, want %d", len(steps), to, to-1)
	}
	if from < 1 || from > to {
		return nil, fmt.Errorf("configuration of identity version %d: this optlab knows versions 1 to %d (a record of a newer optlab?)", from, to)
	}
	out := maps.Clone(cfg)
	for v := from; v < to; v++ {
		out = steps[v-1](out)
	}
	return out, nil
}

// render renders c with settings (Config.Map).
func render(c Config, settings []Setting) map[string]any {
	cfg := map[string]any{}
	set := func(k string, v any) {
		if _, dup := cfg[k]; dup {
			panic(fmt.Sprintf("identity: two settings record key %q", k))
		}
		cfg[k] = v
	}
	root := reflect.ValueOf(c)
	for _, s := range settings {
		if s.Key == "" || (s.When != nil && !s.When(c)) {
			continue
		}
		f, ok := lookup(root, s.Path)
		if !ok {
			panic(fmt.Sprintf("identity: setting %q names no field of Config", s.Path))
		}
		v := f.Interface()
		if s.Encode != nil {
			v = s.Encode(v)
		}
		if s.OmitDefault && (isZero(v) || reflect.DeepEqual(v, s.Default)) {
			continue
		}
		if !s.PerEntry {
			set(s.Key, v)
			continue
		}
		for it := reflect.ValueOf(v).MapRange(); it.Next(); {
			set(s.Key+"."+fmt.Sprint(it.Key().Interface()), it.Value().Interface())
		}
	}
	return cfg
}

// isZero reports whether v is nil or its type's zero value.
func isZero(v any) bool { return v == nil || reflect.ValueOf(v).IsZero() }

// lookup returns the field of v at path, dot-separated field keys (see
// fields).
func lookup(v reflect.Value, path string) (reflect.Value, bool) {
	for _, name := range strings.Split(path, ".") {
		if v.Kind() != reflect.Struct {
			return reflect.Value{}, false
		}
		fs := fields(v.Type())
		i := slices.IndexFunc(fs, func(f reflect.StructField) bool { return fieldKey(f) == name })
		if i < 0 {
			return reflect.Value{}, false
		}
		v = v.FieldByIndex(fs[i].Index)
	}
	return v, true
}

// fields returns the exported fields of struct type t as its settings:
// those of an embedded struct without a toml tag promoted in its place,
// as TOML decoding and Go's selectors see them (a field that an outer one
// shadows is left out).
func fields(t reflect.Type) []reflect.StructField {
	var out []reflect.StructField
	for _, f := range reflect.VisibleFields(t) {
		if !f.IsExported() || (f.Anonymous && f.Tag.Get("toml") == "" && f.Type.Kind() == reflect.Struct) {
			continue
		}
		if top, _ := t.FieldByName(f.Name); !slices.Equal(top.Index, f.Index) {
			continue
		}
		out = append(out, f)
	}
	return out
}

// fieldKey is f's key in a setting's path: its toml key, or its Go name
// when it has none.
func fieldKey(f reflect.StructField) string {
	k, _, _ := strings.Cut(f.Tag.Get("toml"), ",")
	if k == "" || k == "-" {
		return f.Name
	}
	return k
}
