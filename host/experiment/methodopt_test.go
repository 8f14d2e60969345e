package experiment

import (
	"reflect"
	"strings"
	"testing"
)

// methodOptFile is an experiment with an SGD [train.optimizer], a step
// schedule, and methods whose [method.optimizer] and [method.schedule]
// (methods, written from line 16) override them.
func methodOptFile(methods string) string {
	return `name = "t"
[train]
epochs = 10
[train.optimizer]
name = "sgd"
lr = 0.05
momentum = 0.8
nesterov = true
weight_decay = 1e-3
[train.schedule]
kind = "step"
milestones = [0.5]
gamma = 0.1
warmup_epochs = 1

` + methods
}

// The optimizer and schedule a method's runs use: the experiment's, key
// by key overridden by the method's tables, or another optimizer's (kind's)
// defaults when the method names another one.
func TestMethodOptimizerOverrides(t *testing.T) {
	exp := Default().Train
	exp.Epochs = 10
	exp.Optimizer = Optimizer{Name: "sgd", LR: 0.05, Momentum: 0.8, Nesterov: true, WeightDecay: 1e-3, Betas: []float64{0.9, 0.999}, Eps: 1e-8}
	exp.Schedule.Kind, exp.Schedule.Milestones, exp.Schedule.Gamma, exp.Schedule.WarmupEpochs = "step", []float64{0.5}, 0.1, 1
	def := Default().Train
	tests := []struct {
		name   string
		method string
		want   func(t *Train)
	}{
		{"no tables", "", func(*Train) {}},
		{"lr only", "[method.optimizer]\nlr = 0.01", func(t *Train) { t.Optimizer.LR = 0.01 }},
		{"same name, two keys", "[method.optimizer]\nname = \"sgd\"\nmomentum = 0\nnesterov = false",
			func(t *Train) { t.Optimizer.Momentum, t.Optimizer.Nesterov = 0, false }},
		{"another name starts from its defaults", "[method.optimizer]\nname = \"adam\"\nlr = 1e-3\nbetas = [0.8, 0.99]",
			func(t *Train) {
				t.Optimizer = def.Optimizer
				t.Optimizer.Name, t.Optimizer.LR, t.Optimizer.Betas = "adam", 1e-3, []float64{0.8, 0.99}
			}},
		{"schedule key", "[method.schedule]\ngamma = 0.5", func(t *Train) { t.Schedule.Gamma = 0.5 }},
		{"another kind starts from its defaults", "[method.schedule]\nkind = \"cosine\"\nmin_lr = 1e-4",
			func(t *Train) {
				t.Schedule = def.Schedule
				t.Schedule.Kind, t.Schedule.MinLR = "cosine", 1e-4
			}},
		{"inline tables", "optimizer = {lr = 0.2}\nschedule = {warmup_epochs = 0}",
			func(t *Train) { t.Optimizer.LR, t.Schedule.WarmupEpochs = 0.2, 0 }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			src := methodOptFile("[[method]]\nname = \"A\"\nplugin = \"sgd\"\n" + tc.method + "\n[[method]]\nname = \"B\"\nplugin = \"sgd\"\n")
			e, err := Parse([]byte(src), "t.toml")
			if err != nil {
				t.Fatal(err)
			}
			if err := Validate(e, testArchs()); err != nil {
				t.Fatal(err)
			}
			want := exp
			want.Optimizer.Betas = []float64{0.9, 0.999}
			want.Schedule.Milestones = []float64{0.5}
			tc.want(&want)
			runs := Grid(e)
			if len(runs) != 2 {
				t.Fatalf("%d runs, want 2", len(runs))
			}
			if got := runs[0].Experiment(e).Train; !reflect.DeepEqual(got, want) {
				t.Errorf("method A trains with\n%+v\nwant\n%+v", got, want)
			}
			if got := runs[1].Experiment(e); got != e {
				t.Errorf("method B, without tables, sees a copy of the experiment")
			}
			if (tc.method == "") != (runs[0].Experiment(e) == e) {
				t.Errorf("method A sees the experiment itself: %v", runs[0].Experiment(e) == e)
			}
			if !reflect.DeepEqual(e.Train.Optimizer.Betas, []float64{0.9, 0.999}) || e.Train.Optimizer.LR != 0.05 {
				t.Errorf("the experiment's optimizer changed: %+v", e.Train.Optimizer)
			}
		})
	}
}

