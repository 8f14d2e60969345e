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
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/optlab/optlab/host/curves"
	"github.com/optlab/optlab/host/data"
	"github.com/optlab/optlab/host/experiment"
	"github.com/optlab/optlab/host/model"
	"github.com/optlab/optlab/host/plugin"
	"github.com/optlab/optlab/host/results"
	"github.com/optlab/optlab/host/table"
	"github.com/optlab/optlab/host/tensor"
	"github.com/optlab/optlab/host/train"
	"github.com/optlab/optlab/plugins/builtin"
	"github.com/optlab/optlab/sdk/optim"
)

// smoke settings: a few steps with small batches on generated data.
const (
	smokeSteps     = 2
	smokeBatch     = 16
	smokeTrainPerB = 16 // CIFAR-format records per training batch file
	smokeTest      = 32
)

// plan is a validated experiment with its plugins' schemas.
type plan struct {
	exp       *experiment.Experiment
	runs      []experiment.Run
	params    map[string]map[string]any // by run label
	infos     map[string]optim.Info     // by method name
	pluginDir string
	// stderr receives the plugins' output and log lines.
	stderr io.Writer
	// timeouts are the deadlines of the calls into the plugins (zero
	// fields: plugin.DefaultTimeouts).
	timeouts plugin.Timeouts
	// inProcess, when set, lists the methods served inside this process
	// (host run --in-process) instead of as plugin processes.
	inProcess *optim.Registry
}

// method is what a run's record says about its optimizer (without the
// optimizer itself, which a launched plugin provides).
func (p *plan) method(run experiment.Run) train.Method {
	info := p.infos[run.Method.Name]
	return train.Method{Plugin: info.Name, Version: info.Version, Params: p.params[run.Label]}
}

// launchSpec says how to start the plugin of method m.
func (p *plan) launchSpec(m experiment.Method) plugin.LaunchSpec {
	name := m.Plugin
	if name == "" {
		name = filepath.Base(m.Path)
	}
	spec := plugin.LaunchSpec{
		Name: name, Path: m.Path, Dir: p.pluginDir, Timeouts: p.timeouts, Output: p.stderr,
		Logger: hclog.New(&hclog.LoggerOptions{Name: "optlab", Level: hclog.Warn, Output: p.stderr}),
	}
	if e, ok := p.inProcess.Lookup(m.Plugin); ok && m.Path == "" {
		spec.InProcess = e.New
	}
	return spec
}

