package identity

import (
	"fmt"
	"maps"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/optlab/optlab/host/experiment"
)

// problems checks a declaration against root, the struct type it
// classifies: every field (leaf) of root and of its tables must be named
// by exactly one setting, either part of the identity (Key) or excluded
// with a reason; a setting may also name a table, for a key that sums it
// up, and must name a field or table of root. It returns one line per
// problem, naming the field, sorted.
func problems(root reflect.Type, settings []Setting) []string {
	leaves := map[string]string{} // path → Type.Field
	tables := map[string]bool{}
	var walk func(t reflect.Type, prefix string)
	walk = func(t reflect.Type, prefix string) {
		for _, f := range fields(t) {
			p := fieldKey(f)
			if prefix != "" {
				p = prefix + "." + p
			}
			if f.Type.Kind() == reflect.Struct {
				tables[p] = true
				walk(f.Type, p)
				continue
			}
			owner := t
			if n := len(f.Index); n > 1 {
				owner = t.FieldByIndex(f.Index[:n-1]).Type
			}
			leaves[p] = owner.Name() + "." + f.Name
		}
	}
	walk(root, "")
	var out []string
	count := map[string]int{}
	for _, s := range settings {
		count[s.Path]++
		switch {
		case !tables[s.Path] && leaves[s.Path] == "":
			out = append(out, fmt.Sprintf("%s: the declaration names no such field of %s", s.Path, root.Name()))
		case s.Key == "" && s.Excluded == "":
			out = append(out, fmt.Sprintf("%s (%s): neither a key nor the reason it is excluded", s.Path, leaves[s.Path]))
		case s.Key != "" && s.Excluded != "":
			out = append(out, fmt.Sprintf("%s (%s): both a key and excluded", s.Path, leaves[s.Path]))
		case tables[s.Path] && s.Key == "":
			out = append(out, fmt.Sprintf("%s: a table is excluded field by field, not as a whole", s.Path))
		}
	}
	for p, field := range leaves {
		switch n := count[p]; {
		case n == 0:
			out = append(out, fmt.Sprintf("%s (%s) is neither part of a run's identity nor excluded: classify it in host/identity's declaration (settings.go)", p, field))
		case n > 1:
			out = append(out, fmt.Sprintf("%s (%s) is classified %d times", p, field, n))
		}
	}
	for p := range tables {
		if count[p] > 1 {
			out = append(out, fmt.Sprintf("%s: %d settings sum the table up", p, count[p]))
		}
	}
	sort.Strings(out)
	return out
}

// TestDeclarationComplete: every field of Config, the experiment's tables
// field by field, is part of a run's identity or excluded with a reason,
// exactly once.
func TestDeclarationComplete(t *testing.T) {
	for _, p := range problems(reflect.TypeOf(Config{}), Settings()) {
		t.Error(p)
	}
}

// trainPlus is [train] with a setting that nobody classified.
type trainPlus struct {
	experiment.Train
	EMADecay float64 `toml:"ema_decay"`
}

// configPlus is Config whose [train] has an unclassified setting, with an
// unclassified field of its own.
type configPlus struct {
	Config
	Train   trainPlus `toml:"train"`
	Profile bool      `toml:"profile"`
}

