package table

import (
	"bytes"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/optlab/optlab/host/results"
)

func okRec(method, ds, arch string, seed int64, cfg map[string]any, m map[string]float64) results.Record {
	return results.Record{
		Experiment: "e", Key: method + "/" + ds + "/" + arch + "/" + string(rune('0'+seed)), Method: method,
		Config: cfg, ConfigHash: results.HashConfig(cfg), Dataset: ds, Arch: arch, Seed: seed,
		Status: results.StatusOK, Metrics: m, Finished: time.Date(2025, 1, 1, 0, 0, int(seed), 0, time.UTC),
	}
}

func TestSummarize(t *testing.T) {
	tests := []struct {
		in        []float64
		mean, std float64
	}{
		{nil, math.NaN(), math.NaN()},
		{[]float64{2}, 2, math.NaN()},
		{[]float64{1, 2, 3}, 2, 1},
		{[]float64{2, 4, 4, 4, 5, 5, 7, 9}, 5, math.Sqrt(32.0 / 7)},
	}
	for _, tc := range tests {
		s := summarize(tc.in)
		same := func(a, b float64) bool { return (math.IsNaN(a) && math.IsNaN(b)) || math.Abs(a-b) < 1e-12 }
		if s.n != len(tc.in) || !same(s.mean, tc.mean) || !same(s.std, tc.std) {
			t.Errorf("summarize(%v) = %+v, want mean %v std %v", tc.in, s, tc.mean, tc.std)
		}
	}
}

func TestMetricSpec(t *testing.T) {
	tests := []struct {
		key, label, arrow, formatted string
		v                            float64
	}{
		{"acc", "ACC", "↑", "96.59", 0.96587},
		{"nll", "NLL", "↓", "0.1431", 0.14314},
		{"ece", "ECE", "↓", "0.0134", 0.0134},
		{"aac", "AAC", "↓", "0.0000", -1e-17},
		{"auroc", "AUROC", "↑", "0.9468", 0.9468},
		{"auroc_ood", "AUROC-OOD", "↑", "0.9000", 0.9},
		{"cal_nll", "cal NLL", "↓", "0.1200", 0.12},
		{"cal_aac", "cal AAC", "↓", "0.0500", 0.05},
		{"temperature", "T", "", "1.234", 1.2341},
		{"test_loss", "test loss", "↓", "0.5000", 0.5},
		{"seconds_per_epoch", "s/epoch", "↓", "96.0", 96},
		{"train_acc", "train ACC", "↑", "99.00", 0.99},
		{"epoch_time", "epoch time", "↓", "3.50", 3.5},
		{"seconds_per_epoch", "s/epoch", "↓", "0.0312", 0.031234},
		{"wall_seconds", "wall s", "↓", "1234.6", 1234.56},
		{"kl", "kl", "", "0.0010", 0.001},
		{"best_acc", "best-epoch ACC", "↑", "95.00", 0.95},
		{"best_nll", "best-epoch NLL", "↓", "0.2000", 0.2},
		{"best_val_acc", "best-epoch val ACC", "↑", "91.00", 0.91},
		{"best_epoch", "best epoch", "", "8.5", 8.5},
		{"corr_acc", "corrupted ACC", "↑", "72.50", 0.725},
		{"corr_nll", "corrupted NLL", "↓", "1.2000", 1.2},
		{"corr_cal_ece", "corrupted cal ECE", "↓", "0.0300", 0.03},
		{"corr.gaussian_noise.3.acc", "gaussian noise 3 ACC", "↑", "60.00", 0.6},
		{"corr.contrast.ece", "contrast ECE", "↓", "0.1000", 0.1},
		{"corr.2.acc", "severity 2 ACC", "↑", "70.00", 0.7},
		{"mce", "mCE", "↓", "75.94", 0.759402},
		{"rel_mce", "rel. mCE", "↓", "80.12", 0.801221},
		{"retained", "retained", "↑", "83.89", 0.8389},
	}
	for _, tc := range tests {
		sp := metricSpec(tc.key)
		if sp.label != tc.label || sp.arrow() != tc.arrow || sp.format(tc.v) != tc.formatted {
			t.Errorf("%s: label %q arrow %q format %q; want %q %q %q", tc.key, sp.label, sp.arrow(), sp.format(tc.v), tc.label, tc.arrow, tc.formatted)
		}
	}
}