// prepare loads the experiment with the --set overrides sets and validates
// it, asks every method's plugin for its schema and validates the
// hyperparameters against it (every value of a sweep, then each run's
// setting). The plan's plugins are started with timeouts and write their
// output to stderr.
func prepare(ctx context.Context, path string, sets []string, pluginDir string, timeouts plugin.Timeouts, inProcess *optim.Registry, stderr io.Writer) (*plan, error) {
	exp, err := experiment.Load(path, sets...)
	if err != nil {
		return nil, err
	}
	if err := experiment.Validate(exp, model.Builtin().Names()); err != nil {
		return nil, err
	}
	p := &plan{exp: exp, runs: experiment.Grid(exp), params: map[string]map[string]any{}, infos: map[string]optim.Info{},
		pluginDir: pluginDir, stderr: stderr, timeouts: timeouts, inProcess: inProcess}
	var errs []error
	for _, m := range exp.Methods {
		c, err := plugin.Launch(ctx, p.launchSpec(m))
		if err != nil {
			errs = append(errs, fmt.Errorf("%s:%d: method %q: %w", exp.File, m.Line, m.Name, err))
			continue
		}
		info, err := c.Info(ctx)
		_ = c.Close()
		if err != nil {
			errs = append(errs, fmt.Errorf("%s:%d: method %q: %w", exp.File, m.Line, m.Name, err))
			continue
		}
		if info.ProtocolMinor > optim.ProtocolMinor {
			errs = append(errs, fmt.Errorf("%s:%d: plugin %s speaks protocol %d.%d, newer than this host's %d.%d: %s", exp.File, m.Line, info.Name,
				optim.ProtocolMajor, info.ProtocolMinor, optim.ProtocolMajor, optim.ProtocolMinor, plugin.RebuildAdvice))
			continue
		}
		if err := checkMembers(exp, info); err != nil {
			errs = append(errs, fmt.Errorf("%s:%d: method %q: %w", exp.File, m.Line, m.Name, err))
			continue
		}
		if _, err := experiment.ValidateParams(m, info.Params); err != nil {
			errs = append(errs, err)
			continue
		}
		p.infos[m.Name] = info
		for _, run := range p.runs {
			if _, done := p.params[run.Label]; done || run.Method.Name != m.Name {
				continue
			}
			params, err := experiment.ValidateParamsIn(run.Method, info.Params, experiment.RunBounds(run.Experiment(exp)))
			if err != nil {
				errs = append(errs, err)
				break
			}
			p.params[run.Label] = params
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return p, nil
}

func checkCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("check", flag.ContinueOnError)
	dir := fs.String("plugins", DefaultPluginDir(), "plugin directory")
	var sets setFlag
	fs.Var(&sets, "set", setUsage)
	pos, err := parseInterleaved(fs, args, stdout)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return errors.New("usage: host check [--set KEY=VALUE …] EXPERIMENT.toml")
	}
	p, err := prepare(ctx, pos[0], sets, *dir, plugin.Timeouts{}, nil, stderr)
	if err != nil {
		return err
	}
	sp, err := train.LoadSplit(p.exp.Data)
	if err != nil {
		return fmt.Errorf("%s: data: %w", pos[0], err)
	}
	shape := make([]int64, len(sp.Train.Shape))
	for i, v := range sp.Train.Shape {
		shape[i] = int64(v)
	}
	zoo := model.Builtin()
	fmt.Fprintf(stdout, "%s: %s — %d train / %d test samples, %d classes, input %v\n", p.exp.File, p.exp.Data.Dataset, sp.Train.Len(), sp.Test.Len(), sp.Train.Classes, shape)
	fmt.Fprintln(stdout, gridSummary(p.exp, p.runs))
	fmt.Fprintln(stdout, stepsSummary(p.exp, p.runs, sp.Train.Len()))
	for _, r := range p.runs {
		var params int64
		for _, a := range r.Members {
			m, err := zoo.New(a, sp.Train.Classes, shape)
			if err != nil {
				return err
			}
			params += m.Numel
		}
		info := p.infos[r.Method.Name]
		fmt.Fprintf(stdout, "  %3d  %-40s plugin %s %s, %d parameters\n", r.Index, r.Key, info.Name, info.Version, params)
	}
	if err := preflight(ctx, p, sp, shape); err != nil {
		return err
	}
	for _, n := range p.exp.Notes {
		fmt.Fprintln(stdout, "note:", n)
	}
	fmt.Fprintln(stdout, "ok")
	return nil
}

// preflight fails on what would make runs fail at their start: a batch
// larger than the training set, a missing or mismatched model.init_from, a
// hyperparameter the plugin rejects when configured, a run's file names too
// long for the file system, a results folder that cannot be written. Each
// setting of each method is configured once, on its first run, through the
// same code a run uses (train.Runner.Preflight), so the messages are the
// run's.
func preflight(ctx context.Context, p *plan, sp data.Split, shape []int64) error {
	var errs []error
	keys := make([]string, len(p.runs))
	for i, r := range p.runs {
		keys[i] = r.Key
	}
	if err := train.CheckPaths(filepath.Join(p.exp.ResultsDir, p.exp.Name), keys); err != nil {
		errs = append(errs, fmt.Errorf("%s: %w", p.exp.File, err))
	}
	if err := checkWritable(filepath.Join(p.exp.ResultsDir, p.exp.Name)); err != nil {
		errs = append(errs, fmt.Errorf("results_dir: %w", err))
	} else if err := checkRunFolders(p.exp); err != nil {
		errs = append(errs, err)
	}
	w := tensor.NewWorker(p.exp.Train.Threads)
	defer w.Close()
	var dev tensor.Device
	if err := w.Do(ctx, func() (err error) { dev, err = tensor.ParseDevice(p.exp.Train.Device); return err }); err != nil {
		return errors.Join(append(errs, err)...)
	}
	r := &train.Runner{W: w, Dev: dev, Exp: p.exp, Zoo: model.Builtin(),
		Data: &train.Data{Classes: sp.Train.Classes, Shape: shape, TrainSize: sp.Train.Len(), TestSz: sp.Test.Len()}}
	seen := map[string]bool{}
	for _, run := range p.runs {
		if seen[run.Label] {
			continue
		}
		seen[run.Label] = true
		if err := preflightRun(ctx, r, p, run); err != nil {
			errs = append(errs, fmt.Errorf("%s:%d: %s: %w", p.exp.File, run.Method.Line, run.Key, err))
		}
	}
	return errors.Join(errs...)
}

