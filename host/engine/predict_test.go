package engine

import (
	"context"
	"errors"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/optlab/optlab/internal/testutil"

	"github.com/optlab/optlab/host/data"
	"github.com/optlab/optlab/host/data/devset"
	"github.com/optlab/optlab/host/eval"
	"github.com/optlab/optlab/host/model"
	"github.com/optlab/optlab/host/tensor"
	"github.com/optlab/optlab/sdk/optim"
)

// semProbs is the float64 predictive of semTiny at p, N×C row-major.
func semProbs(m *model.Model, p []float64, x [][]float64) []float64 {
	var out []float64
	for _, row := range x {
		out = append(out, semSoftmax(semLogits(m, p, row))...)
	}
	return out
}

func semUpload(t testing.TB, e *Engine, s *data.Set, normalize bool) *devset.Set {
	t.Helper()
	ds, err := devset.Upload(context.Background(), e.w, e.cfg.Device, s, normalize)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.w.Do(context.Background(), func() error { ds.Drop(); return nil }) })
	return ds
}

// semPredict evaluates pred over ds with host/eval, which runs the engine's
// Probs batch by batch.
func semPredict(t testing.TB, e *Engine, pred optim.Predictive, ds *devset.Set, batch, seed int64) []float64 {
	t.Helper()
	p, err := eval.Predict(context.Background(), e, pred, ds, batch, seed)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func semRowsSumToOne(t testing.TB, what string, p []float64, n, c int) {
	t.Helper()
	if len(p) != n*c {
		t.Errorf("%s: %d probabilities, want %d×%d", what, len(p), n, c)
		return
	}
	for i := range n {
		var s float64
		for k := range c {
			v := p[i*c+k]
			if !(v >= 0 && v <= 1) {
				t.Errorf("%s: row %d has probability %v", what, i, v)
			}
			s += v
		}
		if math.Abs(s-1) > 1e-5 {
			t.Errorf("%s: row %d sums to %v", what, i, s)
		}
	}
}

func TestPredict(t *testing.T) {
	const n, f, c = 10, 4, 3
	set := testutil.FeatureSet(n, f, c)
	x := testutil.Inputs(set)
	m0, m1, m2 := semTiny(t, []int64{f}, 5, c), semTiny(t, []int64{f}, 5, c), semTiny(t, []int64{f}, 7, c)
	e := semEngine(t, Config{Seed: 13}, m0, m1, m2)
	ds := semUpload(t, e, set, true)
	p0, p2 := semRead(t, e, optim.Params), semRead(t, e, optim.ParamsOf(2))
	semExec(t, e, optim.Prog().Alloc(1, 0).Copy(1, optim.Params).Scale(1, optim.K(-0.5)).AddConst(1, optim.K(0.1)).
		Alloc(2, 0).Alloc(3, 0).Fill(3, optim.K(0.05)))
	q := semRead(t, e, 1)
	point := semPredict(t, e, optim.Predictive{Kind: optim.Point}, ds, 0, 1)
	semRowsSumToOne(t, "point", point, n, c)
	ref0, refQ := semProbs(m0, p0, x), semProbs(m0, q, x)
	testutil.CheckVec(t, "point", point, ref0, 1e-6, 1e-5)

	mix := func(w0, w1 float64, a, b []float64) []float64 {
		out := make([]float64, len(a))
		for i := range a {
			out[i] = w0*a[i] + w1*b[i]
		}
		return out
	}
	tests := []struct {
		name string
		pred optim.Predictive
		want []float64
	}{
		{"members weighted", optim.Predictive{Kind: optim.Members, Vecs: []optim.Vec{optim.Params, 1}, Weights: []float64{0.25, 0.75}}, mix(0.25, 0.75, ref0, refQ)},
		{"members uniform", optim.Predictive{Kind: optim.Members, Vecs: []optim.Vec{optim.Params, 1}}, mix(0.5, 0.5, ref0, refQ)},
		{"members one vector", optim.Predictive{Kind: optim.Members, Vecs: []optim.Vec{1}}, refQ},
		{"members other architecture", optim.Predictive{Kind: optim.Members, Vecs: []optim.Vec{optim.ParamsOf(2)}}, semProbs(m2, p2, x)},
		{"members across architectures", optim.Predictive{Kind: optim.Members, Vecs: []optim.Vec{optim.Params, optim.ParamsOf(2)}, Weights: []float64{0.6, 0.4}},
			mix(0.6, 0.4, ref0, semProbs(m2, p2, x))},
		{"samples with zero std", optim.Predictive{Kind: optim.Samples, Mean: optim.Params, Std: 2, N: 3}, ref0},
		{"samples of another mean, zero std", optim.Predictive{Kind: optim.Samples, Mean: 1, Std: 2, N: 2}, refQ},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for _, batch := range []int64{0, 3, 1} {
				got := semPredict(t, e, tc.pred, ds, batch, 5)
				semRowsSumToOne(t, tc.name, got, n, c)
				testutil.CheckVec(t, tc.name, got, tc.want, 1e-6, 1e-5)
			}
		})
	}

	// Two members with identical parameters predict like one.
	semExec(t, e, optim.Prog().Copy(optim.ParamsOf(1), optim.Params))
	both := semPredict(t, e, optim.Predictive{Kind: optim.Members, Vecs: []optim.Vec{optim.Params, optim.ParamsOf(1)}}, ds, 0, 1)
	testutil.CheckVec(t, "two identical members", both, point, 1e-7, 1e-6)

	// Gaussian samples: valid distributions, fixed by the seed, independent
	// of the batching, different from the mean's prediction.
	gauss := optim.Predictive{Kind: optim.Samples, Mean: optim.Params, Std: 3, N: 4}
	s1 := semPredict(t, e, gauss, ds, 0, 7)
	semRowsSumToOne(t, "samples", s1, n, c)
	if s2 := semPredict(t, e, gauss, ds, 0, 7); !slices.Equal(s1, s2) {
		t.Error("samples with the same seed differ")
	}
	testutil.CheckVec(t, "samples in batches of 3", semPredict(t, e, gauss, ds, 3, 7), s1, 1e-7, 1e-6)
	if s3 := semPredict(t, e, gauss, ds, 0, 8); slices.Equal(s1, s3) {
		t.Error("samples with seeds 7 and 8 are identical")
	}
	if slices.Equal(s1, point) {
		t.Error("samples with std 0.05 equal the point prediction")
	}

	// Predict leaves parameters and grad mode alone.
	if !slices.Equal(semRead(t, e, optim.Params), p0) {
		t.Error("Predict changed Params")
	}
	xb, yb := testutil.Features(4, f, c, 3)
	semBatch(t, e, 0, xb, yb)
	semGrad(t, e, 2, optim.Params)
}

