package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"

	"github.com/optlab/optlab/host/experiment"
	"github.com/optlab/optlab/host/grid"
	"github.com/optlab/optlab/host/plugin"
	"github.com/optlab/optlab/host/results"
	"github.com/optlab/optlab/host/table"
	"github.com/optlab/optlab/host/train"
	"github.com/optlab/optlab/plugins/builtin"
)

func checkCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("check", flag.ContinueOnError)
	dir := fs.String("plugins", DefaultPluginDir(), "plugin directory")
	timeouts := fs.String("timeouts", "", timeoutsUsage())
	var sets setFlag
	fs.Var(&sets, "set", setUsage)
	pos, err := parseInterleaved(fs, args, stdout)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return errors.New("usage: host check [--set KEY=VALUE …] EXPERIMENT.toml")
	}
	t, err := plugin.ParseTimeouts(*timeouts)
	if err != nil {
		return err
	}
	// The file's structure first (syntax, keys, types); then its values
	// and its hyperparameters, whose problems Prepare reports together.
	exp, err := experiment.Load(pos[0], sets...)
	if err != nil {
		return err
	}
	p, err := grid.Prepare(ctx, exp, grid.Plugins{Dir: *dir, Output: stderr, Timeouts: t})
	if err != nil {
		return err
	}
	ck, err := grid.NewCheck(p)
	if err != nil {
		return err
	}
	defer ck.Close()
	sp := ck.Split
	fmt.Fprintf(stdout, "%s: %s — %d train / %d test samples, %d classes, input %v\n", exp.File, exp.Data.Dataset, sp.Train.Len(), sp.Test.Len(), sp.Train.Classes, ck.Shape())
	noise, err := ck.LabelNoise()
	if err != nil {
		return err
	}
	fmt.Fprint(stdout, noiseSummaries(noise))
	fmt.Fprint(stdout, evalSummary(exp.Eval))
	fmt.Fprintln(stdout, gridSummary(exp, p.Runs))
	fmt.Fprint(stdout, optimizerSummary(exp, p.OwnsUpdate))
	fmt.Fprintln(stdout, stepsSummary(exp, p.Runs, sp.Train.Len()))
	if n := len(p.Runs); n > grid.DefaultWarnRuns {
		fmt.Fprintf(stdout, "warning: %d runs, more than %d: is every list of the sweep meant? (host run --shard i/n splits a grid)\n", n, grid.DefaultWarnRuns)
	}
	for _, r := range p.Runs {
		var params int64
		for _, a := range r.Members {
			n, err := ck.Params(ctx, a)
			if err != nil {
				return err
			}
			params += n
		}
		info := p.Infos[r.Method.Name]
		fmt.Fprintf(stdout, "  %3d  %-40s plugin %s %s, %d parameters\n", r.Index, r.Key, info.Name, info.Version, params)
	}
	if err := ck.Preflight(ctx); err != nil {
		return err
	}
	for _, n := range exp.Notes {
		fmt.Fprintln(stdout, "note:", n)
	}
	fmt.Fprintln(stdout, "ok")
	return nil
}

// timeoutsUsage documents the --timeouts flag.
func timeoutsUsage() string {
	return "deadlines of the calls into plugins, e.g. start=2m,configure=20m (default " + plugin.DefaultTimeouts().String() + "); a plugin past one counts as hung"
}

func runCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	o := runOpts{}
	fs.Var((*setFlag)(&o.sets), "set", setUsage)
	fs.StringVar(&o.plugins.Dir, "plugins", DefaultPluginDir(), "plugin directory")
	fs.BoolVar(&o.grid.Smoke, "smoke", false, "run every run for 2 epochs of 2 steps on generated data (results to a temporary folder unless --results)")
	shard := fs.String("shard", "", "run only shard i of n of the grid (i/n, 1-based); results go to runs-<i>of<n>.jsonl")
	fs.StringVar(&o.resDir, "results", "", "results folder (default: the experiment's results_dir)")
	fs.StringVar(&o.device, "device", "", "override train.device: auto, cpu, cuda or cuda:N")
	quiet := fs.Bool("q", false, "no progress output")
	stepTimeout := fs.Duration("step-timeout", plugin.DefaultTimeouts().Step, "how long one optimizer step may take before the plugin counts as hung (also --timeouts step=…)")
	timeouts := fs.String("timeouts", "", timeoutsUsage())
	lockTimeout := fs.Duration("lock-timeout", results.DefaultLockTimeout, "how long to wait for the results lock that another process holds before giving up")
	inProcess := fs.Bool("in-process", false, "serve the built-in methods inside this process, not as plugin processes (to step through an optimizer and the host in one debugger)")
	pos, err := parseInterleaved(fs, args, stdout)
	if err != nil {
		return err
	}
	if len(pos) == 0 {
		return errors.New("usage: host run [flags] EXPERIMENT.toml [EXPERIMENT2.toml …]")
	}
	if *stepTimeout <= 0 {
		return fmt.Errorf("--step-timeout %v: want a positive duration, e.g. 10m", *stepTimeout)
	}
	if *lockTimeout <= 0 {
		return fmt.Errorf("--lock-timeout %v: want a positive duration, e.g. 10m", *lockTimeout)
	}
	o.grid.LockWait = results.LockWait{Ctx: ctx, Timeout: *lockTimeout, Log: stderr}
	if o.plugins.Timeouts, err = plugin.ParseTimeouts(*timeouts); err != nil {
		return err
	}
	fs.Visit(func(f *flag.Flag) {
		if f.Name == "step-timeout" {
			o.plugins.Timeouts.Step = *stepTimeout
		}
	})
	o.plugins.Output = stderr
	if *inProcess {
		o.plugins.InProcess = builtin.Registry()
	}
	if *shard != "" {
		if o.grid.Shard.I, o.grid.Shard.N, err = parseShard(*shard); err != nil {
			return err
		}
	}
	o.grid.SmokeResults = o.grid.Smoke && o.resDir == ""
	o.grid.Log, o.grid.Progress, o.grid.Terminal = stderr, stderr, isTerminal(stderr)
	if *quiet {
		o.grid.Progress = nil
	}
	o.grid.Meta = train.Meta{GitCommit: gitCommit(), Host: train.DefaultHost()}
	exps := loadExperiments(pos, o.sets)
	if err := checkDistinctResults(exps, o); err != nil {
		return err
	}
	var files []string
	var recs []results.Record
	var failed, total int
	for _, l := range exps {
		if l.err != nil {
			return l.err
		}
		res, err := runExperiment(ctx, l.exp, o)
		if err != nil {
			return err
		}
		files = append(files, res.Files...)
		recs = append(recs, res.Records...)
		failed += res.Failed
		total += res.Runs
	}
	fmt.Fprintf(stdout, "\n%s\n\n", strings.Join(files, ", "))
	if err := table.Render(stdout, recs, table.Options{}); err != nil {
		return err
	}
	if failed > 0 {
		return fmt.Errorf("%d of %d runs failed (see above and %s)", failed, total, strings.Join(files, ", "))
	}
	return nil
}

