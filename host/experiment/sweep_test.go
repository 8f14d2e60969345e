package experiment

import (
	"reflect"
	"strings"
	"testing"

	"github.com/optlab/optlab/sdk/optim"
)

// sweepFile is a file with a [train] body (from line 2) and one method SAM
// (line 7) whose [method.params] body starts on line 11.
func sweepFile(train, params string) string {
	return "name = \"s\"\n" + // 1
		"[train]\n" + // 2
		train + strings.Repeat("\n", 4-strings.Count(train, "\n")) + // 3..6
		"[[method]]\n" + // 7
		"name = \"SAM\"\nplugin = \"sam\"\n" + // 8, 9
		"[method.params]\n" + // 10
		params + "\n" // 11…
}

func TestParseSweeps(t *testing.T) {
	tests := []struct {
		name         string
		train        string
		params       string
		sweeps       []Sweep
		lr           float64
		epochs       int
		paramsWant   map[string]any
		errs         []string
		validateErrs []string
	}{
		{name: "no lists", train: "epochs = 3", params: "rho = 0.05",
			lr: 0.1, epochs: 3, paramsWant: map[string]any{"rho": 0.05}},
		{name: "lr list", train: "optimizer.lr = [0.05, 0.1]", params: "rho = 0.05",
			sweeps: []Sweep{{"train.optimizer.lr", []any{0.05, 0.1}}}, lr: 0.05, epochs: 10, paramsWant: map[string]any{"rho": 0.05}},
		{name: "integers in a number list", train: "optimizer.lr = [1, 0.5]",
			sweeps: []Sweep{{"train.optimizer.lr", []any{1.0, 0.5}}}, lr: 1, epochs: 10, paramsWant: map[string]any{}},
		{name: "integer list, file order", train: "epochs = [2, 1]\noptimizer.lr = [0.05, 0.1]",
			sweeps: []Sweep{{"train.epochs", []any{int64(2), int64(1)}}, {"train.optimizer.lr", []any{0.05, 0.1}}}, lr: 0.05, epochs: 2, paramsWant: map[string]any{}},
		{name: "one value is the value", train: "optimizer.lr = [0.2]", params: "rho = [0.05]",
			lr: 0.2, epochs: 10, paramsWant: map[string]any{"rho": 0.05}},
		{name: "parameter lists stay lists", params: "rho = [0.02, 0.05]\nadaptive = [true, false]\nnorm = [\"l2\", \"linf\"]",
			lr: 0.1, epochs: 10, paramsWant: map[string]any{"rho": []any{0.02, 0.05}, "adaptive": []any{true, false}, "norm": []any{"l2", "linf"}}},
		{name: "empty train list", train: "optimizer.lr = []",
			errs: []string{"s.toml:3: train.optimizer.lr is an empty list; a sweep needs at least one value"}},
		{name: "wrong element type", train: "optimizer.lr = [0.1, \"a\"]",
			errs: []string{`s.toml:3: train.optimizer.lr[1] must be a number (got string "a")`}},
		{name: "float in an integer list", train: "epochs = [1, 2.5]",
			errs: []string{`s.toml:3: train.epochs[1] must be an integer (got float 2.5)`}},
		{name: "list of lists", train: "optimizer.lr = [[0.1], [0.2]]",
			errs: []string{`s.toml:3: train.optimizer.lr[0] must be a number (got an array)`}},
		{name: "value twice", train: "optimizer.lr = [0.1, 0.2, 0.1]",
			errs: []string{"s.toml:3: train.optimizer.lr lists 0.1 twice (elements 0 and 2)"}},
		{name: "integer and float twice", train: "optimizer.lr = [1, 1.0]",
			errs: []string{"s.toml:3: train.optimizer.lr lists 1 twice (elements 0 and 1)"}},
		{name: "zero and negative zero twice", train: "optimizer.weight_decay = [0.0, -0.0]",
			errs: []string{"s.toml:3: train.optimizer.weight_decay lists 0 twice (elements 0 and 1)"}},
		{name: "key that cannot sweep", train: "eval_batch_size = [100, 200]",
			errs: []string{"s.toml:3: train.eval_batch_size must be an integer (got an array); a list of values (a sweep) may be written only for method parameters, the numbers of [train], [train.optimizer] and [train.schedule] other than eval_batch_size, threads and dump_params_every, and data.label_noise.rate and seed"}},
		{name: "data key cannot sweep", train: "optimizer.name = [\"sgd\", \"adam\"]",
			errs: []string{`s.toml:3: train.optimizer.name must be a string (got an array); a list of values (a sweep)`}},
		{name: "empty parameter list", params: "rho = []",
			errs: []string{"s.toml:11: method \"SAM\": params.rho is an empty list; a sweep needs at least one value"}},
		{name: "mixed parameter list", params: "rho = [0.1, \"a\"]",
			errs: []string{"s.toml:11: method \"SAM\": params.rho mixes a string (element 1) with a number (element 0); a sweep's values have one type"}},
		{name: "parameter list of lists", params: "rho = [[0.1]]",
			errs: []string{"s.toml:11: method \"SAM\": params.rho[0] must be a value: a list of values is a sweep, and a sweep cannot hold an array"}},
		{name: "parameter value twice", params: "rho = [1, 1.0]",
			errs: []string{"s.toml:11: method \"SAM\": params.rho lists 1 twice (elements 0 and 1)"}},
		{name: "parameter zero and negative zero", params: "rho = [0.0, -0.0]",
			errs: []string{"s.toml:11: method \"SAM\": params.rho lists 0 twice (elements 0 and 1)"}},
		{name: "each value validated", train: "optimizer.lr = [0.1, -1]",
			sweeps: []Sweep{{"train.optimizer.lr", []any{0.1, -1.0}}}, lr: 0.1, epochs: 10, paramsWant: map[string]any{},
			validateErrs: []string{"s.toml:3: train.optimizer.lr must be > 0 (got -1)"}},
		{name: "each combination validated, once", train: "optimizer.lr = [0.05, 0.1]\nschedule.kind = \"cosine\"\nschedule.min_lr = 0.07\nepochs = [1, 2]",
			sweeps: []Sweep{{"train.optimizer.lr", []any{0.05, 0.1}}, {"train.epochs", []any{int64(1), int64(2)}}}, lr: 0.05, epochs: 1, paramsWant: map[string]any{},
			validateErrs: []string{"s.toml:5: train.schedule.min_lr must be < train.optimizer.lr = 0.05 (got 0.07)"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e, err := Parse([]byte(sweepFile(tc.train, tc.params)), "s.toml")
			if tc.errs != nil {
				checkErrs(t, err, tc.errs)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(e.Sweeps, tc.sweeps) {
				t.Errorf("Sweeps = %v, want %v", e.Sweeps, tc.sweeps)
			}
			if e.Train.Optimizer.LR != tc.lr || e.Train.Epochs != tc.epochs {
				t.Errorf("lr, epochs = %v, %v; want the first values %v, %v", e.Train.Optimizer.LR, e.Train.Epochs, tc.lr, tc.epochs)
			}
			if got := e.Methods[0].Params; !reflect.DeepEqual(got, tc.paramsWant) {
				t.Errorf("Params = %#v, want %#v", got, tc.paramsWant)
			}
			err = Validate(e, testArchs())
			if tc.validateErrs == nil {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			checkErrs(t, err, tc.validateErrs)
			if n := strings.Count(err.Error(), "\n") + 1; n != len(tc.validateErrs) {
				t.Errorf("%d problems reported, want %d:\n%v", n, len(tc.validateErrs), err)
			}
		})
	}
}

// checkErrs fails unless err holds every wanted message.
func checkErrs(t *testing.T, err error, want []string) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error, want %q", want)
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error\n%v\ndoes not contain\n%s", err, w)
		}
	}
}

