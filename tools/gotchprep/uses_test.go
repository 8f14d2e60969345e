package main

import (
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
)

// fakeGotch is a miniature of gotch's layout: libtch's Go functions call
// C.atg_*, ts's generated methods call libtch, Must* wrappers and
// hand-written helpers call those.
var fakeGotch = map[string]string{
	"dtype.go": `package gotch
type DType struct{ n int }
`,
	"libtch/c-generated.go": `package libtch
// #include "torch_api.h"
import "C"
type Ctensor = C.tensor
func AtgFoo(ptr *Ctensor, self Ctensor) { C.atg_foo(ptr, self) }
func AtgBar(ptr *Ctensor, self Ctensor) { C.atg_bar(ptr, self) }
func AtgBaz(ptr *Ctensor, self Ctensor) { C.atg_baz(ptr, self) }
func AtgQux(ptr *Ctensor, self Ctensor) { C.atg_qux(ptr, self) }
func AtgUnused(ptr *Ctensor, self Ctensor) { C.atg_unused(ptr, self) }
`,
	"libtch/tensor.go": `package libtch
// #include "torch_api.h"
import "C"
func AtFree(t Ctensor) { C.at_free(t) }
`,
	"ts/tensor-generated.go": `package ts
import (
	"fmt"
	lib "github.com/sugarme/gotch/libtch"
)
func (ts *Tensor) Foo(del bool) (*Tensor, error) {
	var p lib.Ctensor
	lib.AtgFoo(&p, ts.ctensor)
	return &Tensor{p}, fmt.Errorf("x")
}
func (ts *Tensor) Bar() { var p lib.Ctensor; lib.AtgBar(&p, ts.ctensor) }
func (ts *Tensor) Baz() { var p lib.Ctensor; lib.AtgBaz(&p, ts.ctensor) }
func Qux(t *Tensor) { var p lib.Ctensor; lib.AtgQux(&p, t.ctensor) }
func (ts *Tensor) Unused() { var p lib.Ctensor; lib.AtgUnused(&p, ts.ctensor) }
`,
	"ts/must-tensor-generated.go": `package ts
import "log"
func (ts *Tensor) MustFoo(del bool) *Tensor {
	r, err := ts.Foo(del)
	if err != nil { log.Fatal(err) }
	return r
}
`,
	"ts/tensor.go": `package ts
import (
	"github.com/sugarme/gotch"
	lib "github.com/sugarme/gotch/libtch"
)
type Tensor struct{ ctensor lib.Ctensor }
// Helper is hand-written code calling a generated method.
func Helper(dt gotch.DType) *Tensor { t := &Tensor{}; t.Baz(); return t }
func (ts *Tensor) Drop() { lib.AtFree(ts.ctensor) }
`,
}

// fakeHost uses MustFoo (through Foo), Helper (through Baz) and Qux as a
// method value; its own Scope.Bar shares a name with ts's Bar, which it does
// not call, and its test file calls Unused.
var fakeHost = map[string]string{
	"tensor.go": `package tensor
import (
	"fmt"
	"github.com/sugarme/gotch"
	"github.com/sugarme/gotch/ts"
)
type T struct{ t *ts.Tensor }
type Scope struct{}
func (s *Scope) Bar(x T) T { fmt.Println("no gotch here"); return x }
func (s *Scope) Foo(x T) T { return T{x.t.MustFoo(false)} }
func help() *ts.Tensor { return ts.Helper(gotch.DType{}) }
var q = ts.Qux
func use(s *Scope, x T) { s.Bar(x); x.t.Drop() }
`,
	"tensor_test.go": `package tensor
func unused(x T) { x.t.Unused() }
`,
}

