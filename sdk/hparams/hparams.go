// Package hparams derives an optimizer's hyperparameter schema from a tagged
// Go struct and applies validated values back onto such a struct.
//
// A hyperparameter is an exported struct field with an `hp:"name"` tag; an
// optional `doc:"..."` tag documents it. The values of the struct passed to
// Specs are the defaults. Supported field kinds are float64 (optim.Float),
// int and int64 (optim.Int), bool (optim.Bool) and string (optim.String).
// Fields without an hp tag, or tagged `hp:"-"`, are not hyperparameters.
// An embedded struct without an hp tag contributes its own hyperparameters,
// so a method that wraps another reuses its Config as it is.
//
// Two more tags constrain values, checked by Apply and Resolve (so by the
// host before training and by the plugin, with the same message):
// `enum:"all|weights"` lists the values a string may take, and
// `range:"[0,)"` gives the interval a number must lie in, "[" and "]"
// inclusive, "(" and ")" exclusive, an empty bound unbounded.
//
//	type Config struct {
//		Rho      float64 `hp:"rho" doc:"neighbourhood radius"`
//		Adaptive bool    `hp:"adaptive" doc:"ASAM scaling"`
//	}
//	specs := hparams.MustSpecs(Config{Rho: 0.05})
//
// Values travel as float64, int64, bool and string (optim.Config.Params).
// Conversions are strict but accept what transports and TOML decoders
// produce: an integer value is accepted for a float hyperparameter, and a
// float64 with an integral value (e.g. from JSON or structpb) for an int one.
package hparams

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"reflect"
	"slices"
	"strings"

	"github.com/optlab/optlab/sdk/optim"
)

// ErrUnknown is wrapped by errors about a hyperparameter name that the
// schema does not have.
var ErrUnknown = errors.New("unknown hyperparameter")

// field is one tagged struct field.
type field struct {
	spec  optim.ParamSpec
	index []int
}