func TestValidateTooManySettings(t *testing.T) {
	var a, b []string
	for i := range 101 {
		a = append(a, "0."+strings.Repeat("0", 3)+string(rune('1'+i%9))+strings.Repeat("1", i/9))
	}
	for i := range 100 {
		b = append(b, string(rune('1'+i%9))+strings.Repeat("0", i/9))
	}
	src := sweepFile("optimizer.lr = ["+strings.Join(a, ", ")+"]\nepochs = ["+strings.Join(b, ", ")+"]", "")
	e, err := Parse([]byte(src), "s.toml")
	if err != nil {
		t.Fatal(err)
	}
	checkErrs(t, Validate(e, testArchs()), []string{`s.toml:7: method "SAM": its lists of values make more than 10000 settings; sweep fewer values`})
	if runs := Grid(e); len(runs) != 0 {
		t.Errorf("Grid gives %d runs for a method with too many settings, want 0", len(runs))
	}
}

func TestGridSweep(t *testing.T) {
	src := `name = "g"
[model]
archs = ["cnn"]
[train]
seeds = [1, 2]
optimizer.lr = [0.05, 0.1]
[[method]]
name = "SGD"
plugin = "sgd"
[[method]]
name = "SAM"
plugin = "sam"
[method.params]
rho = [0.02, 0.05]
adaptive = true
`
	e, err := Parse([]byte(src), "g.toml")
	if err != nil {
		t.Fatal(err)
	}
	if err := Validate(e, testArchs()); err != nil {
		t.Fatal(err)
	}
	runs := Grid(e)
	type want struct {
		key, label, setting string
		rho                 any
		lr                  float64
	}
	wants := []want{
		{"method=SGD lr=0.05/arch=cnn/seed=1", "SGD lr=0.05", "lr=0.05", nil, 0.05},
		{"method=SGD lr=0.05/arch=cnn/seed=2", "SGD lr=0.05", "lr=0.05", nil, 0.05},
		{"method=SGD lr=0.1/arch=cnn/seed=1", "SGD lr=0.1", "lr=0.1", nil, 0.1},
		{"method=SGD lr=0.1/arch=cnn/seed=2", "SGD lr=0.1", "lr=0.1", nil, 0.1},
		{"method=SAM rho=0.02 lr=0.05/arch=cnn/seed=1", "SAM rho=0.02 lr=0.05", "rho=0.02 lr=0.05", 0.02, 0.05},
		{"method=SAM rho=0.02 lr=0.05/arch=cnn/seed=2", "SAM rho=0.02 lr=0.05", "rho=0.02 lr=0.05", 0.02, 0.05},
		{"method=SAM rho=0.02 lr=0.1/arch=cnn/seed=1", "SAM rho=0.02 lr=0.1", "rho=0.02 lr=0.1", 0.02, 0.1},
		{"method=SAM rho=0.02 lr=0.1/arch=cnn/seed=2", "SAM rho=0.02 lr=0.1", "rho=0.02 lr=0.1", 0.02, 0.1},
		{"method=SAM rho=0.05 lr=0.05/arch=cnn/seed=1", "SAM rho=0.05 lr=0.05", "rho=0.05 lr=0.05", 0.05, 0.05},
		{"method=SAM rho=0.05 lr=0.05/arch=cnn/seed=2", "SAM rho=0.05 lr=0.05", "rho=0.05 lr=0.05", 0.05, 0.05},
		{"method=SAM rho=0.05 lr=0.1/arch=cnn/seed=1", "SAM rho=0.05 lr=0.1", "rho=0.05 lr=0.1", 0.05, 0.1},
		{"method=SAM rho=0.05 lr=0.1/arch=cnn/seed=2", "SAM rho=0.05 lr=0.1", "rho=0.05 lr=0.1", 0.05, 0.1},
	}
	if len(runs) != len(wants) {
		t.Fatalf("%d runs, want %d", len(runs), len(wants))
	}
	for i, r := range runs {
		w := wants[i]
		if r.Index != i || r.Key != w.key || r.Label != w.label || r.SettingString() != w.setting {
			t.Errorf("run %d = %d %q %q %q, want %q %q %q", i, r.Index, r.Key, r.Label, r.SettingString(), w.key, w.label, w.setting)
		}
		if got := r.Method.Params["rho"]; got != w.rho {
			t.Errorf("run %d: rho = %v, want %v", i, got, w.rho)
		}
		if r.Method.Name != strings.Fields(w.label)[0] || r.Method.Params["adaptive"] != nil && r.Method.Params["adaptive"] != true {
			t.Errorf("run %d: method %q params %v", i, r.Method.Name, r.Method.Params)
		}
		if got := r.Experiment(e).Train.Optimizer.LR; got != w.lr {
			t.Errorf("run %d: lr = %v, want %v", i, got, w.lr)
		}
	}
	// The experiment itself is not changed by a run's view of it.
	if e.Train.Optimizer.LR != 0.05 || !reflect.DeepEqual(e.Methods[1].Params["rho"], []any{0.02, 0.05}) {
		t.Errorf("Grid or Run.Experiment changed the experiment: lr %v, rho %v", e.Train.Optimizer.LR, e.Methods[1].Params["rho"])
	}
	// Each run's parameters validate to one value.
	params, err := ValidateParams(runs[4].Method, samSchema())
	if err != nil || params["rho"] != 0.02 {
		t.Errorf("ValidateParams(run 4) = %v, %v; want rho 0.02", params, err)
	}
}

