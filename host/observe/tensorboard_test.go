package observe

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/optlab/optlab/host/metrics"
	"github.com/optlab/optlab/host/tensorboard"
)

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
		if err := l.Step(Step{Step: s, Metrics: map[string]float64{"loss": float64(s), "acc": 0.5, "gnorm": float64(10 * s)}}); err != nil {
			t.Fatal(err)
		}
		if s == 4 {
			if err := l.Epoch(Epoch{Step: 4, LR: 0.25, TrainLoss: 2.5, TrainAcc: 0.5, Eval: &metrics.Report{NLL: 3, Acc: 0.125}, Validation: true}); err != nil {
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
		if err := l.Step(Step{Step: s, Metrics: map[string]float64{"loss": float64(10 * s), "acc": 0.75, "gnorm": float64(s)}}); err != nil {
			t.Fatal(err)
		}
	}
	rep := metrics.Report{NLL: 1.5, Acc: 0.75}
	if err := l.Epoch(Epoch{Step: 8, LR: 0.125, TrainLoss: 65, TrainAcc: 0.75, Eval: &rep}); err != nil {
		t.Fatal(err)
	}
	if err := l.Final(Final{Step: 8, Test: rep}); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}

	view, files, err := tensorboard.ReadRun(dir)
	if err != nil {
		t.Fatal(err)
	}
	if files != 2 {
		t.Errorf("%d event files, want 2 (the first attempt's and the resumed one's)", files)
	}
	want := map[string][]tensorboard.Point{
		TagTrainLossStep:          {{Step: 2, Value: 2}, {Step: 4, Value: 4}, {Step: 6, Value: 60}, {Step: 8, Value: 80}},
		TagTrainLoss:              {{Step: 4, Value: 2.5}, {Step: 8, Value: 65}},
		TagTrainAcc:               {{Step: 4, Value: 0.5}, {Step: 8, Value: 0.75}},
		TagLR:                     {{Step: 4, Value: 0.25}, {Step: 8, Value: 0.125}},
		TagMethodPrefix + "gnorm": {{Step: 4, Value: 25}, {Step: 8, Value: 6.5}},
		TagValLoss:                {{Step: 4, Value: 3}},
		TagValAcc:                 {{Step: 4, Value: 0.125}},
		TagTestLoss:               {{Step: 8, Value: 1.5}},
		TagTestAcc:                {{Step: 8, Value: 0.75}},
	}
	if fmt.Sprint(view) != fmt.Sprint(want) {
		t.Errorf("TensorBoard shows\n%v\nwant\n%v", view, want)
	}

	l, err = openTB(dir, false, 0, 0) // started over: the old files go
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Step(Step{Step: 1, Metrics: map[string]float64{"loss": 1}}); err != nil { // interval 0: no per-step values
		t.Fatal(err)
	}
	if err := l.Final(Final{Step: 1, Test: rep}); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if view, files, err = tensorboard.ReadRun(dir); err != nil {
		t.Fatal(err)
	}
	if want := map[string][]tensorboard.Point{TagTestLoss: {{Step: 1, Value: 1.5}}, TagTestAcc: {{Step: 1, Value: 0.75}}}; files != 1 || fmt.Sprint(view) != fmt.Sprint(want) {
		t.Errorf("after starting over: %d files, %v; want 1 file, %v", files, view, want)
	}
}
