package train

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/optlab/optlab/internal/testutil"

	"github.com/optlab/optlab/host/checkpoint"
	"github.com/optlab/optlab/host/data"
	"github.com/optlab/optlab/host/data/devset"
	"github.com/optlab/optlab/host/engine"
	"github.com/optlab/optlab/host/eval"
	"github.com/optlab/optlab/host/model"
	"github.com/optlab/optlab/host/tensor"
	"github.com/optlab/optlab/sdk/optim"
)

// bnEngine is a one-member CNN engine on the CPU whose current batch is the
// whole set, with the set on the device and a gradient vector g allocated.
func bnEngine(t *testing.T, w *tensor.Worker, set *data.Set) (*engine.Engine, *devset.Set) {
	t.Helper()
	ctx := context.Background()
	cnn, err := model.NewCNN(set.Classes, []int64{2, 4, 4})
	if err != nil {
		t.Fatal(err)
	}
	e, err := engine.New(ctx, w, engine.Config{Device: tensor.CPU, Seed: 3, Base: engine.BaseConfig{Name: "sgd", Momentum: 0.9}}, []*model.Model{cnn})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	ds, err := devset.Upload(ctx, w, tensor.CPU, set, true)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = w.Do(ctx, func() error { ds.Drop(); return nil }) })
	err = w.Do(ctx, func() error {
		s := tensor.NewScope()
		defer s.Close()
		idx := make([]int64, set.Len())
		for i := range idx {
			idx[i] = int64(i)
		}
		x, y := ds.Batch(s, idx, devset.Augment{}, nil, tensor.CPU)
		if err := s.Err(); err != nil {
			return err
		}
		e.SetBatch(0, s.Keep(x), s.Keep(y))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return e, ds
}

// bnExec runs a program and fails the test on error.
func bnExec(t *testing.T, e *engine.Engine, p *optim.Program) {
	t.Helper()
	if _, err := e.Exec(context.Background(), p); err != nil {
		t.Fatal(err)
	}
}

// bnTrain runs n SGD steps of member 0 with gradient vector g (BatchNorm in
// train mode, so the running statistics move with the parameters).
func bnTrain(t *testing.T, e *engine.Engine, g optim.Vec, n int) {
	t.Helper()
	for range n {
		e.BeginStep(0, 0.05)
		p := optim.Prog()
		p.Grad(g, optim.Params, optim.Batch{}, optim.BNUpdate)
		bnExec(t, e, p.BaseStep(optim.Params, g))
	}
}

// A snapshot's statistics are part of the training state: a resumed
// engine predicts with them exactly as the original did.
func TestCopyStateInTrainingState(t *testing.T) {
	w := tensor.NewWorker(1)
	defer w.Close()
	ctx := context.Background()
	set := testutil.BNImages(8, 3)
	hs := optim.NewHandles()
	g, snap, plain := hs.New("g"), hs.New("snap"), hs.New("plain")
	e, ds := bnEngine(t, w, set)
	bnExec(t, e, optim.Prog().Alloc(g, 0))
	bnTrain(t, e, g, 2)
	bnExec(t, e, optim.Prog().Alloc(snap, 0).CopyState(snap, optim.Params).Alloc(plain, 0).Copy(plain, optim.Params))
	bnTrain(t, e, g, 2)
	members := func(e *engine.Engine, ds *devset.Set) []float64 {
		p, err := eval.Predict(ctx, e, optim.Predictive{Kind: optim.Members, Vecs: []optim.Vec{snap, plain}}, ds, 0, 1)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	want := members(e, ds)
	ts, meta, err := saveEngineState(ctx, e, []optim.Vec{snap, plain})
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]checkpoint.Tensor{}
	for _, c := range ts {
		byName[c.Name] = c
	}
	name := func(v optim.Vec, suffix string) string { return "vecs." + strconv.Itoa(int(v)) + suffix }
	if _, ok := byName[name(snap, ".bn")]; !ok {
		t.Fatal("the training state has no statistics for the snapshot")
	}
	if _, ok := byName[name(plain, ".bn")]; ok {
		t.Fatal("the training state has statistics for a plain copy")
	}

	r, rds := bnEngine(t, w, set)
	bnExec(t, r, optim.Prog().Alloc(g, 0).Alloc(snap, 0).Alloc(plain, 0))
	if err := loadEngineState(ctx, r, byName, meta); err != nil {
		t.Fatal(err)
	}
	if got := members(r, rds); !slices.Equal(got, want) {
		t.Errorf("resumed snapshots predict %v, want %v", got, want)
	}

	unallocated := hs.New("unallocated")
	delete(byName, name(plain, ""))
	byName[name(unallocated, ".bn")] = byName[name(snap, ".bn")]
	if err := loadEngineState(ctx, r, byName, meta); err == nil || !strings.Contains(err.Error(), name(unallocated, ".bn")) {
		t.Errorf("statistics of an unallocated vector: %v", err)
	}
}
