package train

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/optlab/optlab/host/curves"
	"github.com/optlab/optlab/host/experiment"
	"github.com/optlab/optlab/host/metrics"
	"github.com/optlab/optlab/host/results"
	"github.com/optlab/optlab/host/tensor"
	"github.com/optlab/optlab/host/tensorboard"
	"github.com/optlab/optlab/plugins/sgd"
)

// tbPoint is one value of a TensorBoard series.
type tbPoint struct {
	Step  int64
	Value float64
}

// tbView reads a run's event files as TensorBoard's loader merges them:
// files in name order, and a session start after the run's first drops
// the values logged at steps ≥ its step. It returns each tag's series.
func tbView(t *testing.T, dir string) (map[string][]tbPoint, int) {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "events.out.tfevents.*"))
	if err != nil {
		t.Fatal(err)
	}
	view := map[string][]tbPoint{}
	starts := 0
	for _, f := range files {
		evs, err := tensorboard.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, ev := range evs {
			if ev.SessionStart {
				if starts++; starts > 1 {
					for tag, ps := range view {
						kept := ps[:0]
						for _, p := range ps {
							if p.Step < ev.Step {
								kept = append(kept, p)
							}
						}
						view[tag] = kept
					}
				}
			}
			for _, v := range ev.Values {
				view[v.Tag] = append(view[v.Tag], tbPoint{ev.Step, v.Value})
			}
		}
	}
	return view, len(files)
}

// f32 is v as TensorBoard stores it.
func f32(v float64) float64 { return float64(float32(v)) }

// A run that is interrupted and resumed shows in TensorBoard as one run:
// what the interrupted attempt logged past its saved state is replaced,
// the epoch means and the method's own metrics are per epoch, the test
// values are written once, and a run started over removes the old files.
func TestTBLogResume(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "tb", "run")
	l, err := openTB(dir, false, 0, 2)
	if err != nil {
		t.Fatal(err)
	}
	for s := int64(1); s <= 6; s++ { // epoch 1 is steps 1–4; the attempt dies in epoch 2
		if err := l.step(s, map[string]float64{"loss": float64(s), "acc": 0.5, "gnorm": float64(10 * s)}); err != nil {
			t.Fatal(err)
		}
		if s == 4 {
			if err := l.epoch(4, 0.25, 2.5, 0.5, metrics.Report{NLL: 3, Acc: 0.125}, true, true); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}

	l, err = openTB(dir, true, 4, 2) // resumed from the state saved after step 4
	if err != nil {
		t.Fatal(err)
	}
	for s := int64(5); s <= 8; s++ {
		if err := l.step(s, map[string]float64{"loss": float64(10 * s), "acc": 0.75, "gnorm": float64(s)}); err != nil {
			t.Fatal(err)
		}
	}
	rep := metrics.Report{NLL: 1.5, Acc: 0.75}
	if err := l.epoch(8, 0.125, 65, 0.75, rep, true, false); err != nil {
		t.Fatal(err)
	}
	if err := l.final(8, rep); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}

	view, files := tbView(t, dir)
	if files != 2 {
		t.Errorf("%d event files, want 2 (the first attempt's and the resumed one's)", files)
	}
	want := map[string][]tbPoint{
		tbTrainLossStep:          {{2, 2}, {4, 4}, {6, 60}, {8, 80}},
		tbTrainLoss:              {{4, 2.5}, {8, 65}},
		tbTrainAcc:               {{4, 0.5}, {8, 0.75}},
		tbLR:                     {{4, 0.25}, {8, 0.125}},
		tbMethodPrefix + "gnorm": {{4, 25}, {8, 6.5}},
		tbValLoss:                {{4, 3}},
		tbValAcc:                 {{4, 0.125}},
		tbTestLoss:               {{8, 1.5}},
		tbTestAcc:                {{8, 0.75}},
	}
	if fmt.Sprint(view) != fmt.Sprint(want) {
		t.Errorf("TensorBoard shows\n%v\nwant\n%v", view, want)
	}

	l, err = openTB(dir, false, 0, 0) // started over: the old files go
	if err != nil {
		t.Fatal(err)
	}
	if err := l.step(1, map[string]float64{"loss": 1}); err != nil { // interval 0: no per-step values
		t.Fatal(err)
	}
	if err := l.final(1, rep); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	view, files = tbView(t, dir)
	if want := map[string][]tbPoint{tbTestLoss: {{1, 1.5}}, tbTestAcc: {{1, 0.75}}}; files != 1 || fmt.Sprint(view) != fmt.Sprint(want) {
		t.Errorf("after starting over: %d files, %v; want 1 file, %v", files, view, want)
	}

	var none *tbLog // eval.tensorboard = false
	if err := none.step(1, nil); err != nil {
		t.Error(err)
	}
	if err := none.epoch(1, 0, 0, 0, rep, true, true); err != nil {
		t.Error(err)
	}
	if err := none.final(1, rep); err != nil {
		t.Error(err)
	}
	if err := none.Close(); err != nil {
		t.Error(err)
	}
}

