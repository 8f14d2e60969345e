package cli_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/optlab/optlab/host/results"
)

// TestSweep runs a sweep given by --set (a parameter list and an lr list)
// on an experiment with a validation split, checks the records, that a
// second run skips every run, and that host table --select keeps, per
// method, the setting with the best validation accuracy.
func TestSweep(t *testing.T) {
	s := spec{Name: "sweep", Data: "dataset = \"uci-digits\"\nvalidation = 0.2",
		Methods: []method{{Name: "SGD", Plugin: "sgd"}, {Name: "SAM", Plugin: "sam", Params: []string{"rho = 0.05"}}}}
	dir := t.TempDir()
	exp := s.write(t, dir)
	res := filepath.Join(dir, "results")
	sets := []string{"--set", "method.SAM.params.rho=[0.02, 0.1]", "--set", "train.optimizer.lr=[0.05,0.1]"}

	c := host(t, append(append([]string{"check", "--plugins", pluginDir}, sets...), exp)...)
	if c.code != 0 {
		t.Fatalf("host check: exit code %d", c.code)
	}
	for _, want := range []string{
		"grid: 6 settings (SGD: 2, lr; SAM: 4, rho × lr) × 1 arch × 1 seed = 6 runs",
		"6 runs × 17 steps (17 per epoch × 1 epochs, batch 64)",
		"method=SGD lr=0.05/arch=mlp/seed=1",
		"method=SAM rho=0.1 lr=0.1/arch=mlp/seed=1",
	} {
		if !strings.Contains(c.stdout, want) {
			t.Errorf("host check does not say %q:\n%s", want, c.stdout)
		}
	}

	args := append(append([]string{"run", "-q", "--plugins", pluginDir, "--results", res}, sets...), exp)
	if r := host(t, args...); r.code != 0 {
		t.Fatalf("host run: exit code %d", r.code)
	}
	path := results.NewLayout(res, s.Name).Runs()
	recs := readRecords(t, path)
	if len(recs) != 6 {
		t.Fatalf("%d records, want 6", len(recs))
	}
	rec, ok := recs["method=SAM rho=0.02 lr=0.1/arch=mlp/seed=1"]
	if !ok {
		t.Fatalf("no record of SAM rho=0.02 lr=0.1 among %v", recs)
	}
	if rec.Method != "SAM rho=0.02 lr=0.1" || rec.Base != "SAM" || rec.Setting != "rho=0.02 lr=0.1" {
		t.Errorf("record names %q, %q, %q", rec.Method, rec.Base, rec.Setting)
	}
	if rec.Config["params.rho"] != 0.02 || rec.Config["train.optimizer.lr"] != 0.1 {
		t.Errorf("record config has rho %v, lr %v; want 0.02, 0.1", rec.Config["params.rho"], rec.Config["train.optimizer.lr"])
	}
	// The best setting on validation data, per method.
	best := map[string]string{}
	bestAcc := map[string]float64{}
	for _, r := range recs {
		for _, k := range []string{"val_acc", "val_nll", "acc"} {
			if _, ok := r.Metrics[k]; !ok {
				t.Errorf("%s: no %s in %v", r.Key, k, r.Metrics)
			}
		}
		if v, ok := bestAcc[r.Base]; !ok || r.Metrics["val_acc"] > v {
			best[r.Base], bestAcc[r.Base] = r.Setting, r.Metrics["val_acc"]
		}
	}

	again := host(t, args...)
	if again.code != 0 || strings.Count(again.stderr, "already finished") != 6 {
		t.Errorf("a second run did not skip the 6 finished runs (exit code %d):\n%s", again.code, again.stderr)
	}

	tab := host(t, "table", path, "--select", "val_acc", "--format", "csv", "--metrics", "val_acc")
	if tab.code != 0 {
		t.Fatalf("host table --select: exit code %d", tab.code)
	}
	for _, m := range []string{"SGD", "SAM"} {
		row := m + "," + best[m] + ",uci-digits,mlp,val_acc,"
		if !strings.Contains(tab.stdout, row) {
			t.Errorf("--select val_acc does not keep %s %s (val_acc %v):\n%s", m, best[m], bestAcc[m], tab.stdout)
		}
	}
	if r := host(t, "table", path, "--select", "acc"); r.code != 1 || !strings.Contains(r.stderr, "never on test") {
		t.Errorf("--select acc: exit code %d, stderr %s", r.code, r.stderr)
	}
}

// TestSweepKeepsFinishedRuns: runs that sweep nothing keep their keys, so
// results written before (and a list of one value) are recognised.
func TestSweepKeepsFinishedRuns(t *testing.T) {
	s := spec{Name: "keys", Methods: []method{{Name: "SAM", Plugin: "sam", Params: []string{"rho = 0.05"}}}}
	dir := t.TempDir()
	exp := s.write(t, dir)
	res := filepath.Join(dir, "results")
	if r := host(t, "run", "-q", "--plugins", pluginDir, "--results", res, exp); r.code != 0 {
		t.Fatalf("host run: exit code %d", r.code)
	}
	if _, ok := readRecords(t, results.NewLayout(res, s.Name).Runs())["method=SAM/arch=mlp/seed=1"]; !ok {
		t.Fatal("no record under the key method=SAM/arch=mlp/seed=1")
	}
	r := host(t, "run", "-q", "--plugins", pluginDir, "--results", res, "--set", "method.SAM.params.rho=[0.05]", exp)
	if r.code != 0 || !strings.Contains(r.stderr, "method=SAM/arch=mlp/seed=1 already finished") {
		t.Errorf("a list of one value did not recognise the finished run (exit code %d):\n%s", r.code, r.stderr)
	}
}

// TestSetErrors: --set values are validated like the file's, and the
// messages cite the override.
func TestSetErrors(t *testing.T) {
	tests := []struct {
		set  string
		want string
	}{
		{"train.epochs=0", "testdata/valid.toml: --set train.epochs=0: train.epochs must be > 0 (got 0)"},
		{"train.epoch=2", `testdata/valid.toml: --set train.epoch=2: unknown key "train.epoch"; did you mean "epochs"?`},
		{"method.SAMM.params.rho=1", `testdata/valid.toml: --set method.SAMM.params.rho=1: no [[method]] named "SAMM"; did you mean "SAM"?`},
		{"method.SAM.params.rho=[0.1,-1]", `testdata/valid.toml: --set method.SAM.params.rho=[0.1,-1]: method "SAM": params.rho[1] -1 is out of range [0,): want ≥ 0`},
		{"data.test_fraction=[0.1,0.2]", `testdata/valid.toml: --set data.test_fraction=[0.1,0.2]: data.test_fraction must be a number (got an array); a list of values (a sweep) may be written only for`},
	}
	for _, tc := range tests {
		t.Run(tc.set, func(t *testing.T) {
			wantError(t, host(t, "check", "--plugins", pluginDir, "--set", tc.set, "testdata/valid.toml"), tc.want)
		})
	}
}
