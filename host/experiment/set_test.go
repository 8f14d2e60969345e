package experiment

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

// setFile has two methods, one with a name that is not a bare key.
const setFile = `name = "o"
[train]
epochs = 5
[train.optimizer]
lr = 0.1
[[method]]
name = "SAM"
plugin = "sam"
[method.params]
rho = 0.05
[[method]]
name = "SAM big"
plugin = "sam"
`

func TestParseSets(t *testing.T) {
	tests := []struct {
		name  string
		sets  []string
		check func(*Experiment) bool
	}{
		{"integer", []string{"train.epochs=3"}, func(e *Experiment) bool { return e.Train.Epochs == 3 }},
		{"spaces around", []string{"train.epochs = 3"}, func(e *Experiment) bool { return e.Train.Epochs == 3 }},
		{"key the file does not write", []string{"data.validation=0.1"}, func(e *Experiment) bool {
			// A value set by --set counts as written: eval.temperature's
			// default follows it.
			return e.Data.Validation == 0.1 && e.Eval.Temperature == TemperatureValidation
		}},
		{"bare word is a string", []string{"train.device=cuda:1"}, func(e *Experiment) bool { return e.Train.Device == "cuda:1" }},
		{"quoted string", []string{`train.device="cpu"`}, func(e *Experiment) bool { return e.Train.Device == "cpu" }},
		{"later wins", []string{"train.epochs=3", "train.epochs=4"}, func(e *Experiment) bool { return e.Train.Epochs == 4 }},
		{"inline table merges", []string{"train.optimizer={momentum=0.5}"}, func(e *Experiment) bool {
			return e.Train.Optimizer.Momentum == 0.5 && e.Train.Optimizer.LR == 0.1
		}},
		{"train list is a sweep", []string{"train.optimizer.lr=[0.05,0.1]"}, func(e *Experiment) bool {
			return reflect.DeepEqual(e.Sweeps, []Sweep{{"train.optimizer.lr", []any{0.05, 0.1}}})
		}},
		{"method parameter", []string{"method.SAM.params.rho=0.1"}, func(e *Experiment) bool { return e.Methods[0].Params["rho"] == 0.1 }},
		{"method parameter list", []string{"method.SAM.params.rho=[0.02, 0.05]"}, func(e *Experiment) bool {
			return reflect.DeepEqual(e.Methods[0].Params["rho"], []any{0.02, 0.05})
		}},
		{"method with a quoted name", []string{`method."SAM big".params.rho=0.2`}, func(e *Experiment) bool {
			return e.Methods[1].Params["rho"] == 0.2 && len(e.Methods[0].Params) == 1
		}},
		{"method with a literal-quoted name", []string{`method.'SAM big'.plugin=sgd`}, func(e *Experiment) bool { return e.Methods[1].Plugin == "sgd" }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e, err := Parse([]byte(setFile), "o.toml", tc.sets...)
			if err == nil {
				err = Validate(e, testArchs())
			}
			if err != nil {
				t.Fatal(err)
			}
			if !tc.check(e) {
				t.Errorf("--set %q not applied: %+v", tc.sets, e)
			}
		})
	}
}

