package compose_test

import (
	"context"
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/optlab/optlab/plugins/bsam"
	"github.com/optlab/optlab/plugins/compose"
	"github.com/optlab/optlab/plugins/otmdr"
	"github.com/optlab/optlab/plugins/sam"
	"github.com/optlab/optlab/plugins/sgd"
	"github.com/optlab/optlab/sdk/hparams"
	"github.com/optlab/optlab/sdk/optim"
	"github.com/optlab/optlab/sdk/optimtest"
)

// options lists sgd, sam, bsam and otmdr, all but bsam following SetLR.
func options(t *testing.T) compose.Options {
	t.Helper()
	r := &optim.Registry{}
	for _, e := range []optim.Entry{{Name: "sgd", New: sgd.New}, {Name: "sam", New: sam.New},
		{Name: "bsam", New: bsam.New}, {Name: "otmdr", New: otmdr.New}} {
		if err := r.Add(e); err != nil {
			t.Fatal(err)
		}
	}
	return compose.Options{Members: r}
}

func TestPrefixed(t *testing.T) {
	o := options(t)
	specs := o.Prefixed()
	byName := map[string]optim.ParamSpec{}
	for _, s := range specs {
		byName[s.Name] = s
	}
	for name, opt := range map[string]optim.Optimizer{"sam": sam.New(), "bsam": bsam.New(), "otmdr": otmdr.New()} {
		for _, s := range opt.Info().Params {
			got, ok := byName[name+"_"+s.Name]
			if !ok || got.Type != s.Type || !reflect.DeepEqual(got.Default, s.Default) || got.Doc != "member = "+name+": "+s.Doc {
				t.Errorf("%s_%s: %+v, want the %s plugin's %+v", name, s.Name, got, name, s)
			}
		}
	}
	if _, err := hparams.Resolve(specs, nil); err != nil {
		t.Errorf("prefixed schema does not resolve: %v", err)
	}
	if got := (compose.Options{}).Prefixed(); got != nil {
		t.Errorf("no members: %v", got)
	}
	if got, want := o.Scheduled(), []string{"sgd", "sam", "otmdr"}; !slices.Equal(got, want) {
		t.Errorf("scheduled %v, want %v", got, want)
	}
}

func TestSplit(t *testing.T) {
	tests := []struct {
		name        string
		params      map[string]any
		member      string
		inner, own  map[string]any
		errContains string
		unknown     bool
	}{
		{"default member", map[string]any{"freq": 2}, "sgd", map[string]any{}, map[string]any{"freq": 2}, "", false},
		{"member's own", map[string]any{"member": "sam", "sam_rho": 0.1, "start": 3},
			"sam", map[string]any{"rho": 0.1}, map[string]any{"member": "sam", "start": 3}, "", false},
		{"others at their defaults", map[string]any{"member": "sam", "otmdr_rho1": 0.05, "bsam_m": 8},
			"sam", map[string]any{}, map[string]any{"member": "sam"}, "", false},
		{"other member's set", map[string]any{"member": "sam", "otmdr_rho1": 0.1}, "", nil, nil,
			`wrap: otmdr_rho1 = 0.1 is set but member = "sam": only sam_* parameters apply`, false},
		{"unknown prefixed", map[string]any{"sam_bogus": 1}, "", nil, nil, `wrap: "sam_bogus": `, true},
		{"unknown member", map[string]any{"member": "adam"}, "", nil, nil,
			`wrap: member "adam": want one of ["sgd" "sam" "bsam" "otmdr"]`, false},
	}
	o := options(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			member, inner, own, err := o.Split("wrap", tt.params)
			if tt.errContains != "" {
				if err == nil || !strings.Contains(err.Error(), tt.errContains) || errors.Is(err, hparams.ErrUnknown) != tt.unknown {
					t.Fatalf("err = %v, want containing %q (ErrUnknown %v)", err, tt.errContains, tt.unknown)
				}
				return
			}
			if err != nil || member != tt.member || !reflect.DeepEqual(inner, tt.inner) || !reflect.DeepEqual(own, tt.own) {
				t.Errorf("Split = %q, %v, %v, %v; want %q, %v, %v", member, inner, own, err, tt.member, tt.inner, tt.own)
			}
		})
	}
	if _, _, _, err := (compose.Options{}).Split("wrap", nil); err == nil || !strings.Contains(err.Error(), `member "sgd": want one of []`) {
		t.Errorf("no members: %v", err)
	}
}

func TestRequireSetLR(t *testing.T) {
	o := options(t)
	if err := o.RequireSetLR("wrap", "swa_lr", "sam"); err != nil {
		t.Error(err)
	}
	err := o.RequireSetLR("wrap", "swa_lr = 0.05", "bsam")
	want := "wrap: swa_lr = 0.05 needs a member optimizer that steps with the host's base optimizer, " +
		"whose rate SetLR sets (sgd, sam, otmdr); bsam does its own update"
	if err == nil || err.Error() != want {
		t.Errorf("err = %v, want %q", err, want)
	}
}