func TestPredictErrors(t *testing.T) {
	set := testutil.FeatureSet(5, 4, 3)
	e := semEngine(t, Config{Seed: 13}, semTiny(t, []int64{4}, 5, 3), semTiny(t, []int64{4}, 6, 3))
	ds := semUpload(t, e, set, true)
	semExec(t, e, optim.Prog().Alloc(1, 0).Alloc(2, 1))
	tests := []struct {
		name    string
		pred    optim.Predictive
		errWith string
	}{
		{"members without vectors", optim.Predictive{Kind: optim.Members}, "no vectors"},
		{"weights mismatch", optim.Predictive{Kind: optim.Members, Vecs: []optim.Vec{0, 1}, Weights: []float64{1}}, "1 weights for 2 vectors"},
		{"unallocated vector", optim.Predictive{Kind: optim.Members, Vecs: []optim.Vec{42}}, "not allocated"},
		{"no such member", optim.Predictive{Kind: optim.Members, Vecs: []optim.Vec{optim.ParamsOf(4)}}, "names member 4; the run has 2"},
		{"no samples", optim.Predictive{Kind: optim.Samples, Mean: 0, Std: 1}, "0 samples"},
		{"variational weights of a point model", optim.Predictive{Kind: optim.Samples, N: 2}, "not variational"},
		{"std of another layout", optim.Predictive{Kind: optim.Samples, Mean: 0, Std: 2, N: 2}, "has the layout of member 1"},
		{"unknown kind", optim.Predictive{Kind: 9}, "unknown kind 9"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := eval.Predict(context.Background(), e, tc.pred, ds, 0, 1)
			if err == nil || !strings.Contains(err.Error(), tc.errWith) {
				t.Fatalf("Predict: %v, want an error containing %q", err, tc.errWith)
			}
		})
	}
	// A failed Predict leaves grad mode on.
	xb, yb := testutil.Features(4, 4, 3, 3)
	semBatch(t, e, 0, xb, yb)
	semGrad(t, e, 1, optim.Params)
}

