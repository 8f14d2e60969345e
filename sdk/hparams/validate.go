package hparams

import (
	"errors"
	"fmt"
	"reflect"

	"github.com/optlab/optlab/sdk/optim"
)

// Validate checks the hp-tagged fields of v (a struct or a pointer to one)
// against their enum and range tags, with the messages of Apply: for a
// configuration built as a Go value (a method reusing another's Config)
// rather than applied from params, which Apply has checked already.
func Validate(v any) error {
	rv := reflect.ValueOf(v)
	if rv.Kind() == reflect.Pointer {
		if rv.IsNil() {
			return errors.New("hparams: nil pointer")
		}
		rv = rv.Elem()
	}
	if !rv.IsValid() {
		return errors.New("hparams: nil value")
	}
	fs, err := fields(rv.Type())
	if err != nil {
		return err
	}
	for _, f := range fs {
		if err := Check(f.spec, canonical(rv.FieldByIndex(f.index), f.spec.Type)); err != nil {
			return fmt.Errorf("hparams: %q: %w", f.spec.Name, err)
		}
	}
	return nil
}

// canonical returns the value of a field of type t as Convert would.
func canonical(fv reflect.Value, t optim.ParamType) any {
	switch t {
	case optim.Float:
		return fv.Float()
	case optim.Int:
		return fv.Int()
	case optim.Bool:
		return fv.Bool()
	}
	return fv.String()
}

// Changed returns, by name and in canonical types (float64, int64, bool,
// string), the hyperparameters of after whose values differ from before's:
// what an optimizer's Configure derived, for optim.Resolver, when before
// is its configuration as given (defaults and params applied) and after
// the one it resolved (-1 "auto" and "" "the mode's" made concrete). Nil
// when nothing differs. before and after must be values of, or non-nil
// pointers to, one struct type that Specs accepts; anything else is a
// programming error, and Changed panics.
func Changed(before, after any) map[string]any {
	b, a := reflect.Indirect(reflect.ValueOf(before)), reflect.Indirect(reflect.ValueOf(after))
	if !b.IsValid() || !a.IsValid() || b.Type() != a.Type() {
		panic(fmt.Sprintf("hparams: Changed needs two values of one struct type, got %T and %T", before, after))
	}
	fs, err := fields(a.Type())
	if err != nil {
		panic(err)
	}
	var out map[string]any
	for _, f := range fs {
		bv, av := canonical(b.FieldByIndex(f.index), f.spec.Type), canonical(a.FieldByIndex(f.index), f.spec.Type)
		if bv == av {
			continue
		}
		if out == nil {
			out = map[string]any{}
		}
		out[f.spec.Name] = av
	}
	return out
}
