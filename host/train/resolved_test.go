package train

import (
	"context"
	"math"
	"reflect"
	"strings"
	"testing"

	"github.com/optlab/optlab/host/experiment"
	"github.com/optlab/optlab/host/results"
	"github.com/optlab/optlab/host/tensor"
	"github.com/optlab/optlab/plugins/otmdr"
	"github.com/optlab/optlab/sdk/optim"
)

// A run of OT-MDR with rho2 = -1 ("2ρ₁") records the ρ₂ that trained in
// its record's Resolved, under the configuration's key, while its Config
// keeps the -1: the next host run of the file, which knows only the -1,
// finds the run finished with the same configuration and skips it.
func TestResolvedRecorded(t *testing.T) {
	w := tensor.NewWorker(2)
	defer w.Close()
	r, exp := newRunner(t, w, strings.Replace(digitsTOML, "epochs = 3", "epochs = 1\nmax_steps = 2", 1))
	run := experiment.Grid(exp)[0]
	given := map[string]any{"rho1": 0.1}
	rec, err := r.Run(context.Background(), run, method(t, otmdr.New(), given))
	if err != nil {
		t.Fatal(err)
	}
	if v := rec.Config["params.rho2"]; v != -1.0 {
		t.Errorf("config params.rho2 = %v, want the configured -1", v)
	}
	want := map[string]any{"params.rho2": 0.2, "params.noise_std": 0.0, "params.particle_reduction": "mean", "params.split": "random"}
	if !reflect.DeepEqual(rec.Resolved, want) {
		t.Errorf("resolved = %#v, want %#v", rec.Resolved, want)
	}

	l := results.NewLayout(exp.ResultsDir, exp.Name)
	s, _, err := results.Open(l, results.StoreOptions{Owner: "me"})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Finish(rec); err != nil {
		t.Fatal(err)
	}
	if s, _, err = results.Open(l, results.StoreOptions{Owner: "me"}); err != nil {
		t.Fatal(err)
	}
	again := r.Record(run, method(t, otmdr.New(), given))
	st, err := s.Begin(context.Background(), run.Key, again.Config)
	if err != nil || st.Skip != results.SkipFinished {
		t.Errorf("the same run again: %+v, %v; want it skipped as finished", st, err)
	}
	_, recs, err := s.Records()
	if err != nil || len(recs) != 1 || recs[0].Resolved["params.rho2"] != 0.2 || recs[0].ConfigHash != results.HashConfig(again.Config) {
		t.Errorf("records file: %+v, %v", recs, err)
	}
}

// nanResolver is an optimizer whose resolved values hold a non-finite one.
type nanResolver struct {
	optim.Optimizer
	v any
}

func (n nanResolver) Resolved() map[string]any { return map[string]any{"scale": n.v, "ok": 1.0} }

// A plugin that resolves NaN or ±Inf (an "auto" value computed wrong)
// has its run recorded, the value written as a string and named in a
// warning, as a non-finite metric is moved to Undefined (hardening4/02:
// "json: unsupported value: NaN" lost the run and stopped the grid).
func TestResolvedNonFiniteRecorded(t *testing.T) {
	w := tensor.NewWorker(2)
	defer w.Close()
	r, exp := newRunner(t, w, strings.Replace(digitsTOML, "epochs = 3", "epochs = 1\nmax_steps = 2", 1))
	var log strings.Builder
	r.Log = &log
	run := experiment.Grid(exp)[0]
	for _, tc := range []struct {
		v          any
		warn, json string
	}{
		{math.NaN(), "params.scale = NaN", `"params.scale":"NaN"`},
		{math.Inf(1), "params.scale = +Inf", `"params.scale":"+Inf"`},
		{[]any{1.0, math.Inf(-1)}, "params.scale = -Inf", `"params.scale":[1,"-Inf"]`},
	} {
		log.Reset()
		opt := nanResolver{otmdr.New(), tc.v}
		rec, err := r.Run(context.Background(), run, method(t, opt, map[string]any{"rho1": 0.1}))
		if err != nil {
			t.Fatalf("%v: %v", tc.v, err)
		}
		if !strings.Contains(log.String(), tc.warn) || !strings.Contains(log.String(), "not a finite number") {
			t.Errorf("%v: log %q lacks a warning naming %q", tc.v, log.String(), tc.warn)
		}
		line, err := results.Marshal(rec)
		if err != nil {
			t.Fatalf("%v: the run's record: %v", tc.v, err)
		}
		if !strings.Contains(string(line), tc.json) || !strings.Contains(string(line), `"params.ok":1`) {
			t.Errorf("%v: record %s lacks %s", tc.v, line, tc.json)
		}
	}
}
