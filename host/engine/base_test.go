package engine

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/optlab/optlab/internal/testutil"

	"github.com/optlab/optlab/sdk/optim"
)

// semBaseRef is one member's base optimizer in float64, written from
// PyTorch's torch.optim.SGD and torch.optim.Adam (coupled weight decay).
type semBaseRef struct {
	c       BaseConfig
	p       []float64
	buf     []float64 // SGD momentum buffer
	m, v    []float64 // Adam moments
	t       int
	started bool
}

func (r *semBaseRef) step(g []float64, lr float64) {
	c := r.c
	d := make([]float64, len(g))
	for i := range d {
		d[i] = g[i] + c.WeightDecay*r.p[i]
	}
	if c.Name == "adam" {
		if r.m == nil {
			r.m, r.v = make([]float64, len(d)), make([]float64, len(d))
		}
		r.t++
		bc1 := 1 - math.Pow(c.Beta1, float64(r.t))
		bc2 := 1 - math.Pow(c.Beta2, float64(r.t))
		for i := range d {
			r.m[i] = c.Beta1*r.m[i] + (1-c.Beta1)*d[i]
			r.v[i] = c.Beta2*r.v[i] + (1-c.Beta2)*d[i]*d[i]
			den := math.Sqrt(r.v[i])/math.Sqrt(bc2) + c.Eps
			r.p[i] -= lr / bc1 * r.m[i] / den
		}
		return
	}
	if c.Momentum != 0 {
		if !r.started {
			r.buf = slices.Clone(d)
			r.started = true
		} else {
			for i := range d {
				r.buf[i] = c.Momentum*r.buf[i] + (1-c.Dampening)*d[i]
			}
		}
		for i := range d {
			if c.Nesterov {
				d[i] += c.Momentum * r.buf[i]
			} else {
				d[i] = r.buf[i]
			}
		}
	}
	for i := range d {
		r.p[i] -= lr * d[i]
	}
}

// TestBaseStep runs several steps of each base optimizer on two members,
// with SetLR overrides that BeginStep resets, against the float64 reference.
func TestBaseStep(t *testing.T) {
	configs := []struct {
		name string
		c    BaseConfig
	}{
		{"sgd", BaseConfig{Name: "sgd"}},
		{"sgd by default", BaseConfig{}},
		{"sgd weight decay", BaseConfig{Name: "sgd", WeightDecay: 0.1}},
		{"momentum", BaseConfig{Name: "sgd", Momentum: 0.9}},
		{"momentum dampening weight decay", BaseConfig{Name: "sgd", Momentum: 0.9, Dampening: 0.3, WeightDecay: 0.05}},
		{"nesterov", BaseConfig{Name: "sgd", Momentum: 0.8, Nesterov: true, WeightDecay: 0.01}},
		{"adam", BaseConfig{Name: "adam", Beta1: 0.9, Beta2: 0.999, Eps: 1e-8}},
		{"adam weight decay", BaseConfig{Name: "adam", Beta1: 0.8, Beta2: 0.99, Eps: 1e-3, WeightDecay: 0.1}},
	}
	// One training step: the schedule's lr and the ops after the gradients
	// are drawn into handles 1 (member 0) and 2 (member 1).
	type update struct {
		member int
		lr     float64 // the lr the reference must use
	}
	steps := []struct {
		lr      float64
		prog    *optim.Program
		updates []update
	}{
		{0.1, optim.Prog().BaseStep(optim.Params, 1).BaseStep(optim.ParamsOf(1), 2),
			[]update{{0, 0.1}, {1, 0.1}}},
		{0.05, optim.Prog().SetLR(0, 0.3).BaseStep(optim.Params, 1).BaseStep(optim.ParamsOf(1), 2),
			[]update{{0, 0.3}, {1, 0.05}}},
		{0.2, optim.Prog().SetLR(1, 0.01).BaseStep(optim.Params, 1).BaseStep(optim.ParamsOf(1), 2),
			[]update{{0, 0.2}, {1, 0.01}}},
		{0.02, optim.Prog().BaseStep(optim.Params, 1).BaseStep(optim.ParamsOf(1), 2),
			[]update{{0, 0.02}, {1, 0.02}}},
		{0.1, optim.Prog().BaseStep(optim.Params, 1).SetLR(0, 0.5).BaseStep(optim.Params, 1).BaseStep(optim.ParamsOf(1), 2),
			[]update{{0, 0.1}, {0, 0.5}, {1, 0.1}}},
		{0.3, optim.Prog().SetLR(0, 0).SetLR(1, 0.07).BaseStep(optim.Params, 1).BaseStep(optim.ParamsOf(1), 2),
			[]update{{0, 0}, {1, 0.07}}},
	}
	for _, tc := range configs {
		t.Run(tc.name, func(t *testing.T) {
			m0, m1 := semTiny(t, []int64{4}, 5, 3), semTiny(t, []int64{4}, 5, 3)
			e := semEngine(t, Config{Seed: 21, Base: tc.c}, m0, m1)
			refs := []*semBaseRef{
				{c: tc.c, p: semRead(t, e, optim.Params)},
				{c: tc.c, p: semRead(t, e, optim.ParamsOf(1))},
			}
			if tc.c.Name == "" {
				refs[0].c.Name, refs[1].c.Name = "sgd", "sgd"
			}
			semExec(t, e, optim.Prog().Alloc(1, 0).Alloc(2, 1))
			for k, st := range steps {
				e.BeginStep(int64(k), st.lr)
				semExec(t, e, optim.Prog().RandN(1, 1, int64(100+10*k)).RandN(2, 0.5, int64(101+10*k)))
				g := [][]float64{semRead(t, e, 1), semRead(t, e, 2)}
				semExec(t, e, st.prog)
				for _, u := range st.updates {
					refs[u.member].step(g[u.member], u.lr)
				}
				for mi, h := range []optim.Vec{optim.Params, optim.ParamsOf(1)} {
					testutil.CheckVec(t, fmt.Sprintf("step %d member %d", k, mi), semRead(t, e, h), refs[mi].p, 2e-6, 1e-5)
				}
				if !slices.Equal(semRead(t, e, 1), g[0]) || !slices.Equal(semRead(t, e, 2), g[1]) {
					t.Fatalf("step %d: BaseStep changed its gradient vector", k)
				}
				if t.Failed() {
					t.FailNow()
				}
			}
		})
	}
}

// TestBaseStepUnknown checks the error of a base optimizer the engine does
// not have (the errors of BaseStep's operands are in the conformance suite).
func TestBaseStepUnknown(t *testing.T) {
	e := semEngine(t, Config{Seed: 1, Base: BaseConfig{Name: "rmsprop"}}, semTiny(t, []int64{4}, 5, 3))
	e.BeginStep(0, 0.1)
	_, err := e.Exec(context.Background(), optim.Prog().Alloc(1, 0).BaseStep(optim.Params, 1))
	if want := `unknown base optimizer "rmsprop"`; err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("error %v, want one containing %q", err, want)
	}
}
