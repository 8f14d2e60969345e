package optim_test

import (
	"bytes"
	"context"
	"errors"
	"math"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/optlab/optlab/sdk/optim"
)

func TestHandlesNamespaces(t *testing.T) {
	root := optim.NewHandles()
	a, b := root.Sub("outer"), root.Sub("outer").Sub("inner")
	va := a.New("g")
	vb := b.PerMember("g", 2)
	vc := a.New("h")
	got := []optim.Vec{va, vb[0], vb[1], vc}
	seen := map[optim.Vec]bool{}
	for _, v := range got {
		if v <= 0 || seen[v] {
			t.Fatalf("handles %v: want distinct handles > 0", got)
		}
		seen[v] = true
	}
	for v, want := range map[optim.Vec]string{
		va: "outer/g", vb[1]: "outer/inner/g[1]", vc: "outer/h",
		optim.ParamsOf(2): "params[2]", optim.RhoOf(1): "rho[1]", 999: "v999",
	} {
		if name := b.Name(v); name != want {
			t.Errorf("Name(%d) = %q, want %q", v, name, want)
		}
	}
	// A config without Handles gets a fresh root; with Handles, a Sub of it.
	if v := (optim.Config{}).Namespace("x").New("y"); v != 1 {
		t.Errorf("fresh namespace starts at %d, want 1", v)
	}
	if v := (optim.Config{Handles: root}).Namespace("x").New("y"); seen[v] || v <= vc {
		t.Errorf("sub-namespace handle %d collides with %v", v, got)
	}
}

// A program names a handle as its listing does, and a VecError prints the
// name it carries (the bare name without one).
func TestProgramName(t *testing.T) {
	hs := optim.NewHandles().Sub("sam")
	g := hs.New("g")
	var none *optim.Program
	for _, tc := range []struct {
		p    *optim.Program
		v    optim.Vec
		want string
	}{{hs.Prog(), g, "sam/g"}, {optim.Prog(), g, "v1"}, {none, g, "v1"}, {hs.Prog(), optim.ParamsOf(1), "params[1]"}} {
		if got := tc.p.Name(tc.v); got != tc.want {
			t.Errorf("Name(%d) = %q, want %q", tc.v, got, tc.want)
		}
	}
	e := &optim.VecError{Vec: g, Msg: "is not allocated"}
	if got := e.Error(); got != "handle v1 is not allocated" {
		t.Errorf("VecError without a name: %q", got)
	}
	e.Name = hs.Prog().Name(g)
	if got := e.Error(); got != "handle sam/g is not allocated" {
		t.Errorf("VecError with a name: %q", got)
	}
}

func TestRegisters(t *testing.T) {
	p := optim.Prog()
	p.Fill(1, optim.K(2))
	n := p.Norm(1)
	// An op appended directly still counts for later registers.
	p.Ops = append(p.Ops, optim.Dot{A: 1, B: 1})
	ev := p.Grad(2, optim.Params, optim.Batch{}, optim.BNUpdate)
	d := p.Dot(1, 2)
	c := p.Div(optim.K(0.05), p.Add(n, optim.K(1e-12)))
	if n.Index() != 1 || ev.Loss.Index() != 3 || ev.Acc.Index() != 4 || d.Index() != 5 || c.Index() != 7 {
		t.Fatalf("registers %v %v %v %v %v; want #1 #3 #4 #5 #7", n, ev.Loss, ev.Acc, d, c)
	}
	p.Read(n, ev.Acc, c)
	r := optim.Result{Program: p, Reads: []float64{10, 40, 70}}
	for _, tc := range []struct {
		r    optim.Reg
		want float64
	}{{n, 10}, {ev.Acc, 40}, {c, 70}} {
		if got := r.Get(tc.r); got != tc.want {
			t.Errorf("Get(%v) = %v, want %v", tc.r, got, tc.want)
		}
	}
	if !math.IsNaN(r.Get(optim.Reg{})) {
		t.Error("the zero register must read NaN")
	}
	// A register that was not read, or that belongs to another program,
	// is an error, not another value.
	var re *optim.ReadError
	if _, err := r.Lookup(d); !errors.As(err, &re) || !strings.Contains(err.Error(), "not read") {
		t.Errorf("Lookup of an unread register: %v", err)
	}
	q := optim.Prog()
	q.Norm(1)
	qn := q.Norm(1)
	if _, err := r.Lookup(qn); err == nil || !strings.Contains(err.Error(), "another program") {
		t.Errorf("Lookup of another program's register: %v", err)
	}
	func() {
		defer func() {
			if e := recover(); e == nil {
				t.Error("Get of another program's register did not panic")
			}
		}()
		r.Get(qn)
	}()
	// Using another program's register as an operand is a build error.
	q.Axpy(1, n, 2)
	if err := q.Err(); err == nil || !strings.Contains(err.Error(), "another program") {
		t.Errorf("Err after a foreign register: %v", err)
	}
	// A result with fewer values than Read ops is an error too.
	short := optim.Result{Program: p, Reads: []float64{10}}
	if v, err := short.Lookup(ev.Acc); !errors.As(err, &re) || err.Error() != "register #4: has no value: the result has 1 value(s), fewer than the program's Read ops" {
		t.Errorf("Lookup past the values = %v, %v", v, err)
	}
	if _, err := (optim.Result{}).Lookup(n); err == nil || !strings.Contains(err.Error(), "another program") {
		t.Errorf("Lookup in a result without a program: %v", err)
	}
}

