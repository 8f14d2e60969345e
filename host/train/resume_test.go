package train

import (
	"context"
	"errors"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/optlab/optlab/host/checkpoint"
	"github.com/optlab/optlab/host/curves"
	"github.com/optlab/optlab/host/experiment"
	"github.com/optlab/optlab/host/results"
	"github.com/optlab/optlab/host/tensor"
	"github.com/optlab/optlab/plugins/otmdr"
	"github.com/optlab/optlab/plugins/sam"
	"github.com/optlab/optlab/plugins/shampoo"
	"github.com/optlab/optlab/plugins/soap"
	"github.com/optlab/optlab/sdk/optim"
)

// crashAfter runs run with m until a simulated crash after epoch ends it,
// leaving its training state for the next Run to resume from.
func crashAfter(t *testing.T, r *Runner, run experiment.Run, m Optimizer, epoch int) {
	t.Helper()
	crash := errors.New("simulated crash")
	r.afterEpoch = func(e int) error {
		if e == epoch {
			return crash
		}
		return nil
	}
	defer func() { r.afterEpoch = nil }()
	if _, err := r.Run(context.Background(), run, m); !errors.Is(err, crash) {
		t.Fatalf("interrupted run: %v", err)
	}
}

// A run interrupted after an epoch resumes from its training state and ends
// bitwise where an uninterrupted run ends, for optimizers with state on the
// host (momentum) and in the plugin (OT-MDR's random stream).
func TestResumeMidRun(t *testing.T) {
	w := tensor.NewWorker(2)
	defer w.Close()
	cases := []struct {
		name  string
		newOp func() optim.Optimizer
		given map[string]any
		tags  []string // the method's TensorBoard tags
	}{
		{"sam", sam.New, map[string]any{"rho": 0.05}, nil},
		{"otmdr", otmdr.New, nil, []string{"method/acc_perturbed", "method/loss_perturbed"}},
		// Shampoo's factors and preconditioners are factor vectors
		// (protocol minor 8) in the training state; with a preconditioner
		// every 10 steps the interruption after epoch 2 falls between two.
		{"shampoo", shampoo.New, map[string]any{"precondition_frequency": int64(10)}, nil},
		// SOAP's bases are sorted (SortColumns, protocol minor 12) and
		// refreshed every 7 steps, with Adam's second moment permuted along:
		// the interruption falls between two refreshes.
		{"soap", soap.New, map[string]any{"precondition_frequency": int64(7)}, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r, exp := newRunner(t, w, digitsTOML)
			run := experiment.Grid(exp)[0]
			dir := t.TempDir()
			r.Checkpoints = &results.Layout{Dir: filepath.Join(dir, "full")}
			full, err := r.Run(context.Background(), run, method(t, c.newOp(), c.given))
			if err != nil {
				t.Fatal(err)
			}
			r.Checkpoints = &results.Layout{Dir: filepath.Join(dir, "cut")}
			crashAfter(t, r, run, method(t, c.newOp(), c.given), 2)
			if _, err := os.Stat(r.statePath(run)); err != nil {
				t.Fatalf("no training state after the interruption: %v", err)
			}
			resumed, err := r.Run(context.Background(), run, method(t, c.newOp(), c.given))
			if err != nil {
				t.Fatal(err)
			}
			for _, k := range []string{"acc", "nll", "brier", "train_loss", "grad_evals"} {
				if full.Metrics[k] != resumed.Metrics[k] {
					t.Errorf("%s: resumed %v, uninterrupted %v", k, resumed.Metrics[k], full.Metrics[k])
				}
			}
			if resumed.Steps != full.Steps {
				t.Errorf("steps: resumed %d, uninterrupted %d", resumed.Steps, full.Steps)
			}
			if _, err := os.Stat(r.statePath(run)); !os.IsNotExist(err) {
				t.Errorf("training state not removed after the run finished: %v", err)
			}
			if _, err := os.Stat(r.Checkpoints.Model(run.Key)); err != nil {
				t.Errorf("final model checkpoint: %v", err)
			}
			// The final models are equal, BatchNorm counters included: the
			// training state carries them (issue 39).
			fullModel := results.Layout{Dir: filepath.Join(dir, "full")}.Model(run.Key)
			sameTensors(t, fullModel, r.Checkpoints.Model(run.Key))
			rows, err := curves.Read(results.NewLayout(exp.ResultsDir, exp.Name).Curve(run.Key))
			if err != nil {
				t.Fatal(err)
			}
			if len(rows) != 3 || rows[0].Epoch != 1 || rows[2].Epoch != 3 {
				t.Errorf("training curve after resuming: %+v, want epochs 1, 2, 3", rows)
			}
			if files := checkRunTB(t, r, run, resumed, c.tags...); files != 2 {
				t.Errorf("%d TensorBoard event files, want 2 (the interrupted attempt's and the resumed one's)", files)
			}
		})
	}
}

