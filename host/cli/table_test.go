package cli

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/optlab/optlab/host/results"
)

// tableTestdata holds host/table's results files.
var tableTestdata = filepath.Join("..", "table", "testdata")

// tableRec is a successful run's record.
func tableRec(method, ds, arch string, seed int64, cfg map[string]any, m map[string]float64) results.Record {
	return results.Record{
		Experiment: "e", Key: method + "/" + ds + "/" + arch + "/" + string(rune('0'+seed)), Method: method,
		Config: cfg, ConfigHash: results.HashConfig(cfg), Dataset: ds, Arch: arch, Seed: seed,
		Status: results.StatusOK, Metrics: m, Finished: time.Date(2025, 1, 1, 0, 0, int(seed), 0, time.UTC),
	}
}

// TestTableCmd checks host table's flags and files: flags may come before,
// between or after the files, and "--" ends them.
func TestTableCmd(t *testing.T) {
	specials := filepath.Join(tableTestdata, "specials.jsonl")
	shard := filepath.Join(tableTestdata, "specials_shard.jsonl")
	dir := t.TempDir()
	mixed := filepath.Join(dir, "mixed.jsonl")
	for _, r := range []results.Record{
		tableRec("SAM", "cifar10", "r18", 1, map[string]any{"rho": 0.05}, map[string]float64{"acc": 0.9}),
		tableRec("SAM", "cifar10", "r18", 2, map[string]any{"rho": 0.1}, map[string]float64{"acc": 0.9}),
	} {
		if err := results.Append(mixed, r); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name string
		args []string
		want string // error substring, or output substring when ok
		ok   bool
	}{
		{"no files", []string{"--format", "csv"}, "no results files", false},
		{"unknown flag", []string{specials, "--colour"}, "flag provided but not defined", false},
		{"missing value", []string{specials, "--by"}, "flag needs an argument", false},
		{"missing file", []string{filepath.Join(dir, "nope.jsonl")}, "no such file", false},
		{"mixed configs refused", []string{mixed}, `run "SAM/cifar10/r18/1" has config hash`, false},
		{"bad format", []string{specials, "--format=html"}, "unknown format", false},
		{"unknown metric", []string{specials, "--metrics", "accc"}, `table: unknown metric "accc"; did you mean "acc"? (valid metrics: acc, nll,`, false},
		{"metric no run has", []string{specials, "--metrics", "acc,brier"},
			`table: metric "brier" is missing from all 3 successful runs (metrics present: acc, nll, ece, seconds_per_epoch, wall_seconds)`, false},
		{"select a test metric", []string{specials, "--select", "acc"}, "--select acc: a setting must be chosen on the validation split, never on test (or training) data: select val_acc", false},
		{"select without a validation split", []string{specials, "--select", "val_acc"}, "was trained without one (data.validation = 0)", false},
		{"select", []string{filepath.Join(tableTestdata, "sweep.jsonl"), "--select=val_acc"}, "SAM: rho=0.05 (val ACC 92.60, best of 3 settings", true},
		{"help", []string{"-h"}, "usage: table FILE.jsonl", true},
		{"flags between files", []string{specials, "--format", "csv", shard, "--metrics", "acc"},
			"OT_MDR & K=2 (50%),cifar10,resnet18,acc,0.9659,0.0007000000000000339,3", true},
		{"file after --", []string{"--format=csv", "--", specials}, "OT_MDR & K=2 (50%),cifar10,resnet18,ece", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			err := tableCmd(&buf, tc.args)
			if tc.ok {
				if err != nil || !strings.Contains(buf.String(), tc.want) {
					t.Fatalf("err %v, output:\n%s\nwant containing %q", err, buf.String(), tc.want)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want containing %q", err, tc.want)
			}
		})
	}
}

// TestTableCorruptions checks host table --corruptions and the label-noise
// rows through the command line.
func TestTableCorruptions(t *testing.T) {
	corrupt := filepath.Join(tableTestdata, "corrupt.jsonl")
	noise := filepath.Join(tableTestdata, "noise.jsonl")
	tests := []struct {
		name string
		args []string
		want string
		ok   bool
	}{
		{"summary without baseline", []string{corrupt, "--corruptions"}, "| CIFAR-10 corrupted ACC ↑ | CIFAR-10 retained ↑ |", true},
		{"mCE with baseline", []string{corrupt, "--corruptions", "--baseline", "SGD"}, "75.94 ± 11.30 Δ -24.06", true},
		{"family table", []string{corrupt, "--corruptions"}, "| noise      | 80.00 | 67.50 | 73.75 |", true},
		{"csv", []string{"--format=csv", corrupt, "--corruptions"}, "SAM,cifar10,resnet18,corr.noise.2.acc,0.675,", true},
		{"best-epoch headers", []string{corrupt, "--metrics", "best_acc,corr_acc"}, "CIFAR-10 best-epoch ACC ↑ | CIFAR-10 corrupted ACC ↑", true},
		{"noise rows", []string{noise, "--metrics", "acc", "--baseline", "SGD"}, "| 0.4 symmetric | SAM    | 85.50 ± 0.71 Δ +4.50 [-2.42, 11.42] |", true},
		{"no corr keys", []string{filepath.Join(tableTestdata, "baseline.jsonl"), "--corruptions"}, "--corruptions: no successful run has accuracies on corrupted test sets", false},
		{"with --time", []string{corrupt, "--corruptions", "--time"}, "--time and --corruptions are different tables", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			err := tableCmd(&buf, tc.args)
			if tc.ok {
				if err != nil || !strings.Contains(buf.String(), tc.want) {
					t.Fatalf("err %v, output:\n%s\nwant containing %q", err, buf.String(), tc.want)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want containing %q", err, tc.want)
			}
		})
	}
}

// TestTableWhere: --where keeps the records that match every condition.
func TestTableWhere(t *testing.T) {
	noise := filepath.Join(tableTestdata, "noise.jsonl")
	for _, tc := range []struct {
		args      []string
		want, not []string
		err       string
	}{
		{args: []string{noise, "--where", "data.label_noise.rate=0.4"}, want: []string{"SGD", "SAM", "81.00 ± 1.41"}, not: []string{"Label noise"}},
		{args: []string{noise, "--where", "data.label_noise.rate=0.4", "--where", "method=SAM"}, want: []string{"SAM"}, not: []string{"SGD"}},
		{args: []string{noise, "--where", "seed=9"}, err: "no record of the 10 matches --where seed=9"},
		{args: []string{noise, "--where", "rate"}, err: "want KEY=VALUE"},
	} {
		var out bytes.Buffer
		err := tableCmd(&out, tc.args)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%v: error %v, want %q", tc.args, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%v: %v", tc.args, err)
		}
		for _, w := range tc.want {
			if !strings.Contains(out.String(), w) {
				t.Errorf("%v: no %q in\n%s", tc.args, w, out.String())
			}
		}
		for _, n := range tc.not {
			if strings.Contains(out.String(), n) {
				t.Errorf("%v: %q in\n%s", tc.args, n, out.String())
			}
		}
	}
}
