package opset_test

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/optlab/optlab/sdk/opset"
	"github.com/optlab/optlab/sdk/optim"
)

var update = flag.Bool("update", false, "rewrite sdk/python/optlab/ops.json")

// The Python SDK takes its ops from ops.json; it must be the op table.
func TestOpSetJSON(t *testing.T) {
	got, err := opset.OpSetJSON()
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
		t.Fatalf("%v (run go test ./opset -update)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s is not the op table: run `go test ./opset -run TestOpSetJSON -update` in sdk/", path)
	}
}

// SpecOf finds every op of the table by value and by pointer, Emits agrees
// with the registers a program's builder counts (optim's own count), and
// every field has a protocol kind.
func TestOpSet(t *testing.T) {
	for _, s := range optim.OpSet() {
		op := reflect.New(s.Type).Elem().Interface().(optim.Op)
		for _, o := range []optim.Op{op, reflect.New(s.Type).Interface().(optim.Op)} {
			if spec, ok := opset.SpecOf(o); !ok || spec.Name != s.Name {
				t.Errorf("SpecOf(%T) = %v, %v", o, spec.Name, ok)
			}
		}
		p := optim.Prog()
		p.Ops = append(p.Ops, op)
		if n := opset.Emits(op); n != len(s.Regs) || n != p.NumRegs() {
			t.Errorf("%s: Emits %d, table %d registers, NumRegs %d", s.Name, n, len(s.Regs), p.NumRegs())
		}
		for _, f := range opset.Fields(s.Type) {
			if f.Kind == "" || f.Wire == "" {
				t.Errorf("%s.%s has no protocol kind or wire name", s.Name, f.Name)
			}
		}
	}
	if _, ok := opset.SpecOf(nil); ok {
		t.Error("SpecOf(nil) has a row")
	}
	if n := opset.Emits(nil); n != 0 {
		t.Errorf("Emits(nil) = %d", n)
	}
	want := []opset.FieldSpec{
		{Name: "Out", Wire: "out", Kind: "vec"}, {Name: "At", Wire: "at", Kind: "vec"}, {Name: "Batch", Wire: "batch", Kind: "batch"},
		{Name: "BN", Wire: "bn", Kind: "enum:BNMode"}, {Name: "Eps", Wire: "eps", Kind: "vec"}, {Name: "OutRho", Wire: "out_rho", Kind: "vec"},
		{Name: "OutLosses", Wire: "out_losses", Kind: "vec"}, {Name: "Rank", Wire: "rank", Kind: "vec"}, {Name: "Keep", Wire: "keep", Kind: "int64"},
	}
	got := opset.Fields(reflect.TypeFor[optim.Grad]())
	for i := range got {
		got[i].Type = nil
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Fields(Grad) = %+v\nwant %+v", got, want)
	}
}

func TestEnums(t *testing.T) {
	e := opset.Enums()
	if e["UnaryKind"]["softplus"] != int32(optim.Softplus) || e["Segmentation"]["row"] != int32(optim.PerRow) || e["BNMode"]["freeze"] != int32(optim.BNFreeze) {
		t.Errorf("Enums = %v", e)
	}
	if _, ok := e["ArithKind"]["ArithKind(0)"]; ok || len(e["ArithKind"]) != 9 {
		t.Errorf("ArithKind names: %v", e["ArithKind"])
	}
}

func TestNewResult(t *testing.T) {
	p := optim.Prog()
	n := p.Norm(1)
	ev := p.Grad(2, optim.Params, optim.Batch{}, optim.BNUpdate)
	p.Read(n, ev.Acc)
	r, err := opset.NewResult(p, []float64{10, 40})
	if err != nil || r.Program != p || r.Get(n) != 10 || r.Get(ev.Acc) != 40 {
		t.Fatalf("NewResult = %+v, %v", r, err)
	}
	for _, vals := range [][]float64{nil, {1}, {1, 2, 3}} {
		if _, err := opset.NewResult(p, vals); err == nil || !strings.Contains(err.Error(), "for 2 Read ops") {
			t.Errorf("NewResult with %d values: %v", len(vals), err)
		}
	}
	if r, err := opset.NewResult(nil, nil); err != nil || len(r.Reads) != 0 {
		t.Errorf("NewResult(nil, nil) = %v, %v", r, err)
	}
	if _, err := opset.NewResult(nil, []float64{1}); err == nil {
		t.Error("NewResult of a nil program with a value")
	}
}

