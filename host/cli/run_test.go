package cli_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/optlab/optlab/host/results"
)

// TestRunEveryPlugin trains one run with each built-in plugin, through its
// real binary, and checks the records and the printed table.
func TestRunEveryPlugin(t *testing.T) {
	methods := []struct {
		m          method
		plugin     string
		wantParams map[string]any // hyperparameters the record must show
	}{
		{method{Name: "SGD", Plugin: "sgd"}, "sgd", nil},
		{method{Name: "SAM", Plugin: "sam", Params: []string{"rho = 0.05"}}, "sam",
			map[string]any{"params.rho": 0.05, "params.adaptive": false}},
		{method{Name: "ASAM", Plugin: "sam", Params: []string{"rho = 0.5", "adaptive = true"}}, "sam",
			map[string]any{"params.adaptive": true}},
		{method{Name: "bSAM", Plugin: "bsam"}, "bsam", nil},
		{method{Name: "OT-MDR paper", Plugin: "otmdr", Params: []string{`mode = "paper"`}}, "otmdr",
			map[string]any{"params.mode": "paper"}},
		{method{Name: "OT-MDR reference", Plugin: "otmdr", Params: []string{`mode = "reference"`}}, "otmdr",
			map[string]any{"params.mode": "reference"}},
	}
	s := spec{Name: "every-plugin"}
	for _, m := range methods {
		s.Methods = append(s.Methods, m.m)
	}
	dir := t.TempDir()
	exp := s.write(t, dir)
	res := filepath.Join(dir, "results")

	r := host(t, "run", "-q", "--plugins", pluginDir, "--results", res, exp)
	if r.code != 0 {
		t.Fatalf("host run: exit code %d", r.code)
	}
	if msgs := errorMessages(r.stderr); len(msgs) != 0 {
		t.Errorf("unexpected messages: %q", msgs)
	}
	recs := readRecords(t, results.NewLayout(res, s.Name).Runs())
	if len(recs) != len(methods) {
		t.Errorf("%d records, want %d", len(recs), len(methods))
	}
	for _, m := range methods {
		t.Run(m.m.Name, func(t *testing.T) {
			key := "method=" + m.m.Name + "/arch=mlp/seed=1"
			rec, ok := recs[key]
			if !ok {
				t.Fatalf("no record of %s", key)
			}
			if rec.Status != results.StatusOK || rec.Error != "" {
				t.Errorf("status %q, error %q; want ok", rec.Status, rec.Error)
			}
			if rec.Plugin != m.plugin {
				t.Errorf("plugin %q, want %q", rec.Plugin, m.plugin)
			}
			if rec.Steps != 22 { // 1438 training samples / 64
				t.Errorf("%d steps, want 22", rec.Steps)
			}
			if acc := rec.Metrics["acc"]; !(acc > 0.2 && acc <= 1) {
				t.Errorf("accuracy %v after an epoch; want better than chance", acc)
			}
			for k, v := range m.wantParams {
				if got := rec.Config[k]; got != v {
					t.Errorf("config %s = %v, want %v", k, got, v)
				}
			}
			if tableRow(r.stdout, m.m.Name) == "" {
				t.Errorf("the table has no row %q:\n%s", m.m.Name, r.stdout)
			}
		})
	}
}

