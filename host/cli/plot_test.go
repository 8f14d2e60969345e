package cli

import (
	"bytes"
	"context"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestPlotCorruptions checks host plot --corruptions: a PNG of accuracy
// against severity from records files or a results folder, and a clear
// error for records without corrupted-test metrics.
func TestPlotCorruptions(t *testing.T) {
	dir := t.TempDir()
	data, err := os.ReadFile(filepath.Join(tableTestdata, "noise.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "runs.jsonl"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, want string
		args       []string
		png        string
	}{
		{"folder", "SAM (label noise 0.4 symmetric)  2      0: 85.50, 1: 77.00, 2: 67.00", []string{dir, "--corruptions"}, filepath.Join(dir, "corruptions.png")},
		{"where", "SAM (label noise 0.4 symmetric)  2      0: 85.50, 1: 77.00, 2: 67.00", []string{dir, "--corruptions", "--where", "method=SAM", "--out", filepath.Join(dir, "sam.png")}, filepath.Join(dir, "sam.png")},
		{"file", "wrote " + filepath.Join(dir, "x.png"), []string{"--corruptions", filepath.Join(tableTestdata, "corrupt.jsonl"), "--out", filepath.Join(dir, "x.png")}, filepath.Join(dir, "x.png")},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			if err := plotCmd(context.Background(), tc.args, &stdout, &stderr); err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(stdout.String(), tc.want) {
				t.Errorf("output lacks %q:\n%s", tc.want, stdout.String())
			}
			if tc.name == "where" && strings.Contains(stdout.String(), "SGD") {
				t.Errorf("--where method=SAM plotted SGD:\n%s", stdout.String())
			}
			f, err := os.Open(tc.png)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			img, err := png.Decode(f)
			if err != nil || img.Bounds().Dx() == 0 {
				t.Fatalf("PNG %s: %v", tc.png, err)
			}
		})
	}
	var stdout bytes.Buffer
	err = plotCmd(context.Background(), []string{"--corruptions", filepath.Join(tableTestdata, "baseline.jsonl"), "--out", filepath.Join(dir, "none.png")}, &stdout, &stdout)
	if err == nil || !strings.Contains(err.Error(), "no successful run has accuracies on corrupted test sets") {
		t.Errorf("records without corr keys: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "none.png")); err == nil {
		t.Error("a PNG was written for records without corr keys")
	}
}
