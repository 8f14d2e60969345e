package experiment

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/optlab/optlab/sdk/hparams"
	"github.com/optlab/optlab/sdk/optim"
)

// ValidateParams checks m.Params ([method.params]) against a plugin's
// hyperparameter schema and returns the complete parameter map for
// optim.Config.Params: every schema name, with the value from the file or
// the spec's default, converted to the canonical Go type (optim.Float →
// float64, optim.Int → int64, optim.Bool → bool, optim.String → string).
//
// Rules: a key not in the schema is an error with a did-you-mean
// suggestion (or the list of valid names); a TOML integer is accepted for a
// float parameter, but a float is not accepted for an int parameter; float
// parameters must be finite; a spec whose Default is nil is required. A
// schema with duplicate or empty names, an unknown type, or a default of
// the wrong type is reported as a plugin error. Problems cite the lines in
// m.ParamLines and are returned together as an ErrorList.
//
// A swept parameter (a list of values, see Grid) has each value checked,
// messages naming the element ("params.rho[1]"), and maps to the list of
// its converted values; the Method of each of Grid's runs holds one value
// instead, and ValidateParams of it gives that run's parameters.
func ValidateParams(m Method, schema []optim.ParamSpec) (map[string]any, error) {
	return ValidateParamsIn(m, schema, nil)
}

// ValidateParamsIn is ValidateParams with the range bounds a plugin may name
// resolved by b: a run's is RunBounds of its experiment, so that SAM's m
// (range "[1,batch]") larger than train.batch_size is refused by check
// instead of failing every run at its first step.
func ValidateParamsIn(m Method, schema []optim.ParamSpec, b hparams.Bounds) (map[string]any, error) {
	c := &errs{file: m.File, sets: m.sets}
	label := "method " + strconv.Quote(m.Name)
	out := make(map[string]any, len(schema))
	specs := make(map[string]optim.ParamSpec, len(schema))
	names := make([]string, 0, len(schema))
	for _, s := range schema {
		switch _, dup := specs[s.Name]; {
		case s.Name == "":
			c.add(m.Line, "", "%s: plugin schema has a parameter with an empty name", label)
			continue
		case dup:
			c.add(m.Line, "", "%s: plugin schema lists parameter %q twice", label, s.Name)
			continue
		}
		specs[s.Name] = s
		names = append(names, s.Name)
		if s.Default == nil {
			continue
		}
		def, err := convertParam(s.Type, s.Default)
		if err != nil {
			c.add(m.Line, "", "%s: plugin schema: default of %q: %v", label, s.Name, err)
			continue
		}
		out[s.Name] = def
	}

	keys := make([]string, 0, len(m.Params))
	for k := range m.Params {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b string) int {
		return cmp.Or(cmp.Compare(m.ParamLines[a], m.ParamLines[b]), cmp.Compare(a, b))
	})
	for _, k := range keys {
		key := "params." + keyPath{k}.String()
		line := m.ParamLines[k]
		if line == 0 {
			line = m.Line
		}
		s, ok := specs[k]
		if !ok {
			c.add(line, key, "%s: unknown parameter %q%s", label, k, suggestion(k, names, "parameters"))
			continue
		}
		if list, ok := m.Params[k].([]any); ok {
			vals := make([]any, len(list))
			good := true
			for i, x := range list {
				ek := key + "[" + strconv.Itoa(i) + "]"
				var err error
				if vals[i], err = checkParam(s, x, b); err != nil {
					c.add(line, ek, "%s: %s %v", label, ek, err)
					good = false
				}
			}
			if good {
				out[k] = vals
			}
			continue
		}
		val, err := checkParam(s, m.Params[k], b)
		if err != nil {
			c.add(line, key, "%s: %s %v", label, key, err)
			continue
		}
		out[k] = val
	}
	for _, s := range schema {
		if _, ok := out[s.Name]; !ok && s.Default == nil && s.Name != "" {
			if _, given := m.Params[s.Name]; !given {
				c.add(m.Line, "params."+s.Name, "%s: parameter %q is required (%s)", label, s.Name, s.Type)
			}
		}
	}
	if err := c.err(); err != nil {
		return nil, err
	}
	return out, nil
}

// checkParam converts v to the type of s and checks it against the
// plugin's enum and range tags.
func checkParam(s optim.ParamSpec, v any, b hparams.Bounds) (any, error) {
	val, err := convertParam(s.Type, v)
	if err != nil {
		return nil, err
	}
	return val, hparams.CheckIn(s, val, b)
}

