package engine

import (
	"context"
	"math"
	"strings"
	"testing"

	"github.com/optlab/optlab/internal/testutil"

	"github.com/optlab/optlab/host/data"
	"github.com/optlab/optlab/host/data/devset"
	"github.com/optlab/optlab/host/model"
	"github.com/optlab/optlab/host/tensor"
	"github.com/optlab/optlab/sdk/optim"
)

// bnEngine is a one-member CNN engine whose current batch is the whole set.
func bnEngine(t *testing.T, set *data.Set) (*Engine, *devset.Set) {
	t.Helper()
	cnn, err := model.NewCNN(set.Classes, []int64{2, 4, 4})
	if err != nil {
		t.Fatal(err)
	}
	e := semEngine(t, Config{Seed: 3, Base: BaseConfig{Name: "sgd", Momentum: 0.9}}, cnn)
	ds := semUpload(t, e, set, true)
	semDo(t, e, func(s *tensor.Scope) error {
		idx := make([]int64, set.Len())
		for i := range idx {
			idx[i] = int64(i)
		}
		x, y := ds.Batch(s, idx, devset.Augment{}, nil, e.cfg.Device)
		if err := s.Err(); err != nil {
			return err
		}
		e.SetBatch(0, s.Keep(x), s.Keep(y))
		return nil
	})
	semExec(t, e, optim.Prog().Alloc(100, 0))
	return e, ds
}

// bnTrain runs n SGD steps of member 0 (BatchNorm in train mode, so the
// running statistics move with the parameters).
func bnTrain(t *testing.T, e *Engine, n int) {
	t.Helper()
	for range n {
		e.BeginStep(0, 0.05)
		prog := optim.Prog()
		prog.Grad(100, optim.Params, optim.Batch{}, optim.BNUpdate)
		semExec(t, e, prog.BaseStep(optim.Params, 100))
	}
}

func bnMaxDiff(a, b []float64) float64 {
	d := 0.0
	for i := range a {
		d = max(d, math.Abs(a[i]-b[i]))
	}
	return d
}

// A Copy with BN keeps the BatchNorm statistics of its moment: the
// predictive over the snapshot equals the point predictive at the time it
// was taken, after the member trained on; a plain Copy evaluates with the
// member's later statistics and does not. Copying the state back into the
// live parameters restores both.
func TestCopyStateSnapshotsBatchNorm(t *testing.T) {
	set := testutil.BNImages(8, 3)
	e, ds := bnEngine(t, set)
	point := optim.Predictive{Kind: optim.Point}
	bnTrain(t, e, 2)
	then := semPredict(t, e, point, ds, 0, 1)
	semExec(t, e, optim.Prog().Alloc(1, 0).CopyState(1, optim.Params).Alloc(2, 0).Copy(2, optim.Params))
	bnTrain(t, e, 3)
	if d := bnMaxDiff(semPredict(t, e, point, ds, 0, 1), then); d < 1e-4 {
		t.Fatalf("training on changed the predictive by only %g", d)
	}
	snap := semPredict(t, e, optim.Predictive{Kind: optim.Members, Vecs: []optim.Vec{1}}, ds, 0, 1)
	testutil.CheckVec(t, "snapshot with its statistics", snap, then, 1e-7, 0)
	plain := semPredict(t, e, optim.Predictive{Kind: optim.Members, Vecs: []optim.Vec{2}}, ds, 0, 1)
	if d := bnMaxDiff(plain, then); d < 1e-4 {
		t.Errorf("parameters alone with the later statistics differ by only %g: the test cannot tell the two apart", d)
	}

	semExec(t, e, optim.Prog().CopyState(optim.Params, 1))
	testutil.CheckVec(t, "restored state", semPredict(t, e, point, ds, 0, 1), then, 1e-7, 0)

	// A plain Copy into a vector drops the statistics it held.
	semExec(t, e, optim.Prog().Copy(1, 2))
	if _, err := e.Exec(context.Background(), optim.Prog().CopyState(2, 1)); err == nil || !strings.Contains(err.Error(), "holds no statistics") {
		t.Errorf("copy with BN from a vector without statistics: %v", err)
	}
}
