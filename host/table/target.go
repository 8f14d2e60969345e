package table

import (
	"fmt"
	"maps"
	"math"
	"slices"

	"github.com/optlab/optlab/host/results"
)

// Keys of the time-to-target metrics (Options.Target): for each run, the
// first evaluation during training (results.Record.Evals) whose accuracy
// reaches the target, AlgoPerf style: the training seconds (evaluations
// not counted), the gradient evaluations and the epochs spent by then.
// A run that never reaches it has +Inf, which a cell shows as "not
// reached".
const (
	tttSeconds   = "ttt_seconds"
	tttGradEvals = "ttt_grad_evals"
	tttEpochs    = "ttt_epochs"
)

// targetKeys are the time-to-target metrics, in the order a table shows
// them by default.
func targetKeys() []string { return []string{tttSeconds, tttGradEvals, tttEpochs} }

// isTargetKey tells whether key is a time-to-target metric.
func isTargetKey(key string) bool { return slices.Contains(targetKeys(), key) }

// checkTarget checks Options.Target and that the time-to-target metrics
// are asked for only with it.
func checkTarget(opts Options) error {
	if t := opts.Target; t != 0 && !(t > 0 && t <= 1) {
		return fmt.Errorf("target accuracy %v: want a fraction in (0, 1] (0.9 for 90 %%)", t)
	}
	if opts.Target == 0 {
		for _, m := range opts.Metrics {
			if isTargetKey(m) {
				return fmt.Errorf("metric %q needs a target accuracy (--target)", m)
			}
		}
	}
	return nil
}

// withTimeToTarget returns recs with the time-to-target metrics of
// accuracy target added to the Metrics (in copies) of every record that
// evaluated during training.
func withTimeToTarget(recs []results.Record, target float64) []results.Record {
	out := make([]results.Record, len(recs))
	for i, r := range recs {
		out[i] = r
		if len(r.Evals) == 0 || r.Status != results.StatusOK {
			continue
		}
		m := maps.Clone(r.Metrics)
		if m == nil {
			m = map[string]float64{}
		}
		m[tttSeconds], m[tttGradEvals], m[tttEpochs] = math.Inf(1), math.Inf(1), math.Inf(1)
		for _, p := range r.Evals {
			if p.Acc >= target {
				m[tttSeconds], m[tttGradEvals], m[tttEpochs] = p.TrainSeconds, float64(p.GradEvals), float64(p.Epoch)
				break
			}
		}
		out[i].Metrics = m
	}
	return out
}

// evalSets returns the held-out sets (results.Record.EvalSet) of the
// records that evaluated during training, sorted.
func evalSets(recs []results.Record) []string {
	var sets []string
	for _, r := range recs {
		if len(r.Evals) > 0 && !slices.Contains(sets, r.EvalSet) {
			sets = append(sets, r.EvalSet)
		}
	}
	slices.Sort(sets)
	return sets
}

// targetNote explains the time-to-target columns.
func targetNote(target float64, sets []string) string {
	set := "held-out"
	if len(sets) == 1 {
		set = sets[0]
	}
	return fmt.Sprintf("To target: the first epoch-end evaluation at which the %s accuracy reaches %s, in training seconds (evaluations not counted), gradient evaluations (millions of samples of forward-backward passes) and epochs; mean ± std over the seeds that reached it, with k/n when not all did; \"not reached\" when none did. Runs evaluate during training with eval.every_epochs.",
		set, fmt.Sprintf("%.2f %%", 100*target))
}
