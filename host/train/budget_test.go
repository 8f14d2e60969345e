package train

import (
	"context"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/optlab/optlab/host/experiment"
	"github.com/optlab/optlab/host/results"
	"github.com/optlab/optlab/host/tensor"
	"github.com/optlab/optlab/plugins/sam"
	"github.com/optlab/optlab/plugins/sgd"
)

// BudgetPosition of SGD's steps (one batch a step) is StepPosition
// exactly, bit for bit, so that SGD with train.budget = N follows the
// schedule of train.epochs = N.
func TestBudgetPositionOfSGDIsStepPosition(t *testing.T) {
	for _, c := range []struct{ n, batch int }{{1, 1}, {3, 64}, {7, 100}, {22, 64}, {390, 128}, {422, 128}} {
		unit := int64(c.n * c.batch)
		for epoch := range 3 {
			for i := range c.n {
				spent := int64(epoch*c.n+i) * int64(c.batch)
				got, want := BudgetPosition(spent, unit, int64(c.batch)), StepPosition(epoch, i, c.n)
				if got != want {
					t.Fatalf("n %d batch %d: step %d of epoch %d at %+v, want %+v", c.n, c.batch, i, epoch, got, want)
				}
			}
		}
	}
}

// A step of two gradients (SAM) moves the schedule on by two batches: a
// budget of N epochs ends after N/2 epochs of SAM, the cosine schedule at
// its end.
func TestBudgetPositionOfTwoGradientSteps(t *testing.T) {
	const n, b = 10, 8
	unit := int64(n * b)
	// SAM's step 5 of its first epoch has spent 10 batches: budget
	// epoch 1 starts.
	if got := BudgetPosition(2*5*b, unit, b); got.Epoch != 1 || got.Start != 0 {
		t.Errorf("SAM's step 5 at %+v, want epoch 1 start 0", got)
	}
	if got := BudgetPosition(2*7*b, unit, b); got.Epoch != 1 || got.Start != 0.4 {
		t.Errorf("SAM's step 7 at %+v, want epoch 1 start 0.4", got)
	}
}

// budgetTOML is digitsTOML with a budget instead of epochs.
func budgetTOML(budget string) string {
	return strings.Replace(digitsTOML, "epochs = 3", "budget = "+budget, 1)
}

// SGD with train.budget = N trains exactly as with train.epochs = N:
// the same steps, schedule and result, bit for bit; it spends N epochs of
// gradient evaluations.
func TestBudgetSGDIsEpochs(t *testing.T) {
	w := tensor.NewWorker(2)
	defer w.Close()
	r1, exp1 := newRunner(t, w, strings.Replace(digitsTOML, "epochs = 3", "epochs = 2", 1))
	byEpochs := runOnce(t, r1, exp1, sgd.New(), nil)
	r2, exp2 := newRunner(t, w, budgetTOML("2"))
	byBudget := runOnce(t, r2, exp2, sgd.New(), nil)
	perEpoch, _ := r2.Steps()
	if got, want := byBudget.Metrics["grad_evals"], float64(2*perEpoch*64); got != want {
		t.Errorf("grad_evals %v, want %v (2 epochs of %d steps of 64)", got, want, perEpoch)
	}
	if byBudget.Epochs != 2 || byEpochs.Epochs != 2 {
		t.Errorf("epochs %d by budget, %d by epochs; want 2", byBudget.Epochs, byEpochs.Epochs)
	}
	for _, k := range []string{"acc", "nll", "train_loss", "grad_evals"} {
		if a, b := byEpochs.Metrics[k], byBudget.Metrics[k]; math.Float64bits(a) != math.Float64bits(b) {
			t.Errorf("%s: %v by epochs, %v by budget; want the same bits", k, a, b)
		}
	}
	if byBudget.Config["train.budget"] != int64(2) {
		t.Errorf("config train.budget = %v, want 2", byBudget.Config["train.budget"])
	}
	if _, ok := byBudget.Config["train.epochs"]; ok {
		t.Errorf("config records train.epochs (%v) for a run with a budget", byBudget.Config["train.epochs"])
	}
	if results.HashConfig(byEpochs.Config) == results.HashConfig(byBudget.Config) {
		t.Error("a run by budget has the config hash of the run by epochs")
	}
}

