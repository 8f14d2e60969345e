package table

import (
	"bytes"
	"strings"
	"testing"

	"github.com/optlab/optlab/host/results"
)

// evalRec is a record of method and seed whose evaluations during
// training reached the accuracies accs at epochs 1, 2, …, each epoch
// taking 10 training seconds and perEpoch gradient evaluations.
func evalRec(method string, seed int64, perEpoch int64, accs ...float64) results.Record {
	r := okRec(method, "d", "a", seed, map[string]any{"m": method}, map[string]float64{"acc": accs[len(accs)-1]})
	r.EvalSet = "validation"
	for i, a := range accs {
		r.Evals = append(r.Evals, results.EvalPoint{Epoch: i + 1, Step: int64(i+1) * 10, GradEvals: int64(i+1) * perEpoch, TrainSeconds: float64(i+1) * 10, Acc: a})
	}
	return r
}

// The time-to-target columns: the first evaluation at the target,
// averaged over the seeds that reached it, "k/n" when not all did, "not
// reached" when none did; no difference to a baseline where a seed did
// not reach it; CSV's reached column.
func TestTimeToTarget(t *testing.T) {
	recs := []results.Record{
		evalRec("SGD", 1, 1000, 0.5, 0.8, 0.91),
		evalRec("SGD", 2, 1000, 0.5, 0.92, 0.93),
		evalRec("SAM", 1, 2000, 0.6, 0.9, 0.95),
		evalRec("SAM", 2, 2000, 0.7, 0.85, 0.88),
		evalRec("Slow", 1, 1000, 0.3, 0.4, 0.5),
		evalRec("Slow", 2, 1000, 0.3, 0.4, 0.6),
	}
	var b bytes.Buffer
	opts := Options{Target: 0.9, Metrics: []string{"acc", tttSeconds, tttGradEvals, tttEpochs}, Baseline: "SGD"}
	if err := Render(&b, recs, opts); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{
		"25.0 ± 7.1 |", "0.003 ± 0.001 |", "2.5 ± 0.7 |",
		"20.0 (1/2)",
		"0.004 (1/2)",
		"not reached",
		"the first epoch-end evaluation at which the validation accuracy reaches 90.00 %",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, "| SAM") && strings.Count(line, "Δ") != 1 {
			t.Errorf("SAM's row has a difference to SGD in a time-to-target column, where one seed did not reach it: %s", line)
		}
	}
	b.Reset()
	opts.Format, opts.Baseline = CSV, ""
	if err := Render(&b, recs, opts); err != nil {
		t.Fatal(err)
	}
	csv := b.String()
	for _, want := range []string{"method,dataset,arch,metric,mean,std,n,reached", "SAM,d,a,ttt_seconds,20,,2,1", "Slow,d,a,ttt_seconds,NaN,,2,0"} {
		if !strings.Contains(csv, want) {
			t.Errorf("CSV lacks %q:\n%s", want, csv)
		}
	}
}

func TestTimeToTargetErrors(t *testing.T) {
	recs := []results.Record{evalRec("SGD", 1, 1000, 0.5)}
	for _, c := range []struct {
		opts Options
		want string
	}{
		{Options{Metrics: []string{tttSeconds}}, `metric "ttt_seconds" needs a target accuracy (--target)`},
		{Options{Target: 1.5}, "target accuracy 1.5: want a fraction in (0, 1]"},
		{Options{Target: 0.9, Metrics: []string{tttSeconds}}, ""},
	} {
		err := Render(&bytes.Buffer{}, recs, c.opts)
		if c.want == "" {
			if err != nil {
				t.Errorf("%+v: %v", c.opts, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: error %v, want %q", c.opts, err, c.want)
		}
	}
	// Records of runs that did not evaluate during training have no
	// time to target: asking for it is the missing-metric error.
	plain := okRec("SGD", "d", "a", 1, nil, map[string]float64{"acc": 0.9})
	err := Render(&bytes.Buffer{}, []results.Record{plain}, Options{Target: 0.9, Metrics: []string{tttSeconds}})
	if err == nil || !strings.Contains(err.Error(), `metric "ttt_seconds" is missing`) {
		t.Errorf("records without evaluations: error %v", err)
	}
}
