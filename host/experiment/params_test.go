package experiment

import (
	"reflect"
	"strings"
	"testing"

	"github.com/optlab/optlab/sdk/optim"
)

func samSchema() []optim.ParamSpec {
	return []optim.ParamSpec{
		{Name: "rho", Type: optim.Float, Default: 0.05, Doc: "radius"},
		{Name: "adaptive", Type: optim.Bool, Default: false},
		{Name: "members", Type: optim.Int, Default: 1},
		{Name: "norm", Type: optim.String, Default: "l2"},
	}
}

func TestValidateParams(t *testing.T) {
	tests := []struct {
		name   string
		params string // the [method.params] body, starting on line 6
		schema []optim.ParamSpec
		want   map[string]any
		errs   []string
	}{
		{
			name:   "defaults filled in",
			schema: samSchema(),
			want:   map[string]any{"rho": 0.05, "adaptive": false, "members": int64(1), "norm": "l2"},
		},
		{
			name:   "values converted",
			params: "rho = 1\nadaptive = true\nmembers = 5\nnorm = \"linf\"",
			schema: samSchema(),
			want:   map[string]any{"rho": 1.0, "adaptive": true, "members": int64(5), "norm": "linf"},
		},
		{
			name:   "did you mean",
			params: "rhoo = 0.1",
			schema: samSchema(),
			errs:   []string{`t.toml:6: method "SAM": unknown parameter "rhoo"; did you mean "rho"?`},
		},
		{
			name:   "case variant suggests the right case",
			params: "Rho = 0.1",
			schema: samSchema(),
			errs:   []string{`t.toml:6: method "SAM": unknown parameter "Rho"; did you mean "rho"?`},
		},
		{
			name:   "unknown without close match lists names",
			params: "temperature = 0.1",
			schema: samSchema(),
			errs:   []string{`unknown parameter "temperature" (valid parameters: rho, adaptive, members, norm)`},
		},
		{
			name:   "no params accepted",
			params: "x = 1",
			schema: nil,
			errs:   []string{`unknown parameter "x" (there are no parameters)`},
		},
		{
			name:   "float for int",
			params: "members = 2.0",
			schema: samSchema(),
			errs:   []string{`t.toml:6: method "SAM": params.members must be an integer (got float 2; write it without a decimal point)`},
		},
		{
			name:   "string for float",
			params: "rho = \"0.1\"",
			schema: samSchema(),
			errs:   []string{`t.toml:6: method "SAM": params.rho must be a float (got string "0.1")`},
		},
		{
			name:   "wrong bool and string",
			params: "adaptive = 1\nnorm = false",
			schema: samSchema(),
			errs:   []string{`t.toml:6: method "SAM": params.adaptive must be a boolean (got integer 1)`, `t.toml:7: method "SAM": params.norm must be a string (got boolean false)`},
		},
		{
			name:   "non-finite float",
			params: "rho = nan",
			schema: samSchema(),
			errs:   []string{"params.rho must be a finite number (got nan)"},
		},
		{
			name:   "table value",
			params: "rho = {a = 1}",
			schema: samSchema(),
			errs:   []string{"params.rho must be a float (got a table)"},
		},
		{
			name:   "required parameter",
			schema: []optim.ParamSpec{{Name: "k", Type: optim.Int}},
			errs:   []string{`t.toml:2: method "SAM": parameter "k" is required (int)`},
		},
		{
			name:   "required parameter given",
			params: "k = 3",
			schema: []optim.ParamSpec{{Name: "k", Type: optim.Int}},
			want:   map[string]any{"k": int64(3)},
		},
		{
			name:   "bad schema",
			schema: []optim.ParamSpec{{Name: "a", Type: "complex", Default: 1}, {Name: "b", Type: optim.Float, Default: "x"}, {Name: "b", Type: optim.Float, Default: 1.0}},
			errs:   []string{`plugin schema: default of "a": unknown parameter type "complex"`, `plugin schema: default of "b": must be a float (got string "x")`, `plugin schema lists parameter "b" twice`},
		},
		{
			name:   "enum and range tags of the plugin",
			params: "rho = -0.5\nnorm = \"l3\"\nm = 2",
			schema: []optim.ParamSpec{{Name: "rho", Type: optim.Float, Default: 0.05, Range: "[0,)"},
				{Name: "norm", Type: optim.String, Default: "l2", Enum: []string{"l2", "linf"}},
				{Name: "m", Type: optim.Int, Default: 1, Range: "[1,4]"}},
			errs: []string{`t.toml:6: method "SAM": params.rho -0.5 is out of range [0,): want ≥ 0`,
				`t.toml:7: method "SAM": params.norm "l3" is not one of "l2", "linf"`},
		},
		{
			name:   "schema defaults of other Go types",
			schema: []optim.ParamSpec{{Name: "f", Type: optim.Float, Default: float32(0.5)}, {Name: "i", Type: optim.Int, Default: int32(7)}, {Name: "g", Type: optim.Float, Default: 2}},
			want:   map[string]any{"f": 0.5, "i": int64(7), "g": 2.0},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			src := "name = \"x\"\n[[method]]\nname = \"SAM\"\nplugin = \"sam\"\n[method.params]\n" + tc.params + "\n"
			e, err := Parse([]byte(src), "t.toml")
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			got, err := ValidateParams(e.Methods[0], tc.schema)
			if len(tc.errs) == 0 {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				if !reflect.DeepEqual(got, tc.want) {
					t.Errorf("got %#v, want %#v", got, tc.want)
				}
				return
			}
			if err == nil {
				t.Fatalf("no error, want %q", tc.errs)
			}
			for _, w := range tc.errs {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error\n%v\ndoes not contain\n%s", err, w)
				}
			}
		})
	}
}

