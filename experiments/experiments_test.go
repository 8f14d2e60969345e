// Package experiments_test checks every shipped experiment file
// (experiments/*.toml) end to end.
//
// TestMain builds every plugin binary under plugins/*/cmd/* into a
// temporary folder; the tests run the host command with --plugins pointing
// there: in-process (cli.Main, what bin/host runs) for checks, as a process
// of its own for each smoke run (see hostProcess: this test binary, started
// again, runs cli.Main as bin/host does).
//
// TestCheck and TestSmoke run in parallel, and so do TestSmoke's subtests,
// at most -parallel (GOMAXPROCS) at a time: on 2 cores, the checks (one at
// a time, see TestCheck) or a smoke run beside another smoke run. Smoke
// runs use one torch thread each (train.threads = 1): the cores go to two
// runs at once rather than to one run's two threads, which at batch 8 wait
// for each other at every op and, on a machine loaded by other builds, spin
// while the partner thread is descheduled (docs/BENCHMARKS.md): the same
// run then took up to 7 times the CPU time.
//
//   - TestCheck: `host check` must pass on every FULL file (every method,
//     arch and seed). check loads the data, so CIFAR experiments are checked
//     on a copy whose data.dir / data.ood_dir ("data/cifar") point at small
//     generated CIFAR-format files (host/data.WriteCIFAR); nothing else is
//     changed.
//   - TestSmoke: `host run --smoke` (2 epochs of 2 steps on generated data, batch ≤ 8)
//     must finish the runs it is given, with results in a temporary folder.
//     It runs the shipped files with `--set train.seeds=[first seed]` (seeds
//     only change random streams) and `--set train.threads=1`. Even so,
//     every method × arch of every file (107 runs with one seed) is 16
//     CPU-minutes, so by default it smoke-runs every file and each distinct
//     method configuration, on cheap archs, in 30 runs (see smokePlan):
//     about 2.5 CPU-minutes. OPTLAB_SMOKE=all smoke-runs every method ×
//     arch of every file (first seed): about 12 minutes on 2 cores, more
//     than go test's default -timeout 10m.
//   - TestConventions: what the README's commands rely on: the experiment
//     name is the file name (results go to results/<name>/runs.jsonl) and
//     CIFAR data lives in data/cifar.
package experiments_test

import (
	"cmp"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/optlab/optlab/host/cli"
	"github.com/optlab/optlab/host/data"
	"github.com/optlab/optlab/host/experiment"
	"github.com/optlab/optlab/host/model"
	"github.com/optlab/optlab/host/results"
	"github.com/optlab/optlab/internal/testutil"
)

// dataDir is the CIFAR folder the experiment files name, relative to their
// folder (experiments/): the repository's data/cifar, where the README tells
// users to put the data with `bin/host data get cifar10 --dir data/cifar`.
// The MNIST-format datasets go to ../data/<dataset> (dirOf).
const dataDir = "../data/cifar"

// dirOf is the data folder experiment files name for a dataset read from a
// folder.
func dirOf(dataset string) string {
	if isCIFAR(dataset) {
		return dataDir
	}
	return "../data/" + dataset
}

var (
	// pluginDir holds the plugin binaries built by TestMain.
	pluginDir string
	// hostBin is this test binary, which runs as the host command when
	// started with asHostEnv set (see TestMain), for the smoke runs.
	hostBin string
	// genDir holds generated CIFAR-10 and CIFAR-100 files in the layout
	// `host data get` produces (cifar-10-batches-bin, cifar-100-binary).
	genDir string
	// genMNIST holds generated MNIST-format files, one folder per dataset.
	genMNIST string
)

// asHostEnv, set to "1" in the environment of this test binary, makes it
// the host command: it runs cli.Main on its arguments as bin/host does
// (host/main.go), instead of the tests. The smoke runs start it so, which
// spares TestMain linking a second libtorch binary.
const asHostEnv = "OPTLAB_EXPERIMENTS_TEST_AS_HOST"