// NewMember configures the member inside the wrapper's namespace; Resolved
// prefixes what it resolved; Predictive is its own or the point estimate.
func TestMember(t *testing.T) {
	ctx := context.Background()
	o := options(t)
	h := optimtest.MustHost(t, optimtest.NewMLP(optimtest.MLPConfig{Hidden: 4, Samples: 64}), optimtest.WithBatchSize(16))
	hs := optim.NewHandles().Sub("wrap")
	opt, err := o.NewMember(ctx, h, "wrap", "otmdr", optim.Config{Params: map[string]any{"rho1": 0.1},
		TotalSteps: 4, StepsPerEpoch: 4, Members: 1, Handles: hs})
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range h.Handles() {
		if name := hs.Name(v); !strings.HasPrefix(name, "wrap/otmdr/") {
			t.Errorf("member's vector %d named %q", v, name)
		}
	}
	res := compose.Resolved(map[string]any{"start_epoch": int64(3)}, "otmdr", opt)
	if res["start_epoch"] != int64(3) || res["otmdr_rho2"] == nil {
		t.Errorf("Resolved = %v", res)
	}
	if got := compose.Resolved(nil, "sgd", sgd.New()); got != nil {
		t.Errorf("nothing resolved: %v", got)
	}
	pred, err := compose.Predictive(ctx, opt, 1)
	if want := (optim.Predictive{Kind: optim.Members, Vecs: []optim.Vec{optim.Params}}); err != nil || !reflect.DeepEqual(pred, want) {
		t.Errorf("otmdr's predictive %+v (%v), want %+v", pred, err, want)
	}
	pred, err = compose.Predictive(ctx, sgd.New(), 2)
	if want := (optim.Predictive{Kind: optim.Members, Vecs: []optim.Vec{optim.ParamsOf(0), optim.ParamsOf(1)}}); err != nil || !reflect.DeepEqual(pred, want) {
		t.Errorf("sgd's predictive %+v (%v), want %+v", pred, err, want)
	}
	if _, err := o.NewMember(ctx, h, "wrap", "sam", optim.Config{Params: map[string]any{"m": 0}, Handles: hs}); err == nil ||
		!strings.HasPrefix(err.Error(), "wrap: member optimizer: sam: ") {
		t.Errorf("member's configure error: %v", err)
	}
}

// LRHost sends the SetLR in front of the first program only, keeping
// the member's program (and its registers) as they are.
func TestLRHost(t *testing.T) {
	ctx := context.Background()
	h := optimtest.MustHost(t, optimtest.DiagQuadratic(1, 2))
	h.BeginStep(optim.StepInput{LR: 0.5})
	lh := compose.NewLRHost(h)
	lh.Before(optim.Prog().SetLR(0, 0.25))
	p := optim.Prog()
	n := p.Norm(optim.Params)
	p.Read(n)
	member := p.Ops
	res, err := lh.Exec(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := res.Lookup(n); err != nil {
		t.Errorf("the member's register: %v", err)
	}
	q := optim.Prog()
	q.Norm(optim.Params)
	if _, err := lh.Exec(ctx, q); err != nil {
		t.Fatal(err)
	}
	execs := h.Execs()
	if len(execs) != 2 || !reflect.DeepEqual(execs[0].Program.Ops, append([]optim.Op{optim.SetLR{LR: 0.25}}, member...)) ||
		len(execs[1].Program.Ops) != 1 {
		t.Errorf("programs sent %+v", execs)
	}
	if !slices.Equal(p.Ops, member) || h.LR(0) != 0.25 {
		t.Errorf("member's program changed to %+v, or lr %v", p.Ops, h.LR(0))
	}
	// A nil first program is the SetLR alone.
	lh.Before(optim.Prog().SetLR(0, 0.125))
	if _, err := lh.Exec(ctx, nil); err != nil || h.LR(0) != 0.125 {
		t.Errorf("nil program: lr %v, err %v", h.LR(0), err)
	}
}

// SaveVecs and LoadVecs: a state names its vectors; the same list loads,
// another (or another version, or no JSON) is refused naming the method.
func TestSaveLoadVecs(t *testing.T) {
	vecs := []optim.Vec{3, 4, 9}
	blob, got, err := compose.SaveVecs("rule", vecs)
	if err != nil || !slices.Equal(got, vecs) || string(blob) != `{"version":1,"vecs":[3,4,9]}` {
		t.Fatalf("SaveVecs = %s, %v, %v", blob, got, err)
	}
	if err := compose.LoadVecs("rule", blob, vecs); err != nil {
		t.Errorf("LoadVecs of its own state: %v", err)
	}
	for _, c := range []struct {
		blob string
		want []optim.Vec
	}{
		{string(blob), []optim.Vec{3, 4}},
		{`{"version":2,"vecs":[3,4,9]}`, vecs},
		{`not json`, vecs},
	} {
		if err := compose.LoadVecs("rule", []byte(c.blob), c.want); err == nil || !strings.HasPrefix(err.Error(), "rule: load state") {
			t.Errorf("LoadVecs(%s, want %v) = %v, want a refusal naming rule", c.blob, c.want, err)
		}
	}
}
