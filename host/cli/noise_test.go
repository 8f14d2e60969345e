package cli_test

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/optlab/optlab/host/results"
)

// TestLabelNoiseCheckAndRecord: host check prints what the label noise
// does (realised fraction, transition matrix); a run with it is another
// run than the finished one without it, and its record carries the
// same statistics and the noise in its configuration.
func TestLabelNoiseCheckAndRecord(t *testing.T) {
	dir := t.TempDir()
	res := filepath.Join(dir, "results")
	s := spec{Name: "noise", Methods: []method{{Name: "SGD", Plugin: "sgd"}}}
	exp := s.write(t, dir)
	args := []string{"run", "-q", "--plugins", pluginDir, "--results", res, exp}
	if r := host(t, args...); r.code != 0 {
		t.Fatalf("clean run: exit code %d\n%s", r.code, r.stderr)
	}
	runs := results.NewLayout(res, s.Name).Runs()
	recs, err := results.Read(runs)
	if err != nil || len(recs) != 1 {
		t.Fatalf("clean run's records: %v (%d)", err, len(recs))
	}
	clean := recs[0]
	if clean.LabelNoise != nil || clean.Config["data.label_noise.kind"] != nil {
		t.Errorf("the clean run's record has label noise: %+v", clean.LabelNoise)
	}

	s.Data = "dataset = \"uci-digits\"\n[data.label_noise]\nkind = \"pairflip\"\nrate = 0.25\nseed = 3"
	exp = s.write(t, dir)
	check := host(t, "check", "--plugins", pluginDir, exp)
	if check.code != 0 {
		t.Fatalf("check: exit code %d\n%s", check.code, check.stderr)
	}
	var flipped, samples int
	var pct float64
	i := strings.Index(check.stdout, "label noise: pairflip, rate 0.25, seed 3: ")
	if i < 0 {
		t.Fatalf("check does not describe the label noise:\n%s", check.stdout)
	}
	if _, err := fmt.Sscanf(check.stdout[i:], "label noise: pairflip, rate 0.25, seed 3: %d of %d training labels flipped (%f%%)", &flipped, &samples, &pct); err != nil {
		t.Fatalf("%v:\n%s", err, check.stdout)
	}
	if samples != 1438 || flipped < 300 || flipped > 420 {
		t.Errorf("%d of %d labels flipped, want about a quarter of 1438", flipped, samples)
	}
	if !strings.Contains(check.stdout, "transition (rows: clean label, columns: noisy label):") {
		t.Errorf("check prints no transition matrix:\n%s", check.stdout)
	}

	run := host(t, args...)
	if run.code != 0 {
		t.Fatalf("noisy run: exit code %d\n%s", run.code, run.stderr)
	}
	if strings.Contains(run.stderr, "already finished") {
		t.Errorf("the run with label noise was taken for the finished one without:\n%s", run.stderr)
	}
	if recs, err = results.Read(runs); err != nil || len(recs) == 0 {
		t.Fatalf("records: %v (%d)", err, len(recs))
	}
	last := recs[len(recs)-1]
	if last.Config["data.label_noise.kind"] != "pairflip" || last.Config["data.label_noise.rate"] != 0.25 {
		t.Errorf("noisy record's config: %v", last.Config)
	}
	if results.SameConfig(clean.Config, last.Config) {
		t.Error("the records with and without label noise have the same configuration")
	}
	ln := last.LabelNoise
	if ln == nil || ln.Samples != samples || ln.Flipped != flipped || ln.Fraction != float64(flipped)/float64(samples) || len(ln.Transition) != 10 {
		t.Fatalf("record's label noise %+v, want %d of %d flipped and a 10×10 matrix", ln, flipped, samples)
	}
	total, off := 0, 0
	for c, row := range ln.Transition {
		for d, v := range row {
			total += v
			if c != d {
				off += v
				if d != (c+1)%10 && v != 0 {
					t.Errorf("pairflip moved %d labels from %d to %d", v, c, d)
				}
			}
		}
	}
	if total != samples || off != flipped {
		t.Errorf("transition holds %d samples, %d flipped; want %d, %d", total, off, samples, flipped)
	}
}

// TestLabelNoiseSweepCheck: with a sweep of data.label_noise.rate, host
// check prints what the noise of each rate does, and that the rate-0 runs
// have none.
func TestLabelNoiseSweepCheck(t *testing.T) {
	dir := t.TempDir()
	s := spec{Name: "noisesweep", Methods: []method{{Name: "SGD", Plugin: "sgd"}},
		Data: "dataset = \"uci-digits\"\n[data.label_noise]\nkind = \"pairflip\"\nrate = [0, 0.25, 0.5]\nseed = 3"}
	check := host(t, "check", "--plugins", pluginDir, s.write(t, dir))
	if check.code != 0 {
		t.Fatalf("check: exit code %d\n%s", check.code, check.stderr)
	}
	out := check.stdout
	for _, want := range []string{
		"label noise: none for the runs with rate 0 (clean training labels)\n",
		"grid: 3 settings (SGD: 3, rate) × 1 arch × 1 seed = 3 runs",
		"method=SGD rate=0/arch=", "method=SGD rate=0.25/arch=", "method=SGD rate=0.5/arch=",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("check's output lacks %q:\n%s", want, out)
		}
	}
	var flipped [2]int
	for i, rate := range []string{"0.25", "0.5"} {
		head := "label noise: pairflip, rate " + rate + ", seed 3: "
		j := strings.Index(out, head)
		if j < 0 {
			t.Fatalf("check does not describe the noise of rate %s:\n%s", rate, out)
		}
		var samples int
		var pct float64
		if _, err := fmt.Sscanf(out[j+len(head):], "%d of %d training labels flipped (%f%%)", &flipped[i], &samples, &pct); err != nil || samples != 1438 {
			t.Fatalf("rate %s: %v (%d samples):\n%s", rate, err, samples, out)
		}
	}
	if strings.Count(out, "transition (rows: clean label, columns: noisy label):") != 2 {
		t.Errorf("check prints %d transition matrices, want 2:\n%s", strings.Count(out, "transition (rows"), out)
	}
	if f := flipped; f[0] < 300 || f[0] > 420 || f[1] < 650 || f[1] > 790 {
		t.Errorf("rates 0.25 and 0.5 flipped %d and %d of 1438 labels", f[0], f[1])
	}
}