func TestMean(t *testing.T) {
	p := optim.Prog()
	evs := []optim.Eval{p.Grad(1, optim.ParamsOf(0), optim.Batch{}, optim.BNUpdate), p.Grad(2, optim.ParamsOf(1), optim.Batch{}, optim.BNUpdate)}
	p.Read(evs[0].Loss, evs[0].Acc, evs[1].Loss, evs[1].Acc)
	r := optim.Result{Program: p, Reads: []float64{1, 0.5, 3, 0.25}}
	if loss, acc := r.Mean(evs); loss != 2 || acc != 0.375 {
		t.Errorf("Mean = %v, %v; want 2, 0.375", loss, acc)
	}
	// The device-side mean is the same arithmetic: loss_0/2 + loss_1/2.
	loss, acc := p.Mean(evs)
	want := " 9 Arith     add(#5, #7)  → #8\n"
	if !strings.Contains(p.String(), want) || loss.Index() != 8 || acc.Index() != 10 {
		t.Errorf("Mean's ops:\n%s\nwant %q, loss #8, acc #10 (got %v %v)", p, want, loss, acc)
	}
}

type fixedHost struct{ err error }

func (h fixedHost) Layout(context.Context) (optim.Layout, error) {
	return optim.Layout{Members: []optim.MemberLayout{{Arch: "mlp", Numel: 3}}}, nil
}

func (h fixedHost) Exec(_ context.Context, p *optim.Program) (optim.Result, error) {
	if h.err != nil {
		return optim.Result{}, h.err
	}
	return optim.Result{Program: p, Reads: []float64{1.5}}, nil
}

func TestTrace(t *testing.T) {
	var w bytes.Buffer
	hs := optim.NewHandles().Sub("sam")
	g := hs.New("g")
	p := hs.Prog().Alloc(g, 0)
	p.Read(p.Norm(g))
	h := optim.Trace(fixedHost{}, &w, false)
	if _, err := h.Layout(context.Background()); err != nil {
		t.Fatal(err)
	}
	if r, err := h.Exec(context.Background(), p); err != nil || r.Reads[0] != 1.5 {
		t.Fatalf("Exec through the tracer = %v, %v", r, err)
	}
	bad := &optim.OpError{Index: 1, Op: "Norm", Err: errors.New("handle 7 is not allocated")}
	if _, err := optim.Trace(fixedHost{err: bad}, &w, true).Exec(context.Background(), p); !errors.Is(err, bad) {
		t.Fatalf("the tracer changed the error: %v", err)
	}
	want := []string{
		"layout: 1 member(s) [mlp: 3 parameters in 0 tensors]",
		"exec 1: 3 ops",
		" 0 Alloc     sam/g member=0",
		" 1 Norm      sam/g  → #1",
		" 2 Read      #1",
		"   ← #1=1.5",
		"   error: op 1 (Norm): handle 7 is not allocated",
	}
	for _, line := range want {
		if !strings.Contains(w.String(), line+"\n") {
			t.Errorf("trace lacks %q:\n%s", line, w.String())
		}
	}
}

func TestRegistry(t *testing.T) {
	var r optim.Registry
	if err := r.Add(optim.Entry{Name: "a", New: func() optim.Optimizer { return nil }}); err != nil {
		t.Fatal(err)
	}
	if err := r.Add(optim.Entry{Name: "a", New: func() optim.Optimizer { return nil }}); err == nil {
		t.Error("a name added twice")
	}
	if err := r.Add(optim.Entry{Name: "b"}); err == nil {
		t.Error("an entry without a constructor")
	}
	if _, err := r.New("c"); err == nil || !strings.Contains(err.Error(), "known: a") {
		t.Errorf("New(unknown) = %v", err)
	}
	var none *optim.Registry
	if _, ok := none.Lookup("a"); ok {
		t.Error("a nil registry has entries")
	}
}