// checkRunTB checks the event files of a trained run against its curve
// (per-epoch values) and record (final test values), and returns how many
// event files it has. methodTags are the method/ tags it must have.
func checkRunTB(t *testing.T, r *Runner, run experiment.Run, rec results.Record, methodTags ...string) int {
	t.Helper()
	exp := r.Exp
	rows, err := curves.Read(curves.Path(exp.ResultsDir, exp.Name, run.Key))
	if err != nil {
		t.Fatal(err)
	}
	steps, acc, nll := rec.Steps, rec.Metrics["acc"], rec.Metrics["nll"]
	view, files := tbView(t, filepath.Join(exp.ResultsDir, exp.Name, TensorBoardDir(run.Key)))
	every := int64(exp.Eval.TensorBoardEverySteps)
	if got := int64(len(view[tbTrainLossStep])); got != steps/every {
		t.Errorf("%d %s values, want %d", got, tbTrainLossStep, steps/every)
	}
	for i, p := range view[tbTrainLossStep] {
		if p.Step != int64(i+1)*every {
			t.Errorf("%s value %d at step %d, want %d", tbTrainLossStep, i, p.Step, int64(i+1)*every)
		}
	}
	for _, tag := range append([]string{tbTrainLoss, tbTrainAcc, tbLR}, methodTags...) {
		if len(view[tag]) != len(rows) {
			t.Errorf("%s: %d values, want one per epoch (%d)", tag, len(view[tag]), len(rows))
		}
	}
	for i, row := range rows {
		if i >= len(view[tbTrainLoss]) || i >= len(view[tbLR]) {
			break
		}
		p := view[tbTrainLoss][i]
		if p.Step != row.Step || p.Value != f32(row.TrainLoss) {
			t.Errorf("%s[%d] = %+v, curve says step %d loss %v", tbTrainLoss, i, p, row.Step, row.TrainLoss)
		}
		if lr := view[tbLR][i]; lr.Value != f32(row.LR) {
			t.Errorf("%s[%d] = %+v, curve says %v", tbLR, i, lr, row.LR)
		}
	}
	want := fmt.Sprint([]tbPoint{{steps, f32(acc)}}, []tbPoint{{steps, f32(nll)}})
	if got := fmt.Sprint(view[tbTestAcc], view[tbTestLoss]); got != want {
		t.Errorf("test acc, loss: %s, want %s", got, want)
	}
	for tag := range view {
		if tag == tbValLoss || tag == tbValAcc || (strings.HasPrefix(tag, tbMethodPrefix) && !slices.Contains(methodTags, tag)) {
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
	if _, err := os.Stat(filepath.Join(exp.ResultsDir, exp.Name, TensorBoardDir(run.Key))); !os.IsNotExist(err) {
		t.Errorf("event files with eval.tensorboard = false: %v", err)
	}
	if _, ok := rec.Config["eval.every_epochs"]; !ok {
		t.Errorf("the other eval keys are still recorded: %v", rec.Config)
	}
}
