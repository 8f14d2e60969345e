package eval

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/optlab/optlab/host/data"
	"github.com/optlab/optlab/host/data/devset"
	"github.com/optlab/optlab/host/tensor"
	"github.com/optlab/optlab/sdk/optim"
)

// echo is an Interpreter whose "probabilities" are the inputs it is given,
// so Predict's output shows which samples reached it, in which batches, and
// prepared how.
type echo struct {
	w       *tensor.Worker
	batches []int64 // the size of every batch
	gradOn  bool    // grad mode was on during a call
	failAt  int     // the call (1-based) that fails; 0 = none
	cancel  func()  // called on the first call, when set
}

func (e *echo) Worker() *tensor.Worker { return e.w }

func (e *echo) Probs(_ context.Context, s *tensor.Scope, _ optim.Predictive, x tensor.T, _ int64) (tensor.T, error) {
	e.batches = append(e.batches, x.Shape()[0])
	if e.cancel != nil {
		e.cancel()
	}
	if prev, err := tensor.SetGradEnabled(false); err != nil || prev {
		e.gradOn = true
	}
	if len(e.batches) == e.failAt {
		return tensor.T{}, errors.New("batch failed")
	}
	return s.Scale(x, 1), nil
}

func TestPredictBatches(t *testing.T) {
	w := tensor.NewWorker(1)
	defer w.Close()
	ctx := context.Background()
	// 7 samples of 2 features, normalized by Mean 1 and Std 2.
	set := &data.Set{Name: "echo", Shape: []int{2}, Classes: 2, Mean: []float32{1, 1}, Std: []float32{2, 2}}
	var want []float64
	for i := range 14 {
		set.F = append(set.F, float32(i))
		want = append(want, float64((float32(i)-1)/2))
	}
	for i := range 7 {
		set.Y = append(set.Y, int32(i%2))
	}
	ds, err := devset.Upload(ctx, w, tensor.CPU, set, true)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = w.Do(ctx, func() error { ds.Drop(); return nil }) }()

	tests := []struct {
		batch   int64
		batches []int64
	}{
		{0, []int64{7}},
		{3, []int64{3, 3, 1}},
		{7, []int64{7}},
		{100, []int64{7}},
	}
	for _, tc := range tests {
		in := &echo{w: w}
		got, err := Predict(ctx, in, optim.Predictive{Kind: optim.Point}, ds, tc.batch, 1)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, want) || !slices.Equal(in.batches, tc.batches) || in.gradOn {
			t.Errorf("batch %d: got %v in batches %v (grad on: %v), want %v in %v", tc.batch, got, in.batches, in.gradOn, want, tc.batches)
		}
	}

	// Cancelled (SIGINT/SIGTERM) during the first batch: Predict stops
	// before the second instead of evaluating the whole set (issue 26,
	// case 08).
	cctx, cancel := context.WithCancel(ctx)
	in := &echo{w: w, cancel: cancel}
	if _, err := Predict(cctx, in, optim.Predictive{Kind: optim.Point}, ds, 3, 1); !errors.Is(err, context.Canceled) || len(in.batches) != 1 {
		t.Errorf("cancelled during batch 1: err = %v after batches %v, want context.Canceled after one", err, in.batches)
	}

	in = &echo{w: w, failAt: 2}
	if _, err := Predict(ctx, in, optim.Predictive{Kind: optim.Point}, ds, 3, 1); err == nil || err.Error() != "batch failed" {
		t.Errorf("a failing batch: err = %v", err)
	}
	// Grad mode is restored after Predict, failed or not.
	err = w.Do(ctx, func() error {
		if on, err := tensor.SetGradEnabled(true); err != nil || !on {
			t.Errorf("grad mode after Predict: on = %v, %v", on, err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
