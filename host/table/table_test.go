package table

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// TestGolden runs the CLI on the testdata JSONL files and compares the
// output with testdata/<name>; go test -run Golden -update rewrites them.
func TestGolden(t *testing.T) {
	tests := []struct {
		golden string
		args   []string
	}{
		{"ensemble.md", []string{"testdata/ensemble.jsonl", "--metrics", "acc,brier,nll,ece,aac"}},
		{"ensemble.tex", []string{"--format", "latex", "testdata/ensemble.jsonl", "--metrics=acc,brier,nll,ece,aac"}},
		{"ensemble.csv", []string{"testdata/ensemble.jsonl", "--format", "csv"}},
		{"ensemble_calibrated.md", []string{"testdata/ensemble.jsonl", "--metrics", "nll,cal_nll,ece,cal_ece,temperature,auroc"}},
		{"single.md", []string{"testdata/single.jsonl"}},
		{"single_by_arch.md", []string{"testdata/single.jsonl", "--by", "arch", "--metrics", "acc"}},
		{"single_by_arch.tex", []string{"testdata/single.jsonl", "--by", "arch", "--metrics", "acc", "--format", "latex"}},
		{"single_by_dataset_arch.md", []string{"testdata/single.jsonl", "--by", "dataset,arch", "--metrics", "acc"}},
		{"single_time.md", []string{"testdata/single.jsonl", "--time"}},
		{"single_time.tex", []string{"--time", "--format", "latex", "testdata/single.jsonl"}},
		{"specials.md", []string{"testdata/specials.jsonl", "testdata/specials_shard.jsonl"}},
		{"specials.tex", []string{"testdata/specials.jsonl", "--format", "latex", "testdata/specials_shard.jsonl"}},
		{"specials.csv", []string{"testdata/specials.jsonl", "testdata/specials_shard.jsonl", "--format", "csv"}},
		{"specials_by_none.md", []string{"--by", "none", "--", "testdata/specials.jsonl"}},
		{"baseline.md", []string{"testdata/baseline.jsonl", "--baseline", "SGD"}},
		{"baseline.tex", []string{"testdata/baseline.jsonl", "--baseline=SGD", "--format", "latex"}},
		{"baseline.csv", []string{"testdata/baseline.jsonl", "--baseline", "SGD", "--format", "csv", "--metrics", "acc,nll,ece"}},
		{"baseline_by_none.md", []string{"--by", "none", "--baseline", "SGD", "testdata/baseline.jsonl", "--metrics", "acc"}},
	}
	for _, tc := range tests {
		t.Run(tc.golden, func(t *testing.T) {
			var buf bytes.Buffer
			if err := Run(&buf, tc.args); err != nil {
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
