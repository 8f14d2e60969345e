package cli

import (
	"testing"

	"github.com/optlab/optlab/host/data"
	"github.com/optlab/optlab/host/experiment"
)

// TestNoiseSummaryManyClasses: for more classes than a matrix fits in a
// terminal, host check lists the largest flips instead.
func TestNoiseSummaryManyClasses(t *testing.T) {
	k := 30
	st := &data.NoiseStats{Samples: 300, Flipped: 12, Transition: make([][]int, k)}
	for c := range st.Transition {
		st.Transition[c] = make([]int, k)
		st.Transition[c][c] = 10
	}
	st.Transition[3][5], st.Transition[7][1], st.Transition[2][0] = 6, 4, 2
	n := experiment.LabelNoise{Kind: experiment.NoiseAsymmetric, Rate: 0.5, Map: map[string]int{"3": 5, "7": 1, "2": 0}}
	want := "label noise: asymmetric, rate 0.5, seed 0, map {2 = 0, 3 = 5, 7 = 1}: 12 of 300 training labels flipped (4.00%)\n" +
		"  transition: 30×30, 3 class pairs flipped (the matrix is in each run's record); largest: 3→5 ×6 7→1 ×4 2→0 ×2\n"
	if got := noiseSummary(n, st); got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
}

func TestEvalSummary(t *testing.T) {
	e := experiment.Default().Eval
	if got := evalSummary(e); got != "" {
		t.Errorf("defaults: %q, want nothing", got)
	}
	e.BestEpoch, e.EveryEpochs = "acc", 2
	e.Corruptions = experiment.Corruptions{Families: []string{"jpeg", "contrast"}, Severities: []int{1, 5}, Seed: 3}
	want := "best epoch: the test metrics of the epoch with the best validation acc are recorded as best_* (evaluated every 2 epochs)\n" +
		"corrupted test sets: 2 families × 2 severities [1 5] = 4 sets, seed 3: contrast, jpeg\n"
	if got := evalSummary(e); got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}
