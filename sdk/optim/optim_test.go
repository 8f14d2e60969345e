package optim_test

import (
	"bytes"
	"context"
	"errors"
	"math"
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

func TestSlots(t *testing.T) {
	p := optim.Prog()
	p.Fill(1, 2)
	n := p.Norm(1)
	// An op appended directly still counts for later slots.
	p.Ops = append(p.Ops, optim.Dot{A: 1, B: 1})
	ev := p.Grad(2, optim.Params, optim.Batch{}, optim.BNUpdate)
	d := p.Dot(1, 2)
	r := optim.Result{Scalars: []float64{10, 20, 30, 40, 50}}
	for _, c := range []struct {
		s    optim.Scalar
		want float64
	}{{n, 10}, {ev.Loss, 30}, {ev.Acc, 40}, {d, 50}} {
		if got := r.Get(c.s); got != c.want {
			t.Errorf("Get = %v, want %v", got, c.want)
		}
	}
	// Ops replaced directly (same length) are counted as they are now.
	q0 := optim.Prog()
	q0.Norm(1)
	q0.Norm(1)
	q0.Ops = []optim.Op{optim.Grad{At: optim.Params}, optim.Fill{Dst: 1}}
	if s := q0.Norm(1); (optim.Result{Scalars: []float64{1, 2, 3}}).Get(s) != 3 {
		t.Errorf("slot after replacing Ops reads %v, want the third scalar", (optim.Result{Scalars: []float64{1, 2, 3}}).Get(s))
	}
	if !math.IsNaN(r.Get(optim.Scalar{})) || !math.IsNaN(optim.Result{}.Get(d)) {
		t.Error("a missing slot must read NaN")
	}
	q := optim.Prog()
	evs := []optim.Eval{q.Grad(1, optim.ParamsOf(0), optim.Batch{}, optim.BNUpdate), q.Grad(2, optim.ParamsOf(1), optim.Batch{}, optim.BNUpdate)}
	if loss, acc := (optim.Result{Scalars: []float64{1, 0.5, 3, 0.25}}).Mean(evs); loss != 2 || acc != 0.375 {
		t.Errorf("Mean = %v, %v; want 2, 0.375", loss, acc)
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
	return optim.Result{Scalars: []float64{1.5}}, nil
}

func TestTrace(t *testing.T) {
	var w bytes.Buffer
	hs := optim.NewHandles().Sub("sam")
	g := hs.New("g")
	p := hs.Prog().Alloc(g, 0)
	p.Norm(g)
	h := optim.Trace(fixedHost{}, &w, false)
	if _, err := h.Layout(context.Background()); err != nil {
		t.Fatal(err)
	}
	if r, err := h.Exec(context.Background(), p); err != nil || r.Scalars[0] != 1.5 {
		t.Fatalf("Exec through the tracer = %v, %v", r, err)
	}
	bad := &optim.OpError{Index: 1, Op: "Norm", Err: errors.New("handle 7 is not allocated")}
	if _, err := optim.Trace(fixedHost{err: bad}, &w, true).Exec(context.Background(), p); !errors.Is(err, bad) {
		t.Fatalf("the tracer changed the error: %v", err)
	}
	want := []string{
		"layout: 1 member(s) [mlp: 3 parameters in 0 tensors]",
		"exec 1: 2 ops",
		" 0 Alloc     sam/g member=0",
		" 1 Norm      sam/g  → #1",
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

func TestStateless(t *testing.T) {
	var s optim.Stateless
	if blob, vecs, err := s.SaveState(context.Background()); blob != nil || vecs != nil || err != nil {
		t.Errorf("SaveState = %v, %v, %v", blob, vecs, err)
	}
	if s.LoadState(context.Background(), nil) != nil || s.LoadState(context.Background(), []byte{1}) == nil {
		t.Error("LoadState must accept only an empty state")
	}
}
