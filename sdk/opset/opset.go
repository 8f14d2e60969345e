// Package opset is the op set as hosts and other SDKs see it: the table
// (optim.OpSet, with each op's fields and their protocol kinds, and as the
// JSON that SDKs in other languages read), the argument checker that every
// host runs before an op, results, immediates, and handle naming in errors.
// Plugin authors write against package optim alone; the hosts (the engine,
// optimtest's exact host), the wire and sdk/serve use this package too.
package opset

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"

	"github.com/optlab/optlab/sdk/optim"
)

// SpecOf returns the row of the op table (optim.OpSet) of op's type (a
// value or a pointer), and whether it has one.
func SpecOf(op optim.Op) (optim.OpSpec, bool) { return specIn(optim.OpSet(), op) }

// specIn returns the row of table for op's type.
func specIn(table []optim.OpSpec, op optim.Op) (optim.OpSpec, bool) {
	if op == nil {
		return optim.OpSpec{}, false
	}
	t := reflect.TypeOf(op)
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	for _, s := range table {
		if s.Type == t {
			return s, true
		}
	}
	return optim.OpSpec{}, false
}

// Emits returns the number of registers op sets (its table row's Regs): 1
// for Dot, Norm, Arith and SegReduce, 2 for Grad and JointGrad, else 0.
func Emits(op optim.Op) int {
	s, _ := SpecOf(op)
	return len(s.Regs)
}

// FieldSpec describes one field of an op (or of Batch or Term, the
// messages inside ops).
type FieldSpec struct {
	// Name is the Go field name; Wire the protocol's (snake case).
	Name, Wire string
	// Kind is the field's type in the protocol: "vec", "vecs", "num",
	// "reg", "terms", "batch", "bool", "int32", "int64", "float", "string",
	// or "enum:<Type>" for the kinds and modes.
	Kind string
	// Type is the field's Go type.
	Type reflect.Type
}

// Fields returns the fields of t, an op's Go type (OpSpec.Type) or Batch or
// Term: its exported fields, in order, with their wire names and protocol
// kinds. It panics on a field type that has no protocol kind.
func Fields(t reflect.Type) []FieldSpec {
	var out []FieldSpec
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		out = append(out, FieldSpec{Name: f.Name, Wire: snake(f.Name), Kind: fieldKind(f.Type), Type: f.Type})
	}
	return out
}

// snake turns a Go field name into the protocol's: OutRho → out_rho,
// LR → lr, ID → id.
func snake(s string) string {
	var b strings.Builder
	for i, r := range s {
		if r >= 'A' && r <= 'Z' {
			if i > 0 && !(s[i-1] >= 'A' && s[i-1] <= 'Z') {
				b.WriteByte('_')
			}
			b.WriteRune(r + 'a' - 'A')
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

// fieldKind returns the protocol kind of an op field's Go type.
func fieldKind(t reflect.Type) string {
	switch t {
	case reflect.TypeFor[optim.Vec]():
		return "vec"
	case reflect.TypeFor[optim.Num]():
		return "num"
	case reflect.TypeFor[optim.Reg]():
		return "reg"
	case reflect.TypeFor[optim.Batch]():
		return "batch"
	case reflect.TypeFor[[]optim.Term]():
		return "terms"
	case reflect.TypeFor[[]optim.Vec]():
		return "vecs"
	}
	if t.PkgPath() == reflect.TypeFor[optim.Vec]().PkgPath() && t.Kind() == reflect.Int32 {
		return "enum:" + t.Name()
	}
	switch t.Kind() {
	case reflect.Bool:
		return "bool"
	case reflect.Int32:
		return "int32"
	case reflect.Int64:
		return "int64"
	case reflect.Float64:
		return "float"
	case reflect.String:
		return "string"
	}
	panic(fmt.Sprintf("opset: op field type %v has no protocol kind", t))
}

// Enums are the enumerations of the op set by Go type name, with their
// names (as listings print them) and numbers (as the wire carries them).
func Enums() map[string]map[string]int32 {
	out := map[string]map[string]int32{}
	add := func(name string, n int32, str func(int32) string) {
		m := map[string]int32{}
		for i := range n {
			if s := str(i); !strings.Contains(s, "(") {
				m[s] = i
			}
		}
		out[name] = m
	}
	add("UnaryKind", 16, func(i int32) string { return optim.UnaryKind(i).String() })
	add("BinaryKind", 16, func(i int32) string { return optim.BinaryKind(i).String() })
	add("BNMode", 4, func(i int32) string { return optim.BNMode(i).String() })
	add("ArithKind", 16, func(i int32) string { return optim.ArithKind(i).String() })
	add("SegKind", 8, func(i int32) string { return optim.SegKind(i).String() })
	add("Segmentation", 4, func(i int32) string { return optim.Segmentation(i).String() })
	add("VecShape", 4, func(i int32) string { return optim.VecShape(i).String() })
	add("MatFuncKind", 8, func(i int32) string { return optim.MatFuncKind(i).String() })
	return out
}

// OpSetJSON returns the op table as JSON, for SDKs in other languages
// (sdk/python reads it from optlab/ops.json, which a test keeps equal to
// this): the protocol minor, the optional features (optim.FeatureSet),
// every op with its wire name, minor, registers, listing format and fields
// (Go and wire names, protocol kind), and the enumerations by name.
func OpSetJSON() ([]byte, error) {
	type field struct {
		Name string `json:"name"`
		Wire string `json:"wire"`
		Kind string `json:"kind"`
	}
	type op struct {
		Name   string   `json:"name"`
		Wire   string   `json:"wire"`
		Since  int      `json:"since"`
		Regs   []string `json:"regs"`
		Segs   bool     `json:"segs,omitempty"`
		Arith  bool     `json:"arith,omitempty"`
		Format string   `json:"format"`
		Fields []field  `json:"fields"`
	}
	type feature struct {
		Name   string `json:"name"`
		Field  string `json:"field"`
		Method string `json:"method,omitempty"`
		Since  int    `json:"since"`
		Doc    string `json:"doc"`
	}
	doc := struct {
		ProtocolMinor int                         `json:"protocol_minor"`
		Features      []feature                   `json:"features"`
		Ops           []op                        `json:"ops"`
		Enums         map[string]map[string]int32 `json:"enums"`
	}{ProtocolMinor: optim.ProtocolMinor, Enums: Enums()}
	for _, f := range optim.FeatureSet() {
		doc.Features = append(doc.Features, feature{Name: f.Name, Field: f.Field, Method: f.Method, Since: f.Since, Doc: f.Doc})
	}
	for _, s := range optim.OpSet() {
		o := op{Name: s.Name, Wire: s.Wire, Since: s.Since, Regs: s.Regs, Segs: s.Segs, Arith: s.Arith, Format: s.Format}
		if o.Regs == nil {
			o.Regs = []string{}
		}
		for _, f := range Fields(s.Type) {
			o.Fields = append(o.Fields, field{Name: f.Name, Wire: f.Wire, Kind: f.Kind})
		}
		doc.Ops = append(doc.Ops, o)
	}
	b, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}