// TestResume re-runs a finished experiment: every run is skipped, with a
// message, and the table is the same.
func TestResume(t *testing.T) {
	dir := t.TempDir()
	s := spec{Name: "resume", Seeds: "[1, 2]", Methods: []method{{Name: "SGD", Plugin: "sgd"}, {Name: "SAM", Plugin: "sam"}}}
	exp := s.write(t, dir)
	res := filepath.Join(dir, "results")
	args := []string{"run", "-q", "--plugins", pluginDir, "--results", res, exp}

	first := host(t, args...)
	if first.code != 0 {
		t.Fatalf("first run: exit code %d", first.code)
	}
	second := host(t, args...)
	if second.code != 0 {
		t.Fatalf("second run: exit code %d", second.code)
	}
	path := results.NewLayout(res, s.Name).Runs()
	for _, key := range []string{
		"method=SGD/arch=mlp/seed=1", "method=SGD/arch=mlp/seed=2",
		"method=SAM/arch=mlp/seed=1", "method=SAM/arch=mlp/seed=2",
	} {
		if want := "host: " + key + " already finished in " + filepath.Dir(path) + "; skipping"; !strings.Contains(second.stderr, want) {
			t.Errorf("second run does not say %q:\n%s", want, second.stderr)
		}
	}
	if second.stdout != first.stdout {
		t.Errorf("the tables differ:\nfirst:\n%s\nsecond:\n%s", first.stdout, second.stdout)
	}
	if recs, err := results.Read(path); err != nil || len(recs) != 4 {
		t.Errorf("%s holds %d records (%v), want 4", path, len(recs), err)
	}
}

// TestResumeRetriesFailed re-runs an experiment whose run failed: the
// finished runs are skipped, the failed one is run again.
func TestResumeRetriesFailed(t *testing.T) {
	dir := t.TempDir()
	res := filepath.Join(dir, "results")
	s := spec{Name: "retry", Methods: []method{{Name: "SGD", Plugin: "sgd"}, {Name: "Flaky", Plugin: "faultplugin", Params: []string{"fail_at = 1"}}}}
	exp := s.write(t, dir)
	args := []string{"run", "-q", "--plugins", pluginDir, "--results", res, exp}
	wantFailedRuns(t, host(t, args...), 1, 2, "faulty: simulated failure at step 1")

	// The plugin is fixed: the same experiment without the fault.
	s.Methods[1].Params = nil
	s.write(t, dir)
	r := host(t, args...)
	if r.code != 0 {
		t.Fatalf("exit code %d", r.code)
	}
	if !strings.Contains(r.stderr, "method=SGD/arch=mlp/seed=1 already finished") {
		t.Errorf("the finished run was not skipped:\n%s", r.stderr)
	}
	if strings.Contains(r.stderr, "method=Flaky/arch=mlp/seed=1 already finished") {
		t.Errorf("the failed run was skipped:\n%s", r.stderr)
	}
	if tableRow(r.stdout, "Flaky") == "" {
		t.Errorf("no row of the retried run:\n%s", r.stdout)
	}
}

// TestShards runs a grid in two shards and checks that the merged table
// equals that of one unsharded run.
func TestShards(t *testing.T) {
	dir := t.TempDir()
	s := spec{Name: "shards", Seeds: "[1, 2]", Methods: []method{{Name: "SGD", Plugin: "sgd"}, {Name: "SAM", Plugin: "sam"}}}
	exp := s.write(t, dir)
	run := func(res string, extra ...string) string {
		t.Helper()
		args := append([]string{"run", "-q", "--plugins", pluginDir, "--results", res}, extra...)
		if r := host(t, append(args, exp)...); r.code != 0 {
			t.Fatalf("host %s: exit code %d", strings.Join(args, " "), r.code)
		}
		return results.NewLayout(res, s.Name).Runs()
	}
	whole := run(filepath.Join(dir, "whole"))
	// Shards write their own files, so they can share one results folder.
	shardDir := filepath.Join(dir, "sharded")
	run(shardDir, "--shard", "1/2")
	run(shardDir, "--shard", "2/2")
	a := filepath.Join(shardDir, s.Name, "runs-1of2.jsonl")
	b := filepath.Join(shardDir, s.Name, "runs-2of2.jsonl")

	na, nb := len(readRecords(t, a)), len(readRecords(t, b))
	if na != 2 || nb != 2 {
		t.Errorf("shards hold %d and %d runs, want 2 and 2", na, nb)
	}
	merged := host(t, "table", a, b)
	single := host(t, "table", whole)
	if merged.code != 0 || single.code != 0 {
		t.Fatalf("host table: exit codes %d and %d", merged.code, single.code)
	}
	if merged.stdout != single.stdout {
		t.Errorf("merged shards:\n%s\nunsharded:\n%s", merged.stdout, single.stdout)
	}
	if !strings.Contains(single.stdout, "over 2 seeds") {
		t.Errorf("the table does not pool the 2 seeds:\n%s", single.stdout)
	}
}

