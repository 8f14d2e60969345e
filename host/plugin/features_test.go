package plugin

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/optlab/optlab/internal/testutil"
	"github.com/optlab/optlab/plugins/compose"
	"github.com/optlab/optlab/plugins/swa"
	"github.com/optlab/optlab/sdk/optim"
	"github.com/optlab/optlab/sdk/protocoltest"
)

// featured is a member optimizer with every behaviour of optim.Features:
// plain gradient descent through BaseStep that keeps a vector and a step
// count as its state, forms its own predictive (distinguishable by its
// weights) and sends one program from Finalize. It records what the
// wrapper asked of it.
type featured struct {
	// configured collects the instances that were configured (a wrapper
	// also makes instances to read their Info).
	configured *[]*featured
	h          optim.Host
	hs         *optim.Handles
	g, keep    optim.Vec
	steps      int
	loaded     []byte
	finalize   int
}

func (f *featured) Info() optim.Info {
	return optim.Info{Name: "featured", Features: optim.Features{BaseStep: true, Predictive: true, State: true, Finalize: true}}
}

func (f *featured) Configure(ctx context.Context, h optim.Host, cfg optim.Config) error {
	f.h, f.hs = h, cfg.Namespace("featured")
	*f.configured = append(*f.configured, f)
	f.g, f.keep = f.hs.New("g"), f.hs.New("keep")
	_, err := h.Exec(ctx, f.hs.Prog().Alloc(f.g, 0).Alloc(f.keep, 0))
	return err
}

func (f *featured) Step(ctx context.Context, _ optim.StepInput) (optim.StepOutput, error) {
	p := f.hs.Prog()
	p.Grad(f.g, optim.Params, optim.Batch{}, optim.BNUpdate)
	p.BaseStep(optim.Params, f.g).Copy(f.keep, f.g)
	f.steps++
	_, err := f.h.Exec(ctx, p)
	return optim.StepOutput{}, err
}

func (f *featured) Predictive(context.Context) (optim.Predictive, error) {
	return optim.Predictive{Kind: optim.Members, Vecs: []optim.Vec{optim.Params}, Weights: []float64{1}}, nil
}

func (f *featured) SaveState(context.Context) ([]byte, []optim.Vec, error) {
	b, err := json.Marshal(f.steps)
	return b, []optim.Vec{f.keep}, err
}

func (f *featured) LoadState(_ context.Context, blob []byte) error {
	f.loaded = slices.Clone(blob)
	return json.Unmarshal(blob, &f.steps)
}

func (f *featured) Finalize(ctx context.Context) error {
	f.finalize++
	p := f.hs.Prog()
	p.Norm(f.keep)
	_, err := f.h.Exec(ctx, p)
	return err
}

func (f *featured) Resolved() map[string]any {
	return map[string]any{"steps_at_configure": int64(f.steps)}
}

