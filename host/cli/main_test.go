package cli_test

// End-to-end tests of the host command. TestMain builds the real plugin
// binaries (the built-in optimizers and internal/testplugin/faultplugin,
// which misbehaves on request) and bin/host into a temporary folder; the
// tests drive cli.Main in-process with --plugins pointing there, except the
// Ctrl-C test, which runs bin/host as a subprocess.

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"text/template"
	"time"

	"github.com/optlab/optlab/host/cli"
	"github.com/optlab/optlab/host/results"
	"github.com/optlab/optlab/internal/testutil"
)

var (
	// pluginDir holds the plugin binaries: sgd, sam, bsam, otmdr and
	// faultplugin.
	pluginDir string
	// hostBin is the host binary, for the subprocess tests.
	hostBin string
)

// pluginPkgs are the plugin commands TestMain builds into pluginDir; each
// binary is named after the last element of its package path.
var pluginPkgs = []string{
	"github.com/optlab/optlab/plugins/sgd/cmd/sgd",
	"github.com/optlab/optlab/plugins/sam/cmd/sam",
	"github.com/optlab/optlab/plugins/bsam/cmd/bsam",
	"github.com/optlab/optlab/plugins/otmdr/cmd/otmdr",
	"github.com/optlab/optlab/internal/testplugin/faultplugin",
}

// testBinEnv names a folder with the binaries TestMain would build: host,
// and plugins/<name> for each of pluginPkgs (and no other plugin).
const testBinEnv = "OPTLAB_TEST_BIN"

func TestMain(m *testing.M) {
	os.Exit(testMain(m))
}

func testMain(m *testing.M) int {
	if bin := os.Getenv(testBinEnv); bin != "" {
		// Built already: the device kit's test run, where there is no Go
		// toolchain (scripts/devkit-run.sh makes this folder).
		pluginDir = filepath.Join(bin, "plugins")
		hostBin = filepath.Join(bin, "host")
	} else {
		tmp, err := os.MkdirTemp("", "optlab-cli-test-")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer os.RemoveAll(tmp)
		bin := filepath.Join(tmp, "bin")
		pluginDir = filepath.Join(bin, "plugins")
		hostBin = filepath.Join(bin, "host")
		for _, err := range []error{
			testutil.GoBuild(pluginDir+string(filepath.Separator), pluginPkgs...),
			testutil.GoBuild(hostBin, "github.com/optlab/optlab/host"),
		} {
			if err != nil {
				fmt.Fprintln(os.Stderr, err)
				return 1
			}
		}
	}
	code := m.Run()
	// No test may leave a plugin process behind.
	if left := waitNoProcesses(pluginDir, 10*time.Second); len(left) > 0 {
		fmt.Fprintf(os.Stderr, "plugin processes left running after the tests: %v\n", left)
		return 1
	}
	return code
}

// result is what one host command did.
type result struct {
	code           int
	stdout, stderr string
}

// host runs cli.Main with args and checks that it did not panic.
func host(t *testing.T, args ...string) result {
	t.Helper()
	var stdout, stderr testutil.SyncBuffer
	code := cli.Main(args, &stdout, &stderr)
	r := result{code: code, stdout: stdout.String(), stderr: stderr.String()}
	if code != 0 {
		t.Logf("host %s: exit code %d; stderr:\n%s", strings.Join(args, " "), code, r.stderr)
	}
	assertNoPanic(t, r.stdout+r.stderr)
	return r
}

// assertNoPanic fails when out holds a Go panic trace.
func assertNoPanic(t *testing.T, out string) {
	t.Helper()
	for _, s := range []string{"panic:", "goroutine ", "[recovered]"} {
		if strings.Contains(out, s) {
			t.Fatalf("output holds a Go panic trace (%q):\n%s", s, out)
		}
	}
}

// wantError checks that r failed with exit code 1 and exactly one error
// message, starting "host: " and holding every string of want.
func wantError(t *testing.T, r result, want ...string) {
	t.Helper()
	if r.code != 1 {
		t.Errorf("exit code %d, want 1", r.code)
	}
	if msgs := errorMessages(r.stderr); len(msgs) != 1 {
		t.Errorf("got %d error messages, want 1:\n%s", len(msgs), strings.Join(msgs, "\n"))
	}
	for _, w := range want {
		if !strings.Contains(r.stderr, w) {
			t.Errorf("stderr does not say %q:\n%s", w, r.stderr)
		}
	}
}