// TestGridKeysUnchanged: a file that sweeps nothing, or whose lists hold
// one value, has the run keys (and parameters) it had before sweeps, so
// runs.jsonl written before still matches.
func TestGridKeysUnchanged(t *testing.T) {
	scalar := "name = \"k\"\n[train]\nseeds = [1, 2]\noptimizer.lr = 0.1\n[[method]]\nname = \"SAM\"\nplugin = \"sam\"\n[method.params]\nrho = 0.05\n"
	lists := "name = \"k\"\n[train]\nseeds = [1, 2]\noptimizer.lr = [0.1]\n[[method]]\nname = \"SAM\"\nplugin = \"sam\"\n[method.params]\nrho = [0.05]\n"
	var grids [][]Run
	for _, src := range []string{scalar, lists} {
		e, err := Parse([]byte(src), "k.toml")
		if err != nil {
			t.Fatal(err)
		}
		if err := Validate(e, testArchs()); err != nil {
			t.Fatal(err)
		}
		if len(e.Sweeps) != 0 || e.Train.Optimizer.LR != 0.1 {
			t.Errorf("sweeps %v, lr %v", e.Sweeps, e.Train.Optimizer.LR)
		}
		if r := Grid(e)[0]; r.Experiment(e) != e {
			t.Error("Run.Experiment copies an experiment it does not change")
		}
		grids = append(grids, Grid(e))
	}
	for _, g := range grids {
		keys := []string{}
		for _, r := range g {
			keys = append(keys, r.Key)
			if r.Label != "SAM" || r.Setting != nil || r.Method.Params["rho"] != 0.05 {
				t.Errorf("run %q: label %q setting %v params %v", r.Key, r.Label, r.Setting, r.Method.Params)
			}
		}
		if want := []string{"method=SAM/arch=cnn/seed=1", "method=SAM/arch=cnn/seed=2"}; !reflect.DeepEqual(keys, want) {
			t.Errorf("keys %q, want %q", keys, want)
		}
	}
}