func writeTree(t *testing.T, root string, files map[string]string) {
	t.Helper()
	for name, src := range files {
		p := filepath.Join(root, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func TestUsedOpsFake(t *testing.T) {
	dir := t.TempDir()
	writeTree(t, filepath.Join(dir, "gotch"), fakeGotch)
	writeTree(t, filepath.Join(dir, "host", "tensor"), fakeHost)
	used, err := usedOps(filepath.Join(dir, "gotch"), filepath.Join(dir, "host", "tensor"), "host/tensor")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for n := range used {
		names = append(names, n)
	}
	sort.Strings(names)
	if want := []string{"atg_baz", "atg_foo", "atg_qux"}; !reflect.DeepEqual(names, want) {
		t.Fatalf("used ops %v, want %v (Scope.Bar is not ts's Bar; test files do not count)", names, want)
	}
	if u := used["atg_foo"]; u.Via != "ts.(*Tensor).MustFoo" || u.At != "host/tensor/tensor.go:10" {
		t.Errorf("atg_foo: %+v", u)
	}
	if u := used["atg_baz"]; u.Via != "ts.Helper" {
		t.Errorf("atg_baz: %+v", u)
	}
}

func TestUsedOpsNone(t *testing.T) {
	dir := t.TempDir()
	writeTree(t, filepath.Join(dir, "gotch"), fakeGotch)
	writeTree(t, filepath.Join(dir, "host", "tensor"), map[string]string{"a.go": "package tensor\nfunc F() {}\n"})
	if _, err := usedOps(filepath.Join(dir, "gotch"), filepath.Join(dir, "host", "tensor"), "host/tensor"); err == nil || !strings.Contains(err.Error(), "scan is broken") {
		t.Errorf("a package that reaches no op must be an error (a broken scan would pass everything): %v", err)
	}
}

func TestCheckStubbed(t *testing.T) {
	used := map[string]opUse{
		"atg_totype": {Op: "atg_totype", Via: "ts.(*Tensor).Totype", At: "host/tensor/tensor.go:320"},
		"atg_sum":    {Op: "atg_sum", Via: "ts.(*Tensor).Sum", At: "host/tensor/ops.go:157"},
	}
	if err := checkStubbed(used, []string{"atg_nonzero_static", "atg__cslt_compress"}, "1.13.1"); err != nil {
		t.Errorf("unused stubbed ops: %v", err)
	}
	err := checkStubbed(used, []string{"atg_sum", "atg_nonzero_static", "atg_totype"}, "2.11.0")
	if err == nil {
		t.Fatal("used stubbed ops passed")
	}
	for _, want := range []string{"libtorch 2.11.0", "2 op(s)", "atg_sum  (ts.(*Tensor).Sum, at host/tensor/ops.go:157)", "atg_totype  (ts.(*Tensor).Totype"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
	if strings.Contains(err.Error(), "nonzero_static") {
		t.Errorf("error names an unused op:\n%v", err)
	}
}

func TestHeaderLine(t *testing.T) {
	lines := strings.Split(generated, "\n")
	for name, want := range map[string]int{"atg_ok": 0, "atg_bad": 7, "atg_many": 14, "atg_b": -1, "atg_missing": -1} {
		if got := headerLine(lines, name); got != want {
			t.Errorf("headerLine(%s) = %d, want %d", name, got, want)
		}
	}
}

// gotchSource returns gotch's folder in the module cache, or skips.
func gotchSource(t *testing.T) string {
	t.Helper()
	src, err := moduleDir("v0.9.1")
	if err != nil {
		t.Skipf("gotch v0.9.1 is not in the module cache and cannot be fetched: %v", err)
	}
	return src
}

// prepareForTest runs the preparation on the real gotch and a copy of the
// real host/tensor sources (under root), with g++'s syntax check replaced:
// the only stubs are the forced ones. calls counts syntax checks.
func prepareForTest(t *testing.T, out, root string, force []string, calls *int) error {
	t.Helper()
	old := syntaxCheck
	syntaxCheck = func(string, Libtorch) (string, bool, error) { *calls++; return "", true, nil }
	defer func() { syntaxCheck = old }()
	lt := Libtorch{Source: "test", IncludeDir: "/nonexistent/include", LibDir: "/nonexistent/lib", Version: "9.8.7", ABI: 1}
	return prepare(options{out: out, version: "v0.9.1", uses: root, forceStub: force}, lt)
}

// copyHostTensor copies the repository's host/tensor (Go files only) under
// a fresh root, so that a test can change it.
func copyHostTensor(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	src := filepath.Join("..", "..", "host", "tensor")
	entries, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".go") {
			if err := copyFile(filepath.Join(src, e.Name()), filepath.Join(root, "host", "tensor", e.Name())); err != nil {
				t.Fatal(err)
			}
		}
	}
	return root
}

// TestForcedStubOfUsedOp stubs atg_totype, which host/tensor's Cast calls
// through ts.(*Tensor).Totype: the preparation must fail naming the op and
// the libtorch version, also on a re-run that finds the copy up to date.
func TestForcedStubOfUsedOp(t *testing.T) {
	gotchSource(t)
	root := copyHostTensor(t)
	out := filepath.Join(t.TempDir(), "gotch")
	calls := 0
	err := prepareForTest(t, out, root, []string{"atg_totype"}, &calls)
	if err == nil {
		t.Fatal("a stubbed op that optlab uses passed")
	}
	for _, want := range []string{"libtorch 9.8.7", "atg_totype", "ts.(*Tensor).Totype", "host/tensor/tensor.go:"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
	stubs := readLines(filepath.Join(out, "libtch", "STUBBED_OPS.txt"))
	if !reflect.DeepEqual(stubs, []string{"atg_totype"}) {
		t.Errorf("STUBBED_OPS.txt = %v", stubs)
	}
	gen, _ := os.ReadFile(filepath.Join(out, "libtch", "torch_api_generated.cpp.h"))
	if !strings.Contains(string(gen), `"atg_totype is not available in the installed libtorch (libtorch 9.8.7)`) {
		t.Error("atg_totype's wrapper was not stubbed")
	}
	// The re-run finds the copy prepared (no g++ pass) and fails again.
	calls = 0
	err2 := prepareForTest(t, out, root, []string{"atg_totype"}, &calls)
	if err2 == nil || !strings.Contains(err2.Error(), "atg_totype") {
		t.Errorf("re-run: %v", err2)
	}
	if calls != 0 {
		t.Errorf("re-run prepared again (%d syntax checks)", calls)
	}
}

// TestForcedStubOfUnusedOp stubs atg_nonzero_static, which optlab does not
// call (host/tensor's TestStubbedOp does, but test files do not count): the
// preparation passes, and a re-run is a no-op. When host/tensor then starts
// calling it, the next run fails without preparing again.
func TestForcedStubOfUnusedOp(t *testing.T) {
	gotchSource(t)
	root := copyHostTensor(t)
	out := filepath.Join(t.TempDir(), "gotch")
	calls := 0
	if err := prepareForTest(t, out, root, []string{"atg_nonzero_static", "atg__cslt_compress"}, &calls); err != nil {
		t.Fatal(err)
	}
	if calls != 1 {
		t.Errorf("%d syntax checks, want 1", calls)
	}
	stamp := readLines(filepath.Join(out, ".optlab-prepared"))
	if len(stamp) != 3 || !strings.HasPrefix(stamp[2], "uses ") {
		t.Fatalf("stamp after a passing check: %q", stamp)
	}
	before, _ := os.ReadFile(filepath.Join(out, "ts", "tensor-generated.go"))
	calls = 0
	if err := prepareForTest(t, out, root, []string{"atg__cslt_compress", "atg_nonzero_static"}, &calls); err != nil || calls != 0 {
		t.Errorf("re-run: %v, %d syntax checks", err, calls)
	}
	if after, _ := os.ReadFile(filepath.Join(out, "ts", "tensor-generated.go")); string(after) != string(before) {
		t.Error("re-run rewrote the copy")
	}
	// host/tensor starts calling the stubbed op: only the check runs again.
	more := "package tensor\n\nimport \"github.com/sugarme/gotch/ts\"\n\nfunc nonzero(x *ts.Tensor) (*ts.Tensor, error) { return x.NonzeroStatic(2, -1, false) }\n"
	if err := os.WriteFile(filepath.Join(root, "host", "tensor", "nonzero.go"), []byte(more), 0o644); err != nil {
		t.Fatal(err)
	}
	calls = 0
	err := prepareForTest(t, out, root, []string{"atg_nonzero_static", "atg__cslt_compress"}, &calls)
	if err == nil || !strings.Contains(err.Error(), "atg_nonzero_static  (ts.(*Tensor).NonzeroStatic, at host/tensor/nonzero.go:5)") || strings.Contains(err.Error(), "cslt") {
		t.Errorf("after host/tensor started calling a stubbed op: %v", err)
	}
	if calls != 0 {
		t.Errorf("a source change prepared again (%d syntax checks)", calls)
	}
}

func TestForceStubUnknown(t *testing.T) {
	gotchSource(t)
	root := copyHostTensor(t)
	calls := 0
	err := prepareForTest(t, filepath.Join(t.TempDir(), "gotch"), root, []string{"atg_no_such_op"}, &calls)
	if err == nil || !strings.Contains(err.Error(), "atg_no_such_op is not a generated wrapper") {
		t.Errorf("unknown -force-stub name: %v", err)
	}
}
