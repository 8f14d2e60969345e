package table

import (
	"bytes"
	"errors"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/optlab/optlab/host/results"
)

// readTestdata reads host/table's testdata files.
func readTestdata(t *testing.T, files ...string) []results.Record {
	t.Helper()
	var paths []string
	for _, f := range files {
		paths = append(paths, filepath.Join("testdata", f))
	}
	recs, err := results.Read(paths...)
	if err != nil {
		t.Fatal(err)
	}
	return recs
}

func TestParseCorrKey(t *testing.T) {
	tests := []struct {
		key, family, sev, metric string
		ok                       bool
	}{
		{"corr.gaussian_noise.3.acc", "gaussian_noise", "3", "acc", true},
		{"corr.contrast.nll", "contrast", "", "nll", true},
		{"corr.2.acc", "", "severity 2", "acc", true},
		{"corr_acc", "", "", "", false},
		{"corr.jpeg.high.acc", "", "", "", false},
		{"corr.a.1.b.c", "", "", "", false},
		{"corr..acc", "", "", "", false},
		{"acc", "", "", "", false},
	}
	for _, tc := range tests {
		f, s, m, ok := parseCorrKey(tc.key)
		if f != tc.family || s != tc.sev || m != tc.metric || ok != tc.ok {
			t.Errorf("parseCorrKey(%q) = %q %q %q %v, want %q %q %q %v", tc.key, f, s, m, ok, tc.family, tc.sev, tc.metric, tc.ok)
		}
	}
}