// TestCheckValid checks a valid experiment: it prints the grid and "ok".
func TestCheckValid(t *testing.T) {
	r := host(t, "check", "--plugins", pluginDir, "testdata/valid.toml")
	if r.code != 0 {
		t.Fatalf("exit code %d", r.code)
	}
	for _, want := range []string{
		"testdata/valid.toml: uci-digits — 1438 train / 359 test samples, 10 classes, input [1 8 8]",
		"4 runs × 22 steps (22 per epoch × 1 epochs, batch 64)",
		"method=SGD/arch=mlp/seed=1",
		"method=SGD/arch=mlp/seed=2",
		"method=SAM/arch=mlp/seed=1",
		"method=SAM/arch=mlp/seed=2",
		"plugin sgd 0.1.0",
		"plugin sam ",
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("stdout does not say %q:\n%s", want, r.stdout)
		}
	}
	if !strings.HasSuffix(r.stdout, "\nok\n") {
		t.Errorf("stdout does not end with ok:\n%s", r.stdout)
	}
}

// TestHelp checks that -h documents a command's flags on stdout and exits 0.
func TestHelp(t *testing.T) {
	tests := []struct {
		args []string
		want []string
	}{
		{[]string{"run", "-h"}, []string{"flags of host run:", "-step-timeout duration", "-shard string", "-smoke"}},
		{[]string{"check", "-h"}, []string{"flags of host check:", "-plugins string"}},
		{[]string{"data", "get", "-h"}, []string{"flags of host data get:", "-md5 string", "-url string", "-no-apt", "-debian-dir string"}},
		{[]string{"help"}, []string{"usage: host <command>", "--step-timeout", "--md5 HEX"}},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			r := host(t, tt.args...)
			if r.code != 0 || r.stderr != "" {
				t.Errorf("exit code %d, stderr %q; want 0 and nothing", r.code, r.stderr)
			}
			for _, w := range tt.want {
				if !strings.Contains(r.stdout, w) {
					t.Errorf("stdout does not say %q:\n%s", w, r.stdout)
				}
			}
		})
	}
}

// TestEditedExperimentNotSkipped: after lr, rho and epochs are changed, a
// rerun does not skip the finished runs as if they were the same: it trains
// them again, says what changed, and keeps the old records aside.
func TestEditedExperimentNotSkipped(t *testing.T) {
	dir := t.TempDir()
	s := spec{Name: "edited", Methods: []method{{Name: "SGD", Plugin: "sgd"}, {Name: "SAM", Plugin: "sam", Params: []string{"rho = 0.05"}}}}
	exp := s.write(t, dir)
	res := filepath.Join(dir, "results")
	args := []string{"run", "-q", "--plugins", pluginDir, "--results", res, exp}
	if r := host(t, args...); r.code != 0 {
		t.Fatalf("first run: exit code %d", r.code)
	}
	s.LR = 0.1
	s.Methods[1].Params = []string{"rho = 0.1"}
	s.write(t, dir)
	r := host(t, args...)
	if r.code != 0 {
		t.Fatalf("second run: exit code %d", r.code)
	}
	if strings.Contains(r.stderr, "skipping") {
		t.Errorf("an edited run was skipped:\n%s", r.stderr)
	}
	sup := filepath.Join(res, s.Name, "superseded")
	for _, want := range []string{
		"host: method=SAM/arch=mlp/seed=1 finished before with another configuration (params.rho: 0.05 → 0.1; train.optimizer.lr: 0.05 → 0.1;",
		"its result is kept in " + sup,
		"host: method=SGD/arch=mlp/seed=1 finished before with another configuration (train.optimizer.lr: 0.05 → 0.1;",
	} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("stderr does not say %q:\n%s", want, r.stderr)
		}
	}
	now := readRecords(t, results.NewLayout(res, s.Name).Runs())
	old := readRecords(t, filepath.Join(sup, "runs.jsonl"))
	if len(now) != 2 || len(old) != 2 {
		t.Fatalf("%d current and %d superseded records, want 2 and 2", len(now), len(old))
	}
	if now["method=SAM/arch=mlp/seed=1"].Config["params.rho"] != 0.1 || old["method=SAM/arch=mlp/seed=1"].Config["params.rho"] != 0.05 {
		t.Errorf("rho: now %v, superseded %v", now["method=SAM/arch=mlp/seed=1"].Config["params.rho"], old["method=SAM/arch=mlp/seed=1"].Config["params.rho"])
	}
	for _, d := range []string{filepath.Join(res, s.Name, "tb"), filepath.Join(sup, "tb")} {
		if runs, _ := filepath.Glob(filepath.Join(d, "method=*")); len(runs) != 2 {
			t.Errorf("TensorBoard folders in %s: %v, want one per run", d, runs)
		}
	}
	// A third run with the edited file skips both.
	if r := host(t, args...); strings.Count(r.stderr, "skipping") != 2 {
		t.Errorf("third run did not skip the runs:\n%s", r.stderr)
	}
}

