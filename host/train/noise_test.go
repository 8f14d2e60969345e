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