func TestSettingNames(t *testing.T) {
	src := `name = "n"
[train.optimizer]
name = "adam"
eps = [1e-8, 1e-6]
[[method]]
name = "A"
plugin = "a"
[method.params]
eps = [0.1, 0.2]
mode = ["all", "two words"]
[[method]]
name = "B"
plugin = "b"
`
	e, err := Parse([]byte(src), "n.toml")
	if err != nil {
		t.Fatal(err)
	}
	if err := Validate(e, testArchs()); err != nil {
		t.Fatal(err)
	}
	runs := Grid(e)
	if len(runs) != 8+2 {
		t.Fatalf("%d runs, want 10", len(runs))
	}
	if got, want := runs[1].Label, `A eps=0.1 mode=all train.optimizer.eps=1e-06`; got != want {
		t.Errorf("label %q, want %q (a [train] key named like a swept parameter is written in full)", got, want)
	}
	if got, want := runs[2].Label, `A eps=0.1 mode="two words" train.optimizer.eps=1e-08`; got != want {
		t.Errorf("label %q, want %q", got, want)
	}
	if got, want := runs[9].Label, `B eps=1e-06`; got != want {
		t.Errorf("label %q, want %q", got, want)
	}
}

func TestValidateParamsLists(t *testing.T) {
	schema := []optim.ParamSpec{
		{Name: "rho", Type: optim.Float, Default: 0.05, Range: "[0,)"},
		{Name: "scope", Type: optim.String, Default: "all", Enum: []string{"all", "weights"}},
		{Name: "k", Type: optim.Int, Default: 1},
	}
	tests := []struct {
		params string
		want   map[string]any
		errs   []string
	}{
		{params: "rho = [1, 0.5]\nscope = [\"all\", \"weights\"]",
			want: map[string]any{"rho": []any{1.0, 0.5}, "scope": []any{"all", "weights"}, "k": int64(1)}},
		{params: "rho = [0.1, -1, -2]",
			errs: []string{`s.toml:11: method "SAM": params.rho[1] -1 is out of range [0,): want ≥ 0`, `s.toml:11: method "SAM": params.rho[2] -2 is out of range`}},
		{params: "scope = [\"all\", \"wieghts\"]",
			errs: []string{`s.toml:11: method "SAM": params.scope[1] "wieghts" is not one of "all", "weights"`}},
		{params: "k = [1, 2.5]",
			errs: []string{`s.toml:11: method "SAM": params.k[1] must be an integer (got float 2.5; write it without a decimal point)`}},
	}
	for _, tc := range tests {
		t.Run(tc.params, func(t *testing.T) {
			e, err := Parse([]byte(sweepFile("", tc.params)), "s.toml")
			if err != nil {
				t.Fatal(err)
			}
			got, err := ValidateParams(e.Methods[0], schema)
			if tc.errs != nil {
				checkErrs(t, err, tc.errs)
				return
			}
			if err != nil || !reflect.DeepEqual(got, tc.want) {
				t.Errorf("ValidateParams = %#v, %v; want %#v", got, err, tc.want)
			}
		})
	}
}

