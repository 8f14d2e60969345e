package cli_test

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/optlab/optlab/host/data"
	"github.com/optlab/optlab/host/results"
)

// TestConfigErrors checks that every mistake in an experiment file gives one
// clear message, with the line, from both check and run, and that run then
// trains nothing.
func TestConfigErrors(t *testing.T) {
	tests := []struct {
		file string
		want []string
	}{
		{"syntax.toml", []string{
			"host: testdata/errors/syntax.toml:6: expected value",
			"6 | batch_size =", "^",
		}},
		{"unknown_key.toml", []string{
			`host: testdata/errors/unknown_key.toml:6: unknown key "train.batchsize"; did you mean "batch_size"?`,
		}},
		{"case_key.toml", []string{
			`host: testdata/errors/case_key.toml:5: key "train.Epochs" must be written "train.epochs" (keys are case-sensitive)`,
		}},
		{"bad_value.toml", []string{
			"host: testdata/errors/bad_value.toml:8: train.optimizer.lr must be > 0 (got -0.1)",
		}},
		{"bad_type.toml", []string{
			`host: testdata/errors/bad_type.toml:5: train.epochs must be an integer (got string "ten")`,
		}},
		{"unknown_plugin.toml", []string{
			`host: testdata/errors/unknown_plugin.toml:7: method "Mine": unknown plugin "sgdd"`,
			"installed plugins in " + "PLUGINS" + ": bsam, faultplugin, otmdr, sam, sgd",
		}},
		{"unknown_param.toml", []string{
			`host: testdata/errors/unknown_param.toml:11: method "SAM": unknown parameter "rhoo"; did you mean "rho"?`,
		}},
		// Validate's problems and the plugin's schema's, together, in
		// line order, the method named alike (issue 39).
		{"values_and_params.toml", []string{
			"host: testdata/errors/values_and_params.toml:19: method \"AdamW\": optimizer.weight_decay must be ≥ 0 (got -1)\n" +
				"testdata/errors/values_and_params.toml:21: method \"AdamW\": params.rho -1 is out of range [0,): want ≥ 0\n",
		}},
		{"missing_cifar.toml", []string{
			"host: testdata/errors/missing_cifar.toml: data: cifar10: no CIFAR-10 binary files in testdata/errors/no-such-cifar",
			"get them with `host data get cifar10 --dir testdata/errors/no-such-cifar`",
		}},
	}
	for _, tt := range tests {
		for _, cmd := range []string{"check", "run"} {
			t.Run(cmd+"/"+tt.file, func(t *testing.T) {
				res := t.TempDir()
				args := []string{cmd, "--plugins", pluginDir, filepath.Join("testdata", "errors", tt.file)}
				if cmd == "run" {
					args = append(args, "-q", "--results", res)
				}
				want := make([]string, len(tt.want))
				for i, w := range tt.want {
					want[i] = strings.ReplaceAll(w, "PLUGINS", pluginDir)
				}
				r := host(t, args...)
				wantError(t, r, want...)
				if r.stdout != "" {
					t.Errorf("stdout is not empty:\n%s", r.stdout)
				}
				if entries, _ := os.ReadDir(res); len(entries) > 0 {
					t.Errorf("results were written to %s", res)
				}
			})
		}
	}
}

// TestBadFlags checks the messages about the command line itself.
func TestBadFlags(t *testing.T) {
	exp := spec{Name: "flags", Methods: []method{{Name: "SGD", Plugin: "sgd"}}}.write(t, t.TempDir())
	tests := []struct {
		name string
		args []string
		want []string
	}{
		{"unknown flag", []string{"run", "--bogus", exp}, []string{"host: run: flag provided but not defined: -bogus (`host run -h` lists the flags)"}},
		{"bad shard", []string{"run", "--plugins", pluginDir, "--shard", "3", exp}, []string{`host: --shard "3": want i/n, e.g. 2/8`}},
		{"shard out of range", []string{"run", "--plugins", pluginDir, "--shard", "3/2", exp}, []string{`host: --shard "3/2": want i/n with n ≥ 1 and 1 ≤ i ≤ n`}},
		{"shard 0/0", []string{"run", "--plugins", pluginDir, "--shard", "0/0", exp}, []string{`host: --shard "0/0": want i/n with n ≥ 1 and 1 ≤ i ≤ n`}},
		{"shard 1/0", []string{"run", "--plugins", pluginDir, "--shard", "1/0", exp}, []string{`host: --shard "1/0": want i/n with n ≥ 1 and 1 ≤ i ≤ n`}},
		{"bad step timeout", []string{"run", "--step-timeout", "0s", exp}, []string{"host: --step-timeout 0s: want a positive duration"}},
		{"bad timeouts", []string{"run", "--timeouts", "start=fast", exp}, []string{`host: timeouts "start=fast": want a positive duration`}},
		{"bad check timeouts", []string{"check", "--timeouts", "boot=1m", exp}, []string{`host: timeouts "boot=1m": want name=duration`}},
		{"no experiment", []string{"check", "--plugins", pluginDir}, []string{"host: usage: host check [--set KEY=VALUE …] EXPERIMENT.toml"}},
		{"missing file", []string{"check", "--plugins", pluginDir, "testdata/no-such.toml"}, []string{"host: experiment: open testdata/no-such.toml: no such file or directory"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wantError(t, host(t, tt.args...), tt.want...)
		})
	}
}

