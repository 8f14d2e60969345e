package statedict

import (
	"context"
	"fmt"
	"math"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/optlab/optlab/host/checkpoint"
	"github.com/optlab/optlab/host/engine"
	"github.com/optlab/optlab/host/tensor"
	"github.com/optlab/optlab/sdk/optim"
)

// bnTrain gives e a training set of n samples of ckptShape (drawn from
// seed) for UpdateBN, read in batches of batch, and returns it.
func bnTrain(t *testing.T, e *engine.Engine, n int, seed uint64, batch int64) ([]float32, []int64) {
	t.Helper()
	x, shape := ckptInput(n, seed)
	var xt tensor.T
	err := e.Worker().Do(context.Background(), func() error {
		s := tensor.NewScope()
		defer s.Close()
		xt = s.Keep(s.FromFloat32(x, shape, e.Device()))
		return s.Err()
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Worker().Do(context.Background(), func() error { xt.Drop(); return nil }) })
	e.SetBNData(engine.BNData{N: int64(n), Batch: batch, Inputs: func(s *tensor.Scope, start, k int64) tensor.T {
		return s.Narrow(xt, 0, start, k)
	}})
	return x, shape
}

// predictiveProbs returns the eval-mode probabilities of pred on x.
func predictiveProbs(t *testing.T, e *engine.Engine, pred optim.Predictive, x []float32, shape []int64) []float32 {
	t.Helper()
	var out []float32
	err := e.Worker().Do(context.Background(), func() error {
		restore, err := tensor.NoGrad()
		if err != nil {
			return err
		}
		defer restore()
		s := tensor.NewScope()
		defer s.Close()
		p, err := e.Probs(context.Background(), s, pred, s.FromFloat32(x, shape, e.Device()), 1)
		if err != nil {
			return err
		}
		out = s.Float32s(p)
		return s.Err()
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestUpdateBNMatchesPyTorch: the host's UpdateBN of a vector (an SWA
// average: parameters that no pass has run at) gives the BatchNorm
// statistics that torch.optim.swa_utils.update_bn computes at the same
// parameters over the same training batches (20 samples in batches of 8:
// the last one smaller, which a per-sample average would weigh
// differently), with update_bn's num_batches_tracked (the number of
// batches), SavePredictive writes them with the parameters, and the
// PyTorch twin loaded from that file predicts what the host evaluated. A
// negative control: the same parameters with the live statistics do not
// match.
func TestUpdateBNMatchesPyTorch(t *testing.T) {
	python, script := torchTwin(t)
	w := tensor.NewWorker(2)
	defer w.Close()
	ctx := context.Background()
	const arch, batch = "cnn", 8
	e := ckptEngine(t, w, tensor.CPU, 11, arch)
	ckptTrainStep(t, e)
	train, tshape := bnTrain(t, e, 20, 5, batch)
	hs := optim.NewHandles()
	avg, stale := hs.New("avg"), hs.New("stale")
	p := hs.Prog().Alloc(avg, 0).Alloc(stale, 0).RandN(avg, 0.01, 3).Axpy(avg, optim.K(1), optim.Params).
		CopyState(stale, optim.Params).Copy(stale, avg).UpdateBN(avg)
	if _, err := e.Exec(ctx, p); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	x, shape := ckptInput(6, 13)
	check := func(name string, v optim.Vec) (statDiff, scale, probDiff float64, mismatches int) {
		pred := optim.Predictive{Kind: optim.Members, Vecs: []optim.Vec{v}}
		ckpt := filepath.Join(dir, name+".safetensors")
		if err := SavePredictive(ctx, e, pred, ckpt, nil); err != nil {
			t.Fatal(err)
		}
		probs := predictiveProbs(t, e, pred, x, shape)
		io := filepath.Join(dir, name+"-io.safetensors")
		if err := checkpoint.Write(io, []checkpoint.Tensor{
			checkpoint.NewF32("train", tshape, train),
			checkpoint.NewF32("input", shape, x),
			checkpoint.NewF32("probs", []int64{shape[0], 10}, probs),
		}, nil); err != nil {
			t.Fatal(err)
		}
		out, err := exec.Command(python, script, "--update-bn", ckpt, "--arch", arch, "--io", io, "--batch", fmt.Sprint(batch)).CombinedOutput()
		if err != nil {
			t.Fatalf("%s --update-bn: %v\n%s", script, err, out)
		}
		if _, err := fmt.Sscanf(strings.TrimSpace(string(out)), "max_abs_diff %g max_abs_stat %g max_abs_prob_diff %g tracked_mismatches %d", &statDiff, &scale, &probDiff, &mismatches); err != nil {
			t.Fatalf("unexpected output %q: %v", out, err)
		}
		return statDiff, scale, probDiff, mismatches
	}
	d, scale, pd, mism := check("avg", avg)
	t.Logf("UpdateBN: max |Δstat| %.3g (max |stat| %.3g), max |Δprob| %.3g", d, scale, pd)
	if tol := 1e-5 * max(1, scale); d > tol || math.IsNaN(d) {
		t.Errorf("statistics differ from update_bn's by %g (> %g)", d, tol)
	}
	// The twin's probabilities are taken after its update_bn, whose
	// statistics equal the file's (above): equal probabilities mean that
	// the saved parameters are the evaluated ones.
	if pd > 1e-5 || math.IsNaN(pd) {
		t.Errorf("PyTorch's probabilities from the saved model differ from the host's by %g", pd)
	}
	// num_batches_tracked: update_bn leaves the number of batches it
	// passed (3 of 8, 8 and 4 samples), and so does the host's UpdateBN.
	if mism != 0 {
		t.Errorf("num_batches_tracked of %d BatchNorms differs from update_bn's", mism)
	}
	if n := e.BNBatches(avg); n != 3 {
		t.Errorf("BNBatches after UpdateBN = %d, want 3 batches", n)
	}
	if d, _, _, _ := check("stale", stale); d < 1e-3 {
		t.Errorf("the live statistics match update_bn's too (Δ %g): the comparison is blind", d)
	}
}

// SavePredictive writes what the predictive evaluates: one vector as a
// bare model with its own statistics, several under members.<i>., a
// Gaussian's mean as the model and its std under posterior_std. (which
// Load skips), and records the kind.
func TestSavePredictive(t *testing.T) {
	w := tensor.NewWorker(2)
	defer w.Close()
	ctx := context.Background()
	e := ckptEngine(t, w, tensor.CPU, 11, "cnn")
	ckptTrainStep(t, e)
	bnTrain(t, e, 10, 5, 4)
	hs := optim.NewHandles()
	a, b, sd, mask := hs.New("a"), hs.New("b"), hs.New("sd"), hs.New("mask")
	if _, err := e.Exec(ctx, hs.Prog().Alloc(a, 0).Alloc(b, 0).Alloc(sd, 0).Alloc(mask, 0).RandN(a, 1, 1).RandN(b, 1, 2).
		Fill(sd, optim.K(0.5)).Fill(mask, optim.K(1)).UpdateBN(a)); err != nil {
		t.Fatal(err)
	}
	x, shape := ckptInput(4, 9)
	dir := t.TempDir()
	for _, c := range []struct {
		name  string
		pred  optim.Predictive
		kind  string
		names []string // names that must be present
	}{
		{"point", optim.Predictive{Kind: optim.Point}, "point", []string{"features.0.bn.running_mean"}},
		{"one", optim.Predictive{Kind: optim.Members, Vecs: []optim.Vec{a}}, "members", []string{"features.0.bn.running_mean"}},
		{"two", optim.Predictive{Kind: optim.Members, Vecs: []optim.Vec{a, b}, Weights: []float64{0.25, 0.75}}, "members",
			[]string{"members.0.features.0.bn.running_mean", "members.1.features.0.bn.running_mean"}},
		{"gaussian", optim.Predictive{Kind: optim.Samples, Mean: a, Std: sd, N: 3}, "samples",
			[]string{"features.0.bn.running_mean", PosteriorStd + "fc.weight"}},
		{"masked", optim.Predictive{Kind: optim.Members, Vecs: []optim.Vec{a}, Masks: []optim.Vec{mask}}, "members",
			[]string{"fc.weight", MaskPrefix + "fc.weight", MaskPrefix + "features.0.conv.weight"}},
		{"two masked", optim.Predictive{Kind: optim.Members, Vecs: []optim.Vec{a, b}, Masks: []optim.Vec{mask, mask}}, "members",
			[]string{"members.1.fc.weight", MaskPrefix + "members.0.fc.weight", MaskPrefix + "members.1.fc.weight"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(dir, c.name+".safetensors")
			if err := SavePredictive(ctx, e, c.pred, path, map[string]string{"run_key": "k"}); err != nil {
				t.Fatal(err)
			}
			ts, meta, err := checkpoint.Read(path)
			if err != nil {
				t.Fatal(err)
			}
			if meta[MetaPredictive] != c.kind || meta["run_key"] != "k" {
				t.Errorf("metadata %v", meta)
			}
			for _, n := range c.names {
				if _, ok := ts[n]; !ok {
					t.Errorf("no tensor %s", n)
				}
			}
			for name, x := range ts {
				if strings.HasPrefix(name, MaskPrefix) && (len(x.F32) == 0 || slices.ContainsFunc(x.F32, func(v float32) bool { return v != 1 })) {
					t.Errorf("%s: want the mask's ones, got %d values", name, len(x.F32))
				}
			}
			if c.kind == "point" || strings.HasPrefix(c.name, "two") {
				return
			}
			// Loaded into a fresh engine, the file evaluates as the
			// predictive's model (the mean, for the Gaussian).
			fresh := ckptEngine(t, w, tensor.CPU, 99, "cnn")
			if err := Load(ctx, fresh, path); err != nil {
				t.Fatal(err)
			}
			got := predictiveProbs(t, fresh, optim.Predictive{Kind: optim.Point}, x, shape)
			want := predictiveProbs(t, e, optim.Predictive{Kind: optim.Members, Vecs: []optim.Vec{a}}, x, shape)
			if d := ckptMaxAbsDiff(got, want); d != 0 {
				t.Errorf("the loaded model's probabilities differ by %g", d)
			}
		})
	}
}