// TestGridLabelNoiseSweep: the rate and seed of [data.label_noise] are grid
// dimensions like lr: every run sees its own values in Data.LabelNoise
// (through Run.Experiment), and its label and key name them; the
// experiment keeps the first values. Rate 0 is no noise.
func TestGridLabelNoiseSweep(t *testing.T) {
	src := `name = "robust"
[data.label_noise]
kind = "symmetric"
rate = [0, 0.2, 0.4, 0.6]
seed = [5, 6]
[train]
seeds = [1, 2]
optimizer.lr = [0.05, 0.1]
[[method]]
name = "SGD"
plugin = "sgd"
[[method]]
name = "SAM"
plugin = "sam"
[method.params]
rho = 0.05
`
	e, err := Parse([]byte(src), "robust.toml")
	if err != nil {
		t.Fatal(err)
	}
	if err := Validate(e, testArchs()); err != nil {
		t.Fatal(err)
	}
	wantSweeps := []Sweep{{"data.label_noise.rate", []any{0.0, 0.2, 0.4, 0.6}}, {"data.label_noise.seed", []any{int64(5), int64(6)}}, {"train.optimizer.lr", []any{0.05, 0.1}}}
	if !reflect.DeepEqual(e.Sweeps, wantSweeps) {
		t.Errorf("Sweeps = %v, want %v", e.Sweeps, wantSweeps)
	}
	runs := Grid(e)
	// 2 methods × (4 rates × 2 noise seeds × 2 lr) × 1 arch × 2 seeds.
	if len(runs) != 2*16*2 {
		t.Fatalf("%d runs, want 64", len(runs))
	}
	tests := []struct {
		i     int
		key   string
		rate  float64
		seed  int64
		lr    float64
		noisy bool
	}{
		{0, "method=SGD rate=0 label_noise.seed=5 lr=0.05/arch=cnn/seed=1", 0, 5, 0.05, false},
		{3, "method=SGD rate=0 label_noise.seed=5 lr=0.1/arch=cnn/seed=2", 0, 5, 0.1, false},
		{4, "method=SGD rate=0 label_noise.seed=6 lr=0.05/arch=cnn/seed=1", 0, 6, 0.05, false},
		{8, "method=SGD rate=0.2 label_noise.seed=5 lr=0.05/arch=cnn/seed=1", 0.2, 5, 0.05, true},
		{31, "method=SGD rate=0.6 label_noise.seed=6 lr=0.1/arch=cnn/seed=2", 0.6, 6, 0.1, true},
		{32 + 17, "method=SAM rate=0.4 label_noise.seed=5 lr=0.05/arch=cnn/seed=2", 0.4, 5, 0.05, true},
	}
	for _, tc := range tests {
		r := runs[tc.i]
		if r.Key != tc.key {
			t.Errorf("run %d: key %q, want %q", tc.i, r.Key, tc.key)
		}
		re := r.Experiment(e)
		if n := re.Data.LabelNoise; n.Rate != tc.rate || n.Seed != tc.seed || n.Kind != NoiseSymmetric || n.Active() != tc.noisy {
			t.Errorf("run %d: label noise %+v (active %v), want rate %v seed %d (active %v)", tc.i, n, n.Active(), tc.rate, tc.seed, tc.noisy)
		}
		if re.Train.Optimizer.LR != tc.lr {
			t.Errorf("run %d: lr %v, want %v", tc.i, re.Train.Optimizer.LR, tc.lr)
		}
	}
	if n := e.Data.LabelNoise; n.Rate != 0 || n.Seed != 5 {
		t.Errorf("the experiment's label noise is %+v, want the first values (rate 0, seed 5)", n)
	}
}