// The method tables are decoded as strictly as [train.optimizer] and
// validated like it, with messages citing the method's keys and lines.
func TestMethodOptimizerErrors(t *testing.T) {
	head := "[[method]]\nname = \"A\"\nplugin = \"sgd\"\n" // lines 16-18
	tests := []struct {
		name, method string
		sets         []string
		want         []string
	}{
		{"unknown key", "[method.optimizer]\nmomentun = 0.5", nil,
			[]string{`t.toml:20: method "A": unknown key "optimizer.momentun"; did you mean "momentum"?`}},
		{"unknown schedule key", "[method.schedule]\nmilestone = [0.5]", nil,
			[]string{`t.toml:20: method "A": unknown key "schedule.milestone"; did you mean "milestones"?`}},
		{"wrong type", "[method.optimizer]\nlr = \"fast\"", nil,
			[]string{`t.toml:20: method "A": optimizer.lr must be a number (got string "fast")`}},
		{"a sweep is refused", "[method.optimizer]\nlr = [0.1, 0.2]", nil,
			[]string{`t.toml:20: method "A": optimizer.lr must be a number (got an array); [method.optimizer] takes one value per key, not a sweep`}},
		{"bad value", "[method.optimizer]\nlr = -1", nil,
			[]string{`t.toml:20: method "A": optimizer.lr must be > 0 (got -1)`}},
		{"unknown name", "[method.optimizer]\nname = \"adamw\"", nil,
			[]string{`t.toml:20: method "A": optimizer.name must be one of sgd, adam (got "adamw"); did you mean "adam"?`}},
		{"key of another optimizer", "[method.optimizer]\nname = \"adam\"\nmomentum = 0.5", nil,
			[]string{`t.toml:21: method "A": optimizer.momentum applies only to optimizer sgd`}},
		{"inherited key checked against the method's", "[method.optimizer]\nmomentum = 0", nil,
			[]string{`t.toml:8: method "A": train.optimizer.nesterov needs optimizer.momentum > 0 (got 0)`}},
		{"schedule key of another kind", "[method.schedule]\nkind = \"cosine\"\ngamma = 0.5", nil,
			[]string{`t.toml:21: method "A": schedule.gamma applies only to schedule kind step`}},
		{"cross-key check with the method's lr", "[method.optimizer]\nlr = 1e-4\n[method.schedule]\nkind = \"cosine\"\nmin_lr = 1e-3", nil,
			[]string{`t.toml:23: method "A": schedule.min_lr must be < optimizer.lr = 0.0001 (got 0.001)`}},
		{"--set", "", []string{"method.A.optimizer.lr=-2"},
			[]string{`t.toml: --set method.A.optimizer.lr=-2: method "A": optimizer.lr must be > 0 (got -2)`}},
		{"--set unknown key", "", []string{"method.A.optimizer.lrr=2"},
			[]string{`t.toml: --set method.A.optimizer.lrr=2: method "A": unknown key "optimizer.lrr"; did you mean "lr"?`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			src := methodOptFile(head + tc.method + "\n")
			e, err := Parse([]byte(src), "t.toml", tc.sets...)
			if err == nil {
				err = Validate(e, testArchs())
			}
			if err == nil {
				t.Fatalf("no error, want %q", tc.want)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error\n%v\nwant it to contain\n%s", err, w)
				}
			}
		})
	}
}

// A message about a method's keys names the method by its name, with the
// keys relative to it, in every check (decoding, Validate, ValidateParams);
// a method whose name cannot tell it from the others (none, an invalid
// one, or one another method has too, ignoring case) keeps its index.
func TestMethodLabels(t *testing.T) {
	tests := []struct {
		name, methods string
		want          []string
	}{
		{"named", "[[method]]\nname = \"A\"\nplugin = \"sgd\"\n[method.optimizer]\nlr = -1\n", []string{
			`t.toml:20: method "A": optimizer.lr must be > 0 (got -1)`,
		}},
		{"a name that needs quoting", "[[method]]\nname = \"Adam + SAM\"\nplugin = \"sgd\"\n[method.optimizer]\nlrr = 1\n", []string{
			`t.toml:20: method "Adam + SAM": unknown key "optimizer.lrr"; did you mean "lr"?`,
		}},
		{"no name", "[[method]]\nplugin = \"sgd\"\n[method.optimizer]\nlr = -1\n", []string{
			`t.toml:16: method[0].name is required`,
			`t.toml:19: method[0].optimizer.lr must be > 0 (got -1)`,
		}},
		{"a name used twice", "[[method]]\nname = \"sam\"\nplugin = \"sgd\"\n[method.optimizer]\nlr = -1\n[[method]]\nname = \"SAM\"\nplugin = \"sgd\"\n", []string{
			`t.toml:20: method[0].optimizer.lr must be > 0 (got -1)`,
			`t.toml:22: method[1].name "SAM" is already used by method[0] (line 16); names must be unique, ignoring case`,
		}},
		{"the other method keeps its name", "[[method]]\nname = \"A\"\nplugin = \"sgd\"\n[[method]]\nname = \"B\"\nplugin = \"sgd\"\n[method.schedule]\ngamma = 2\n", []string{
			`t.toml:23: method "B": schedule.gamma must be in (0, 1] (got 2)`,
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e, err := Parse([]byte(methodOptFile(tc.methods)), "t.toml")
			if err == nil {
				err = Validate(e, testArchs())
			}
			if err == nil {
				t.Fatalf("no error, want %q", tc.want)
			}
			if got, want := err.Error(), strings.Join(tc.want, "\n"); got != want {
				t.Errorf("error\n%s\nwant\n%s", got, want)
			}
		})
	}
}