func TestDefaults(t *testing.T) {
	var d optim.Defaults
	ctx := context.Background()
	if blob, vecs, err := d.SaveState(ctx); blob != nil || vecs != nil || err != nil {
		t.Errorf("SaveState = %v, %v, %v", blob, vecs, err)
	}
	if d.LoadState(ctx, nil) != nil || d.LoadState(ctx, []byte{1}) == nil {
		t.Error("LoadState must accept only an empty state")
	}
	if p, err := d.Predictive(ctx); err != nil || p.Kind != optim.Point {
		t.Errorf("Predictive = %+v, %v: want the point estimate", p, err)
	}
	if d.Finalize(ctx) != nil || d.Resolved() != nil {
		t.Error("Finalize and Resolved must do nothing")
	}
}

// Every Features field is a row of FeatureSet, in order, and each row
// sets its field alone; its name round-trips through Names and FeaturesOf.
func TestFeatureSet(t *testing.T) {
	set := optim.FeatureSet()
	ft := reflect.TypeOf(optim.Features{})
	if ft.NumField() != len(set) {
		t.Fatalf("Features has %d fields, FeatureSet %d rows", ft.NumField(), len(set))
	}
	opt := reflect.TypeOf((*optim.Optimizer)(nil)).Elem()
	for i, s := range set {
		if ft.Field(i).Name != s.Field {
			t.Errorf("row %d is %s, field %d is %s", i, s.Field, i, ft.Field(i).Name)
		}
		f := s.Set(optim.Features{}, true)
		v := reflect.ValueOf(f)
		for j := range v.NumField() {
			if v.Field(j).Bool() != (j == i) {
				t.Errorf("%s sets field %s = %v", s.Name, ft.Field(j).Name, v.Field(j).Bool())
			}
		}
		if names := f.Names(); !slices.Equal(names, []string{s.Name}) {
			t.Errorf("%s: Names = %q", s.Name, names)
		}
		if back, unknown := optim.FeaturesOf([]string{s.Name, "from-the-future"}); back != f || !slices.Equal(unknown, []string{"from-the-future"}) {
			t.Errorf("%s: FeaturesOf = %+v, %q", s.Name, back, unknown)
		}
		if s.Method != "" {
			if _, ok := opt.MethodByName(s.Method); !ok {
				t.Errorf("%s: Optimizer has no method %s", s.Name, s.Method)
			}
		}
	}
}

// An optimizer that embeds Defaults writes Info, Configure and Step only.
type onlyStep struct{ optim.Defaults }

func (onlyStep) Info() optim.Info                                          { return optim.Info{Name: "only"} }
func (onlyStep) Configure(context.Context, optim.Host, optim.Config) error { return nil }
func (onlyStep) Step(context.Context, optim.StepInput) (optim.StepOutput, error) {
	return optim.StepOutput{}, nil
}

func TestInfoStamped(t *testing.T) {
	var o optim.Optimizer = onlyStep{}
	if got := o.Info().Stamped().ProtocolMinor; got != optim.ProtocolMinor {
		t.Errorf("stamped minor %d, want %d", got, optim.ProtocolMinor)
	}
	if got := (optim.Info{ProtocolMinor: 99}).Stamped().ProtocolMinor; got != 99 {
		t.Errorf("a declared minor is kept: got %d", got)
	}
	if optim.Unwrap(o) != nil {
		t.Error("a plain optimizer wraps nothing")
	}
}

// Info.Applied leaves out the hyperparameters of the update rules a
// method does not use, and nothing else.
func TestInfoApplied(t *testing.T) {
	info := optim.Info{Features: optim.Features{UpdateRule: true}, Params: []optim.ParamSpec{
		{Name: "rho"}, {Name: optim.UpdateParam, Enum: []string{optim.BaseUpdate, "adamw", "muon"}},
		{Name: "adamw_beta1"}, {Name: "muon_momentum"}}}
	params := map[string]any{"rho": 0.05, optim.UpdateParam: "muon", "adamw_beta1": 0.9, "muon_momentum": 0.95}
	got := info.Applied(params)
	want := map[string]any{"rho": 0.05, optim.UpdateParam: "muon", "muon_momentum": 0.95}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Applied = %v, want %v", got, want)
	}
	if len(params) != 4 {
		t.Error("Applied changed its argument")
	}
	info.Features.UpdateRule = false
	if got := info.Applied(params); !reflect.DeepEqual(got, params) {
		t.Errorf("without UpdateRule: %v, want every parameter", got)
	}
}
