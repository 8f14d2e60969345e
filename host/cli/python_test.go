package cli_test

import (
	"bytes"
	"encoding/csv"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/optlab/optlab/internal/testutil"

	"github.com/optlab/optlab/host/checkpoint"
	"github.com/optlab/optlab/host/results"
	"github.com/optlab/optlab/plugins/builtin"
)

// End-to-end tests of optimizer plugins written in Python (sdk/python):
// the host runs them like any plugin, from a method's path or from a
// plugin folder, and nothing it reports depends on the plugin's language.

var (
	pySAMScript   = filepath.Join("..", "..", "examples", "python-sam", "sam.py")
	pyFaultScript = filepath.Join("..", "..", "internal", "testplugin", "pyfault", "faultplugin.py")
)

// pythonPluginDir returns a plugin folder in which "sam" and "faultplugin"
// are the Python twins of the Go plugins of pluginDir (links to the
// scripts), and checks at cleanup that no Python plugin process is left.
func pythonPluginDir(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "pyplugins")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, script := range map[string]string{"sam": pySAMScript, "faultplugin": pyFaultScript} {
		abs, err := filepath.Abs(script)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(abs, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		if left := waitNoCommandLines(dir, 10*time.Second); len(left) > 0 {
			t.Errorf("Python plugin processes left running: %v", left)
		}
	})
	return dir
}

