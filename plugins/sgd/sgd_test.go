package sgd_test

import (
	"context"
	"flag"
	"slices"
	"strings"
	"testing"

	"github.com/optlab/optlab/plugins/sgd"
	"github.com/optlab/optlab/sdk/optim"
	"github.com/optlab/optlab/sdk/optimtest"
)

func TestOneExecPerStepAndMembers(t *testing.T) {
	q := &optimtest.Quadratic{A: [][]float64{{2, 0.5}, {0.5, 1}}, B: []float64{1, 0}}
	tests := []struct {
		name    string
		members int
		base    optimtest.BaseOptimizer
	}{
		{"plain", 1, optimtest.BaseOptimizer{}},
		{"momentum nesterov wd, 3 members", 3, optimtest.BaseOptimizer{Momentum: 0.9, Nesterov: true, WeightDecay: 1e-3}},
		{"adam, 2 members", 2, optimtest.BaseOptimizer{Adam: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			opts := []optimtest.HostOption{optimtest.WithMembers(tt.members), optimtest.WithBase(tt.base)}
			for m := range tt.members {
				opts = append(opts, optimtest.WithParams(m, []float64{float64(m) + 1, -1}))
			}
			h, err := optimtest.NewHost(q, opts...)
			if err != nil {
				t.Fatal(err)
			}
			// Reference: the host's own base step driven by hand.
			ref, err := optimtest.NewHost(q, opts...)
			if err != nil {
				t.Fatal(err)
			}
			const steps = 6
			if _, err := optimtest.Run(context.Background(), sgd.New(), h, steps, optimtest.WithLR(0.05)); err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			gs := optim.NewHandles().PerMember("g", tt.members)
			p := optim.Prog()
			for m, g := range gs {
				p.Alloc(g, m)
			}
			if _, err := ref.Exec(ctx, p); err != nil {
				t.Fatal(err)
			}
			for s := range int64(steps) {
				ref.BeginStep(optim.StepInput{Step: s, LR: 0.05})
				p := optim.Prog()
				for m, g := range gs {
					p.Grad(g, optim.ParamsOf(m), optim.Batch{}, optim.BNUpdate)
					p.BaseStep(optim.ParamsOf(m), g)
				}
				if _, err := ref.Exec(ctx, p); err != nil {
					t.Fatal(err)
				}
				if n := h.ExecCount(s); n != 1 {
					t.Errorf("step %d: %d Exec calls, want 1", s, n)
				}
				if n := h.ReadCount(s); n != 0 {
					t.Errorf("step %d: %d values read back, want 0", s, n)
				}
			}
			for m := range tt.members {
				if got, want := h.Params(m), ref.Params(m); !slices.Equal(got, want) {
					t.Errorf("member %d: %v, want %v", m, got, want)
				}
			}
		})
	}
}

func TestTrainsMLP(t *testing.T) {
	h, err := optimtest.NewHost(optimtest.NewMLP(optimtest.MLPConfig{Hidden: 8, Samples: 128}),
		optimtest.WithBatchSize(32), optimtest.WithBase(optimtest.BaseOptimizer{Momentum: 0.9}))
	if err != nil {
		t.Fatal(err)
	}
	outs, err := optimtest.Run(context.Background(), sgd.New(), h, 80, optimtest.WithLR(0.1))
	if err != nil {
		t.Fatal(err)
	}
	first, last := outs[0].Metrics, outs[len(outs)-1].Metrics
	if !(last["loss"] < first["loss"]/2) || last["acc"] < 0.8 {
		t.Errorf("did not train: first %v, last %v", first, last)
	}
}

func TestRejectsUnknownParams(t *testing.T) {
	h, err := optimtest.NewHost(&optimtest.Linear{C: []float64{1}})
	if err != nil {
		t.Fatal(err)
	}
	err = sgd.New().Configure(context.Background(), h, optim.Config{Params: map[string]any{"rho": 0.1}, Members: 1})
	if err == nil || !strings.Contains(err.Error(), "unknown") {
		t.Errorf("err = %v", err)
	}
}

func TestState(t *testing.T) {
	st := sgd.New()
	if st.Info().Features.State {
		t.Fatal("sgd declares state: its state lives on the host")
	}
	blob, vecs, err := st.SaveState(context.Background())
	if err != nil || blob != nil || vecs != nil {
		t.Errorf("state %v %v %v", blob, vecs, err)
	}
	if err := st.LoadState(context.Background(), nil); err != nil {
		t.Error(err)
	}
	if err := st.LoadState(context.Background(), []byte("x")); err == nil {
		t.Error("garbage state accepted")
	}
}

var update = flag.Bool("update", false, "rewrite testdata/*.golden")

// TestTraceGolden pins the ops that Configure and two steps of a
// two-member run send: testdata/trace.golden documents the algorithm.
func TestTraceGolden(t *testing.T) {
	optimtest.TestTraces(t, *update, optimtest.TraceCase{Golden: "testdata/trace.golden", New: sgd.New, Members: 2})
}
