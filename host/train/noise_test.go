package train

import (
	"fmt"
	"strings"
	"testing"

	"github.com/optlab/optlab/host/data"
	"github.com/optlab/optlab/host/data/devset"
	"github.com/optlab/optlab/host/experiment"
	"github.com/optlab/optlab/host/results"
)

// TestLabelNoiseConfig: a run without label noise has no
// data.label_noise key, so its configuration (and hash) is that of the
// records written before label noise existed; a run with noise has them,
// and ConfigDiff tells the two apart, and one noise from another.
func TestLabelNoiseConfig(t *testing.T) {
	exp := experiment.Default()
	r := &Runner{Exp: exp}
	run := experiment.Run{Key: "k", Label: "SGD"}
	clean := r.Record(run, Optimizer{}).Config
	// The hash of this configuration before label noise existed.
	if got, want := results.HashConfig(clean), "c04e43278e2e0824"; got != want {
		t.Errorf("configuration without label noise has hash %s, want %s (as before label noise existed):\n%v", got, want, clean)
	}
	// Values left in a table without kind change nothing.
	exp.Data.LabelNoise = experiment.LabelNoise{Rate: 0.3, Seed: 2}
	if d := results.ConfigDiff(clean, r.Record(run, Optimizer{}).Config); d != nil {
		t.Errorf("inactive label noise changed the configuration: %v", d)
	}
	for k := range clean {
		if strings.HasPrefix(k, "data.label_noise") {
			t.Errorf("configuration without label noise has %s", k)
		}
	}
	exp.Data.LabelNoise = experiment.LabelNoise{Kind: experiment.NoiseSymmetric, Rate: 0.3, Seed: 2}
	sym := r.Record(run, Optimizer{}).Config
	if got, want := strings.Join(results.ConfigDiff(clean, sym), "; "),
		`data.label_noise.kind: "" → "symmetric"; data.label_noise.rate: 0 → 0.3; data.label_noise.seed: 0 → 2`; got != want {
		t.Errorf("clean → symmetric: %q, want %q", got, want)
	}
	if results.SameConfig(clean, sym) || results.HashConfig(clean) == results.HashConfig(sym) {
		t.Error("runs with and without label noise share a configuration")
	}
	exp.Data.LabelNoise = experiment.LabelNoise{Kind: experiment.NoiseAsymmetric, Rate: 0.3, Seed: 2, Map: map[string]int{"9": 1, "2": 0, "10": 3}}
	asym := r.Record(run, Optimizer{}).Config
	if got, want := asym["data.label_noise.map"], "{2 = 0, 9 = 1, 10 = 3}"; got != want {
		t.Errorf("data.label_noise.map = %v, want %q", got, want)
	}
	if got, want := strings.Join(results.ConfigDiff(sym, asym), "; "),
		`data.label_noise.kind: "symmetric" → "asymmetric"; data.label_noise.map: "" → "{2 = 0, 9 = 1, 10 = 3}"`; got != want {
		t.Errorf("symmetric → asymmetric: %q, want %q", got, want)
	}
}

// TestLabelNoiseRecorded: a run's record carries what the label noise of
// the experiment's data did; a run without it has none.
func TestLabelNoiseRecorded(t *testing.T) {
	exp := experiment.Default()
	run := experiment.Run{Key: "k", Label: "SGD"}
	r := &Runner{Exp: exp, Data: &devset.Data{Classes: 2}}
	if ln := r.Record(run, Optimizer{}).LabelNoise; ln != nil {
		t.Errorf("record without label noise has %+v", ln)
	}
	r.Data.LabelNoise = &data.NoiseStats{Samples: 8, Flipped: 2, Transition: [][]int{{3, 1}, {1, 3}}}
	ln := r.Record(run, Optimizer{}).LabelNoise
	if ln == nil || ln.Samples != 8 || ln.Flipped != 2 || ln.Fraction != 0.25 || fmt.Sprint(ln.Transition) != "[[3 1] [1 3]]" {
		t.Errorf("record's label noise %+v", ln)
	}
}

// TestLabelNoiseRateZeroConfig: in a rate sweep, the run with rate 0 is a
// run without label noise: its configuration (and hash) is that of the
// same run in a file without [data.label_noise], while the other rates'
// are their own.
func TestLabelNoiseRateZeroConfig(t *testing.T) {
	const body = "name = \"n\"\n%s\n[[method]]\nname = \"SGD\"\nplugin = \"sgd\"\n"
	load := func(noise string) (*experiment.Experiment, []experiment.Run) {
		t.Helper()
		e, err := experiment.Parse([]byte(fmt.Sprintf(body, noise)), "n.toml")
		if err != nil {
			t.Fatal(err)
		}
		if err := experiment.Validate(e, nil); err != nil {
			t.Fatal(err)
		}
		return e, experiment.Grid(e)
	}
	cleanExp, cleanRuns := load("")
	clean := (&Runner{Exp: cleanExp}).Record(cleanRuns[0], Optimizer{}).Config
	tests := []struct {
		noise string
		runs  int
	}{
		{"[data.label_noise]\nkind = \"symmetric\"\nrate = [0, 0.2, 0.4, 0.6]\nseed = 3", 4},
		{"[data.label_noise]\nkind = \"asymmetric\"\nrate = [0.4, 0]\nmap = {1 = 7}", 2},
		{"[data.label_noise]\nkind = \"pairflip\"\nrate = 0", 1},
	}
	for _, tc := range tests {
		e, runs := load(tc.noise)
		if len(runs) != tc.runs {
			t.Fatalf("%q: %d runs, want %d", tc.noise, len(runs), tc.runs)
		}
		r := &Runner{Exp: e}
		for _, run := range runs {
			cfg := r.Record(run, Optimizer{}).Config
			rate := run.Experiment(e).Data.LabelNoise.Rate
			same := results.ConfigDiff(clean, cfg) == nil && results.ConfigDiff(cfg, clean) == nil && results.HashConfig(cfg) == results.HashConfig(clean)
			if same != (rate == 0) {
				t.Errorf("%s (rate %v): configuration the same as without label noise: %v, want %v\n%v", run.Key, rate, same, rate == 0, results.ConfigDiff(clean, cfg))
			}
			if rate > 0 && cfg["data.label_noise.rate"] != rate {
				t.Errorf("%s: data.label_noise.rate = %v, want %v", run.Key, cfg["data.label_noise.rate"], rate)
			}
		}
	}
}