func TestParseSetErrors(t *testing.T) {
	schema := samSchema()
	schema[0].Range = "[0,)"
	tests := []struct {
		name string
		set  string
		want string
	}{
		{"no value", "train.epochs", `o.toml: --set train.epochs: want KEY=VALUE, e.g. train.epochs=3`},
		{"not TOML", "train.optimizer.lr=[0.1,", `o.toml: --set train.optimizer.lr=[0.1,: not KEY=VALUE with a TOML value`},
		{"unknown top-level table", "nonexistent.key=1", `o.toml: --set nonexistent.key=1: unknown key "nonexistent"`},
		{"a method by index", "method[0].params.rho=0.1", `o.toml: --set method[0].params.rho=0.1: not KEY=VALUE with a TOML key`},
		{"integer out of range", "train.epochs=99999999999999999999", `o.toml: --set train.epochs=99999999999999999999: 99999999999999999999 is out of range: a TOML integer is an int64`},
		{"float out of range", "train.optimizer.lr=1e400", `o.toml: --set train.optimizer.lr=1e400: 1e400 is out of range`},
		{"unknown key", "train.epoch=3", `o.toml: --set train.epoch=3: unknown key "train.epoch"; did you mean "epochs"?`},
		{"wrong type", "train.epochs=ten", `o.toml: --set train.epochs=ten: train.epochs must be an integer (got string "ten")`},
		{"out of range, overriding a line", "train.epochs=0", `o.toml: --set train.epochs=0: train.epochs must be > 0 (got 0)`},
		{"bad sweep element", `train.optimizer.lr=[0.1,"a"]`, `o.toml: --set train.optimizer.lr=[0.1,"a"]: train.optimizer.lr[1] must be a number (got string "a")`},
		{"bad sweep value", `train.optimizer.lr=[0.1,-1]`, `o.toml: --set train.optimizer.lr=[0.1,-1]: train.optimizer.lr must be > 0 (got -1)`},
		{"list where not allowed", "data.validation=[0.1,0.2]", `o.toml: --set data.validation=[0.1,0.2]: data.validation must be a number (got an array); a list of values (a sweep)`},
		{"unknown method", "method.SAMM.params.rho=1", `o.toml: --set method.SAMM.params.rho=1: no [[method]] named "SAMM"; did you mean "SAM"?`},
		{"method replaced", "method=[]", `o.toml: --set method=[]: [[method]] tables cannot be replaced; set a method's key as method.<name>.<key>`},
		{"method as a value", "method.SAM=1", `o.toml: --set method.SAM=1: a method cannot be replaced by a value; set one of its keys, e.g. method.SAM.params.rho=0.1`},
		{"parameter out of the plugin's range", "method.SAM.params.rho=-1", `o.toml: --set method.SAM.params.rho=-1: method "SAM": params.rho -1 is out of range [0,): want ≥ 0`},
		{"parameter list element", "method.SAM.params.rho=[0.1,-1]", `o.toml: --set method.SAM.params.rho=[0.1,-1]: method "SAM": params.rho[1] -1 is out of range [0,): want ≥ 0`},
		{"unknown parameter", "method.SAM.params.rhoo=1", `o.toml: --set method.SAM.params.rhoo=1: method "SAM": unknown parameter "rhoo"; did you mean "rho"?`},
		{"empty parameter list", "method.SAM.params.rho=[]", `o.toml: --set method.SAM.params.rho=[]: method "SAM": params.rho is an empty list; a sweep needs at least one value`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e, err := Parse([]byte(setFile), "o.toml", tc.set)
			if err == nil {
				err = Validate(e, testArchs())
			}
			if err == nil {
				_, err = ValidateParams(e.Methods[0], schema)
			}
			if err == nil || err.Error() != tc.want && !startsWith(err.Error(), tc.want) {
				t.Fatalf("error\n%v\nwant\n%s", err, tc.want)
			}
			var x *Error
			if !errors.As(err, &x) || x.Set != tc.set || x.Line != 0 {
				t.Errorf("error %#v: want Set %q and no line", x, tc.set)
			}
		})
	}
}

func startsWith(s, prefix string) bool { return len(s) >= len(prefix) && s[:len(prefix)] == prefix }

// A --set VALUE with a line break would set further keys of the file, none
// named by KEY (hardening4/13: results_dir and name redirected): refused.
func TestParseSetLineBreak(t *testing.T) {
	for _, set := range []string{
		"train.epochs=1\nresults_dir=\"elsewhere\"\nname=\"other\"",
		"train.epochs=1\r\nresults_dir=\"elsewhere\"",
		"train.device=cpu\rname=x",
	} {
		e, err := Parse([]byte(setFile), "o.toml", set)
		if err == nil || !strings.Contains(err.Error(), "a line break in the override") {
			t.Errorf("%q: err = %v", set, err)
		}
		if err == nil && (e.ResultsDir == "elsewhere" || e.Name == "other") {
			t.Errorf("%q set other keys", set)
		}
	}
}