func TestEscape(t *testing.T) {
	if got := escapeMarkdown("a|b||c"); got != `a\|b\|\|c` {
		t.Errorf("escapeMarkdown = %q", got)
	}
	if got, want := escapeLaTeX(`a_b & 50% $x$ #1 {y} ~ ^ \ <|> ±`), `a\_b \& 50\% \$x\$ \#1 \{y\} \textasciitilde{} \textasciicircum{} \textbackslash{} \textless{}\textbar{}\textgreater{} $\pm$`; got != want {
		t.Errorf("escapeLaTeX = %q, want %q", got, want)
	}
}

func TestDisplayValue(t *testing.T) {
	for in, want := range map[string]string{"cifar10": "CIFAR-10", "CIFAR_100": "CIFAR-100", "tiny-imagenet": "TinyImageNet", "stl10": "stl10"} {
		if got := displayValue(FieldDataset, in); got != want {
			t.Errorf("displayValue(%q) = %q, want %q", in, got, want)
		}
	}
	if got := displayValue(FieldArch, "cifar10"); got != "cifar10" {
		t.Errorf("archs are shown as stored, got %q", got)
	}
}

func TestRenderBoldAndMissing(t *testing.T) {
	cfg := map[string]any{"x": 1}
	recs := []results.Record{
		okRec("A", "cifar10", "r18", 1, cfg, map[string]float64{"acc": 0.90, "nll": 0.5, "temperature": 1.5}),
		okRec("B", "cifar10", "r18", 1, cfg, map[string]float64{"acc": 0.95, "nll": 0.4, "temperature": 1.1}),
		okRec("C", "cifar10", "r18", 1, cfg, map[string]float64{"acc": 0.95}),
	}
	var buf bytes.Buffer
	if err := Render(&buf, recs, Options{Metrics: []string{"acc", "nll", "temperature"}}); err != nil {
		t.Fatal(err)
	}
	out := strings.Join(strings.Fields(buf.String()), " ") // ignore padding
	for _, want := range []string{
		"| A | 90.00 | 0.5000 | 1.500 |",
		"| B | **95.00** | **0.4000** | 1.100 |",
		"| C | **95.00** | – | – |",
		"Single seed per cell. ACC in %.",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "failed") {
		t.Errorf("no failures, but a failure note:\n%s", out)
	}
}

