package train

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/optlab/optlab/host/checkpoint"
	"github.com/optlab/optlab/host/corrupt"
	"github.com/optlab/optlab/host/data"
	"github.com/optlab/optlab/host/experiment"
	"github.com/optlab/optlab/host/metrics"
	"github.com/optlab/optlab/host/results"
	"github.com/optlab/optlab/host/tensor"
	"github.com/optlab/optlab/plugins/sgd"
)

const robustTOML = `
name = "test-robust"
[data]
dataset = "fashion-mnist"
dir = %q
validation = 0.25
[model]
archs = ["mlp"]
[train]
epochs = 3
batch_size = 32
seeds = [1]
threads = 2
[train.optimizer]
lr = 0.05
[eval]
every_epochs = 1
best_epoch = "acc"
[eval.corruptions]
families = ["contrast", "gaussian_noise"]
severities = [1, 3]
seed = 7
[[method]]
name = "SGD"
plugin = "sgd"
`

// TestRobustMetrics: a run with eval.best_epoch and [eval.corruptions]
// records the best epoch's test metrics and every metric per family and
// severity with their means, and its configuration says what it asked for.
func TestRobustMetrics(t *testing.T) {
	w := tensor.NewWorker(2)
	defer w.Close()
	dir := t.TempDir()
	if err := data.WriteMNIST(dir, data.FashionMNIST, 192, 64, 1); err != nil {
		t.Fatal(err)
	}
	r, exp := newRunner(t, w, fmt.Sprintf(robustTOML, dir))
	rec := runOnce(t, r, exp, sgd.New(), nil)
	if rec.Status != results.StatusOK {
		t.Fatalf("status %q: %s", rec.Status, rec.Error)
	}
	m := rec.Metrics
	if e := m["best_epoch"]; e < 1 || e > 3 || e != math.Trunc(e) {
		t.Errorf("best_epoch = %v, want one of 1..3", e)
	}
	for _, k := range []string{"best_acc", "best_nll", "best_ece", "best_brier", "best_val_acc"} {
		if _, ok := m[k]; !ok {
			t.Errorf("no %s in %v", k, m)
		}
	}
	if m["best_epoch"] == 3 && m["best_acc"] != m["acc"] {
		t.Errorf("the best epoch is the last, yet best_acc %v ≠ acc %v", m["best_acc"], m["acc"])
	}
	var sum float64
	for _, f := range []string{"contrast", "gaussian_noise"} {
		var fam float64
		for _, s := range []int{1, 3} {
			for _, mk := range []string{"acc", "nll", "ece", "brier", "cal_nll"} {
				if _, ok := m[corrupt.Key(f, s, mk)]; !ok {
					t.Errorf("no %s", corrupt.Key(f, s, mk))
				}
			}
			fam += m[corrupt.Key(f, s, "acc")]
		}
		if got := m[corrupt.FamilyKey(f, "acc")]; math.Abs(got-fam/2) > 1e-12 {
			t.Errorf("%s = %v, want %v", corrupt.FamilyKey(f, "acc"), got, fam/2)
		}
		sum += fam
	}
	if got := m["corr_acc"]; math.Abs(got-sum/4) > 1e-12 {
		t.Errorf("corr_acc = %v, want %v", got, sum/4)
	}
	for k, want := range map[string]any{"eval.best_epoch": "acc", "eval.corruptions.families": "contrast,gaussian_noise", "eval.corruptions.severities": "1,3", "eval.corruptions.seed": int64(7)} {
		if got := rec.Config[k]; got != want {
			t.Errorf("config %s = %v (%T), want %v", k, got, got, want)
		}
	}
	// The corrupted sets are made once per session and reused.
	if len(r.Data.CorruptedKeys()) != 4 {
		t.Errorf("%d corrupted sets cached, want 4", len(r.Data.CorruptedKeys()))
	}
}

// TestRobustConfigOff: without eval.best_epoch and [eval.corruptions] the
// configuration has none of their keys.
func TestRobustConfigOff(t *testing.T) {
	exp := experiment.Default()
	r := &Runner{Exp: exp}
	cfg := r.Record(experiment.Run{Key: "k", Label: "SGD"}, Optimizer{}).Config
	for k := range cfg {
		if k == "eval.best_epoch" || strings.HasPrefix(k, "eval.corruptions") {
			t.Errorf("configuration without them has %s", k)
		}
	}
}

// TestBestImproves: the best epoch moves only on a strict improvement.
func TestBestImproves(t *testing.T) {
	b := &bestEpoch{Epoch: 2, Val: 0.8}
	for _, tc := range []struct {
		name string
		rep  metrics.Report
		want bool
	}{
		{"acc", metrics.Report{Acc: 0.9}, true},
		{"acc", metrics.Report{Acc: 0.8}, false},
		{"nll", metrics.Report{NLL: 0.7}, true},
		{"nll", metrics.Report{NLL: 0.8}, false},
		{"nll", metrics.Report{NLL: 0.9}, false},
	} {
		if got := improves(tc.name, tc.rep, b); got != tc.want {
			t.Errorf("%s %+v over %v: %v, want %v", tc.name, tc.rep, b.Val, got, tc.want)
		}
		if !improves(tc.name, tc.rep, nil) {
			t.Errorf("%s: the first evaluation is not the best", tc.name)
		}
	}
}

// TestBestEpochResumed: the best epoch so far is part of the training
// state, so a run interrupted after epoch 2 and resumed records the best
// epoch of an uninterrupted run.
func TestBestEpochResumed(t *testing.T) {
	w := tensor.NewWorker(2)
	defer w.Close()
	dir := t.TempDir()
	if err := data.WriteMNIST(dir, data.FashionMNIST, 192, 64, 1); err != nil {
		t.Fatal(err)
	}
	src, _, _ := strings.Cut(fmt.Sprintf(robustTOML, dir), "[eval.corruptions]")
	src += "[[method]]\nname = \"SGD\"\nplugin = \"sgd\"\n"
	r, exp := newRunner(t, w, src)
	run := experiment.Grid(exp)[0]
	r.Checkpoints = &results.Layout{Dir: filepath.Join(dir, "full")}
	full, err := r.Run(context.Background(), run, method(t, sgd.New(), nil))
	if err != nil {
		t.Fatal(err)
	}
	r.Checkpoints = &results.Layout{Dir: filepath.Join(dir, "cut")}
	crashAfter(t, r, run, method(t, sgd.New(), nil), 2)
	// The saved state holds the best of epochs 1 and 2.
	meta, err := checkpoint.ReadMeta(r.statePath(run))
	if err != nil {
		t.Fatal(err)
	}
	var ls loopState
	j, err := base64.StdEncoding.DecodeString(meta["optlab.loop"])
	if err == nil {
		err = json.Unmarshal(j, &ls)
	}
	if err != nil || ls.Best == nil || ls.Best.Epoch < 1 || ls.Best.Epoch > 2 || len(ls.Best.Test) == 0 {
		t.Fatalf("saved loop state's best epoch: %+v, %v", ls.Best, err)
	}
	resumed, err := r.Run(context.Background(), run, method(t, sgd.New(), nil))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for k, v := range full.Metrics {
		if strings.HasPrefix(k, BestPrefix) {
			n++
			if resumed.Metrics[k] != v {
				t.Errorf("%s: resumed %v, uninterrupted %v", k, resumed.Metrics[k], v)
			}
		}
	}
	if n < 5 {
		t.Errorf("%d best_* metrics: %v", n, full.Metrics)
	}
}
