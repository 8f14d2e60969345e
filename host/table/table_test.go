package table

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/optlab/optlab/host/results"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// TestGolden renders the testdata JSONL files and compares the output with
// testdata/<name>; go test -run Golden -update rewrites them. (host table's
// flags, which make these options, are tested in host/cli.)
func TestGolden(t *testing.T) {
	tests := []struct {
		golden string
		files  []string
		opts   Options
		time   bool
	}{
		{"ensemble.md", []string{"ensemble.jsonl"}, Options{Metrics: []string{"acc", "brier", "nll", "ece", "aac"}}, false},
		{"ensemble.tex", []string{"ensemble.jsonl"}, Options{Format: LaTeX, Metrics: []string{"acc", "brier", "nll", "ece", "aac"}}, false},
		{"ensemble.csv", []string{"ensemble.jsonl"}, Options{Format: CSV}, false},
		{"ensemble_calibrated.md", []string{"ensemble.jsonl"}, Options{Metrics: []string{"nll", "cal_nll", "ece", "cal_ece", "temperature", "auroc"}}, false},
		{"single.md", []string{"single.jsonl"}, Options{}, false},
		{"single_by_arch.md", []string{"single.jsonl"}, Options{By: []string{FieldArch}, Metrics: []string{"acc"}}, false},
		{"single_by_arch.tex", []string{"single.jsonl"}, Options{By: []string{FieldArch}, Metrics: []string{"acc"}, Format: LaTeX}, false},
		{"single_by_dataset_arch.md", []string{"single.jsonl"}, Options{By: []string{FieldDataset, FieldArch}, Metrics: []string{"acc"}}, false},
		{"single_time.md", []string{"single.jsonl"}, Options{}, true},
		{"single_time.tex", []string{"single.jsonl"}, Options{Format: LaTeX}, true},
		{"specials.md", []string{"specials.jsonl", "specials_shard.jsonl"}, Options{}, false},
		{"specials.tex", []string{"specials.jsonl", "specials_shard.jsonl"}, Options{Format: LaTeX}, false},
		{"specials.csv", []string{"specials.jsonl", "specials_shard.jsonl"}, Options{Format: CSV}, false},
		{"specials_by_none.md", []string{"specials.jsonl"}, Options{By: []string{ByNone}}, false},
		{"baseline.md", []string{"baseline.jsonl"}, Options{Baseline: "SGD"}, false},
		{"baseline.tex", []string{"baseline.jsonl"}, Options{Baseline: "SGD", Format: LaTeX}, false},
		{"baseline.csv", []string{"baseline.jsonl"}, Options{Baseline: "SGD", Format: CSV, Metrics: []string{"acc", "nll", "ece"}}, false},
		{"baseline_by_none.md", []string{"baseline.jsonl"}, Options{By: []string{ByNone}, Baseline: "SGD", Metrics: []string{"acc"}}, false},
		{"sweep.md", []string{"sweep.jsonl"}, Options{Metrics: []string{"acc", "val_acc", "nll"}}, false},
		{"sweep_select.md", []string{"sweep.jsonl"}, Options{Select: "val_acc"}, false},
		{"sweep_select_nll.md", []string{"sweep.jsonl"}, Options{Select: "val_nll", Metrics: []string{"acc"}}, false},
		{"sweep_select.tex", []string{"sweep.jsonl"}, Options{Select: "val_acc", Format: LaTeX}, false},
		{"sweep_select.csv", []string{"sweep.jsonl"}, Options{Select: "val_acc", Format: CSV, Metrics: []string{"acc", "val_acc"}}, false},
		{"sweep_select_baseline.md", []string{"sweep.jsonl"}, Options{Select: "val_acc", Baseline: "SGD", Metrics: []string{"acc"}}, false},
		{"corrupt.md", []string{"corrupt.jsonl"}, Options{Corruptions: true}, false},
		{"corrupt_baseline.md", []string{"corrupt.jsonl"}, Options{Corruptions: true, Baseline: "SGD"}, false},
		{"corrupt_baseline.tex", []string{"corrupt.jsonl"}, Options{Corruptions: true, Baseline: "SGD", Format: LaTeX}, false},
		{"corrupt_baseline.csv", []string{"corrupt.jsonl"}, Options{Corruptions: true, Baseline: "SGD", Format: CSV}, false},
		{"best.md", []string{"corrupt.jsonl"}, Options{Metrics: []string{"acc", "best_epoch", "best_val_acc", "best_acc", "best_nll", "corr_acc", "corr_nll", "corr.noise.acc", "corr.noise.1.acc"}}, false},
		{"noise_baseline.md", []string{"noise.jsonl"}, Options{Baseline: "SGD", Metrics: []string{"acc", "corr_acc"}}, false},
		{"noise_by_noise.md", []string{"noise.jsonl"}, Options{By: []string{FieldNoise}, Metrics: []string{"acc"}}, false},
		{"noise_baseline.csv", []string{"noise.jsonl"}, Options{Baseline: "SGD", Format: CSV, Metrics: []string{"acc"}}, false},
		{"noise_corrupt_baseline.md", []string{"noise.jsonl"}, Options{Corruptions: true, Baseline: "SGD"}, false},
	}
	for _, tc := range tests {
		t.Run(tc.golden, func(t *testing.T) {
			var files []string
			for _, f := range tc.files {
				files = append(files, filepath.Join("testdata", f))
			}
			recs, err := results.Read(files...)
			if err != nil {
				t.Fatal(err)
			}
			render := Render
			if tc.time {
				render = RenderTime
			}
			var buf bytes.Buffer
			if err := render(&buf, recs, tc.opts); err != nil {
				t.Fatal(err)
			}
			path := filepath.Join("testdata", tc.golden)
			if *update {
				if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run go test -update to create it)", err)
			}
			if !bytes.Equal(buf.Bytes(), want) {
				t.Fatalf("output differs from %s (go test -update rewrites it)\n--- got ---\n%s\n--- want ---\n%s", path, buf.Bytes(), want)
			}
		})
	}
}