// TestRunKeysDistinctFiles: method names "A B" and "A_B" used to share one
// state and one final-model file; now each run has its own.
func TestRunKeysDistinctFiles(t *testing.T) {
	dir := t.TempDir()
	s := spec{Name: "names", Methods: []method{{Name: "A B", Plugin: "sgd"}, {Name: "A_B", Plugin: "sgd"}}}
	exp := s.write(t, dir)
	b, _ := os.ReadFile(exp)
	os.WriteFile(exp, []byte(strings.Replace(string(b), "[train]\n", "[train]\ncheckpoint = true\n", 1)), 0o644)
	res := filepath.Join(dir, "results")
	if r := host(t, "run", "-q", "--plugins", pluginDir, "--results", res, exp); r.code != 0 {
		t.Fatalf("exit code %d", r.code)
	}
	models, _ := filepath.Glob(filepath.Join(res, s.Name, "checkpoints", "*.safetensors"))
	if len(models) != 2 {
		t.Errorf("final models: %v, want one per run", models)
	}
}

// TestHostsShareGrid starts several hosts on one experiment at once: they
// share its grid, each run trained by exactly one of them, and no finished
// run is lost from the results file.
func TestHostsShareGrid(t *testing.T) {
	dir := t.TempDir()
	s := spec{Name: "shared", Seeds: "[1, 2, 3]", Methods: []method{{Name: "SGD", Plugin: "sgd"}, {Name: "SAM", Plugin: "sam"}}}
	exp := s.write(t, dir)
	res := filepath.Join(dir, "results")
	const hosts = 3
	cmds := make([]*exec.Cmd, hosts)
	outs := make([]*bytes.Buffer, hosts)
	for i := range cmds {
		outs[i] = &bytes.Buffer{}
		cmds[i] = exec.Command(hostBin, "run", "-q", "--plugins", pluginDir, "--results", res, exp)
		cmds[i].Stderr = outs[i]
		if err := cmds[i].Start(); err != nil {
			t.Fatal(err)
		}
	}
	for i, c := range cmds {
		if err := c.Wait(); err != nil {
			t.Fatalf("host %d: %v\n%s", i, err, outs[i])
		}
	}
	recs := readRecords(t, results.NewLayout(res, s.Name).Runs()) // fails on a run recorded twice
	if len(recs) != 6 {
		t.Fatalf("%d records, want 6", len(recs))
	}
	for key := range recs {
		skipped := 0
		for _, o := range outs {
			if strings.Contains(o.String(), "host: "+key+" is being trained by another host") || strings.Contains(o.String(), "host: "+key+" already finished") {
				skipped++
			}
		}
		if skipped != hosts-1 {
			t.Errorf("%s: skipped by %d of %d hosts, want all but the one that trained it", key, skipped, hosts)
		}
	}
	if claims, err := results.Claims(results.NewLayout(res, s.Name).Runs()); err != nil || len(claims) != 0 {
		t.Errorf("claims left after every host finished: %v, %v", claims, err)
	}
}