func TestRenderDefaultsAndOnlyFailed(t *testing.T) {
	cfg := map[string]any{"x": 1}
	// No acc/nll/ece: every present metric is shown.
	recs := []results.Record{okRec("A", "cifar10", "r18", 1, cfg, map[string]float64{"train_loss": 0.1, "auroc": 0.9})}
	var buf bytes.Buffer
	if err := Render(&buf, recs, Options{}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(buf.String(), "CIFAR-10 AUROC ↑ | CIFAR-10 train loss ↓") {
		t.Errorf("fallback metrics wrong:\n%s", buf.String())
	}
	failed := recs[0]
	failed.Status = results.StatusFailed
	for _, f := range []Format{Markdown, LaTeX, CSV} {
		buf.Reset()
		if err := Render(&buf, []results.Record{failed}, Options{Format: f}); err != nil {
			t.Fatal(err)
		}
		if f != CSV && !strings.Contains(buf.String(), "Excluded 1 failed run (A / CIFAR-10: 1).") {
			t.Errorf("%s: failure note missing:\n%s", f, buf.String())
		}
		if f == CSV && buf.String() != "method,dataset,arch,metric,mean,std,n\n" {
			t.Errorf("csv of failed-only records: %q", buf.String())
		}
	}
}

func TestRenderErrors(t *testing.T) {
	a := okRec("SAM", "cifar10", "r18", 1, map[string]any{"rho": 0.05}, map[string]float64{"acc": 0.9})
	b := okRec("SAM", "cifar10", "r18", 2, map[string]any{"rho": 0.1}, map[string]float64{"acc": 0.9})
	otherExp := b
	otherExp.Experiment = "e2"
	// For Options.Metrics, which must be errors rather than a column of
	// dashes when unknown or when no successful run has them.
	cfg := map[string]any{"x": 1}
	withKL := okRec("A", "cifar10", "r18", 1, cfg, map[string]float64{"acc": 0.9, "kl_div": 0.1})
	accOnly := okRec("B", "cifar10", "r18", 1, cfg, map[string]float64{"acc": 0.8})
	failed := okRec("C", "cifar10", "r18", 1, map[string]any{"x": 2}, map[string]float64{"brier": 0.2})
	failed.Status = results.StatusFailed
	metrics := func(m ...string) Options { return Options{Metrics: m} }
	tests := []struct {
		name string
		recs []results.Record
		opts Options
		want string
	}{
		{"mixed config", []results.Record{a, b}, Options{}, "mixes configurations"},
		{"mixed config across experiments", []results.Record{a, otherExp}, Options{}, "pools runs with different configurations"},
		{"bad format", []results.Record{a}, Options{Format: "html"}, "unknown format"},
		{"bad by", []results.Record{a}, Options{By: []string{"seed"}}, "unknown grouping field"},
		{"by twice", []results.Record{a}, Options{By: []string{"arch", "arch"}}, "twice"},
		{"none with others", []results.Record{a}, Options{By: []string{"none", "arch"}}, "cannot be combined"},
		{"unknown metric, close to a known one", []results.Record{withKL, accOnly}, metrics("acc", "accc"),
			`unknown metric "accc"; did you mean "acc"? (valid metrics: acc, nll, brier, ece, aac, auroc, auroc_ood, temperature, cal_nll, cal_brier, cal_ece, cal_aac, test_loss, train_loss, kl_div, seconds_per_epoch, wall_seconds)`},
		{"unknown metric, close to a record's key", []results.Record{withKL, accOnly}, metrics("kl_dvi"), `unknown metric "kl_dvi"; did you mean "kl_div"?`},
		{"unknown metric, nothing close", []results.Record{withKL}, metrics("zzzzzz"), `unknown metric "zzzzzz" (valid metrics: acc, nll`},
		{"metric in the wrong case", []results.Record{withKL}, metrics("ACC"), `unknown metric "ACC"; did you mean "acc"?`},
		{"known metric no run has", []results.Record{withKL, accOnly}, metrics("acc", "brier"),
			`metric "brier" is missing from all 2 successful runs (metrics present: acc, kl_div)`},
		{"metric only a failed run has", []results.Record{accOnly, failed}, metrics("brier"),
			`metric "brier" is missing from the only successful run (metrics present: acc)`},
		{"odd metric keys from the file are escaped", []results.Record{okRec("A", "cifar10", "r18", 1, cfg, map[string]float64{"e\x1b[2Jvil": 1})},
			metrics("zzzzzz"), `, "e\x1b[2Jvil", seconds_per_epoch`},
		{"odd method names from the file are escaped", []results.Record{okRec("A\x1b[2J", "cifar10", "r18", 1, cfg, map[string]float64{"acc": 1})},
			Options{Baseline: "B"}, `unknown baseline method "B" (methods: "A\x1b[2J")`},
		{"time not measured", []results.Record{accOnly}, metrics("seconds_per_epoch"),
			`metric "seconds_per_epoch" is missing from the only successful run`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := Render(&bytes.Buffer{}, tc.recs, tc.opts)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want containing %q", err, tc.want)
			}
		})
	}
}

func TestRenderMetricChecks(t *testing.T) {
	cfg := map[string]any{"x": 1}
	a := okRec("A", "cifar10", "r18", 1, cfg, map[string]float64{"acc": 0.9, "kl_div": 0.1})
	b := okRec("B", "cifar10", "r18", 1, cfg, map[string]float64{"acc": 0.8})
	failed := okRec("C", "cifar10", "r18", 1, cfg, map[string]float64{"acc": 0.7})
	failed.Status = results.StatusFailed
	tests := []struct {
		name    string
		recs    []results.Record
		metrics []string
		want    string
	}{
		{"a record's own metric, missing from some runs", []results.Record{a, b}, []string{"acc", "kl_div"}, "| B | 80.00 | – |"},
		{"only failed runs: the failure note, no error", []results.Record{failed}, []string{"acc", "nll"}, "Excluded 1 failed run"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			if err := Render(&buf, tc.recs, Options{Metrics: tc.metrics}); err != nil {
				t.Fatal(err)
			}
			if out := strings.Join(strings.Fields(buf.String()), " "); !strings.Contains(out, tc.want) {
				t.Errorf("output lacks %q:\n%s", tc.want, buf.String())
			}
		})
	}
	if err := RenderTime(&bytes.Buffer{}, []results.Record{b}, Options{}); err == nil || !strings.Contains(err.Error(), `metric "seconds_per_epoch" is missing`) {
		t.Errorf("RenderTime without times: err = %v", err)
	}
}

// sweepRec is a successful record of a run of a sweep.
func sweepRec(base, setting, arch string, seed int64, val, acc float64, validation any) results.Record {
	cfg := map[string]any{"setting": setting}
	if validation != nil {
		cfg["data.validation"] = validation
	}
	r := okRec(base, "cifar10", arch, seed, cfg, map[string]float64{"acc": acc})
	if val >= 0 {
		r.Metrics["val_acc"] = val
	}
	if setting != "" {
		r.Method, r.Base, r.Setting = base+" "+setting, base, setting
	}
	r.Key = "method=" + r.Method + "/arch=" + arch + "/seed=" + string(rune('0'+seed))
	return r
}