func TestMain(m *testing.M) {
	if os.Getenv(asHostEnv) == "1" {
		os.Exit(cli.Main(os.Args[1:], os.Stdout, os.Stderr))
	}
	os.Exit(testMain(m))
}

func testMain(m *testing.M) int {
	tmp, err := os.MkdirTemp("", "optlab-experiments-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(tmp)
	pluginDir = filepath.Join(tmp, "plugins")
	if err := buildPlugins(pluginDir); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if hostBin, err = os.Executable(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	genDir = filepath.Join(tmp, "cifar")
	for kind, sub := range map[string]string{data.CIFAR10: "cifar-10-batches-bin", data.CIFAR100: "cifar-100-binary"} {
		// 206 records per training batch (1,030 training samples: one batch of
		// 1,024, Table 4's, so that host check can configure every method), 32 test.
		if err := data.WriteCIFAR(filepath.Join(genDir, sub), kind, 206, 32, 1); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
	genMNIST = filepath.Join(tmp, "mnist-format")
	for _, kind := range []string{data.FashionMNIST, data.MNIST} {
		if err := data.WriteMNIST(filepath.Join(genMNIST, kind), kind, 200, 32, 1); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
	return m.Run()
}

// buildPlugins builds every plugins/*/cmd/* package into dir with one `go
// build`, so the plugins the tests use are those of this checkout.
func buildPlugins(dir string) error {
	cmds, err := filepath.Glob(filepath.Join("..", "plugins", "*", "cmd", "*"))
	if err != nil {
		return err
	}
	args := []string{"-o", dir + string(filepath.Separator)}
	for _, c := range cmds {
		if goFiles, _ := filepath.Glob(filepath.Join(c, "*.go")); len(goFiles) == 0 {
			continue // a plugin being written, without its main yet
		}
		args = append(args, "./"+filepath.ToSlash(strings.TrimPrefix(c, ".."+string(filepath.Separator))))
	}
	if len(args) == 2 {
		return fmt.Errorf("no plugin commands under ../plugins/*/cmd")
	}
	return goBuild(args...)
}

// goBuild runs `go build args…` in the repository root.
func goBuild(args ...string) error {
	args = append([]string{"build"}, args...)
	cmd := exec.Command("go", args...)
	cmd.Dir = ".."
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("go %s: %w", strings.Join(args, " "), err)
	}
	return nil
}

// host runs the host command in-process (cli.Main, what bin/host runs)
// and fails the test, with its output, unless it exits with 0. It returns
// stdout.
func host(t *testing.T, args ...string) string {
	t.Helper()
	var stdout, stderr testutil.SyncBuffer
	if code := cli.Main(args, &stdout, &stderr); code != 0 {
		t.Fatalf("host %s: exit code %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), code, stdout.String(), stderr.String())
	}
	return stdout.String()
}

// hostProcess runs the host command (this test binary with asHostEnv set)
// in a process of its own and fails the test, with its output, unless it
// exits with 0. Smoke runs use it so that each starts with a fresh heap: the
// host keeps much of the memory of the runs it has done, and one process
// smoke-running every run of every file grew past 22 GB and was killed; and
// so that each sets its own torch thread count (a process-wide setting).
func hostProcess(t *testing.T, args ...string) {
	t.Helper()
	cmd := exec.Command(hostBin, args...)
	cmd.Env = append(os.Environ(), asHostEnv+"=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("host %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// experimentFiles returns experiments/*.toml, failing when there is none.
func experimentFiles(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob("*.toml")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no experiment files")
	}
	return files
}

// load decodes an experiment file.
func load(t *testing.T, path string) *experiment.Experiment {
	t.Helper()
	exp, err := experiment.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	return exp
}

// isCIFAR reports whether name is a CIFAR dataset.
func isCIFAR(name string) bool {
	return name == experiment.DatasetCIFAR10 || name == experiment.DatasetCIFAR100
}

// dirLine matches a data.dir or data.ood_dir line naming dataDir or
// ../data/<MNIST-format dataset>.
var dirLine = regexp.MustCompile(`(?m)^([ \t]*(?:ood_)?dir[ \t]*=[ \t]*)"(` + regexp.QuoteMeta(dataDir) + `|\.\./data/(?:fashion-mnist|mnist))"`)

// withGeneratedData returns the text of an experiment file with its CIFAR
// folders replaced by the generated ones.
func withGeneratedData(text string) string {
	return dirLine.ReplaceAllStringFunc(text, func(line string) string {
		m := dirLine.FindStringSubmatch(line)
		gen := genDir
		if m[2] != dataDir {
			gen = filepath.Join(genMNIST, strings.TrimPrefix(m[2], "../data/"))
		}
		return m[1] + strconv.Quote(gen)
	})
}

// writeCopy writes text under the original file's name into a fresh
// temporary folder and returns its path.
func writeCopy(t *testing.T, orig, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), filepath.Base(orig))
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestConventions checks what the README's commands rely on.
func TestConventions(t *testing.T) {
	for _, f := range experimentFiles(t) {
		exp := load(t, f)
		if want := strings.TrimSuffix(f, ".toml"); exp.Name != want {
			t.Errorf("%s: name = %q, want %q (results go to results/<name>/runs.jsonl)", f, exp.Name, want)
		}
		if exp.ResultsDir != "results" {
			t.Errorf("%s: results_dir = %q, want the default \"results\"", f, exp.ResultsDir)
		}
		if experiment.HasDir(exp.Data.Dataset) && exp.Data.Dir != dirOf(exp.Data.Dataset) {
			t.Errorf("%s: data.dir = %q, want %q", f, exp.Data.Dir, dirOf(exp.Data.Dataset))
		}
		if experiment.HasDir(exp.Data.OOD) && exp.Data.OODDir != dirOf(exp.Data.OOD) {
			t.Errorf("%s: data.ood_dir = %q, want %q", f, exp.Data.OODDir, dirOf(exp.Data.OOD))
		}
	}
}

// TestCheck runs `host check` on every experiment file, full grid, with the
// CIFAR folders pointed at generated data.
//
// Its subtests run one at a time, beside TestSmoke's: cli.Main stops every
// plugin process of this process when it returns (plugin.CleanupAll), so
// two checks in this process at once would stop each other's plugins.
func TestCheck(t *testing.T) {
	t.Parallel()
	for _, f := range experimentFiles(t) {
		t.Run(strings.TrimSuffix(f, ".toml"), func(t *testing.T) {
			exp := load(t, f)
			text, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			path := f
			if experiment.HasDir(exp.Data.Dataset) || experiment.HasDir(exp.Data.OOD) {
				path = writeCopy(t, f, withGeneratedData(string(text)))
			}
			out := host(t, "check", "--plugins", pluginDir, path)
			// check lists the grid, run by run.
			for _, r := range experiment.Grid(exp) {
				if !strings.Contains(out, r.Key) {
					t.Errorf("check does not list run %s:\n%s", r.Key, out)
				}
			}
		})
	}
}

// smokeAllEnv names the environment variable that widens TestSmoke from
// its quick default to every run of every file (first seed): set it to
// "all".
const smokeAllEnv = "OPTLAB_SMOKE"

// smokeFile is the smoke plan of one experiment file.
type smokeFile struct {
	// file is the experiment file; sets the --set flags of its smoke runs.
	file string
	sets []string
	// runs is the grid of the file with sets; chosen the indices of the
	// runs to smoke.
	runs   []experiment.Run
	chosen []int
}

// smokeSets are the --set overrides of a file's smoke runs: its first seed
// only (seeds only change random streams) and one torch thread (see the
// package comment).
//
// A smoke run has 2 epochs, so a method whose phases are counted in epochs
// of the full run (FGE's pretrain_epochs, EDST's explore_epochs) would take
// no snapshot or refine no ticket, which the methods refuse (hardening 4,
// 09): its smoke run explores one epoch (EDST) or pretrains none (FGE), so
// that the other smoke epoch refines a ticket or takes a snapshot.
func smokeSets(exp *experiment.Experiment) []string {
	sets := []string{"train.seeds=[" + strconv.FormatInt(exp.Train.Seeds[0], 10) + "]", "train.threads=1"}
	for _, m := range exp.Methods {
		if _, ok := m.Params["explore_epochs"]; ok && m.Plugin == "edst" {
			sets = append(sets, fmt.Sprintf("method.%s.params.explore_epochs=1", strconv.Quote(m.Name)))
		}
		if _, ok := m.Params["pretrain_epochs"]; ok && m.Plugin == "ensembles" {
			sets = append(sets, fmt.Sprintf("method.%s.params.pretrain_epochs=0", strconv.Quote(m.Name)))
		}
	}
	return sets
}

// methodConfig identifies a method configuration for the quick smoke: the
// plugin, the values of its string and boolean parameters (which choose
// code paths: ensemble kind, member optimizer, mode) and the names of the
// others (whose values only change numbers), whether the data is CIFAR,
// whether the model is variational and train.precision.
func methodConfig(exp *experiment.Experiment, m experiment.Method) string {
	keys := make([]string, 0, len(m.Params))
	for k := range m.Params {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var b strings.Builder
	fmt.Fprintf(&b, "plugin=%s path=%s cifar=%t variational=%t precision=%s", m.Plugin, m.Path, isCIFAR(exp.Data.Dataset), exp.Model.Variational, cmp.Or(exp.Train.Precision, experiment.PrecisionFP32))
	for _, k := range keys {
		switch v := m.Params[k].(type) {
		case string, bool:
			fmt.Fprintf(&b, " %s=%v", k, v)
		default:
			fmt.Fprintf(&b, " %s", k)
		}
	}
	return b.String()
}

// runCost is the number of parameters of a run's members, a proxy for its
// smoke cost.
func runCost(t *testing.T, r experiment.Run) int64 {
	t.Helper()
	var n int64
	for _, a := range r.Members {
		m, err := model.Builtin().New(a, 10, []int64{3, 32, 32})
		if err != nil {
			t.Fatalf("%s: %v", r.Key, err)
		}
		n += m.Numel
	}
	return n
}

// smokePlan chooses the runs to smoke, on the grids of the files with
// smokeSets. With all, every run of every file. Otherwise (the quick
// default) every file is smoke-run and each distinct method configuration
// (see methodConfig) at least once, in few runs, each the cheapest (fewest
// parameters; grid order among equals) of its file that does its job:
//
//  1. each file, in name order, runs its cheapest run of a configuration
//     that no earlier file's choice covers (a cifar100 file thus covers in
//     the run it needs anyway a configuration that its cifar10 twin, which
//     covers another, has too);
//  2. each configuration still not covered runs on its cheapest run in the
//     first file, in name order, that has it;
//  3. a file with no run yet (its configurations all covered by earlier
//     files) runs its cheapest run.
//
// The plan does not depend on which subtests run.
func smokePlan(t *testing.T, all bool) []smokeFile {
	t.Helper()
	var plan []smokeFile
	// orders[k] lists the runs of plan[k] cheapest first; configs[k][i] is
	// the method configuration of its run i.
	var orders [][]int
	var configs [][]string
	for _, f := range experimentFiles(t) {
		exp := load(t, f)
		sets := smokeSets(exp)
		small, err := experiment.Load(f, sets...)
		if err != nil {
			t.Fatalf("%s with --set %s: %v", f, strings.Join(sets, " --set "), err)
		}
		if len(small.Train.Seeds) != 1 || small.Train.Seeds[0] != exp.Train.Seeds[0] || small.Train.Threads != 1 {
			t.Fatalf("%s: seeds, threads with --set %s = %v, %d, want [%d], 1", f, strings.Join(sets, " --set "), small.Train.Seeds, small.Train.Threads, exp.Train.Seeds[0])
		}
		sf := smokeFile{file: f, sets: sets, runs: experiment.Grid(small)}
		order := make([]int, len(sf.runs))
		costs := make([]int64, len(sf.runs))
		cfg := make([]string, len(sf.runs))
		for i, r := range sf.runs {
			order[i], costs[i], cfg[i] = i, runCost(t, r), methodConfig(small, r.Method)
		}
		slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(costs[a], costs[b]) })
		if all {
			sf.chosen = slices.Clone(order)
		}
		plan, orders, configs = append(plan, sf), append(orders, order), append(configs, cfg)
	}
	if !all {
		covered := map[string]bool{}
		for k := range plan { // 1.
			for _, i := range orders[k] {
				if c := configs[k][i]; !covered[c] {
					covered[c] = true
					plan[k].chosen = append(plan[k].chosen, i)
					break
				}
			}
		}
		for k := range plan { // 2.
			for _, i := range orders[k] {
				if c := configs[k][i]; !covered[c] {
					covered[c] = true
					plan[k].chosen = append(plan[k].chosen, i)
				}
			}
		}
		for k := range plan { // 3.
			if len(plan[k].chosen) == 0 {
				plan[k].chosen = orders[k][:1]
			}
		}
	}
	for k := range plan {
		slices.Sort(plan[k].chosen)
	}
	return plan
}

// TestSmoke runs `host run --smoke` on every experiment file, with the
// seeds reduced to the first one and one torch thread (smokeSets), and
// checks that every chosen run finished. By default it runs the quick plan
// of smokePlan: every file and every method configuration of the shipped
// files. OPTLAB_SMOKE=all runs every method × arch of every file.
func TestSmoke(t *testing.T) {
	t.Parallel()
	all := os.Getenv(smokeAllEnv) == "all"
	for _, sf := range smokePlan(t, all) {
		t.Run(strings.TrimSuffix(sf.file, ".toml"), func(t *testing.T) {
			t.Parallel()
			res := t.TempDir()
			start := time.Now()
			args := []string{"run", "--smoke", "-q", "--plugins", pluginDir, "--results", res}
			for _, s := range sf.sets {
				args = append(args, "--set", s)
			}
			if len(sf.chosen) == len(sf.runs) {
				hostProcess(t, slices.Concat(args, []string{sf.file})...)
			} else {
				// --shard k/n with n = the grid's size is exactly run k−1.
				for _, i := range sf.chosen {
					hostProcess(t, slices.Concat(args, []string{"--shard", fmt.Sprintf("%d/%d", i+1, len(sf.runs)), sf.file})...)
				}
			}
			var keys []string
			for _, i := range sf.chosen {
				keys = append(keys, sf.runs[i].Key)
			}
			t.Logf("%s: %d of %d first-seed runs in %.1fs: %s", sf.file, len(keys), len(sf.runs), time.Since(start).Seconds(), strings.Join(keys, ", "))
			// runs.jsonl, or one file per shard.
			files, err := filepath.Glob(filepath.Join(res, strings.TrimSuffix(sf.file, ".toml"), "*.jsonl"))
			if err != nil || len(files) == 0 {
				t.Fatalf("no results files in %s (%v)", res, err)
			}
			recs, err := results.Read(files...)
			if err != nil {
				t.Fatal(err)
			}
			status := map[string]string{}
			for _, r := range recs {
				status[r.Key] = r.Status
				if r.Status != results.StatusOK {
					t.Errorf("%s: status %q: %s", r.Key, r.Status, r.Error)
				}
			}
			for _, k := range keys {
				if _, ok := status[k]; !ok {
					t.Errorf("%s: no result", k)
				}
			}
			if len(recs) != len(keys) {
				t.Errorf("%d results, want %d", len(recs), len(keys))
			}
		})
	}
}