func preflightRun(ctx context.Context, r *train.Runner, p *plan, run experiment.Run) error {
	m := p.method(run)
	c, err := plugin.Launch(ctx, p.launchSpec(run.Method))
	if err != nil {
		return err
	}
	defer func() { _ = c.Close() }()
	m.Optimizer = c.AsOptimizer()
	return r.Preflight(ctx, run, m)
}

// checkMembers refuses an optimizer that trains member 0 only (it does not
// declare optim.CapMembers) for an experiment with several members, which
// would otherwise train one model and evaluate the others untrained.
func checkMembers(exp *experiment.Experiment, info optim.Info) error {
	if info.Has(optim.CapMembers) {
		return nil
	}
	for _, spec := range exp.Model.Archs {
		if _, members, err := experiment.ParseArch(spec); err == nil && len(members) > 1 {
			return fmt.Errorf("plugin %s trains one member (its Info lacks the %q capability), but archs entry %q has %d members",
				info.Name, optim.CapMembers, spec, len(members))
		}
	}
	return nil
}

// checkRunFolders tries the folders of the results folder that runs create
// files in (curves, training state, final models, TensorBoard when
// eval.tensorboard is on, superseded): one that is a file or cannot be
// written fails every run at its start.
func checkRunFolders(exp *experiment.Experiment) error {
	dir := filepath.Join(exp.ResultsDir, exp.Name)
	subs := []string{curves.Dir, "state", filepath.Dir(train.ModelFile("k")), train.SupersededDir}
	if exp.Eval.TensorBoard {
		subs = append(subs, filepath.Dir(train.TensorBoardDir("k")))
	}
	var errs []error
	for _, sub := range subs {
		if err := checkWritable(filepath.Join(dir, sub)); err != nil {
			if sub == filepath.Dir(train.TensorBoardDir("k")) {
				err = fmt.Errorf("%w (TensorBoard files go there; make it a writable folder or set eval.tensorboard = false)", err)
			} else {
				err = fmt.Errorf("%w (the runs' files go there; make it a writable folder)", err)
			}
			errs = append(errs, fmt.Errorf("results_dir: %w", err))
		}
	}
	return errors.Join(errs...)
}

// checkWritable reports whether files can be created in dir, or, when dir
// does not exist yet, in its nearest existing ancestor (where it would be
// made). It creates and removes one temporary file.
func checkWritable(dir string) error {
	d := dir
	for {
		st, err := os.Stat(d)
		if err == nil {
			if !st.IsDir() {
				return fmt.Errorf("cannot create %s: %s is not a folder", dir, d)
			}
			break
		}
		parent := filepath.Dir(d)
		if parent == d {
			return fmt.Errorf("cannot create %s: %w", dir, err)
		}
		d = parent
	}
	f, err := os.CreateTemp(d, ".optlab-write-test-*")
	if err != nil {
		return fmt.Errorf("cannot write results into %s: %w", dir, err)
	}
	_ = f.Close()
	return os.Remove(f.Name())
}

func runCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	o := runOpts{}
	fs.Var((*setFlag)(&o.sets), "set", setUsage)
	fs.StringVar(&o.pluginDir, "plugins", DefaultPluginDir(), "plugin directory")
	fs.BoolVar(&o.smoke, "smoke", false, "run every run for a few steps on generated data (results to a temporary folder unless --results)")
	shard := fs.String("shard", "", "run only shard i of n of the grid (i/n, 1-based); results go to runs-<i>of<n>.jsonl")
	fs.StringVar(&o.resDir, "results", "", "results folder (default: the experiment's results_dir)")
	fs.StringVar(&o.device, "device", "", "override train.device: auto, cpu, cuda or cuda:N")
	quiet := fs.Bool("q", false, "no progress output")
	stepTimeout := fs.Duration("step-timeout", plugin.DefaultTimeouts().Step, "how long one optimizer step may take before the plugin counts as hung")
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
	results.SetLockWait(results.LockWait{Ctx: ctx, Timeout: *lockTimeout, Log: stderr})
	o.timeouts = plugin.Timeouts{Step: *stepTimeout}
	if *inProcess {
		o.inProcess = builtin.Registry()
	}
	if *shard != "" {
		if o.shardI, o.shardN, err = parseShard(*shard); err != nil {
			return err
		}
	}
	o.progress = stderr
	if *quiet {
		o.progress = nil
	}
	if err := checkDistinctResults(pos, o); err != nil {
		return err
	}
	var files []string
	var recs []results.Record
	var failed, total int
	for _, path := range pos {
		res, err := runExperiment(ctx, path, o, stderr)
		if err != nil {
			return err
		}
		files = append(files, res.files...)
		recs = append(recs, res.recs...)
		failed += res.failed
		total += res.runs
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

// checkDistinctResults refuses, before anything is trained, two experiments
// of one host run that write the same results folder (the same name and
// results_dir, a copied file): the second would take the first's fresh
// runs for its own finished or superseded ones. Files that do not load are
// left to runExperiment to report.
func checkDistinctResults(paths []string, o runOpts) error {
	if len(paths) < 2 || (o.smoke && o.resDir == "") {
		return nil
	}
	seen := map[string]string{} // results folder → experiment file
	for _, path := range paths {
		exp, err := experiment.Load(path, o.sets...)
		if err != nil {
			continue
		}
		dir := exp.ResultsDir
		if o.resDir != "" {
			dir = o.resDir
		}
		dir = filepath.Join(dir, exp.Name)
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
	pluginDir, resDir, device string
	sets                      []string // --set overrides, for every experiment
	smoke                     bool
	shardI, shardN            int
	timeouts                  plugin.Timeouts
	inProcess                 *optim.Registry
	progress                  io.Writer
}

// runResult says what runExperiment did.
type runResult struct {
	files        []string // the experiment's results files
	recs         []results.Record
	runs, failed int
}

// runExperiment runs the unfinished runs of one experiment (of its shard).
func runExperiment(ctx context.Context, path string, o runOpts, stderr io.Writer) (runResult, error) {
	var res runResult
	p, err := prepare(ctx, path, o.sets, o.pluginDir, o.timeouts, o.inProcess, stderr)
	if err != nil {
		return res, err
	}
	exp := p.exp
	if o.device != "" {
		exp.Train.Device = o.device
	}
	if o.resDir != "" {
		exp.ResultsDir = o.resDir
	}
	runs := p.runs
	runsPath := results.Path(exp.ResultsDir, exp.Name)
	if o.shardN > 0 {
		if runs, err = experiment.Shard(runs, o.shardI, o.shardN); err != nil {
			return res, err
		}
		runsPath = filepath.Join(filepath.Dir(runsPath), fmt.Sprintf("runs-%dof%d.jsonl", o.shardI, o.shardN))
	}
	if o.smoke {
		cleanup, err := smokeData(exp, o.resDir == "")
		if err != nil {
			return res, err
		}
		defer cleanup()
		runs = smokeRuns(runs, exp.Train.BatchSize)
		runsPath = filepath.Join(exp.ResultsDir, exp.Name, filepath.Base(runsPath))
	}
	res.runs = len(runs)
	w := tensor.NewWorker(exp.Train.Threads)
	defer w.Close()
	var dev tensor.Device
	if err := w.Do(ctx, func() (err error) { dev, err = tensor.ParseDevice(exp.Train.Device); return err }); err != nil {
		return res, err
	}
	fmt.Fprintf(stderr, "host: %s on %s (%d torch threads; %s): %s\n", tensor.LibtorchDescription(), dev, threads(ctx, w), tensor.BLASDescription(), exp.Name)
	if note := tensor.AutoDeviceNote(exp.Train.Device, dev); note != "" {
		fmt.Fprintln(stderr, "host: note:", note)
	}
	d, err := train.Upload(ctx, w, dev, exp.Data)
	if err != nil {
		return res, fmt.Errorf("%s: data: %w", path, err)
	}
	defer d.Drop()
	if gone, err := results.RemoveTemps(runsPath); err != nil {
		return res, err
	} else if len(gone) > 0 {
		fmt.Fprintf(stderr, "host: removed %d temporary file(s) left by an interrupted host in %s\n", len(gone), filepath.Dir(runsPath))
	}
	// Runs finished in any results file of the experiment (unsharded or any
	// shard) with the same configuration are not run again.
	done, err := finishedRuns(filepath.Dir(runsPath))
	if err != nil {
		return res, err
	}
	r := &train.Runner{W: w, Dev: dev, Exp: exp, Data: d, Zoo: model.Builtin(), Progress: o.progress, Log: stderr,
		Terminal: isTerminal(stderr), Meta: train.Meta{GitCommit: gitCommit(), Host: train.DefaultHost()}}
	if o.smoke {
		r.SmokeSteps = smokeSteps
	}
	if exp.Train.Checkpoint {
		r.StateDir = filepath.Join(filepath.Dir(runsPath), "state")
	}
	interrupted := func() error {
		return fmt.Errorf("%v; finished runs are kept in %s (run the same command again to continue)", context.Cause(ctx), runsPath)
	}
	owner := results.Owner()
	for i, run := range runs {
		if fin, ok := done[run.Key]; ok {
			cfg := r.Record(run, p.method(run)).Config
			diff := results.ConfigDiff(fin.rec.Config, cfg)
			if len(diff) == 0 {
				fmt.Fprintf(stderr, "host: %s already finished in %s; skipping\n", run.Key, filepath.Dir(runsPath))
				continue
			}
			where, moved, fresh, err := supersede(filepath.Dir(runsPath), fin.file, run.Key, cfg)
			if err != nil {
				return res, err
			}
			if fresh {
				fmt.Fprintf(stderr, "host: %s has just been trained again by another host; skipping\n", run.Key)
				continue
			}
			if moved {
				fmt.Fprintf(stderr, "host: %s finished before with another configuration (%s); its result is kept in %s, and the run is trained again\n",
					run.Key, strings.Join(diff, "; "), where)
			}
		}
		if ctx.Err() != nil {
			return res, interrupted()
		}
		// Several hosts may work on one experiment: each run is trained by
		// the host that claims it (a host that died leaves its claims to be
		// taken over).
		mine, err := results.Claim(runsPath, run.Key, owner, results.OwnerGone)
		if err != nil {
			return res, err
		}
		if !mine {
			fmt.Fprintf(stderr, "host: %s is being trained by another host, or has just finished; skipping\n", run.Key)
			continue
		}
		rec, err := runOne(ctx, r, p, run)
		if err != nil && ctx.Err() != nil {
			// Interrupted: not a failure of the method, and not recorded.
			// A run that finished as the signal came (err == nil) is.
			_ = results.Release(runsPath, run.Key, owner)
			return res, fmt.Errorf("%s: %w", run.Key, interrupted())
		}
		// A CUDA error that poisons the process's context (an illegal
		// memory access, a launch failure, …) would fail every later run
		// too: the failed run is recorded and the grid stops.
		var lost error
		if err != nil {
			res.failed++
			if lost = deviceLost(); lost == nil {
				fmt.Fprintf(stderr, "host: run %s failed: %v\n", run.Key, err)
			}
			rec.Status = results.StatusFailed
			rec.Error = err.Error()
			rec.Finished = time.Now().UTC()
		}
		if err := results.Append(runsPath, rec); err != nil {
			return res, fmt.Errorf("saving result of %s: %w", run.Key, err)
		}
		if err := results.Release(runsPath, run.Key, owner); err != nil {
			return res, err
		}
		if lost != nil {
			return res, fmt.Errorf("run %s failed with a CUDA error that leaves the GPU unusable for this process (%s); the %d later runs of the grid were not started, as each would fail the same way. The failure is recorded in %s; run the same command again (a new process) to go on",
				run.Key, firstLine(lost), len(runs)-i-1, runsPath)
		}
	}
	res.files, _ = filepath.Glob(filepath.Join(filepath.Dir(runsPath), "*.jsonl"))
	res.recs, err = results.Read(res.files...)
	return res, err
}

// finished is a run's finished record and the results file holding it.
type finished struct {
	rec  results.Record
	file string
}

// finishedRuns returns the runs recorded as finished (status ok) in the
// results files of an experiment's results folder, by key; the latest
// record wins.
func finishedRuns(dir string) (map[string]finished, error) {
	files, _ := filepath.Glob(filepath.Join(dir, "*.jsonl"))
	done := map[string]finished{}
	for _, f := range files {
		recs, err := results.Read(f)
		if err != nil {
			return nil, err
		}
		for _, rec := range recs {
			if rec.Status == results.StatusOK {
				done[rec.Key] = finished{rec, f}
			}
		}
	}
	return done, nil
}

// supersede moves the records of run key made with another configuration
// than cfg from the results file to <dir>/superseded/runs.jsonl, and its
// training curve, final model and TensorBoard folder into <dir>/superseded/
// with the time appended to their names, so that the run can be trained
// again without losing its old result. It returns the superseded folder and
// whether it moved anything. Whether the run is still to be superseded is
// decided under the results lock on the file as it is then: fresh reports
// that another host has meanwhile trained it with cfg (nothing moved); when
// another host has superseded it and is training it, nothing moves either.
func supersede(dir, file, key string, cfg map[string]any) (where string, moved, fresh bool, err error) {
	sup := filepath.Join(dir, train.SupersededDir)
	stale := func(r results.Record) bool { return len(results.ConfigDiff(r.Config, cfg)) > 0 }
	aside := func() error {
		for _, f := range []string{filepath.Join(curves.Dir, curves.KeyFileName(key)), train.ModelFile(key), train.TensorBoardDir(key)} {
			if _, err := train.KeepAside(dir, f); err != nil {
				return err
			}
		}
		return nil
	}
	n, fresh, err := results.Supersede(file, key, filepath.Join(sup, "runs.jsonl"), stale, aside)
	if err != nil {
		return "", false, false, err
	}
	return sup, n > 0, fresh, nil
}

// runOne launches the method's plugin for one run and trains.
func runOne(ctx context.Context, r *train.Runner, p *plan, run experiment.Run) (results.Record, error) {
	m := p.method(run)
	c, err := plugin.Launch(ctx, p.launchSpec(run.Method))
	if err != nil {
		return r.Record(run, m), err
	}
	defer func() { _ = c.Close() }()
	m.Optimizer = c.AsOptimizer()
	return r.Run(ctx, run, m)
}

func threads(ctx context.Context, w *tensor.Worker) int {
	n := 0
	_ = w.Do(ctx, func() error { n = tensor.Threads(); return nil })
	return n
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

// smokeData points CIFAR and MNIST-format experiments at small generated
// files of their format, caps batch sizes, and (when tmpResults) sends
// results to a temporary folder.
func smokeData(exp *experiment.Experiment, tmpResults bool) (func(), error) {
	tmp, err := os.MkdirTemp("", "optlab-smoke-")
	if err != nil {
		return nil, err
	}
	cleanup := func() { _ = os.RemoveAll(tmp) }
	gen := func(kind string) (string, error) {
		dir := filepath.Join(tmp, kind)
		if data.IsMNISTFormat(kind) {
			return dir, data.WriteMNIST(dir, kind, 5*smokeTrainPerB, smokeTest, 1)
		}
		return dir, data.WriteCIFAR(dir, kind, smokeTrainPerB, smokeTest, 1)
	}
	for _, ds := range []*struct{ name, dir *string }{{&exp.Data.Dataset, &exp.Data.Dir}, {&exp.Data.OOD, &exp.Data.OODDir}} {
		if experiment.HasDir(*ds.name) {
			d, err := gen(*ds.name)
			if err != nil {
				cleanup()
				return nil, fmt.Errorf("generating smoke data: %w", err)
			}
			*ds.dir = d
		}
	}
	exp.Train.BatchSize = min(exp.Train.BatchSize, smokeBatch)
	exp.Train.EvalBatchSize = min(exp.Train.EvalBatchSize, 64)
	if tmpResults {
		exp.ResultsDir = filepath.Join(tmp, "results")
	}
	return cleanup, nil
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

// deviceLost reports a CUDA error of this process after which its GPU is
// unusable (tensor.DeviceLost); tests replace it.
var deviceLost = tensor.DeviceLost

// firstLine is the first line of err's text (libtorch's CUDA errors go on
// with advice over several lines).
func firstLine(err error) string {
	s, _, _ := strings.Cut(err.Error(), "\n")
	return s
}