// TestMCEByHand checks mCE and relative mCE on testdata/corrupt.jsonl:
// families noise and blur, severities 1 and 2, SGD (the baseline) and SAM,
// two seeds each. SGD's mean errors: clean (0.10 + 0.08)/2 = 0.09; noise
// 0.25 and 0.40 (sum 0.65); blur 0.15 and 0.30 (sum 0.45). Relative
// denominators: noise 0.16 + 0.31 = 0.47, blur 0.06 + 0.21 = 0.27.
func TestMCEByHand(t *testing.T) {
	merged, _, err := mergeSelect(readTestdata(t, "corrupt.jsonl"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	recs, c, err := withCorruptions(merged, "SGD")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(c.families, []string{"blur", "noise"}) || !slices.Equal(c.severities, []int{1, 2}) {
		t.Fatalf("families %v, severities %v", c.families, c.severities)
	}
	tests := []struct {
		method            string
		seed              int64
		mce, relMCE, kept float64
	}{
		// SAM seed 1: clean err 0.05; noise errs 0.15, 0.30; blur 0.10, 0.20.
		{"SAM", 1, (0.45/0.65 + 0.30/0.45) / 2, (0.35/0.47 + 0.20/0.27) / 2, 0.8125 / 0.95},
		// SAM seed 2: clean err 0.07; noise errs 0.25, 0.35; blur 0.12, 0.22.
		{"SAM", 2, (0.60/0.65 + 0.34/0.45) / 2, (0.46/0.47 + 0.20/0.27) / 2, 0.765 / 0.93},
		// SGD seed 1: clean err 0.10; noise errs 0.20, 0.40; blur 0.15, 0.25.
		{"SGD", 1, (0.60/0.65 + 0.40/0.45) / 2, (0.40/0.47 + 0.20/0.27) / 2, 0.75 / 0.90},
	}
	for _, tc := range tests {
		i := slices.IndexFunc(recs, func(r results.Record) bool { return r.Method == tc.method && r.Seed == tc.seed })
		m := recs[i].Metrics
		for key, want := range map[string]float64{mCE: tc.mce, relMCE: tc.relMCE, retained: tc.kept} {
			if math.Abs(m[key]-want) > 1e-9 {
				t.Errorf("%s seed %d: %s = %.9f, want %.9f", tc.method, tc.seed, key, m[key], want)
			}
		}
	}
	// Over seeds: the baseline's mCE is 100 % exactly (its errors are the
	// denominators' means); SAM's, by hand, 75.94 % and 80.12 %.
	g, _, err := buildCorruptions(readTestdata(t, "corrupt.jsonl"), Options{Baseline: "SGD", By: []string{FieldDataset}})
	if err != nil {
		t.Fatal(err)
	}
	for ri, want := range map[int][2]float64{0: {1, 1}, 1: {0.759402, 0.801221}} {
		got := [2]float64{g.cells[ri][0][slices.Index(g.metrics, mCE)].mean, g.cells[ri][0][slices.Index(g.metrics, relMCE)].mean}
		if math.Abs(got[0]-want[0]) > 1e-6 || math.Abs(got[1]-want[1]) > 1e-6 {
			t.Errorf("row %s: mCE, rel. mCE = %v, want %v", g.rows[ri].method, got, want)
		}
	}
}

// TestNoiseRows checks that runs at different label-noise rates are rows of
// their own and that --baseline pairs each with the baseline at its rate.
func TestNoiseRows(t *testing.T) {
	g, err := build(readTestdata(t, "noise.jsonl"), Options{By: []string{FieldDataset}, Metrics: []string{"acc"}, Baseline: "SGD", Format: Markdown})
	if err != nil {
		t.Fatal(err)
	}
	type rowAt struct{ noise, method string }
	var rows []rowAt
	for _, r := range g.rows {
		rows = append(rows, rowAt{r.fields[0], r.method})
	}
	want := []rowAt{{"0", "SGD"}, {"0", "SAM"}, {"0.4 symmetric", "SGD"}, {"0.4 symmetric", "SAM"}, {"0.6 symmetric", "SAM"}}
	if !slices.Equal(g.rowFields, []string{FieldNoise}) || !slices.Equal(rows, want) {
		t.Fatalf("row fields %v, rows %v; want [noise] %v", g.rowFields, rows, want)
	}
	tests := []struct {
		row  int
		has  bool
		diff float64
	}{
		{1, true, 0.935 - 0.91}, // SAM − SGD at rate 0
		{3, true, 0.855 - 0.81}, // at rate 0.4, not 0.935 − 0.81
		{4, false, 0},           // no SGD at rate 0.6
	}
	for _, tc := range tests {
		d := g.diffs[tc.row][0][0]
		if d.has != tc.has || (tc.has && math.Abs(d.d-tc.diff) > 1e-12) {
			t.Errorf("row %d: diff %+v, want has %v d %v", tc.row, d, tc.has, tc.diff)
		}
	}
	if !slices.Equal(g.unpaired, []string{"label noise 0.6 symmetric / CIFAR-10"}) {
		t.Errorf("unpaired %q", g.unpaired)
	}
}

func TestWithoutNoise(t *testing.T) {
	noisy := map[string]any{noiseRateKey: 0.2, noiseKindKey: "symmetric"}
	tests := []struct {
		method, setting string
		cfg             map[string]any
		wantMethod      string
		wantSetting     string
		wantNoise       string
	}{
		{"SGD rate=0.2", "rate=0.2", noisy, "SGD", "", "0.2 symmetric"},
		{"SAM rho=0.05 rate=0.2", "rho=0.05 rate=0.2", noisy, "SAM rho=0.05", "rho=0.05", "0.2 symmetric"},
		{"SAM label_noise.rate=0.2 kind=symmetric", "label_noise.rate=0.2 kind=symmetric", noisy, "SAM", "", "0.2 symmetric"},
		{"SGD rate=0", "rate=0", map[string]any{noiseKindKey: "pairflip", noiseRateKey: 0.0}, "SGD", "", "0"},
		// A method parameter "rate" whose value is not the noise rate stays.
		{"X rate=0.5", "rate=0.5", noisy, "X rate=0.5", "rate=0.5", "0.2 symmetric"},
		{"SGD", "", nil, "SGD", "", "0"},
	}
	for _, tc := range tests {
		r := results.Record{Method: tc.method, Setting: tc.setting, Config: tc.cfg}
		got := withoutNoise([]results.Record{r})[0]
		if got.Method != tc.wantMethod || got.Setting != tc.wantSetting || noiseValue(&got) != tc.wantNoise {
			t.Errorf("%q: method %q setting %q noise %q, want %q %q %q", tc.method, got.Method, got.Setting, noiseValue(&got), tc.wantMethod, tc.wantSetting, tc.wantNoise)
		}
	}
}

func TestCorruptionErrors(t *testing.T) {
	tests := []struct {
		name  string
		files []string
		opts  Options
		want  string
	}{
		{"no corr keys", []string{"baseline.jsonl"}, Options{Corruptions: true}, "--corruptions: no successful run has accuracies on corrupted test sets"},
		{"with metrics", []string{"corrupt.jsonl"}, Options{Corruptions: true, Metrics: []string{"acc"}}, "leave out --metrics"},
		{"unknown baseline", []string{"corrupt.jsonl"}, Options{Corruptions: true, Baseline: "ADAM"}, `unknown baseline method "ADAM" (methods: SGD, SAM)`},
	}
	for _, tc := range tests {
		err := Render(&bytes.Buffer{}, readTestdata(t, tc.files...), tc.opts)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err %v, want containing %q", tc.name, err, tc.want)
		}
	}
	if _, err := SeverityCurves(readTestdata(t, "baseline.jsonl"), Options{}); !errors.Is(err, errNoCorruptions) {
		t.Errorf("SeverityCurves without corr keys: %v", err)
	}
}

// TestMissingBaselineMCE checks that a row whose label noise has no
// baseline run gets empty mCE cells and a note, not an error.
func TestMissingBaselineMCE(t *testing.T) {
	var buf bytes.Buffer
	if err := Render(&buf, readTestdata(t, "noise.jsonl"), Options{Corruptions: true, Baseline: "SGD"}); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	for _, want := range []string{
		"| 0.6 symmetric | SAM    |",
		"No mCE on CIFAR-10 / resnet18 / label noise 0.6 symmetric: the baseline SGD has no run with corrupted-test accuracies there.",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

func TestSeverityCurves(t *testing.T) {
	curves, err := SeverityCurves(readTestdata(t, "noise.jsonl"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	var labels []string
	for _, c := range curves {
		labels = append(labels, c.Label)
	}
	want := []string{"SGD (label noise 0)", "SAM (label noise 0)", "SGD (label noise 0.4 symmetric)", "SAM (label noise 0.4 symmetric)", "SAM (label noise 0.6 symmetric)"}
	if !slices.Equal(labels, want) {
		t.Fatalf("labels %q, want %q", labels, want)
	}
	// SGD at rate 0: clean 0.90, 0.92; severity 1 = mean of noise.1 and
	// blur.1 per run: (0.80+0.85)/2, (0.78+0.83)/2.
	c := curves[0]
	if !slices.Equal(c.Severity, []int{0, 1, 2}) || c.Runs != 2 ||
		math.Abs(c.Mean[0]-0.91) > 1e-12 || math.Abs(c.Mean[1]-0.815) > 1e-12 || math.Abs(c.Std[1]-math.Sqrt(0.0002)) > 1e-12 {
		t.Errorf("SGD curve %+v", c)
	}
}