// TestLabelNoiseSweepChecks: every value of a label-noise list is checked,
// each problem reported once however many other lists combine with it.
func TestLabelNoiseSweepChecks(t *testing.T) {
	file := func(noise string) string {
		return "name = \"n\"\n" + // 1
			"[data.label_noise]\n" + // 2
			noise + "\n" + // 3, 4
			"[train]\noptimizer.lr = [0.05, 0.1]\nepochs = [1, 2]\n" + // 5..7
			"[[method]]\nname = \"SGD\"\nplugin = \"sgd\"\n"
	}
	tests := []struct {
		name, noise  string
		errs         []string
		validateErrs []string
	}{
		{name: "valid", noise: "kind = \"pairflip\"\nrate = [0, 0.2, 0.99]"},
		{name: "rate out of range", noise: "kind = \"pairflip\"\nrate = [0, 0.2, 1]",
			validateErrs: []string{"n.toml:4: data.label_noise.rate must be in [0, 1) (got 1)"}},
		{name: "negative rate", noise: "kind = \"symmetric\"\nrate = [-0.1, 0.2]",
			validateErrs: []string{"n.toml:4: data.label_noise.rate must be in [0, 1) (got -0.1)"}},
		{name: "rate list without kind", noise: "rate = [0.1, 0.2]",
			validateErrs: []string{"n.toml:2: data.label_noise.kind is required when [data.label_noise] is written"}},
		{name: "rate twice", noise: "kind = \"symmetric\"\nrate = [0.2, 0.20]",
			errs: []string{"n.toml:4: data.label_noise.rate lists 0.2 twice (elements 0 and 1)"}},
		{name: "empty rate list", noise: "kind = \"symmetric\"\nrate = []",
			errs: []string{"n.toml:4: data.label_noise.rate is an empty list; a sweep needs at least one value"}},
		{name: "float seed", noise: "kind = \"symmetric\"\nrate = 0.1\nseed = [1, 2.5]",
			errs: []string{"n.toml:5: data.label_noise.seed[1] must be an integer (got float 2.5)"}},
		{name: "map cannot sweep", noise: "kind = \"asymmetric\"\nrate = 0.1\nmap = [{1 = 2}, {2 = 1}]",
			errs: []string{"data.label_noise.map must be a table"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e, err := Parse([]byte(file(tc.noise)), "n.toml")
			if tc.errs != nil {
				checkErrs(t, err, tc.errs)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			err = Validate(e, testArchs())
			if tc.validateErrs == nil {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			checkErrs(t, err, tc.validateErrs)
			if n := strings.Count(err.Error(), "\n") + 1; n != len(tc.validateErrs) {
				t.Errorf("%d problems reported, want %d:\n%v", n, len(tc.validateErrs), err)
			}
		})
	}
}