// RunBounds returns the values of the named range bounds (see
// hparams.Bounds) for a run of e, e as the run sees it (Run.Experiment):
// "batch" is train.batch_size, the samples of every training step's batch.
// A bound whose key is not valid (a batch size < 1, which Validate
// refuses) is left out, unbounded, so that checking the hyperparameters
// of an experiment with that mistake (grid.Prepare) adds no problem that
// follows from it.
func RunBounds(e *Experiment) hparams.Bounds {
	if e.Train.BatchSize < 1 {
		return hparams.Bounds{}
	}
	return hparams.Bounds{"batch": float64(e.Train.BatchSize)}
}

// convertParam converts a decoded TOML value (or a schema default, which
// may use any Go integer or float type) to the canonical type of t.
func convertParam(t optim.ParamType, v any) (any, error) {
	switch t {
	case optim.Float:
		var f float64
		switch x := v.(type) {
		case float64:
			f = x
		case float32:
			f = float64(x)
		default:
			n, ok := asInt64(v)
			if !ok {
				return nil, typeErr("a float", v)
			}
			if n > maxExactFloatInt || n < -maxExactFloatInt {
				return nil, fmt.Errorf("integer %d is too large to be represented exactly as a float", n)
			}
			f = float64(n)
		}
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return nil, fmt.Errorf("must be a finite number (got %s)", formatFloat(f))
		}
		return f, nil
	case optim.Int:
		n, ok := asInt64(v)
		if !ok {
			return nil, typeErr("an integer", v)
		}
		return n, nil
	case optim.Bool:
		if b, ok := v.(bool); ok {
			return b, nil
		}
		return nil, typeErr("a boolean", v)
	case optim.String:
		if s, ok := v.(string); ok {
			return s, nil
		}
		return nil, typeErr("a string", v)
	}
	return nil, fmt.Errorf("unknown parameter type %q (want %s, %s, %s or %s)", t, optim.Float, optim.Int, optim.Bool, optim.String)
}

// asInt64 returns v as an int64 if it is a Go integer that fits.
func asInt64(v any) (int64, bool) {
	switch x := v.(type) {
	case int64:
		return x, true
	case int:
		return int64(x), true
	case int32:
		return int64(x), true
	case int16:
		return int64(x), true
	case int8:
		return int64(x), true
	case uint8:
		return int64(x), true
	case uint16:
		return int64(x), true
	case uint32:
		return int64(x), true
	case uint:
		return int64(x), x <= math.MaxInt64
	case uint64:
		return int64(x), x <= math.MaxInt64
	}
	return 0, false
}

func typeErr(want string, got any) error {
	d := describe(got)
	if strings.HasPrefix(d, "float ") && want == "an integer" {
		return fmt.Errorf("must be %s (got %s; write it without a decimal point)", want, d)
	}
	return fmt.Errorf("must be %s (got %s)", want, d)
}

// ValidateOwnsUpdate refuses the base optimizer's keys that would be
// ignored because the methods' plugins apply their own update
// (optim.Features.OwnsUpdate; owns reports it for the method of each index):
// the keys of BaseOptimizerKeys written in the [method.optimizer] of such
// a method, and those written in [train.optimizer] (or set by --set) when
// every method owns its update (otherwise they are for the other
// methods). lr stays allowed: it reaches the plugin as StepInput.LR. The
// problems cite the keys' lines, as an ErrorList; nil when there are none.
func ValidateOwnsUpdate(e *Experiment, owns func(method int) bool) error {
	c := &errs{file: e.File, sets: e.sets, names: methodNames(e)}
	all := len(e.Methods) > 0
	for i := range e.Methods {
		if !owns(i) {
			all = false
			continue
		}
		for _, k := range BaseOptimizerKeys() {
			if key := fmt.Sprintf("method[%d].optimizer.%s", i, k); e.has(key) {
				c.add(e.Line(key), key, "%s would be ignored: the method's plugin applies its own update (feature %q, or an update rule other than \"base\") and uses no base optimizer; remove it (only lr applies, as the plugin's StepInput.LR)",
					key, "owns-update")
			}
		}
	}
	if all {
		for _, k := range BaseOptimizerKeys() {
			if key := "train.optimizer." + k; e.has(key) {
				c.add(e.Line(key), key, "%s would be ignored: every method's plugin applies its own update (feature %q, or an update rule other than \"base\") and uses no base optimizer; remove it (only lr applies, as the plugins' StepInput.LR)",
					key, "owns-update")
			}
		}
	}
	return c.err()
}
