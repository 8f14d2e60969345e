package grid

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/optlab/optlab/host/experiment"
	"github.com/optlab/optlab/host/results"
)

// TestSameData: data settings are the same data when they are equal, label
// noise that is not active (rate 0) counting as none.
func TestSameData(t *testing.T) {
	noise := func(kind string, rate float64, seed int64, m map[string]int) experiment.Data {
		d := experiment.Default().Data
		d.LabelNoise = experiment.LabelNoise{Kind: kind, Rate: rate, Seed: seed, Map: m}
		return d
	}
	clean := experiment.Default().Data
	tests := []struct {
		name string
		a, b experiment.Data
		same bool
	}{
		{"clean", clean, clean, true},
		{"rate 0 is clean", noise(experiment.NoiseSymmetric, 0, 3, nil), clean, true},
		{"rate 0, other seeds", noise(experiment.NoisePairflip, 0, 1, nil), noise(experiment.NoiseSymmetric, 0, 2, nil), true},
		{"same noise", noise(experiment.NoiseSymmetric, 0.2, 3, nil), noise(experiment.NoiseSymmetric, 0.2, 3, nil), true},
		{"noise and clean", noise(experiment.NoiseSymmetric, 0.2, 3, nil), clean, false},
		{"other rate", noise(experiment.NoiseSymmetric, 0.2, 3, nil), noise(experiment.NoiseSymmetric, 0.4, 3, nil), false},
		{"other seed", noise(experiment.NoiseSymmetric, 0.2, 3, nil), noise(experiment.NoiseSymmetric, 0.2, 4, nil), false},
		{"equal maps", noise(experiment.NoiseAsymmetric, 0.2, 0, map[string]int{"1": 7}), noise(experiment.NoiseAsymmetric, 0.2, 0, map[string]int{"1": 7}), true},
		{"other maps", noise(experiment.NoiseAsymmetric, 0.2, 0, map[string]int{"1": 7}), noise(experiment.NoiseAsymmetric, 0.2, 0, map[string]int{"1": 2}), false},
	}
	for _, tc := range tests {
		if got := SameData(tc.a, tc.b); got != tc.same {
			t.Errorf("%s: SameData = %v, want %v", tc.name, got, tc.same)
		}
	}
}

// TestLabelNoiseSweepData: when the runs sweep data.label_noise.rate, each
// trains on the data with its own noise, loaded again when it differs from
// the previous run's, so each record's label_noise is its own: the rate-0
// runs have none, the others flip about their rate, the same for every
// method. With --shard, a shard's first run loads its own noise.
func TestLabelNoiseSweepData(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "noise.toml")
	src := `name = "noise"
results_dir = "results"
[data.label_noise]
kind = "symmetric"
rate = [0, 0.2, 0.4]
seed = 3
[model]
archs = ["mlp"]
[train]
epochs = 1
batch_size = 64
seeds = [1]
threads = 1
device = "cpu"
[eval]
aac_steps = 10
[[method]]
name = "SGD"
plugin = "sgd"
[[method]]
name = "SGD2"
plugin = "sgd"
`
	if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	var log strings.Builder
	res, err := Run(context.Background(), plan(t, path), RunOptions{Log: &log, Smoke: true, SmokeResults: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Records) != 6 || res.Failed != 0 {
		t.Fatalf("%d records, %d failed; want 6 and 0\n%s", len(res.Records), res.Failed, log.String())
	}
	// The grid's order is kept: SGD's three rates, then SGD2's; the data is
	// loaded at the start (rate 0) and again at each change of rate.
	if n := strings.Count(log.String(), "data loaded again for its label noise"); n != 5 {
		t.Errorf("data loaded again %d times, want 5:\n%s", n, log.String())
	}
	byRate := map[any]*results.LabelNoise{}
	for i, rec := range res.Records {
		rate := rec.Config["data.label_noise.rate"]
		wantKey := []string{"rate=0/", "rate=0.2/", "rate=0.4/"}[i%3]
		if !strings.Contains(rec.Key, wantKey) {
			t.Errorf("record %d is %s, want the run with %s", i, rec.Key, wantKey)
		}
		if i%3 == 0 {
			if rec.LabelNoise != nil || rate != nil {
				t.Errorf("%s: rate-0 run has label noise %+v (config rate %v)", rec.Key, rec.LabelNoise, rate)
			}
			continue
		}
		ln := rec.LabelNoise
		if ln == nil || ln.Samples != 1438 {
			t.Fatalf("%s: label noise %+v, want statistics over 1438 training labels", rec.Key, ln)
		}
		if r := rate.(float64); ln.Fraction < r-0.05 || ln.Fraction > r+0.05 {
			t.Errorf("%s: %.3f of the labels flipped, want about %v", rec.Key, ln.Fraction, r)
		}
		if prev, ok := byRate[rate]; ok && !reflect.DeepEqual(prev, ln) {
			t.Errorf("%s: label noise %+v differs from the other method's %+v at the same rate", rec.Key, ln, prev)
		}
		byRate[rate] = ln
	}
	if a, b := byRate[0.2], byRate[0.4]; a == nil || b == nil || a.Flipped == b.Flipped {
		t.Errorf("rates 0.2 and 0.4 flipped the same number of labels: %+v, %+v", a, b)
	}

	// Shard 2 of 3: runs 1 and 4, both rate 0.2, loaded once.
	log.Reset()
	res, err = Run(context.Background(), plan(t, path), RunOptions{Log: &log, Smoke: true, SmokeResults: true, Shard: results.Shard{I: 2, N: 3}})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Records) != 2 || strings.Contains(log.String(), "data loaded again") {
		t.Fatalf("shard: %d records, want 2, loaded once:\n%s", len(res.Records), log.String())
	}
	for _, rec := range res.Records {
		if !reflect.DeepEqual(rec.LabelNoise, byRate[0.2]) {
			t.Errorf("shard: %s has label noise %+v, want rate 0.2's %+v", rec.Key, rec.LabelNoise, byRate[0.2])
		}
	}
}