func TestImmRegOf(t *testing.T) {
	p := optim.Prog()
	r := p.Norm(1)
	for _, tc := range []struct {
		n    optim.Num
		k    float64
		imm  bool
		reg  bool
		name string
	}{{nil, 0, true, false, "nil"}, {optim.K(2.5), 2.5, true, false, "K"}, {r, 0, false, true, "register"}, {optim.Reg{}, 0, false, false, "zero Reg"}} {
		if k, ok := opset.Imm(tc.n); k != tc.k || ok != tc.imm {
			t.Errorf("Imm(%s) = %v, %v", tc.name, k, ok)
		}
		if got, ok := opset.RegOf(tc.n); ok != tc.reg || (ok && got != r) {
			t.Errorf("RegOf(%s) = %v, %v", tc.name, got, ok)
		}
	}
}

// NameHandles names the handle of a VecError inside an error by the
// program's namespace, and leaves other errors alone. (An error that
// formats its message when it is made, as fmt.Errorf does, keeps the name
// it printed then.)
func TestNameHandles(t *testing.T) {
	hs := optim.NewHandles().Sub("sam")
	g := hs.PerMember("g", 1)[0]
	err := &optim.OpError{Index: 2, Op: "Norm", Err: &optim.VecError{Vec: g, Msg: "is not allocated"}}
	if got := err.Error(); got != "op 2 (Norm): handle v1 is not allocated" {
		t.Errorf("unnamed: %q", got)
	}
	opset.NameHandles(err, hs.Prog())
	if got := err.Error(); got != "op 2 (Norm): handle sam/g[0] is not allocated" {
		t.Errorf("named: %q", got)
	}
	plain := errors.New("plain")
	opset.NameHandles(plain, hs.Prog())
	opset.NameHandles(nil, hs.Prog())
	opset.NameHandles(err, nil)
	if got := err.Error(); !strings.Contains(got, "sam/g[0]") {
		t.Errorf("a nil program changed the name: %q", got)
	}
}

// The Checker refuses what no host can run, with the messages every host
// shares, and names handles by the program's namespace.
func TestChecker(t *testing.T) {
	l := optim.Layout{Members: []optim.MemberLayout{{Arch: "mlp", Numel: 3}, {Arch: "big", Numel: 5}}}
	hs := optim.NewHandles().Sub("sam")
	g, h := hs.New("g"), hs.New("h")
	allocated := func(v optim.Vec) (optim.VecLayout, bool) {
		switch v {
		case g:
			return optim.VecLayout{Member: 0}, true
		case h:
			return optim.VecLayout{Member: 1}, true
		}
		return optim.VecLayout{}, false
	}
	p := hs.Prog()
	n := p.Norm(g)
	p.Axpy(g, n, optim.Params)
	p.Axpy(g, optim.K(1), h)
	p.Ops = append(p.Ops, optim.Scale{Dst: g, Alpha: p.Reg(2)}, optim.Scale{Dst: 99, Alpha: optim.K(2)}, &optim.Norm{X: g}, optim.Read{X: p.Reg(7)})
	c := opset.NewChecker(p, l)
	want := []string{
		"",
		"",
		"handle sam/h has the layout of member 1 (5 parameters), sam/g has member 0's (3)",
		"register #2 is not set by an earlier op of this program (1 so far)",
		"handle v99 is not allocated",
		"op *optim.Norm is a pointer: programs hold op values (Norm{…}, not &Norm{…})",
		"register #7 is not set by an earlier op of this program (1 so far)",
	}
	for i, op := range p.Ops {
		err := c.Check(i, op, allocated)
		if got := fmt.Sprint(err); (err == nil) != (want[i] == "") || (err != nil && got != want[i]) {
			t.Errorf("op %d (%s): %v, want %q", i, optim.OpName(op), err, want[i])
		}
	}
}
