package optim_test

import (
	"bytes"
	"reflect"
	"testing"

	"github.com/optlab/optlab/sdk/optim"
)

// Every op of the table has a distinct type and wire name, the registers a
// program counts for it are its Regs, and its format names only its
// fields. (sdk/opset tests the rest: SpecOf, Fields, ops.json.)
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
		p := optim.Prog()
		p.Ops = append(p.Ops, op)
		if n := p.NumRegs(); n != len(s.Regs) {
			t.Errorf("%s: NumRegs %d, table %d registers", s.Name, n, len(s.Regs))
		}
		if l := p.String(); bytes.Contains([]byte(l), []byte("?}")) {
			t.Errorf("%s: format names a field the op lacks: %s", s.Name, l)
		}
	}
}