// fields walks the struct type of v (a struct or a pointer to one).
func fields(t reflect.Type) ([]field, error) {
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct {
		return nil, fmt.Errorf("hparams: %v is not a struct", t)
	}
	out, err := walk(t, nil, map[string]bool{})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// walk collects the tagged fields of t, whose index path is at, flattening
// untagged embedded structs.
func walk(t reflect.Type, at []int, seen map[string]bool) ([]field, error) {
	var out []field
	for i := range t.NumField() {
		f := t.Field(i)
		name, ok := f.Tag.Lookup("hp")
		if !ok && f.Anonymous && f.Type.Kind() == reflect.Struct && f.IsExported() {
			inner, err := walk(f.Type, append(slices.Clone(at), f.Index...), seen)
			if err != nil {
				return nil, err
			}
			out = append(out, inner...)
			continue
		}
		if !ok || name == "-" {
			continue
		}
		if !f.IsExported() {
			return nil, fmt.Errorf("hparams: field %s.%s is tagged but unexported", t.Name(), f.Name)
		}
		if name == "" || strings.TrimSpace(name) != name {
			return nil, fmt.Errorf("hparams: field %s.%s has an invalid hp name %q", t.Name(), f.Name, name)
		}
		if seen[name] {
			return nil, fmt.Errorf("hparams: duplicate hyperparameter %q in %s", name, t.Name())
		}
		seen[name] = true
		typ, err := paramType(f.Type)
		if err != nil {
			return nil, fmt.Errorf("hparams: field %s.%s: %w", t.Name(), f.Name, err)
		}
		spec := optim.ParamSpec{Name: name, Type: typ, Doc: f.Tag.Get("doc"), Range: f.Tag.Get("range")}
		if e := f.Tag.Get("enum"); e != "" {
			spec.Enum = strings.Split(e, "|")
		}
		if err := checkConstraints(spec); err != nil {
			return nil, fmt.Errorf("hparams: field %s.%s: %w", t.Name(), f.Name, err)
		}
		out = append(out, field{spec: spec, index: append(slices.Clone(at), f.Index...)})
	}
	return out, nil
}

func paramType(t reflect.Type) (optim.ParamType, error) {
	switch t.Kind() {
	case reflect.Float64:
		return optim.Float, nil
	case reflect.Int, reflect.Int64:
		return optim.Int, nil
	case reflect.Bool:
		return optim.Bool, nil
	case reflect.String:
		return optim.String, nil
	}
	return "", fmt.Errorf("unsupported type %v (want float64, int, int64, bool or string)", t)
}

// Specs returns the schema of the hp-tagged fields of v (a struct or a
// pointer to one), in field order, with v's field values as defaults.
// Int defaults are int64 and float defaults float64.
func Specs(v any) ([]optim.ParamSpec, error) {
	rv := reflect.ValueOf(v)
	if rv.Kind() == reflect.Pointer {
		if rv.IsNil() {
			return nil, errors.New("hparams: nil pointer")
		}
		rv = rv.Elem()
	}
	if !rv.IsValid() {
		return nil, errors.New("hparams: nil value")
	}
	fs, err := fields(rv.Type())
	if err != nil {
		return nil, err
	}
	specs := make([]optim.ParamSpec, len(fs))
	for i, f := range fs {
		specs[i] = f.spec
		fv := rv.FieldByIndex(f.index)

		switch f.spec.Type {
		case optim.Float:
			specs[i].Default = fv.Float()
		case optim.Int:
			specs[i].Default = fv.Int()
		case optim.Bool:
			specs[i].Default = fv.Bool()
		case optim.String:
			specs[i].Default = fv.String()
		}
	}
	for _, sp := range specs {
		if err := Check(sp, sp.Default); err != nil {
			return nil, fmt.Errorf("hparams: default of %q: %w", sp.Name, err)
		}
	}
	return specs, nil
}

// MustSpecs is Specs for use in Info methods; it panics on a malformed
// struct, which is a programming error.
func MustSpecs(v any) []optim.ParamSpec {
	s, err := Specs(v)
	if err != nil {
		panic(err)
	}
	return s
}

// Apply sets the hp-tagged fields of dst (a non-nil pointer to a struct)
// from params. Every key must name a hyperparameter of dst (else the error
// wraps ErrUnknown) and every value must convert to the field's type;
// fields whose names are absent keep their values. On error dst is left
// unchanged. A range bound named after what the host knows ("[1,batch]")
// is left unchecked; ApplyIn checks it.
func Apply(dst any, params map[string]any) error { return ApplyIn(dst, params, nil) }

// ApplyIn is Apply with the named range bounds resolved by b, as a plugin
// whose Configure reads them from the host's Layout does (SAM:
// Bounds{"batch": float64(layout.BatchSize)}), so that it refuses m = 2⁶³−1
// before allocating anything per sub-batch.
func ApplyIn(dst any, params map[string]any, b Bounds) error {
	rv := reflect.ValueOf(dst)
	if rv.Kind() != reflect.Pointer || rv.IsNil() || rv.Elem().Kind() != reflect.Struct {
		return fmt.Errorf("hparams: Apply needs a non-nil pointer to a struct, got %T", dst)
	}
	fs, err := fields(rv.Type())
	if err != nil {
		return err
	}
	byName := make(map[string]field, len(fs))
	for _, f := range fs {
		byName[f.spec.Name] = f
	}
	tmp := reflect.New(rv.Elem().Type()).Elem()
	tmp.Set(rv.Elem())
	for _, name := range slices.Sorted(maps.Keys(params)) {
		f, ok := byName[name]
		if !ok {
			return fmt.Errorf("hparams: %q: %w (have %s)", name, ErrUnknown, names(fs))
		}
		val, err := Convert(f.spec.Type, params[name])
		if err == nil {
			err = CheckIn(f.spec, val, b)
		}
		if err != nil {
			return fmt.Errorf("hparams: %q: %w", name, err)
		}
		fv := tmp.FieldByIndex(f.index)
		switch x := val.(type) {
		case float64:
			fv.SetFloat(x)
		case int64:
			if fv.OverflowInt(x) {
				return fmt.Errorf("hparams: %q: %d overflows %v", name, x, fv.Type())
			}
			fv.SetInt(x)
		case bool:
			fv.SetBool(x)
		case string:
			fv.SetString(x)
		}
	}
	rv.Elem().Set(tmp)
	return nil
}

// Resolve validates given against specs and returns a new map holding every
// spec's value in canonical type (float64, int64, bool, string), with
// defaults filled in for absent names. Unknown names are errors wrapping
// ErrUnknown. This is what a host does before Configure.
func Resolve(specs []optim.ParamSpec, given map[string]any) (map[string]any, error) {
	out := make(map[string]any, len(specs))
	known := make(map[string]optim.ParamSpec, len(specs))
	for _, s := range specs {
		if _, dup := known[s.Name]; dup {
			return nil, fmt.Errorf("hparams: duplicate hyperparameter %q in schema", s.Name)
		}
		known[s.Name] = s
		def, err := Convert(s.Type, s.Default)
		if err != nil {
			return nil, fmt.Errorf("hparams: default of %q: %w", s.Name, err)
		}
		out[s.Name] = def
	}
	for _, name := range slices.Sorted(maps.Keys(given)) {
		s, ok := known[name]
		if !ok {
			all := make([]string, 0, len(specs))
			for _, s := range specs {
				all = append(all, s.Name)
			}
			return nil, fmt.Errorf("hparams: %q: %w (have %s)", name, ErrUnknown, strings.Join(all, ", "))
		}
		v, err := Convert(s.Type, given[name])
		if err == nil {
			err = Check(s, v)
		}
		if err != nil {
			return nil, fmt.Errorf("hparams: %q: %w", name, err)
		}
		out[name] = v
	}
	return out, nil
}

// Convert returns v in the canonical Go type of t: float64, int64, bool or
// string. Integers convert to float; integral floats convert to int.
func Convert(t optim.ParamType, v any) (any, error) {
	switch t {
	case optim.Float:
		switch x := v.(type) {
		case float64:
			return x, nil
		case float32:
			return float64(x), nil
		case int:
			return float64(x), nil
		case int32:
			return float64(x), nil
		case int64:
			return float64(x), nil
		}
	case optim.Int:
		switch x := v.(type) {
		case int:
			return int64(x), nil
		case int32:
			return int64(x), nil
		case int64:
			return x, nil
		case float64:
			if x == math.Trunc(x) && math.Abs(x) <= 1<<53 {
				return int64(x), nil
			}
			return nil, fmt.Errorf("%v is not an integer", x)
		}
	case optim.Bool:
		if x, ok := v.(bool); ok {
			return x, nil
		}
	case optim.String:
		if x, ok := v.(string); ok {
			return x, nil
		}
	default:
		return nil, fmt.Errorf("unknown parameter type %q", t)
	}
	return nil, fmt.Errorf("value %v of type %T is not a valid %s", v, v, t)
}

func names(fs []field) string {
	s := make([]string, len(fs))
	for i, f := range fs {
		s[i] = f.spec.Name
	}
	return strings.Join(s, ", ")
}