// SAM (two gradients a step) with a budget of 2 epochs trains one epoch:
// it spends what SGD's 2 epochs spend, no more.
func TestBudgetSAMHalvesEpochs(t *testing.T) {
	w := tensor.NewWorker(2)
	defer w.Close()
	r, exp := newRunner(t, w, budgetTOML("2"))
	rec := runOnce(t, r, exp, sam.New(), map[string]any{"rho": 0.05})
	perEpoch, _ := r.Steps()
	if rec.Epochs != 1 {
		t.Errorf("SAM trained %d epochs with a budget of 2, want 1", rec.Epochs)
	}
	if got, want := rec.Metrics["grad_evals"], float64(2*perEpoch*64); got != want {
		t.Errorf("grad_evals %v, want %v", got, want)
	}
}

// A run that evaluates every epoch records its evaluations (the curve
// that time-to-target tables read): one per epoch, with the gradient
// evaluations and training seconds (evaluations not counted) so far. An
// interrupted run with a budget resumes where it stopped: the same
// steps, result and evaluations as the uninterrupted run, the budget
// counted over both attempts.
func TestBudgetEvalsAndResume(t *testing.T) {
	w := tensor.NewWorker(2)
	defer w.Close()
	src := strings.Replace(budgetTOML("6"), "[eval]", "[eval]\nevery_epochs = 1", 1)
	r, exp := newRunner(t, w, src)
	run := experiment.Grid(exp)[0]
	dir := t.TempDir()
	given := map[string]any{"rho": 0.05}
	r.Checkpoints = &results.Layout{Dir: filepath.Join(dir, "full")}
	full, err := r.Run(context.Background(), run, method(t, sam.New(), given))
	if err != nil {
		t.Fatal(err)
	}
	perEpoch, _ := r.Steps()
	if full.Epochs != 3 || len(full.Evals) != 3 || full.EvalSet != "test" {
		t.Fatalf("SAM with a budget of 6: %d epochs, %d evaluations on %q; want 3 and 3 on test", full.Epochs, len(full.Evals), full.EvalSet)
	}
	for i, p := range full.Evals {
		if p.Epoch != i+1 || p.GradEvals != int64(i+1)*2*perEpoch*64 || p.Step != int64(i+1)*perEpoch {
			t.Errorf("evaluation %d: %+v", i, p)
		}
		if !(p.TrainSeconds > 0) || p.TrainSeconds > full.WallSeconds || (i > 0 && p.TrainSeconds <= full.Evals[i-1].TrainSeconds) {
			t.Errorf("evaluation %d: training seconds %v (wall %v)", i, p.TrainSeconds, full.WallSeconds)
		}
	}
	r.Checkpoints = &results.Layout{Dir: filepath.Join(dir, "cut")}
	crashAfter(t, r, run, method(t, sam.New(), given), 2)
	resumed, err := r.Run(context.Background(), run, method(t, sam.New(), given))
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"acc", "nll", "train_loss", "grad_evals"} {
		if full.Metrics[k] != resumed.Metrics[k] {
			t.Errorf("%s: resumed %v, uninterrupted %v", k, resumed.Metrics[k], full.Metrics[k])
		}
	}
	if resumed.Steps != full.Steps || len(resumed.Evals) != len(full.Evals) {
		t.Fatalf("resumed: %d steps, %d evaluations; uninterrupted %d, %d", resumed.Steps, len(resumed.Evals), full.Steps, len(full.Evals))
	}
	for i := range full.Evals {
		a, b := full.Evals[i], resumed.Evals[i]
		if a.Epoch != b.Epoch || a.Step != b.Step || a.GradEvals != b.GradEvals || a.Acc != b.Acc {
			t.Errorf("evaluation %d: resumed %+v, uninterrupted %+v", i, b, a)
		}
	}
}