// TestPredictImagesEvalMode predicts raw 8-bit images: the inputs are
// scaled and normalized like training batches, and BatchNorm uses running
// statistics, so a sample's prediction does not depend on its batch.
func TestPredictImagesEvalMode(t *testing.T) {
	const n, c = 6, 3
	set := &data.Set{Name: "sem-images", Shape: []int{2, 2, 2}, Classes: c,
		Mean: []float32{0.4, 0.6}, Std: []float32{0.2, 0.3}}
	for i := range n * 8 {
		set.X = append(set.X, uint8((i*37+11)%256))
	}
	for i := range n {
		set.Y = append(set.Y, int32(i%c))
	}
	m := semTiny(t, []int64{2, 2, 2}, 5, c)
	e := semEngine(t, Config{Seed: 2}, m)
	ds := semUpload(t, e, set, true)
	x := make([][]float64, n)
	for i := range x {
		for k := range 8 {
			ch := k / 4
			v := float32(set.X[i*8+k]) * float32(1.0/255)
			x[i] = append(x[i], float64((v-set.Mean[ch])/set.Std[ch]))
		}
	}
	got := semPredict(t, e, optim.Predictive{Kind: optim.Point}, ds, 0, 1)
	testutil.CheckVec(t, "raw8 point", got, semProbs(m, semRead(t, e, optim.Params), x), 1e-6, 1e-5)

	cnn, err := model.NewCNN(c, []int64{2, 4, 4})
	if err != nil {
		t.Fatal(err)
	}
	img := &data.Set{Name: "sem-cnn", Shape: []int{2, 4, 4}, Classes: c, Mean: []float32{0.5, 0.5}, Std: []float32{0.25, 0.25}}
	for i := range n * 32 {
		img.X = append(img.X, uint8((i*53+7)%256))
	}
	img.Y = set.Y
	ec := semEngine(t, Config{Seed: 2}, cnn)
	dc := semUpload(t, ec, img, true)
	// Move the running statistics away from (0, 1) first.
	tr, err := devset.Upload(context.Background(), ec.w, ec.cfg.Device, img, true)
	if err != nil {
		t.Fatal(err)
	}
	semDo(t, ec, func(s *tensor.Scope) error {
		x, y := tr.Batch(s, []int64{0, 1, 2, 3, 4, 5}, devset.Augment{}, nil, ec.cfg.Device)
		if err := s.Err(); err != nil {
			return err
		}
		ec.SetBatch(0, s.Keep(x), s.Keep(y))
		tr.Drop()
		return nil
	})
	semGrad(t, ec, 0, optim.Params)
	whole := semPredict(t, ec, optim.Predictive{Kind: optim.Point}, dc, 0, 1)
	semRowsSumToOne(t, "cnn", whole, n, c)
	testutil.CheckVec(t, "cnn one sample at a time", semPredict(t, ec, optim.Predictive{Kind: optim.Point}, dc, 1, 1), whole, 1e-6, 1e-5)
	testutil.CheckVec(t, "cnn in batches of 4", semPredict(t, ec, optim.Predictive{Kind: optim.Point}, dc, 4, 1), whole, 1e-6, 1e-5)
}

// A predictive of many Monte-Carlo samples stops between samples once its
// context is done, not after the batch's every sample (hardening4/04:
// SIGTERM ignored inside bSAM's test_mc loop).
func TestPredictStopsBetweenSamples(t *testing.T) {
	const n, f, c = 4, 4, 3
	set := testutil.FeatureSet(n, f, c)
	e := semEngine(t, Config{Seed: 13}, semTiny(t, []int64{f}, 5, c))
	ds := semUpload(t, e, set, true)
	semExec(t, e, optim.Prog().Alloc(1, 0).Fill(1, optim.K(0.05)))
	for _, pred := range []optim.Predictive{
		{Kind: optim.Samples, Mean: optim.Params, Std: 1, N: 50_000_000},
		{Kind: optim.Members, Vecs: slices.Repeat([]optim.Vec{optim.Params}, 5_000_000)},
	} {
		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(100*time.Millisecond, cancel)
		start := time.Now()
		_, err := eval.Predict(ctx, e, pred, ds, 0, 1) // one batch
		if !errors.Is(err, context.Canceled) {
			t.Errorf("kind %v: err = %v, want context.Canceled", pred.Kind, err)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("kind %v: stopped %v after the cancel", pred.Kind, d)
		}
		cancel()
	}
}