// loaded is one experiment file of host run, loaded once for the whole
// command: read and decoded (exp; nil when that failed, err says why,
// when the experiment's turn comes). Its values are validated with its
// hyperparameters by grid.Prepare, so that their problems come together.
type loaded struct {
	path string
	exp  *experiment.Experiment
	err  error
}

// loadExperiments reads and decodes each experiment file of host run
// once, with the --set overrides sets (experiment.Load).
func loadExperiments(paths, sets []string) []loaded {
	out := make([]loaded, len(paths))
	for i, path := range paths {
		l := loaded{path: path}
		l.exp, l.err = experiment.Load(path, sets...)
		out[i] = l
	}
	return out
}

// checkDistinctResults refuses, before anything is trained, two experiments
// of one host run that write the same results folder (the same name and
// results_dir, a copied file): the second would take the first's fresh
// runs for its own finished or superseded ones. Files that do not decode
// are left to the run loop to report.
func checkDistinctResults(exps []loaded, o runOpts) error {
	if len(exps) < 2 || o.grid.SmokeResults {
		return nil
	}
	seen := map[string]string{} // results folder → experiment file
	for _, l := range exps {
		exp, path := l.exp, l.path
		if exp == nil {
			continue
		}
		dir := exp.ResultsDir
		if o.resDir != "" {
			dir = o.resDir
		}
		dir = results.NewLayout(dir, exp.Name).Dir
		if abs, err := filepath.Abs(dir); err == nil {
			dir = abs
		}
		if first, ok := seen[dir]; ok {
			if first == path {
				return fmt.Errorf("%s is given twice: give each experiment once", path)
			}
			return fmt.Errorf("%s and %s share the results folder %s (experiment name %q): give one of them another name or results_dir, or run them one at a time",
				first, path, dir, exp.Name)
		}
		seen[dir] = path
	}
	return nil
}

// runOpts are host run's settings shared by its experiments.
type runOpts struct {
	resDir, device string
	sets           []string // --set overrides, for every experiment
	plugins        grid.Plugins
	grid           grid.RunOptions
}

// runExperiment validates one loaded experiment and its hyperparameters
// (grid.Prepare) and runs its unfinished runs (of its shard).
func runExperiment(ctx context.Context, exp *experiment.Experiment, o runOpts) (grid.Result, error) {
	p, err := grid.Prepare(ctx, exp, o.plugins)
	if err != nil {
		return grid.Result{}, err
	}
	if o.device != "" {
		exp.Train.Device = o.device
	}
	if o.resDir != "" {
		exp.ResultsDir = o.resDir
	}
	return grid.Run(ctx, p, o.grid)
}

func parseShard(s string) (int, int, error) {
	a, b, ok := strings.Cut(s, "/")
	i, err1 := strconv.Atoi(a)
	n, err2 := strconv.Atoi(b)
	if !ok || err1 != nil || err2 != nil {
		return 0, 0, fmt.Errorf("--shard %q: want i/n, e.g. 2/8", s)
	}
	if n < 1 || i < 1 || i > n {
		return 0, 0, fmt.Errorf("--shard %q: want i/n with n ≥ 1 and 1 ≤ i ≤ n, e.g. 2/8", s)
	}
	return i, n, nil
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// gitCommit returns the commit of the code that runs: the binary's own (its
// build information), else the working directory's checkout, or "".
func gitCommit() string {
	info, _ := debug.ReadBuildInfo()
	if c := buildCommit(info); c != "" {
		return c
	}
	out, err := exec.Command("git", "rev-parse", "--short", "HEAD").Output()
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(out))
}

// buildCommit is the commit the binary was built from, as Go's build
// information records it (go build in a git checkout): the revision's
// first 7 hex digits, with "+dirty" when the tree had uncommitted changes;
// "" without the information (then the commit of the working directory's
// checkout is the best guess, and outside one there is none).
func buildCommit(info *debug.BuildInfo) string {
	if info == nil {
		return ""
	}
	var rev string
	dirty := false
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if len(rev) > 7 {
		rev = rev[:7]
	}
	if rev != "" && dirty {
		rev += "+dirty"
	}
	return rev
}
