package train

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/optlab/optlab/host/curves"
	"github.com/optlab/optlab/host/experiment"
	"github.com/optlab/optlab/host/observe"
	"github.com/optlab/optlab/host/results"
	"github.com/optlab/optlab/host/tensor"
	"github.com/optlab/optlab/host/tensorboard"
	"github.com/optlab/optlab/plugins/sgd"
)

// f32 is v as TensorBoard stores it.
func f32(v float64) float64 { return float64(float32(v)) }

// checkRunTB checks the event files of a trained run against its curve
// (per-epoch values) and record (final test values), and returns how many
// event files it has. methodTags are the method/ tags it must have.
func checkRunTB(t *testing.T, r *Runner, run experiment.Run, rec results.Record, methodTags ...string) int {
	t.Helper()
	exp := r.Exp
	rows, err := curves.Read(results.NewLayout(exp.ResultsDir, exp.Name).Curve(run.Key))
	if err != nil {
		t.Fatal(err)
	}
	steps, acc, nll := rec.Steps, rec.Metrics["acc"], rec.Metrics["nll"]
	view, files, err := tensorboard.ReadRun(results.NewLayout(exp.ResultsDir, exp.Name).TensorBoard(run.Key))
	if err != nil {
		t.Fatal(err)
	}
	every := int64(exp.Eval.TensorBoardEverySteps)
	if got := int64(len(view[observe.TagTrainLossStep])); got != steps/every {
		t.Errorf("%d %s values, want %d", got, observe.TagTrainLossStep, steps/every)
	}
	for i, p := range view[observe.TagTrainLossStep] {
		if p.Step != int64(i+1)*every {
			t.Errorf("%s value %d at step %d, want %d", observe.TagTrainLossStep, i, p.Step, int64(i+1)*every)
		}
	}
	for _, tag := range append([]string{observe.TagTrainLoss, observe.TagTrainAcc, observe.TagLR}, methodTags...) {
		if len(view[tag]) != len(rows) {
			t.Errorf("%s: %d values, want one per epoch (%d)", tag, len(view[tag]), len(rows))
		}
	}
	for i, row := range rows {
		if i >= len(view[observe.TagTrainLoss]) || i >= len(view[observe.TagLR]) {
			break
		}
		p := view[observe.TagTrainLoss][i]
		if p.Step != row.Step || p.Value != f32(row.TrainLoss) {
			t.Errorf("%s[%d] = %+v, curve says step %d loss %v", observe.TagTrainLoss, i, p, row.Step, row.TrainLoss)
		}
		if lr := view[observe.TagLR][i]; lr.Value != f32(row.LR) {
			t.Errorf("%s[%d] = %+v, curve says %v", observe.TagLR, i, lr, row.LR)
		}
	}
	want := fmt.Sprint([]tensorboard.Point{{Step: steps, Value: f32(acc)}}, []tensorboard.Point{{Step: steps, Value: f32(nll)}})
	if got := fmt.Sprint(view[observe.TagTestAcc], view[observe.TagTestLoss]); got != want {
		t.Errorf("test acc, loss: %s, want %s", got, want)
	}
	for tag := range view {
		if tag == observe.TagValLoss || tag == observe.TagValAcc || (strings.HasPrefix(tag, observe.TagMethodPrefix) && !slices.Contains(methodTags, tag)) {
			t.Errorf("unexpected tag %s", tag)
		}
	}
	return files
}

// eval.tensorboard = false writes no event files, and neither TensorBoard
// key is part of a run's recorded configuration.
func TestTensorBoardOff(t *testing.T) {
	w := tensor.NewWorker(2)
	defer w.Close()
	src := strings.Replace(digitsTOML, "epochs = 3", "epochs = 1", 1)
	src = strings.Replace(src, "[eval]\n", "[eval]\ntensorboard = false\n", 1)
	r, exp := newRunner(t, w, src)
	run := experiment.Grid(exp)[0]
	rec := runOnce(t, r, exp, sgd.New(), nil)
	for k := range rec.Config {
		if strings.Contains(k, "tensorboard") {
			t.Errorf("recorded configuration has %s", k)
		}
	}
	if _, err := os.Stat(results.NewLayout(exp.ResultsDir, exp.Name).TensorBoard(run.Key)); !os.IsNotExist(err) {
		t.Errorf("event files with eval.tensorboard = false: %v", err)
	}
	if _, ok := rec.Config["eval.every_epochs"]; !ok {
		t.Errorf("the other eval keys are still recorded: %v", rec.Config)
	}
}