// waitNoCommandLines waits up to d until no process has s in its command
// line, and returns the command lines of those still running.
func waitNoCommandLines(s string, d time.Duration) []string {
	deadline := time.Now().Add(d)
	for {
		var left []string
		entries, _ := os.ReadDir("/proc")
		for _, e := range entries {
			b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
			if err == nil && bytes.Contains(b, []byte(s)) {
				left = append(left, strings.ReplaceAll(string(b), "\x00", " "))
			}
		}
		if len(left) == 0 || time.Now().After(deadline) {
			return left
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestPythonSAMBitwise trains the same experiment and seed with the Go SAM
// plugin and with examples/python-sam (from its path, as a user would),
// plain SAM and ASAM on weights with m = 2, on a model with BatchNorm: the
// final models, the metrics and the learning curves are bitwise identical.
func TestPythonSAMBitwise(t *testing.T) {
	testutil.NeedPython(t)
	script, err := filepath.Abs(pySAMScript)
	if err != nil {
		t.Fatal(err)
	}
	asam := []string{"rho = 0.5", "adaptive = true", `adaptive_scope = "weights"`, "m = 2"}
	s := spec{Name: "python-sam", Arch: "cnn-small", Batch: 128, Methods: []method{
		{Name: "Go SAM", Plugin: "sam"},
		{Name: "Python SAM", Plugin: "PATH"},
		{Name: "Go ASAM", Plugin: "sam", Params: asam},
		{Name: "Python ASAM", Plugin: "PATH", Params: asam},
	}}
	dir := t.TempDir()
	exp := s.write(t, dir)
	// A method given by path: `path = "…/sam.py"` instead of `plugin = …`.
	b, err := os.ReadFile(exp)
	if err != nil {
		t.Fatal(err)
	}
	text := strings.ReplaceAll(string(b), `plugin = "PATH"`, "path = "+tomlString(script))
	text = strings.Replace(text, "[train]\n", "[train]\ncheckpoint = true\n", 1)
	if err := os.WriteFile(exp, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	res := filepath.Join(dir, "results")
	r := host(t, "run", "-q", "--plugins", pluginDir, "--results", res, exp)
	if r.code != 0 {
		t.Fatalf("host run: exit code %d", r.code)
	}
	recs := readRecords(t, results.NewLayout(res, s.Name).Runs())
	goOnly := map[string]bool{}
	for _, spec := range builtin.Rules().Params() {
		goOnly["params."+spec.Name] = true
	}
	for _, pair := range [][2]string{{"Go SAM", "Python SAM"}, {"Go ASAM", "Python ASAM"}} {
		t.Run(pair[1], func(t *testing.T) {
			key := func(m string) string { return "method=" + m + "/arch=cnn-small/seed=1" }
			g, p := recs[key(pair[0])], recs[key(pair[1])]
			if g.Status != results.StatusOK || p.Status != results.StatusOK || g.Steps != 11 || p.Steps != 11 {
				t.Fatalf("runs: %s %q after %d steps, %s %q after %d steps", pair[0], g.Status, g.Steps, pair[1], p.Status, p.Steps)
			}
			if p.Plugin != "python-sam" {
				t.Errorf("plugin %q, want python-sam", p.Plugin)
			}
			if len(g.Metrics) == 0 || !sameBits(g.Metrics, p.Metrics) {
				t.Errorf("metrics differ:\n%s %v\n%s %v", pair[0], g.Metrics, pair[1], p.Metrics)
			}
			for k, v := range g.Config {
				// The Go plugin's update rules (update = "base" here) are
				// hyperparameters the Python SAM does not have.
				if goOnly[k] {
					continue
				}
				if strings.HasPrefix(k, "params.") && p.Config[k] != v {
					t.Errorf("config %s: %v, %v", k, v, p.Config[k])
				}
			}
			gc, pc := readCurve(t, res, s.Name, key(pair[0])), readCurve(t, res, s.Name, key(pair[1]))
			if len(gc) < 2 || !equalRows(gc, pc) {
				t.Errorf("learning curves differ (time column aside):\n%v\n%v", gc, pc)
			}
			gm, pm := readModel(t, res, s.Name, key(pair[0])), readModel(t, res, s.Name, key(pair[1]))
			if len(gm) == 0 || len(gm) != len(pm) {
				t.Fatalf("final models hold %d and %d tensors", len(gm), len(pm))
			}
			for name, gt := range gm {
				if pt, ok := pm[name]; !ok || !sameTensor(gt, pt) {
					t.Errorf("final model tensor %s differs", name)
				}
			}
		})
	}
}

// tomlString quotes s as a TOML basic string.
func tomlString(s string) string {
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(s) + `"`
}

func sameBits(a, b map[string]float64) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		w, ok := b[k]
		if !ok || math.Float64bits(v) != math.Float64bits(w) {
			return false
		}
	}
	return true
}

// readCurve reads a run's learning curve without its last column (seconds).
func readCurve(t *testing.T, res, name, key string) [][]string {
	t.Helper()
	f, err := os.Open(filepath.Join(res, name, "curves", results.KeyFileStem(key)+".csv"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rows, err := csv.NewReader(f).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	for i, row := range rows {
		if len(row) == 0 || row[len(row)-1] != "seconds" && i == 0 {
			t.Fatalf("curve header %v: want the time last", row)
		}
		rows[i] = row[:len(row)-1]
	}
	return rows
}

func equalRows(a, b [][]string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if strings.Join(a[i], ",") != strings.Join(b[i], ",") {
			return false
		}
	}
	return true
}

// readModel reads a run's final model.
func readModel(t *testing.T, res, name, key string) map[string]checkpoint.Tensor {
	t.Helper()
	ts, _, err := checkpoint.Read(filepath.Join(res, name, "checkpoints", results.KeyFileStem(key)+".safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	return ts
}

// sameTensor reports whether two tensors have the same dtype, shape and
// bits.
func sameTensor(a, b checkpoint.Tensor) bool {
	if a.DType != b.DType || len(a.Shape) != len(b.Shape) || a.Len() != b.Len() {
		return false
	}
	for i := range a.Shape {
		if a.Shape[i] != b.Shape[i] {
			return false
		}
	}
	for i := range a.F32 {
		if math.Float32bits(a.F32[i]) != math.Float32bits(b.F32[i]) {
			return false
		}
	}
	for i := range a.F64 {
		if math.Float64bits(a.F64[i]) != math.Float64bits(b.F64[i]) {
			return false
		}
	}
	for i := range a.I64 {
		if a.I64[i] != b.I64[i] {
			return false
		}
	}
	return true
}

// TestPythonPluginFailures runs an experiment whose runs crash, hang, fail,
// report NaN or have bad hyperparameters once with the Go plugins and once
// with their Python twins (same plugin names): the host's messages are the
// same, word for word, and every run is tried and recorded (a failed run
// fails only itself).
func TestPythonPluginFailures(t *testing.T) {
	testutil.NeedPython(t)
	pyDir := pythonPluginDir(t)
	run := spec{Name: "failures", Methods: []method{
		{Name: "Crashy", Plugin: "faultplugin", Params: []string{"crash_at = 3"}},
		{Name: "Hangs", Plugin: "faultplugin", Params: []string{"hang_at = 2"}},
		{Name: "Fails", Plugin: "faultplugin", Params: []string{"fail_at = 1"}},
		{Name: "NaN", Plugin: "faultplugin", Params: []string{"nan_at = 4"}},
		{Name: "Scope", Plugin: "sam", Params: []string{`adaptive_scope = "weights"`}},
	}}
	check := spec{Name: "bad-params", Methods: []method{
		{Name: "Typo", Plugin: "sam", Params: []string{"rhoo = 0.1"}},
		{Name: "Type", Plugin: "sam", Params: []string{`m = "two"`}},
		{Name: "Negative", Plugin: "sam", Params: []string{"rho = -1.0"}},
		{Name: "Enum", Plugin: "sam", Params: []string{"adaptive = true", `adaptive_scope = "some"`}},
	}}
	dir := t.TempDir()
	runExp, checkExp := run.write(t, dir), check.write(t, dir)
	// Lines that legitimately differ: go-plugin's own log lines (times,
	// process IDs) and the plugin folder.
	logLine := regexp.MustCompile(`(?m)^\d{4}-\d\d-\d\dT.*\n`)
	normalize := func(s, plugins, res string) string {
		return strings.NewReplacer(plugins, "PLUGINS", res, "RESULTS").Replace(logLine.ReplaceAllString(s, ""))
	}
	var out [2]string
	for i, plugins := range []string{pluginDir, pyDir} {
		res := filepath.Join(dir, "results", filepath.Base(plugins))
		r := host(t, "run", "-q", "--step-timeout", "1s", "--plugins", plugins, "--results", res, runExp)
		wantFailedRuns(t, r, 5, 5,
			"host: run method=Crashy/arch=mlp/seed=1 failed: step 3 (epoch 1): plugin faultplugin crashed (exit status 3) during Step; last stderr lines:\n  faulty: simulated crash at step 3\n",
			"host: run method=Hangs/arch=mlp/seed=1 failed: step 2 (epoch 1): plugin faultplugin did not answer Step within 1s; last stderr lines:\n  faulty: hanging at step 2\n",
			"host: run method=Fails/arch=mlp/seed=1 failed: step 1 (epoch 1): plugin faultplugin: Step: faulty: simulated failure at step 1\n",
			`host: run method=Scope/arch=mlp/seed=1 failed: configure: plugin sam: Configure: sam: adaptive_scope "weights" applies to ASAM only: set adaptive = true`,
		)
		if recs := readRecords(t, results.NewLayout(res, run.Name).Runs()); len(recs) != len(run.Methods) {
			t.Errorf("%s: %d runs recorded, want %d", plugins, len(recs), len(run.Methods))
		}
		c := host(t, "check", "--plugins", plugins, checkExp)
		wantError(t, c, `method "Typo": unknown parameter "rhoo"; did you mean "rho"?`, `method "Type": params.m must be an integer (got string "two")`,
			`method "Negative": params.rho -1 is out of range [0,): want ≥ 0`, `method "Enum": params.adaptive_scope "some" is not one of "all", "weights"`)
		out[i] = normalize(r.stderr+c.stderr, plugins, res)
	}
	if out[0] != out[1] {
		t.Errorf("the host's messages differ\n--- Go plugins:\n%s\n--- Python plugins:\n%s", out[0], out[1])
	}

	// A Python exception is a bug, reported as Go reports a panic: the run
	// fails with the traceback, the next run trains.
	bug := spec{Name: "exception", Methods: []method{
		{Name: "Raises", Plugin: "faultplugin", Params: []string{"raise_at = 1"}},
		{Name: "Plain", Plugin: "faultplugin"},
	}}
	res := filepath.Join(dir, "results", "exception")
	r := host(t, "run", "-q", "--plugins", pyDir, "--results", res, bug.write(t, dir))
	wantFailedRuns(t, r, 1, 2,
		"host: run method=Raises/arch=mlp/seed=1 failed: step 1 (epoch 1): plugin faultplugin: Step: panic in Step: ZeroDivisionError: division by zero; last stderr lines:\n"+
			"  [ERROR] recovered panic in optimizer method=Step panic=ZeroDivisionError: division by zero\n"+
			"  stack:\n    Traceback (most recent call last):\n",
		`      return {"loss": 1 / 0}`, "    ZeroDivisionError: division by zero\n")
	if rec := readRecords(t, results.NewLayout(res, bug.Name).Runs())["method=Plain/arch=mlp/seed=1"]; rec.Status != results.StatusOK {
		t.Errorf("the run after the failed one: status %q (%s)", rec.Status, rec.Error)
	}
}
