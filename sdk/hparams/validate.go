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