func TestSelect(t *testing.T) {
	tests := []struct {
		name   string
		recs   []results.Record
		opts   Options
		want   []string // substrings of the output
		absent []string
		err    string
	}{
		{
			name: "chosen per arch, unswept method kept",
			recs: []results.Record{
				sweepRec("SAM", "rho=0.05", "cnn", 1, 0.90, 0.80, 0.1),
				sweepRec("SAM", "rho=0.1", "cnn", 1, 0.91, 0.70, 0.1),
				sweepRec("SAM", "rho=0.05", "mlp", 1, 0.95, 0.60, 0.1),
				sweepRec("SAM", "rho=0.1", "mlp", 1, 0.94, 0.99, 0.1),
				sweepRec("SGD", "", "cnn", 1, -1, 0.75, 0.0),
			},
			opts: Options{Select: "val_acc", By: []string{FieldArch}, Metrics: []string{"acc"}},
			want: []string{"| SAM    |     70.00 |     60.00 |", "| SGD    | **75.00** |         – |",
				"SAM: rho=0.1 on CIFAR-10 / cnn (val ACC 91.00, best of 2 settings), rho=0.05 on CIFAR-10 / mlp (val ACC 95.00, best of 2 settings)."},
			absent: []string{"SGD:"},
		},
		{
			name: "runs from before the sweep compete as a setting",
			recs: []results.Record{
				sweepRec("SAM", "", "cnn", 1, 0.95, 0.80, 0.1),
				sweepRec("SAM", "rho=0.1", "cnn", 1, 0.90, 0.70, 0.1),
			},
			opts: Options{Select: "val_acc", Metrics: []string{"acc"}},
			want: []string{"| SAM    |          80.00 |", "SAM: the runs without swept values (val ACC 95.00, best of 2 settings)."},
		},
		{
			name: "tie goes to the first setting",
			recs: []results.Record{
				sweepRec("SAM", "rho=0.05", "cnn", 1, 0.90, 0.80, 0.1),
				sweepRec("SAM", "rho=0.1", "cnn", 1, 0.90, 0.70, 0.1),
			},
			opts: Options{Select: "val_acc", Format: CSV, Metrics: []string{"acc"}},
			want: []string{"SAM,rho=0.05,cifar10,cnn,acc,0.8,,1"},
		},
		{
			name: "every setting failed",
			recs: []results.Record{
				sweepRec("SAM", "rho=0.05", "cnn", 1, 0.90, 0.80, 0.1),
				func() results.Record {
					r := sweepRec("SAM", "rho=0.05", "cnn", 2, 0.90, 0.80, 0.1)
					r.Status, r.Metrics = results.StatusFailed, nil
					return r
				}(),
				func() results.Record {
					r := sweepRec("SAM", "rho=0.1", "cnn", 1, 0.90, 0.80, 0.1)
					r.Status, r.Metrics = results.StatusFailed, nil
					return r
				}(),
			},
			opts: Options{Select: "val_acc"},
			want: []string{"No successful runs.", "SAM: none (each of the 2 settings has failed runs)", "Excluded 2 failed runs (SAM / CIFAR-10: 2)"},
		},
		{
			name: "a non-finite validation metric leaves its setting out",
			recs: []results.Record{
				sweepRec("SAM", "rho=0.05", "cnn", 1, 0.90, 0.80, 0.1),
				func() results.Record {
					r := sweepRec("SAM", "rho=0.1", "cnn", 1, 0.95, 0.70, 0.1)
					delete(r.Metrics, "val_acc")
					r.Undefined = []string{"val_acc"}
					return r
				}(),
			},
			opts: Options{Select: "val_acc", Metrics: []string{"acc"}},
			want: []string{"SAM: rho=0.05 (val ACC 90.00, best of 2 settings; 1 left out for a val ACC that is not finite)."},
		},
		{
			name: "settings over unequal numbers of seeds are named",
			recs: []results.Record{
				sweepRec("SAM", "rho=0.05", "cnn", 1, 0.90, 0.80, 0.1),
				sweepRec("SAM", "rho=0.05", "cnn", 2, 0.92, 0.80, 0.1),
				sweepRec("SAM", "rho=0.1", "cnn", 1, 0.95, 0.70, 0.1),
			},
			opts: Options{Select: "val_acc", Metrics: []string{"acc"}},
			want: []string{"SAM: rho=0.1 (val ACC 95.00, best of 2 settings; the settings' means are over unequal numbers of seeds: rho=0.05 2, rho=0.1 1)."},
		},
		{
			name: "test metric refused",
			opts: Options{Select: "acc"},
			err:  "--select acc: a setting must be chosen on the validation split, never on test (or training) data: select val_acc (val_acc, val_nll,",
		},
		{
			name: "test loss refused",
			opts: Options{Select: "test_loss"},
			err:  "select val_nll",
		},
		{
			name: "not a selectable validation metric",
			opts: Options{Select: "val_temperature"},
			err:  `--select val_temperature: unknown validation metric (select val_acc, val_nll,`,
		},
		{
			name: "the validation loss is val_nll",
			opts: Options{Select: "val_loss"},
			err:  `--select val_loss: unknown validation metric; did you mean val_nll?`,
		},
		{
			name: "a misspelt validation metric",
			opts: Options{Select: "val_ac"},
			err:  `--select val_ac: unknown validation metric; did you mean val_acc?`,
		},
		{
			name: "upper case",
			opts: Options{Select: "VAL_ACC"},
			err:  `--select VAL_ACC: metric names are lower case: select val_acc`,
		},
		{
			name: "every setting's validation metric not finite",
			recs: func() []results.Record {
				var recs []results.Record
				for _, set := range []string{"rho=0.05", "rho=0.1"} {
					r := sweepRec("SAM", set, "cnn", 1, 0.9, 0.8, 0.1)
					delete(r.Metrics, "val_acc")
					r.Undefined = []string{"val_acc"}
					recs = append(recs, r)
				}
				return recs
			}(),
			opts: Options{Select: "val_acc"},
			want: []string{"No row: no setting could be chosen on the validation split (see below).",
				"SAM: none (the val ACC of each of the 2 settings is not finite)"},
		},
		{
			name: "no validation split",
			recs: []results.Record{
				sweepRec("SAM", "rho=0.05", "cnn", 1, -1, 0.80, 0.0),
				sweepRec("SAM", "rho=0.1", "cnn", 1, -1, 0.70, 0.0),
			},
			opts: Options{Select: "val_acc"},
			err:  `--select val_acc chooses on the validation split, but run "method=SAM rho=0.05/arch=cnn/seed=1" was trained without one (data.validation = 0): hold one out by setting data.validation in the experiment's [data] table, e.g. validation = 0.1`,
		},
		{
			name: "no validation split, nothing swept",
			recs: []results.Record{sweepRec("SGD", "", "cnn", 1, -1, 0.75, nil)},
			opts: Options{Select: "val_acc"},
			err:  `was trained without one (data.validation = 0)`,
		},
		{
			name: "record of an older optlab",
			recs: []results.Record{
				sweepRec("SAM", "rho=0.05", "cnn", 1, 0.9, 0.80, 0.1),
				sweepRec("SAM", "rho=0.1", "cnn", 1, -1, 0.70, 0.1),
			},
			opts: Options{Select: "val_acc"},
			err:  `--select val_acc: run "method=SAM rho=0.1/arch=cnn/seed=1" has a validation split (data.validation = 0.1) but no val_acc in its record`,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			err := Render(&buf, tc.recs, tc.opts)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range tc.want {
				if !strings.Contains(buf.String(), w) {
					t.Errorf("output does not contain %q:\n%s", w, buf.String())
				}
			}
			for _, w := range tc.absent {
				if strings.Contains(buf.String(), w) {
					t.Errorf("output contains %q:\n%s", w, buf.String())
				}
			}
		})
	}
}

// A small model's epochs take hundredths of a second: the time table shows
// three significant digits, so that the methods are told apart and only
// the fastest is bold (at one decimal every cell read 0.0, all bold).
func TestRenderTimeSmallModel(t *testing.T) {
	cfg := map[string]any{"x": 1}
	var recs []results.Record
	for seed, s := range []float64{0.0312, 0.0330} {
		r := okRec("SGD", "uci-digits", "cnn", int64(seed+1), cfg, map[string]float64{"acc": 0.9})
		r.SecondsPerEpoch = s
		recs = append(recs, r)
		r = okRec("SAM", "uci-digits", "cnn", int64(seed+1), cfg, map[string]float64{"acc": 0.9})
		r.SecondsPerEpoch = 2 * s
		recs = append(recs, r)
	}
	var buf bytes.Buffer
	if err := RenderTime(&buf, recs, Options{}); err != nil {
		t.Fatal(err)
	}
	out := strings.Join(strings.Fields(buf.String()), " ")
	for _, want := range []string{"| SGD | **0.0321 ± 0.0013** |", "| SAM | 0.0642 ± 0.0025 |"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, buf.String())
		}
	}
}