func TestValidateParamsDoesNotModifyMethod(t *testing.T) {
	m := Method{Name: "m", Params: map[string]any{"rho": int64(1)}}
	if _, err := ValidateParams(m, samSchema()); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(m.Params, map[string]any{"rho": int64(1)}) {
		t.Errorf("Params changed to %#v", m.Params)
	}
}

// A parameter bounded by the batch size (SAM's m, range "[1,batch]") is
// checked against each run's train.batch_size, swept or not (issue 26,
// cases 13 and 14: m = 100 with batches of 64, m = 2⁶³−1).
func TestValidateParamsBatchBound(t *testing.T) {
	schema := []optim.ParamSpec{{Name: "m", Type: optim.Int, Default: 1, Range: "[1,batch]"}}
	src := "name = \"x\"\n[train]\nbatch_size = [64, 128]\n[[method]]\nname = \"SAM\"\nplugin = \"sam\"\n[method.params]\nm = %s\n"
	for _, tc := range []struct {
		m    string
		errs []string // by run, "" for none
	}{
		{"64", []string{"", ""}},
		{"100", []string{`t.toml:8: method "SAM": params.m 100 is out of range [1,batch]: want ≥ 1 and ≤ 64, the batch size`, ""}},
		{"9223372036854775807", []string{"want ≥ 1 and ≤ 64, the batch size", "want ≥ 1 and ≤ 128, the batch size"}},
	} {
		e, err := Parse([]byte(strings.Replace(src, "%s", tc.m, 1)), "t.toml")
		if err != nil {
			t.Fatalf("Parse: %v", err)
		}
		if _, err := ValidateParams(e.Methods[0], schema); err != nil {
			t.Errorf("m = %s: ValidateParams without bounds: %v", tc.m, err)
		}
		runs := Grid(e)
		if len(runs) != 2 {
			t.Fatalf("%d runs, want 2", len(runs))
		}
		for i, r := range runs {
			_, err := ValidateParamsIn(r.Method, schema, RunBounds(r.Experiment(e)))
			switch {
			case tc.errs[i] == "" && err != nil:
				t.Errorf("m = %s, run %d: %v", tc.m, i, err)
			case tc.errs[i] != "" && (err == nil || !strings.Contains(err.Error(), tc.errs[i])):
				t.Errorf("m = %s, run %d: error %v, want %q", tc.m, i, err, tc.errs[i])
			}
		}
	}
}