// errorMessages returns the lines of stderr that start a message of the
// host other than its start-up line ("host: libtorch … on cpu") and its
// notes ("host: note: device auto: no usable GPU, …", which a CUDA build
// without a usable GPU prints when it falls back to the CPU).
func errorMessages(stderr string) []string {
	var out []string
	for line := range strings.Lines(stderr) {
		if strings.HasPrefix(line, "host: ") && !strings.HasPrefix(line, "host: libtorch") && !strings.HasPrefix(line, "host: note: ") {
			out = append(out, strings.TrimSpace(line))
		}
	}
	return out
}

// method is one [[method]] table of a test experiment.
type method struct {
	Name, Plugin string
	// Params are TOML lines of [method.params], e.g. `rho = 0.05`.
	Params []string
}

// spec is a small test experiment: one epoch of an MLP on the UCI digits
// (22 steps of 64) unless changed.
type spec struct {
	Name    string
	Data    string // lines of [data]; default the UCI digits
	Arch    string
	Batch   int
	Seeds   string
	LR      float64
	Methods []method
}

var expTemplate = template.Must(template.New("exp").Parse(`name = "{{.Name}}"

[data]
{{if .Data}}{{.Data}}{{else}}dataset = "uci-digits"{{end}}

[model]
archs = ["{{.Arch}}"]

[train]
epochs = 1
batch_size = {{.Batch}}
seeds = {{.Seeds}}
threads = 1
device = "cpu"

[train.optimizer]
lr = {{.LR}}

[eval]
aac_steps = 10
mc_samples = 2
{{range .Methods}}
[[method]]
name = "{{.Name}}"
plugin = "{{.Plugin}}"
{{- if .Params}}
[method.params]
{{- range .Params}}
{{.}}
{{- end}}
{{- end}}
{{end}}`))

// write writes the experiment into dir and returns its path.
func (s spec) write(t *testing.T, dir string) string {
	t.Helper()
	if s.Arch == "" {
		s.Arch = "mlp"
	}
	if s.Batch == 0 {
		s.Batch = 64
	}
	if s.Seeds == "" {
		s.Seeds = "[1]"
	}
	if s.LR == 0 {
		s.LR = 0.05
	}
	var b bytes.Buffer
	if err := expTemplate.Execute(&b, s); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, s.Name+".toml")
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// readRecords reads a results file into a map by run key.
func readRecords(t *testing.T, path string) map[string]results.Record {
	t.Helper()
	recs, err := results.Read(path)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]results.Record{}
	for _, r := range recs {
		if _, dup := out[r.Key]; dup {
			t.Errorf("%s: run %s recorded twice", path, r.Key)
		}
		out[r.Key] = r
	}
	return out
}

// tableRow returns the markdown table row of method in out, or "".
func tableRow(out, method string) string {
	re := regexp.MustCompile(`(?m)^\| ` + regexp.QuoteMeta(method) + ` +\|.*$`)
	return re.FindString(out)
}

// processesOf returns the pids of the live processes whose executable is
// in dir.
func processesOf(dir string) []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var pids []int
	for _, e := range entries {
		var pid int
		if _, err := fmt.Sscan(e.Name(), &pid); err != nil {
			continue
		}
		exe, err := os.Readlink(filepath.Join("/proc", e.Name(), "exe"))
		if err != nil { // gone, a zombie, or not ours
			continue
		}
		if filepath.Dir(exe) == dir {
			pids = append(pids, pid)
		}
	}
	return pids
}

// waitNoProcesses waits up to d for every process running a binary of dir
// to end, and returns those still running.
func waitNoProcesses(dir string, d time.Duration) []int {
	deadline := time.Now().Add(d)
	for {
		left := processesOf(dir)
		if len(left) == 0 || time.Now().After(deadline) {
			return left
		}
		time.Sleep(50 * time.Millisecond)
	}
}