// TestDeclarationCompleteFails: the completeness check fails on a field
// added without being classified, naming it (the negative control of
// TestDeclarationComplete), and on a declaration that classifies a field
// twice, names no field, or excludes one without a reason.
func TestDeclarationCompleteFails(t *testing.T) {
	got := problems(reflect.TypeOf(configPlus{}), Settings())
	want := []string{
		"profile (configPlus.Profile) is neither part of a run's identity nor excluded: classify it in host/identity's declaration (settings.go)",
		"train.ema_decay (trainPlus.EMADecay) is neither part of a run's identity nor excluded: classify it in host/identity's declaration (settings.go)",
	}
	if !slices.Equal(got, want) {
		t.Errorf("problems with two unclassified fields:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	bad := Settings()
	var dropped Setting
	bad = slices.DeleteFunc(bad, func(s Setting) bool {
		if s.Path == "eval.tensorboard" {
			dropped = s
			return true
		}
		return false
	})
	if dropped.Excluded == "" {
		t.Fatal("no eval.tensorboard setting")
	}
	for i := range bad {
		if bad[i].Path == "train.threads" {
			bad[i].Excluded = ""
		}
	}
	bad = append(bad, Setting{Path: "train.epochs", Key: "epochs"}, Setting{Path: "train.nonesuch", Key: "train.nonesuch"})
	got = problems(reflect.TypeOf(Config{}), bad)
	want = []string{
		"eval.tensorboard (Eval.TensorBoard) is neither part of a run's identity nor excluded: classify it in host/identity's declaration (settings.go)",
		"train.epochs (Train.Epochs) is classified 2 times",
		"train.nonesuch: the declaration names no such field of Config",
		"train.threads (Train.Threads): neither a key nor the reason it is excluded",
	}
	if !slices.Equal(got, want) {
		t.Errorf("problems of a broken declaration:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// configs are configurations that take every branch of the rules.
func configs() map[string]Config {
	def := experiment.Default()
	base := Config{Plugin: "sam", Params: map[string]any{"rho": 0.05, "adaptive": false, "k": int64(2)},
		Train: def.Train, Data: def.Data, Model: def.Model, Eval: def.Eval}
	out := map[string]Config{"defaults": base, "zero": {}}
	with := func(name string, edit func(c *Config)) {
		c := base
		c.Params = maps.Clone(base.Params)
		edit(&c)
		out[name] = c
	}
	with("owns update", func(c *Config) { c.OwnsUpdate = true })
	with("adam, step schedule", func(c *Config) {
		c.Train.Optimizer = experiment.Optimizer{Name: "adam", LR: 1e-3, Betas: []float64{0.8, 0.99}, Eps: 1e-7, WeightDecay: 0.01}
		c.Train.Schedule = experiment.Schedule{Kind: "step", Milestones: []float64{0.5, 0.75}, Gamma: 0.1, WarmupEpochs: 2}
	})
	with("not recorded", func(c *Config) {
		c.Train.Seeds, c.Train.Device, c.Train.Threads, c.Train.Checkpoint, c.Train.Spill, c.Train.EvalBatchSize = []int64{4, 5}, "cuda:1", 3, true, true, 7
		c.Eval.TensorBoard, c.Eval.TensorBoardEverySteps = false, 3
		c.Data.Dir, c.Data.OODDir, c.Data.Path = "elsewhere", "there", "x.npz"
		c.Model.Archs = []string{"resnet18*2"}
	})
	with("numerics", func(c *Config) {
		c.Train.Deterministic, c.Train.CudnnBenchmark, c.Train.TF32 = true, true, true
		c.Train.Precision, c.Model.MemoryFormat, c.Model.TorchScriptInit = experiment.PrecisionBF16, experiment.MemoryChannelsLast, experiment.TorchScriptInitReset
	})
	with("synthetic", func(c *Config) {
		c.Data.Dataset, c.Data.Augment = experiment.DatasetSynthetic, []string{"crop", "flip"}
		c.Data.Synthetic.Features = 12
	})
	with("synthetic OOD, npz in NHWC", func(c *Config) {
		c.Data.Dataset, c.Data.OOD, c.Data.Layout, c.Data.Classes = experiment.DatasetNumPy, experiment.DatasetSynthetic, experiment.LayoutNHWC, 7
		c.DataContent = "sha256:abc size 10"
	})
	with("label noise", func(c *Config) {
		c.Data.LabelNoise = experiment.LabelNoise{Kind: experiment.NoiseSymmetric, Rate: 0.2}
	})
	with("label noise rate 0", func(c *Config) {
		c.Data.LabelNoise = experiment.LabelNoise{Kind: experiment.NoisePairflip, Seed: 3}
	})
	with("asymmetric label noise", func(c *Config) {
		c.Data.LabelNoise = experiment.LabelNoise{Kind: experiment.NoiseAsymmetric, Rate: 0.4, Seed: 2, Map: map[string]int{"9": 1, "2": 0, "10": 3}}
	})
	with("variational", func(c *Config) {
		c.Model.Variational = true
		c.Model.VariationalOpts.LocalReparam = true
	})
	with("files", func(c *Config) {
		c.Model.InitFrom, c.InitFromContent, c.ArchContent = "init.safetensors", "sha256:def", "sha256:1+sha256:2"
	})
	with("robustness", func(c *Config) {
		c.Eval.BestEpoch, c.Eval.EveryEpochs = experiment.BestNLL, 1
		c.Eval.Corruptions = experiment.Corruptions{Families: []string{"contrast", "fog"}, Severities: []int{1, 5}, Seed: 4}
	})
	with("no params", func(c *Config) { c.Params = nil })
	return out
}

// TestVersion1: the declaration of version 1 reproduces the
// configurations of the rules before versions (legacyMap), value and Go
// type, for configurations that take every branch of them, and their
// defaults: records written before keep their configuration and hash.
func TestVersion1(t *testing.T) {
	for name, c := range configs() {
		got, want := render(c, settingsV1()), legacyMap(c)
		if reflect.DeepEqual(got, want) {
			continue
		}
		keys := map[string]bool{}
		for k := range got {
			keys[k] = true
		}
		for k := range want {
			keys[k] = true
		}
		for _, k := range slices.Sorted(maps.Keys(keys)) {
			if g, w := got[k], want[k]; !reflect.DeepEqual(g, w) {
				t.Errorf("%s: %s = %#v (%T), want %#v (%T)", name, k, g, g, w, w)
			}
		}
	}
	if got, want := defaultsOf(settingsV1()), legacyOmittedDefaults(); !reflect.DeepEqual(got, want) {
		t.Errorf("version 1's defaults = %v\nwant %v", got, want)
	}
}

// TestDefaultsFresh: Defaults returns a new map every time; what a caller
// does to it changes nothing.
func TestDefaultsFresh(t *testing.T) {
	d := Defaults()
	d["train.precision"] = "bf16"
	delete(d, "train.tf32")
	if again := Defaults(); again["train.precision"] != experiment.PrecisionFP32 || again["train.tf32"] != false {
		t.Errorf("Defaults() after a caller edited its map: %v", again)
	}
}

// TestOmitted: a setting recorded only away from its default is absent at
// it and present, with the value, away from it; excluded settings change
// nothing.
func TestOmitted(t *testing.T) {
	cs := configs()
	def, num, not := cs["defaults"].Map(), cs["numerics"].Map(), cs["not recorded"].Map()
	for _, k := range []string{"train.precision", "model.memory_format", "model.torchscript_init", "train.tf32", "data.label_noise.rate", "eval.corruptions.seed"} {
		if v, ok := def[k]; ok {
			t.Errorf("at the defaults, %s = %v is recorded", k, v)
		}
	}
	if num["train.precision"] != "bf16" || num["train.tf32"] != true {
		t.Errorf("bf16, tf32: %v", num)
	}
	if !reflect.DeepEqual(def, not) {
		t.Errorf("excluded settings changed the configuration:\n%v\n%v", def, not)
	}
}

// TestOwnsUpdate: a plugin that owns its update has no base optimizer:
// train.optimizer says so, and of [train.optimizer] only lr is recorded.
func TestOwnsUpdate(t *testing.T) {
	cs := configs()
	own, def := cs["owns update"].Map(), cs["defaults"].Map()
	if own["train.optimizer"] != NoBaseOptimizer {
		t.Errorf("train.optimizer = %v, want %q", own["train.optimizer"], NoBaseOptimizer)
	}
	for _, k := range experiment.BaseOptimizerKeys() {
		if _, ok := own["train.optimizer."+k]; ok {
			t.Errorf("train.optimizer.%s recorded for a plugin that owns its update", k)
		}
		if _, ok := def["train.optimizer."+k]; !ok {
			t.Errorf("train.optimizer.%s not recorded with a base optimizer", k)
		}
	}
	if own["train.optimizer.lr"] != def["train.optimizer.lr"] {
		t.Errorf("train.optimizer.lr = %v, want %v", own["train.optimizer.lr"], def["train.optimizer.lr"])
	}
}

// TestMigrate: a configuration of the current version, or of a record
// written before versions (0), comes back as it is, in a new map; a
// version this optlab does not know is an error naming it.
func TestMigrate(t *testing.T) {
	cfg := configs()["robustness"].Map()
	for _, from := range []int{0, Version} {
		got, err := Migrate(cfg, from)
		if err != nil || !reflect.DeepEqual(got, cfg) {
			t.Fatalf("Migrate(cfg, %d) = %v, %v; want cfg", from, got, err)
		}
		got["plugin"] = "changed"
		if cfg["plugin"] == "changed" {
			t.Fatalf("Migrate(cfg, %d) returned cfg itself", from)
		}
	}
	for _, from := range []int{-1, Version + 1} {
		if _, err := Migrate(cfg, from); err == nil || !strings.Contains(err.Error(), fmt.Sprintf("identity version %d", from)) {
			t.Errorf("Migrate(cfg, %d): %v, want an error naming the version", from, err)
		}
	}
}

// TestMigrateSteps: the migrations run in order from the record's version
// to the current one, each once, and leave the record's map alone.
func TestMigrateSteps(t *testing.T) {
	steps := []migration{
		// 1 → 2: data.augment becomes a list.
		func(c map[string]any) map[string]any {
			out := maps.Clone(c)
			if s, ok := out["data.augment"].(string); ok {
				out["data.augment"] = strings.Fields(strings.Trim(s, "[]"))
			}
			return out
		},
		// 2 → 3: the summary string goes.
		func(c map[string]any) map[string]any {
			out := maps.Clone(c)
			delete(out, "train.optimizer")
			return out
		},
	}
	v1 := map[string]any{"data.augment": "[crop flip]", "train.optimizer": "sgd lr=0.1", "plugin": "sgd"}
	orig := maps.Clone(v1)
	want := map[string]any{"data.augment": []string{"crop", "flip"}, "plugin": "sgd"}
	for _, from := range []int{0, 1} {
		got, err := migrate(v1, from, 3, steps)
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("from %d: %v, %v; want %v", from, got, err, want)
		}
	}
	v2 := map[string]any{"data.augment": []string{"crop"}, "train.optimizer": "sgd lr=0.1"}
	if got, err := migrate(v2, 2, 3, steps); err != nil || !reflect.DeepEqual(got, map[string]any{"data.augment": []string{"crop"}}) {
		t.Errorf("from 2: %v, %v", got, err)
	}
	if !reflect.DeepEqual(v1, orig) {
		t.Errorf("migrating changed the record's map: %v", v1)
	}
	if _, err := migrate(v1, 1, 3, steps[:1]); err == nil {
		t.Error("a missing migration is not an error")
	}
}

// TestParamKey: hyperparameters are recorded under ParamKey.
func TestParamKey(t *testing.T) {
	m := configs()["defaults"].Map()
	if m[ParamKey("rho")] != 0.05 || ParamKey("rho") != "params.rho" {
		t.Errorf("params: %v", m)
	}
}

// TestVersion2: version 2 records data.test_fraction only for data that it
// splits; every other key, and every configuration not on npz data, is
// version 1's. A version-1 configuration migrated to version 2 is what
// version 2 renders, so a finished npz run of before is still found
// finished (no ConfigDiff), and one of another dataset keeps its
// configuration and hash.
func TestVersion2(t *testing.T) {
	npz := 0
	for name, c := range configs() {
		v1, v2 := render(c, settingsV1()), render(c, settingsV2())
		want := maps.Clone(v1)
		if c.Data.Dataset == experiment.DatasetNumPy {
			npz++
			if _, ok := v2["data.test_fraction"]; ok {
				t.Errorf("%s: npz data records data.test_fraction", name)
			}
			delete(want, "data.test_fraction")
		}
		if !reflect.DeepEqual(v2, want) {
			t.Errorf("%s: version 2 = %v\nwant %v", name, v2, want)
		}
		if got, err := Migrate(v1, 1); err != nil || !reflect.DeepEqual(got, v2) {
			t.Errorf("%s: version 1 migrated = %v, %v\nwant %v", name, got, err, v2)
		}
		if got, err := Migrate(v2, Version); err != nil || !reflect.DeepEqual(got, v2) {
			t.Errorf("%s: a version-2 configuration migrates to %v, %v", name, got, err)
		}
	}
	if npz == 0 {
		t.Fatal("no npz configuration among the test configurations")
	}
	c := configs()["defaults"]
	c.Data.Dataset = experiment.DatasetNumPy
	a, b := c, c
	b.Data.TestFraction = a.Data.TestFraction + 0.1
	if !reflect.DeepEqual(a.Map(), b.Map()) {
		t.Error("two npz runs that differ in data.test_fraction alone are two runs")
	}
}

// TestV2ToV3: a version-2 configuration of a method over an update rule
// loses the hyperparameters of the rules it does not use, keeps its
// chosen rule's and its own; a method at the base update keeps its own;
// a configuration without an update is unchanged; the input map is left
// alone.
func TestV2ToV3(t *testing.T) {
	for _, c := range []struct {
		name     string
		cfg      map[string]any
		wantKeys []string
	}{
		{"sam over adamw", map[string]any{"plugin": "sam", "params.rho": 0.05, "params.update": "adamw",
			"params.adamw_beta1": 0.9, "params.muon_momentum": 0.95, "params.muon_adamw_lr": 3e-4},
			[]string{"params.adamw_beta1", "params.rho", "params.update", "plugin"}},
		{"sam over muon", map[string]any{"plugin": "sam", "params.update": "muon", "params.adamw_beta1": 0.9,
			"params.muon_adamw_lr": 3e-4}, []string{"params.muon_adamw_lr", "params.update", "plugin"}},
		{"sam over base", map[string]any{"plugin": "sam", "params.update": "base", "params.adamw_beta1": 0.9,
			"params.muon_momentum": 0.95, "params.rho": 0.05}, []string{"params.rho", "params.update", "plugin"}},
		{"no update", map[string]any{"plugin": "muon", "params.adamw_lr": 3e-4, "params.momentum": 0.95},
			[]string{"params.adamw_lr", "params.momentum", "plugin"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			orig := maps.Clone(c.cfg)
			got, err := migrate(c.cfg, 2, 3, migrations()[:2])
			if err != nil {
				t.Fatal(err)
			}
			keys := slices.Sorted(maps.Keys(got))
			if !slices.Equal(keys, c.wantKeys) {
				t.Errorf("keys %v, want %v", keys, c.wantKeys)
			}
			if !reflect.DeepEqual(c.cfg, orig) {
				t.Error("the input configuration changed")
			}
		})
	}
}

// TestV3ToV4: a version-3 configuration of a SAM variant gains
// params.update = "base" (what it ran), one that records an update keeps
// it, and other plugins' are unchanged; the input map is left alone.
func TestV3ToV4(t *testing.T) {
	for _, c := range []struct {
		name string
		cfg  map[string]any
		want any // params.update after, nil: none
	}{
		{"looksam", map[string]any{"plugin": "looksam", "params.rho": 0.05}, "base"},
		{"esam", map[string]any{"plugin": "esam", "params.rho": 0.05}, "base"},
		{"looksam over adamw", map[string]any{"plugin": "looksam", "params.update": "adamw"}, "adamw"},
		{"sam", map[string]any{"plugin": "sam", "params.rho": 0.05}, nil},
		{"msam", map[string]any{"plugin": "msam", "params.rho": 0.05}, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			orig := maps.Clone(c.cfg)
			got, err := migrate(c.cfg, 3, 4, migrations()[:3])
			if err != nil {
				t.Fatal(err)
			}
			if u, ok := got[ParamKey("update")]; (c.want == nil && ok) || (c.want != nil && u != c.want) {
				t.Errorf("params.update = %v (%v), want %v", u, ok, c.want)
			}
			if len(got) != len(orig)+btoi(c.want != nil && orig[ParamKey("update")] == nil) {
				t.Errorf("keys %v from %v", got, orig)
			}
			if !reflect.DeepEqual(c.cfg, orig) {
				t.Errorf("migrating changed the input: %v", c.cfg)
			}
		})
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}