// A run interrupted after an epoch and then rerun with another learning
// rate (the experiment was edited) does not resume the old state: it starts
// over, says what changed, and keeps the old state aside. The result equals
// an uninterrupted run at the new rate.
func TestStaleStateNotResumed(t *testing.T) {
	w := tensor.NewWorker(2)
	defer w.Close()
	r, exp := newRunner(t, w, digitsTOML)
	run := experiment.Grid(exp)[0]
	dir := t.TempDir()
	given := map[string]any{"rho": 0.05}

	lr := exp.Train.Optimizer.LR
	exp.Train.Optimizer.LR = 2 * lr
	r.Checkpoints = &results.Layout{Dir: filepath.Join(dir, "full")}
	full, err := r.Run(context.Background(), run, method(t, sam.New(), given))
	if err != nil {
		t.Fatal(err)
	}

	exp.Train.Optimizer.LR = lr
	r.Checkpoints = &results.Layout{Dir: filepath.Join(dir, "cut")}
	crashAfter(t, r, run, method(t, sam.New(), given), 1)
	exp.Train.Optimizer.LR = 2 * lr
	var log strings.Builder
	r.Log = &log
	rerun, err := r.Run(context.Background(), run, method(t, sam.New(), given))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(log.String(), "not resuming its saved state: the experiment changed since (train.optimizer.lr: 0.05 → 0.1; ") {
		t.Errorf("no notice of the stale state:\n%s", log.String())
	}
	for _, k := range []string{"acc", "nll", "train_loss"} {
		if full.Metrics[k] != rerun.Metrics[k] {
			t.Errorf("%s: rerun %v, uninterrupted run at the new rate %v", k, rerun.Metrics[k], full.Metrics[k])
		}
	}
	kept, _ := filepath.Glob(filepath.Join(r.Checkpoints.Superseded(), results.StateDir, "*"))
	if len(kept) != 1 {
		t.Errorf("the old state was not kept aside: %v", kept)
	}
}

// sameTensors fails unless the safetensors files a and b hold the same
// tensors, bitwise, and returns a's num_batches_tracked values.
func sameTensors(t *testing.T, a, b string) map[string]int64 {
	t.Helper()
	ta, _, err := checkpoint.Read(a)
	if err != nil {
		t.Fatal(err)
	}
	tb, _, err := checkpoint.Read(b)
	if err != nil {
		t.Fatal(err)
	}
	if len(ta) != len(tb) {
		t.Errorf("%s has %d tensors, %s %d", a, len(ta), b, len(tb))
	}
	counters := map[string]int64{}
	for name, x := range ta {
		y, ok := tb[name]
		switch {
		case !ok:
			t.Errorf("%s: no %s", b, name)
		case x.DType != y.DType || !slices.Equal(x.Shape, y.Shape):
			t.Errorf("%s: %s%v and %s%v", name, x.DType, x.Shape, y.DType, y.Shape)
		case !slices.EqualFunc(x.F32, y.F32, func(p, q float32) bool { return math.Float32bits(p) == math.Float32bits(q) }) || !slices.Equal(x.I64, y.I64):
			t.Errorf("%s differs between %s and %s", name, a, b)
		}
		if strings.HasSuffix(name, ".num_batches_tracked") && len(x.I64) == 1 {
			counters[name] = x.I64[0]
		}
	}
	return counters
}