// TestTruncatedCIFAR points an experiment at CIFAR-10 files one of which is
// cut short.
func TestTruncatedCIFAR(t *testing.T) {
	dir := t.TempDir()
	cifar := filepath.Join(dir, "cifar")
	if err := data.WriteCIFAR(cifar, data.CIFAR10, 16, 32, 1); err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(cifar, "data_batch_3.bin")
	if err := os.Truncate(bad, 10000); err != nil { // 3 records and 781 bytes
		t.Fatal(err)
	}
	s := spec{Name: "truncated", Arch: "cnn", Batch: 16, Data: `dataset = "cifar10"` + "\ndir = \"" + cifar + `"`,
		Methods: []method{{Name: "SGD", Plugin: "sgd"}}}
	exp := s.write(t, dir)
	want := "cifar10: " + bad + " is truncated or corrupt: 10000 bytes is not a multiple of the 3073-byte record; record 3 at byte offset 9219 is incomplete"
	t.Run("check", func(t *testing.T) {
		wantError(t, host(t, "check", "--plugins", pluginDir, exp), "host: "+exp+": data: "+want)
	})
	t.Run("run", func(t *testing.T) {
		res := filepath.Join(dir, "results")
		wantError(t, host(t, "run", "-q", "--plugins", pluginDir, "--results", res, exp), "host: "+exp+": data: "+want)
		if _, err := os.Stat(res); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("results folder created (%v)", err)
		}
	})
}

// TestPluginCrash has a plugin die at step 3 of its run: the run is recorded
// as failed with the plugin's last stderr lines, the other runs of the grid
// finish and are recorded, and the exit code is 1.
func TestPluginCrash(t *testing.T) {
	dir := t.TempDir()
	s := spec{Name: "crash", Methods: []method{
		{Name: "SGD", Plugin: "sgd"},
		{Name: "Crashy", Plugin: "faultplugin", Params: []string{"crash_at = 3"}},
		{Name: "SAM", Plugin: "sam"},
	}}
	exp := s.write(t, dir)
	res := filepath.Join(dir, "results")
	r := host(t, "run", "-q", "--plugins", pluginDir, "--results", res, exp)
	path := results.NewLayout(res, s.Name).Runs()
	crash := "step 3 (epoch 1): plugin faultplugin crashed (exit status 3) during Step; last stderr lines:\n"
	lastLine := "  faulty: simulated crash at step 3\n"
	wantFailedRuns(t, r, 1, 3, "host: run method=Crashy/arch=mlp/seed=1 failed: "+crash, lastLine,
		"host: 1 of 3 runs failed (see above and "+path+")")
	recs := readRecords(t, path)
	if len(recs) != 3 {
		t.Fatalf("%d records, want 3", len(recs))
	}
	for key, rec := range recs {
		switch {
		case rec.Method == "Crashy":
			if rec.Status != results.StatusFailed || !strings.HasPrefix(rec.Error, crash) || !strings.Contains(rec.Error+"\n", lastLine) {
				t.Errorf("%s: status %q, error %q; want failed, %q…%q", key, rec.Status, rec.Error, crash, lastLine)
			}
		case rec.Status != results.StatusOK || rec.Steps != 22:
			t.Errorf("%s: status %q after %d steps (%s); want ok after 22", key, rec.Status, rec.Steps, rec.Error)
		}
	}
	for _, m := range []string{"SGD", "SAM"} {
		if tableRow(r.stdout, m) == "" {
			t.Errorf("the table has no row %q:\n%s", m, r.stdout)
		}
	}
	if !strings.Contains(r.stdout, "Excluded 1 failed run (Crashy") {
		t.Errorf("the table does not mention the failed run:\n%s", r.stdout)
	}
}

