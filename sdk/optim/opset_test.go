package optim_test

import (
	"bytes"
	"flag"
	"os"
	"reflect"
	"testing"

	"github.com/optlab/optlab/sdk/optim"
)

var update = flag.Bool("update", false, "rewrite sdk/python/optlab/ops.json and testdata/listing_all_ops.txt")

// The Python SDK takes its ops from ops.json; it must be the op table.
func TestOpSetJSON(t *testing.T) {
	got, err := optim.OpSetJSON()
	if err != nil {
		t.Fatal(err)
	}
	const path = "../python/optlab/ops.json"
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./optim -update)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s is not the op table: run `go test ./optim -run TestOpSetJSON -update` in sdk/", path)
	}
}

// Every op of the table has a distinct type and wire name, its register
// count agrees with Emits, and its format names only its fields.
func TestOpSet(t *testing.T) {
	seen := map[string]bool{}
	for _, s := range optim.OpSet() {
		if seen[s.Wire] || seen[s.Name] {
			t.Errorf("%s/%s listed twice", s.Name, s.Wire)
		}
		seen[s.Wire], seen[s.Name] = true, true
		op := reflect.New(s.Type).Elem().Interface().(optim.Op)
		if optim.OpName(op) != s.Name {
			t.Errorf("%s: Go type %s", s.Name, optim.OpName(op))
		}
		if n := optim.Emits(op); n != len(s.Regs) {
			t.Errorf("%s: Emits %d, table %d registers", s.Name, n, len(s.Regs))
		}
		if spec, ok := optim.SpecOf(reflect.New(s.Type).Interface().(optim.Op)); !ok || spec.Name != s.Name {
			t.Errorf("SpecOf(*%s) = %v, %v", s.Name, spec.Name, ok)
		}
		p := optim.Prog()
		p.Ops = append(p.Ops, op)
		if l := p.String(); bytes.Contains([]byte(l), []byte("?}")) {
			t.Errorf("%s: format names a field the op lacks: %s", s.Name, l)
		}
		for _, f := range s.Fields() {
			if f.Kind == "" {
				t.Errorf("%s.%s has no protocol kind", s.Name, f.Name)
			}
		}
	}
}