// TestRunRefusesSharedResultsFolder (hardening 21): host run A.toml B.toml
// where B is a copy of A with another lr but the same name used to let B
// supersede the runs A had just trained. It is refused before anything is
// trained, naming both files.
func TestRunRefusesSharedResultsFolder(t *testing.T) {
	dir := t.TempDir()
	s := spec{Name: "twin", Methods: []method{{Name: "SGD", Plugin: "sgd"}}}
	b := filepath.Join(dir, "copy.toml")
	s.LR = 0.1
	if err := os.Rename(s.write(t, dir), b); err != nil {
		t.Fatal(err)
	}
	s.LR = 0
	a := s.write(t, dir)
	res := filepath.Join(dir, "results")
	r := host(t, "run", "-q", "--plugins", pluginDir, "--results", res, a, b)
	want := a + " and " + b + " share the results folder " + filepath.Join(res, "twin") + ` (experiment name "twin"): give one of them another name or results_dir`
	if r.code == 0 || !strings.Contains(r.stderr, want) {
		t.Errorf("exit code %d, stderr %q; want an error saying %q", r.code, r.stderr, want)
	}
	if _, err := os.Stat(filepath.Join(res, "twin")); err == nil {
		t.Error("something was trained before the refusal")
	}
	if r := host(t, "run", "-q", "--plugins", pluginDir, "--results", res, a, a); !strings.Contains(r.stderr, a+" is given twice") {
		t.Errorf("the same file twice: exit code %d, stderr %q", r.code, r.stderr)
	}
}

// TestDataFileContentIsConfig (hardening 09): pointing an experiment at
// another CSV (or editing the one it names) trains its runs again, naming
// the change; a record of an older optlab, without the file's identity, is
// still taken as finished (nothing is retrained by the upgrade).
func TestDataFileContentIsConfig(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, classes int) {
		var b strings.Builder
		for i := range 60 {
			fmt.Fprintf(&b, "%d,%d,%d,%d\n", i%7, i%5, i%3, i%classes)
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("a.csv", 3)
	s := spec{Name: "csvdata", Data: "dataset = \"csv\"\npath = \"a.csv\"", Batch: 16, Methods: []method{{Name: "SGD", Plugin: "sgd"}}}
	exp := s.write(t, dir)
	res := filepath.Join(dir, "results")
	args := []string{"run", "-q", "--plugins", pluginDir, "--results", res, exp}
	if r := host(t, args...); r.code != 0 {
		t.Fatalf("first run: exit code %d: %s", r.code, r.stderr)
	}
	// As an older optlab wrote it: no data.path.content.
	path := results.NewLayout(res, s.Name).Runs()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var rec map[string]any
	if err := json.Unmarshal(b, &rec); err != nil {
		t.Fatal(err)
	}
	cfg := rec["config"].(map[string]any)
	if _, ok := cfg["data.path.content"]; !ok {
		t.Fatalf("config lacks data.path.content: %v", cfg)
	}
	delete(cfg, "data.path.content")
	delete(rec, "config_hash")
	old, _ := json.Marshal(rec)
	if err := os.WriteFile(path, append(old, '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
	if r := host(t, args...); !strings.Contains(r.stderr, "already finished") {
		t.Errorf("a record without the file's identity was not taken as finished:\n%s", r.stderr)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	write("a.csv", 2)
	if r := host(t, args...); r.code != 0 || !strings.Contains(r.stderr, "finished before with another configuration (data.path.content: \"480 bytes, sha256 ") {
		t.Errorf("exit code %d; the edited CSV did not supersede the run:\n%s", r.code, r.stderr)
	}
	write("b.csv", 3)
	if r := host(t, append(args[:len(args)-1], "--set", "data.path=b.csv", exp)...); r.code != 0 || !strings.Contains(r.stderr, "data.path.content: ") {
		t.Errorf("exit code %d; another CSV did not supersede the run:\n%s", r.code, r.stderr)
	}
}