// A wrapped plugin's features reach the host: SWA, served as a plugin
// process would be, over a member with a predictive, state and a
// finalizer. The host sees SWA's features through the one adapter; the
// member's predictive is the run's before the first average, its state
// travels inside SWA's (blob and vectors) and comes back on resume, its
// Finalize runs when the host finalizes SWA, and what it resolved is in
// SWA's reply under its prefixed names.
func TestWrappedFeaturesReachTheHost(t *testing.T) {
	ctx := context.Background()
	var members []*featured
	newSWA := func() optim.Optimizer {
		reg := &optim.Registry{}
		if err := reg.Add(optim.Entry{Name: "featured", New: func() optim.Optimizer {
			return &featured{configured: &members}
		}}); err != nil {
			t.Fatal(err)
		}
		return swa.New(compose.Options{Members: reg})
	}
	launchSWA := func() *Client {
		c, err := Launch(ctx, LaunchSpec{Name: "swa", InProcess: newSWA, Logger: quietLogger(t)})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		return c
	}
	c := launchSWA()
	opt := c.AsOptimizer()
	if got, want := opt.Info().Features, (optim.Features{Predictive: true, State: true, Finalize: true}); got != want {
		t.Fatalf("SWA's features as the host sees them: %+v, want %+v", got, want)
	}
	host := protocoltest.NewFakeHost(10)
	cfg := optim.Config{Params: map[string]any{"member": "featured", "start_epoch": int64(2)}, Seed: 1, TotalSteps: 8, StepsPerEpoch: 2, Members: 1}
	if err := opt.Configure(ctx, host, cfg); err != nil {
		t.Fatal(err)
	}
	if got := opt.Resolved(); !reflect.DeepEqual(got, map[string]any{"featured_steps_at_configure": int64(0)}) {
		t.Errorf("resolved %v, want the member's under its prefixed name", got)
	}
	member := members[len(members)-1]
	for s := range 4 {
		if _, err := opt.Step(ctx, optim.StepInput{Step: int64(s), Epoch: s / 2, LR: 0.1}); err != nil {
			t.Fatal(err)
		}
	}
	pred, err := opt.Predictive(ctx)
	if err != nil || !reflect.DeepEqual(pred.Weights, []float64{1}) {
		t.Errorf("predictive before the first average: %+v, %v; want the member's (weights [1])", pred, err)
	}
	blob, vecs, err := opt.SaveState(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var st struct{ Inner []byte }
	if err := json.Unmarshal(blob, &st); err != nil || string(st.Inner) != "4" || !slices.Contains(vecs, member.keep) {
		t.Errorf("SWA's state %s (vecs %v): want the member's blob 4 and its vector %d inside", blob, vecs, member.keep)
	}
	for s := 4; s < 8; s++ {
		if _, err := opt.Step(ctx, optim.StepInput{Step: int64(s), Epoch: s / 2, LR: 0.1}); err != nil {
			t.Fatal(err)
		}
	}
	if err := opt.Finalize(ctx); err != nil || member.finalize != 1 {
		t.Errorf("Finalize: %v; the member's Finalize ran %d times, want 1", err, member.finalize)
	}
	if pred, err := opt.Predictive(ctx); err != nil || pred.Weights != nil || len(pred.Vecs) != 1 || pred.Vecs[0] == optim.Params {
		t.Errorf("predictive after the average: %+v, %v; want SWA's average", pred, err)
	}

	// Resume: a fresh SWA plugin gives its member the blob it saved.
	c2 := launchSWA()
	resumed := c2.AsOptimizer()
	if err := resumed.Configure(ctx, protocoltest.NewFakeHost(10), cfg); err != nil {
		t.Fatal(err)
	}
	if err := resumed.LoadState(ctx, blob); err != nil {
		t.Fatal(err)
	}
	if m := members[len(members)-1]; string(m.loaded) != "4" || m.steps != 4 {
		t.Errorf("the resumed member loaded %q (%d steps), want its saved 4", m.loaded, m.steps)
	}
}

// Every feature of optim.FeatureSet, declared alone by a Python plugin
// (optlab.Features, from sdk/python/optlab/ops.json, which TestOpSetJSON
// keeps equal to the Go table), reaches the host through the wire as the
// same optim.Features: Go, Python and the wire agree on each. A Go plugin
// served in process does the same.
func TestFeaturesAgreeAcrossSDKs(t *testing.T) {
	testutil.NeedPython(t)
	sdk, err := filepath.Abs(filepath.Join("..", "..", "sdk", "python"))
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range optim.FeatureSet() {
		t.Run(s.Name, func(t *testing.T) {
			want := s.Set(optim.Features{}, true)
			field := strings.ReplaceAll(s.Name, "-", "_")
			script := filepath.Join(t.TempDir(), "declares.py")
			src := fmt.Sprintf(`#!/usr/bin/env python3
import sys
sys.path.insert(0, %q)
import optlab

class Declares(optlab.Optimizer):
    def info(self):
        return optlab.Info(name="declares", features=optlab.Features(%s=True))

if __name__ == "__main__":
    optlab.serve(Declares)
`, sdk, field)
			if err := os.WriteFile(script, []byte(src), 0o755); err != nil {
				t.Fatal(err)
			}
			py := launchPython(t, script, nil)
			if got := py.AsOptimizer().Info().Features; got != want {
				t.Errorf("Python plugin declaring %s: the host sees %+v, want %+v", field, got, want)
			}
			goc, err := Launch(context.Background(), LaunchSpec{Name: "declares", Logger: quietLogger(t),
				InProcess: func() optim.Optimizer { return declares{f: want} }})
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = goc.Close() }()
			if got := goc.AsOptimizer().Info(); got.Features != want || got.ProtocolMinor != optim.ProtocolMinor {
				t.Errorf("Go plugin declaring %s: the host sees %+v (minor %d), want %+v stamped %d",
					s.Field, got.Features, got.ProtocolMinor, want, optim.ProtocolMinor)
			}
		})
	}
}

// declares is a Go optimizer that declares the features f and nothing else.
type declares struct {
	optim.Defaults
	f optim.Features
}

func (d declares) Info() optim.Info                                        { return optim.Info{Name: "declares", Features: d.f} }
func (declares) Configure(context.Context, optim.Host, optim.Config) error { return nil }
func (declares) Step(context.Context, optim.StepInput) (optim.StepOutput, error) {
	return optim.StepOutput{}, nil
}