// --set sets a method's optimizer key as if it were written; a method's
// [method.optimizer] key takes it out of the experiment's sweep of that
// key, and a method naming another optimizer out of every optimizer
// sweep.
func TestMethodOptimizerSetAndSweeps(t *testing.T) {
	src := methodOptFile(`[[method]]
name = "SGD"
plugin = "sgd"
[[method]]
name = "Adam"
plugin = "sgd"
[method.optimizer]
name = "adam"
lr = 1e-3
[[method]]
name = "Slow"
plugin = "sgd"
[method.optimizer]
lr = 0.01
`)
	src = strings.Replace(src, "lr = 0.05", "lr = [0.05, 0.1]", 1)
	src = strings.Replace(src, "momentum = 0.8", "momentum = [0.8, 0.9]", 1)
	e, err := Parse([]byte(src), "t.toml", "method.Adam.optimizer.lr=0.002")
	if err != nil {
		t.Fatal(err)
	}
	if err := Validate(e, testArchs()); err != nil {
		t.Fatal(err)
	}
	var labels []string
	lrs := map[string]float64{}
	for _, r := range Grid(e) {
		labels = append(labels, r.Label)
		lrs[r.Label] = r.Experiment(e).Train.Optimizer.LR
	}
	want := []string{
		"SGD lr=0.05 momentum=0.8", "SGD lr=0.05 momentum=0.9", "SGD lr=0.1 momentum=0.8", "SGD lr=0.1 momentum=0.9",
		"Adam",
		"Slow momentum=0.8", "Slow momentum=0.9",
	}
	if !reflect.DeepEqual(labels, want) {
		t.Errorf("runs %q, want %q", labels, want)
	}
	if lrs["Adam"] != 0.002 || lrs["Slow momentum=0.9"] != 0.01 || lrs["SGD lr=0.1 momentum=0.8"] != 0.1 {
		t.Errorf("learning rates %v", lrs)
	}
	if !e.has("method[1].optimizer.lr") || e.has("method[0].optimizer.lr") || !e.has("train.optimizer.momentum") {
		t.Errorf("has is wrong")
	}
	if k := e.methodKey(1, "optimizer", "momentum"); k != "method[1].optimizer.momentum" {
		t.Errorf("methodKey of a reset optimizer's key = %q", k)
	}
	if k := e.methodKey(2, "optimizer", "momentum"); k != "train.optimizer.momentum" {
		t.Errorf("methodKey of an inherited key = %q", k)
	}
}

// The base optimizer's keys that a plugin owning its update would ignore
// are refused: in its method's [method.optimizer], and in [train.optimizer]
// only when every method owns its update.
func TestValidateOwnsUpdate(t *testing.T) {
	src := methodOptFile(`[[method]]
name = "Lion"
plugin = "lion"
[method.optimizer]
lr = 1e-4
weight_decay = 0.1
[[method]]
name = "SGD"
plugin = "sgd"
`)
	tests := []struct {
		name string
		owns []bool
		sets []string
		want []string
	}{
		{"none owns", []bool{false, false}, nil, nil},
		{"one owns", []bool{true, false}, nil, []string{
			`t.toml:21: method "Lion": optimizer.weight_decay would be ignored: the method's plugin applies its own update (feature "owns-update", or an update rule other than "base") and uses no base optimizer; remove it (only lr applies, as the plugin's StepInput.LR)`,
		}},
		{"every one owns", []bool{true, true}, nil, []string{
			`t.toml:5: train.optimizer.name would be ignored: every method's plugin applies its own update`,
			`t.toml:7: train.optimizer.momentum would be ignored`,
			`t.toml:8: train.optimizer.nesterov would be ignored`,
			`t.toml:9: train.optimizer.weight_decay would be ignored`,
			`t.toml:21: method "Lion": optimizer.weight_decay would be ignored`,
		}},
		{"--set", []bool{false, true}, []string{"method.SGD.optimizer.eps=1e-6"}, []string{
			`t.toml: --set method.SGD.optimizer.eps=1e-6: method "SGD": optimizer.eps would be ignored: the method's plugin`,
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e, err := Parse([]byte(src), "t.toml", tc.sets...)
			if err != nil {
				t.Fatal(err)
			}
			err = ValidateOwnsUpdate(e, func(i int) bool { return tc.owns[i] })
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("no error, want %q", tc.want)
			}
			if got := len(err.(ErrorList)); got != len(tc.want) {
				t.Errorf("%d problems, want %d:\n%v", got, len(tc.want), err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error\n%v\nwant it to contain\n%s", err, w)
				}
			}
		})
	}
}