// TestPluginHang has a plugin stop answering at step 2: with a short
// --step-timeout the run fails with a message that says so, the plugin is
// stopped (TestMain checks that none is left), and the next run goes on.
func TestPluginHang(t *testing.T) {
	dir := t.TempDir()
	s := spec{Name: "hang", Methods: []method{
		{Name: "Hangs", Plugin: "faultplugin", Params: []string{"hang_at = 2"}},
		{Name: "SGD", Plugin: "sgd"},
	}}
	exp := s.write(t, dir)
	res := filepath.Join(dir, "results")
	r := host(t, "run", "-q", "--step-timeout", "2s", "--plugins", pluginDir, "--results", res, exp)
	hang := "step 2 (epoch 1): plugin faultplugin did not answer Step within 2s; last stderr lines:\n"
	lastLine := "  faulty: hanging at step 2\n"
	wantFailedRuns(t, r, 1, 2, "host: run method=Hangs/arch=mlp/seed=1 failed: "+hang, lastLine)
	recs := readRecords(t, results.NewLayout(res, s.Name).Runs())
	if rec := recs["method=Hangs/arch=mlp/seed=1"]; rec.Status != results.StatusFailed || !strings.HasPrefix(rec.Error, hang) || !strings.Contains(rec.Error+"\n", lastLine) {
		t.Errorf("hung run: status %q, error %q; want failed, %q…%q", rec.Status, rec.Error, hang, lastLine)
	}
	if rec := recs["method=SGD/arch=mlp/seed=1"]; rec.Status != results.StatusOK {
		t.Errorf("the run after the hung one: status %q (%s)", rec.Status, rec.Error)
	}
}

// TestNaNLoss checks the message of a diverged run, both from a real
// divergence (SGD with lr = 1e6) and from a plugin reporting NaN at a known
// step.
func TestNaNLoss(t *testing.T) {
	tests := []struct {
		name string
		lr   float64
		m    method
		want *regexp.Regexp
	}{
		{"huge learning rate", 1e6, method{Name: "SGD", Plugin: "sgd"},
			regexp.MustCompile(`^step \d+ \(epoch 1, lr 1e\+06\): loss is not finite \((NaN|[+-]Inf)\); lower the learning rate or ρ$`)},
		{"plugin reports NaN", 0.05, method{Name: "NaN", Plugin: "faultplugin", Params: []string{"nan_at = 4"}},
			regexp.MustCompile(`^step 4 \(epoch 1, lr 0\.05\): loss is not finite \(NaN\); lower the learning rate or ρ$`)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			s := spec{Name: "nan", LR: tt.lr, Methods: []method{tt.m}}
			res := filepath.Join(dir, "results")
			r := host(t, "run", "-q", "--plugins", pluginDir, "--results", res, s.write(t, dir))
			wantFailedRuns(t, r, 1, 1, "host: run method="+tt.m.Name+"/arch=mlp/seed=1 failed: step ", "loss is not finite")
			recs := readRecords(t, results.NewLayout(res, s.Name).Runs())
			rec := recs["method="+tt.m.Name+"/arch=mlp/seed=1"]
			if rec.Status != results.StatusFailed || !tt.want.MatchString(rec.Error) {
				t.Errorf("record: status %q, error %q; want failed, %v", rec.Status, rec.Error, tt.want)
			}
		})
	}
}

// wantFailedRuns checks that r ran a grid of total runs of which failed
// failed: exit code 1, one message per failed run and the summary, and
// every string of want in stderr.
func wantFailedRuns(t *testing.T, r result, failed, total int, want ...string) {
	t.Helper()
	if r.code != 1 {
		t.Errorf("exit code %d, want 1", r.code)
	}
	if msgs := errorMessages(r.stderr); len(msgs) != failed+1 {
		t.Errorf("%d messages, want %d (one per failed run and the summary):\n%s", len(msgs), failed+1, strings.Join(msgs, "\n"))
	}
	want = append(want, fmt.Sprintf("host: %d of %d runs failed", failed, total))
	for _, w := range want {
		if !strings.Contains(r.stderr, w) {
			t.Errorf("stderr does not say %q:\n%s", w, r.stderr)
		}
	}
}
