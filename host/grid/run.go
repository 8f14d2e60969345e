package grid

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/optlab/optlab/host/experiment"
	"github.com/optlab/optlab/host/model"
	"github.com/optlab/optlab/host/observe"
	"github.com/optlab/optlab/host/results"
	"github.com/optlab/optlab/host/tensor"
	"github.com/optlab/optlab/host/train"
)

// RunOptions say how Run works through a plan's grid.
type RunOptions struct {
	// Shard selects part of the grid (host run --shard i/n); its records
	// go to the shard's file.
	Shard results.Shard
	// Smoke trains every run for a few steps on small generated data
	// (host run --smoke); SmokeResults sends the results to a temporary
	// folder, removed afterwards.
	Smoke, SmokeResults bool
	// Log receives the notices of the grid (skipped runs, failures, …)
	// and of its runs; Progress the progress lines (nil: none), redrawn in
	// place when Terminal.
	Log, Progress io.Writer
	Terminal      bool
	// Meta is the provenance every record gets.
	Meta train.Meta
	// DeviceLost reports a CUDA error of this process after which its GPU
	// is unusable (nil: tensor.DeviceLost).
	DeviceLost func() error
	// LockWait says how to wait for the results lock that another host
	// holds.
	LockWait results.LockWait
	// WarnRuns is the size of a grid (its runs) above which Run warns
	// before it starts and, after the first run it trains, estimates the
	// time the rest takes (0: DefaultWarnRuns).
	WarnRuns int
}

// DefaultWarnRuns is RunOptions.WarnRuns's default: a grid this large is
// more often a sweep written with a list too many than a plan.
const DefaultWarnRuns = 1000

// Result says what Run did.
type Result struct {
	// Files are the experiment's records files; Records what they hold
	// after the grid.
	Files   []string
	Records []results.Record
	// Runs is how many runs the grid (the shard) has, Failed how many
	// failed in this call.
	Runs, Failed int
}

// Run trains the unfinished runs of the plan's grid (of its shard), each
// as results.Store decides: a run finished with the same configuration is
// skipped, one finished with another is superseded and trained again, one
// another host claimed is left to it. A failed run is recorded as failed
// and the grid goes on, unless its error left the GPU unusable. When ctx is
// done, the run in progress is abandoned (not recorded) and Run returns.
func Run(ctx context.Context, p *Plan, o RunOptions) (Result, error) {
	var res Result
	exp, runs := p.Exp, p.Runs
	var err error
	if o.Shard.N > 0 {
		if runs, err = experiment.Shard(runs, o.Shard.I, o.Shard.N); err != nil {
			return res, err
		}
	}
	if o.Smoke {
		cleanup, err := smokeData(exp, o.SmokeResults)
		if err != nil {
			return res, err
		}
		defer cleanup()
		runs = smokeRuns(runs, exp.Train.BatchSize)
	}
	res.Runs = len(runs)
	if o.WarnRuns <= 0 {
		o.WarnRuns = DefaultWarnRuns
	}
	large := len(runs) > o.WarnRuns
	if large {
		fmt.Fprintf(o.Log, "host: warning: the grid has %d runs; check its sweep (host check prints it) or split it with --shard i/n. The time they take is estimated after the first run.\n", len(runs))
	}
	sess, err := Open(ctx, exp)
	if err != nil {
		return res, err
	}
	defer sess.Close()
	fmt.Fprintf(o.Log, "host: %s: %s\n", sess.Describe(ctx), exp.Name)
	if note := sess.DeviceNote(); note != "" {
		fmt.Fprintln(o.Log, "host: note:", note)
	}
	// The data of the first run; a run with other label noise (a sweep of
	// its rate or seed) loads its own before it trains (gridRun.useData).
	if _, err := sess.Upload(ctx, DataSettings(exp, runs)[0]); err != nil {
		return res, fmt.Errorf("%s: %w", exp.File, err)
	}
	store, removed, err := results.Open(results.NewLayout(exp.ResultsDir, exp.Name), results.StoreOptions{Shard: o.Shard, Wait: o.LockWait})
	if len(removed) > 0 {
		fmt.Fprintf(o.Log, "host: removed %d temporary file(s) left by an interrupted host in %s\n", len(removed), store.Layout.Dir)
	}
	if err != nil {
		return res, err
	}
	g := &gridRun{plan: p, sess: sess, store: store, o: o, runner: newRunner(sess, store, o)}
	if g.o.DeviceLost == nil {
		g.o.DeviceLost = tensor.DeviceLost
	}
	for i, run := range runs {
		start := time.Now()
		trained := g.trained
		stop, err := g.run(ctx, run, &res)
		if err != nil {
			return res, err
		}
		if large && trained == 0 && g.trained == 1 {
			took := time.Since(start)
			left := len(runs) - i - 1
			fmt.Fprintf(o.Log, "host: the first run took %s; at that pace the %d runs left take about %s\n",
				took.Round(time.Second), left, (took * time.Duration(left)).Round(time.Minute))
		}
		if stop != nil {
			return res, fmt.Errorf("run %s failed with a CUDA error that leaves the GPU unusable for this process (%s); the %d later runs of the grid were not started, as each would fail the same way. The failure is recorded in %s; run the same command again (a new process) to go on",
				run.Key, firstLine(stop), len(runs)-i-1, store.File())
		}
	}
	res.Files, res.Records, err = store.Records()
	return res, err
}

// gridRun is one call of Run, working through the runs.
type gridRun struct {
	plan   *Plan
	sess   *Session
	store  *results.Store
	runner *train.Runner
	o      RunOptions
	// trained counts the runs this call trained (finished or failed).
	trained int
}

// newRunner is the trainer of the session's runs.
func newRunner(sess *Session, store *results.Store, o RunOptions) *train.Runner {
	obs := observe.Standard(sess.Exp, store.Layout, observe.Progress{W: o.Progress, Terminal: o.Terminal})
	r := &train.Runner{W: sess.W, Dev: sess.Dev, Exp: sess.Exp, Data: sess.Data, Zoo: model.Builtin(), Observers: obs, Log: o.Log, Meta: o.Meta}
	if o.Smoke {
		r.Smoke = &train.Smoke{Epochs: smokeEpochs, StepsPerEpoch: smokeSteps}
	}
	if sess.Exp.Train.Checkpoint {
		r.Checkpoints = &store.Layout
	}
	if sess.Exp.Train.DumpParamsEvery > 0 {
		r.Dumps = &store.Layout
	}
	return r
}

// run takes one run through its life (results.Store.Begin, train, Finish);
// lost is the CUDA error that makes the grid stop after it.
func (g *gridRun) run(ctx context.Context, run experiment.Run, res *Result) (lost, err error) {
	log := g.o.Log
	m := g.plan.Method(run)
	st, err := g.store.Begin(ctx, run.Key, g.runner.Config(run, m).Map())
	if err != nil {
		if ctx.Err() != nil {
			return nil, g.interrupted(ctx)
		}
		return nil, err
	}
	if st.Superseded != "" {
		fmt.Fprintf(log, "host: %s finished before with another configuration (%s); its result is kept in %s, and the run is trained again\n",
			run.Key, strings.Join(st.Diff, "; "), st.Superseded)
	}
	switch st.Skip {
	case results.SkipFinished:
		fmt.Fprintf(log, "host: %s already finished in %s; skipping\n", run.Key, g.store.Layout.Dir)
		return nil, nil
	case results.SkipFresh:
		fmt.Fprintf(log, "host: %s has just been trained again by another host; skipping\n", run.Key)
		return nil, nil
	case results.SkipClaimed:
		fmt.Fprintf(log, "host: %s is being trained by another host, or has just finished; skipping\n", run.Key)
		return nil, nil
	case results.SkipFailed:
		fmt.Fprintf(log, "host: %s failed in another host since this one started; not trying it again (run the grid again to retry it)\n", run.Key)
		return nil, nil
	}
	if err := g.useData(ctx, run); err != nil {
		return nil, fmt.Errorf("%s: %s: %w", g.plan.Exp.File, run.Key, joinErr(err, g.store.Abandon(run.Key)))
	}
	rec, err := g.train(ctx, run, m)
	g.trained++
	if err != nil && ctx.Err() != nil {
		// Interrupted: not a failure of the method, and not recorded.
		// A run that finished as the signal came (err == nil) is.
		return nil, fmt.Errorf("%s: %w", run.Key, joinErr(g.interrupted(ctx), g.store.Abandon(run.Key)))
	}
	// A CUDA error that poisons the process's context (an illegal memory
	// access, a launch failure, …) would fail every later run too: the
	// failed run is recorded and the grid stops.
	if err != nil {
		res.Failed++
		if lost = g.o.DeviceLost(); lost == nil {
			fmt.Fprintf(log, "host: run %s failed: %v\n", run.Key, err)
		}
		rec.Status = results.StatusFailed
		rec.Error = err.Error()
		rec.Finished = time.Now().UTC()
	}
	return lost, g.store.Finish(rec)
}

// useData makes the session's data, and so the runner's, that of run's own
// settings before it trains: the data loaded for the runs before it, or,
// when its label noise differs (a sweep of data.label_noise.rate or seed),
// the data loaded again with its noise, so that its record's LabelNoise is
// its own.
func (g *gridRun) useData(ctx context.Context, run experiment.Run) error {
	d := run.Experiment(g.plan.Exp).Data
	loaded, err := g.sess.Upload(ctx, d)
	if err != nil {
		return err
	}
	if loaded {
		fmt.Fprintf(g.o.Log, "host: %s: data loaded again for its label noise (%s)\n", run.Key, d.LabelNoise)
	}
	g.runner.Data = g.sess.Data
	return nil
}

// train launches the method's plugin for one run and trains it. Its
// record is made by the runner (train.Runner.Record), once: in Run, or
// here for a plugin that did not start.
func (g *gridRun) train(ctx context.Context, run experiment.Run, m train.Optimizer) (results.Record, error) {
	c, err := g.plan.Launch(ctx, run.Method)
	if err != nil {
		return g.runner.Record(run, m), err
	}
	defer func() { _ = c.Close() }()
	m.Optimizer = c.AsOptimizer()
	rec, err := g.runner.Run(ctx, run, m)
	if err != nil {
		return rec, err
	}
	// An Exec the plugin sent outside the host's calls into it (from a
	// thread left running after its last Step) was refused; the run
	// fails with it. The plugin is closed first, so that one sent at any
	// time before its record is made is seen.
	_ = c.Close()
	if err := c.Refused(); err != nil {
		return rec, err
	}
	return rec, nil
}

// interrupted is the error of a grid stopped by ctx.
func (g *gridRun) interrupted(ctx context.Context) error {
	return fmt.Errorf("%v; finished runs are kept in %s (run the same command again to continue)", context.Cause(ctx), g.store.File())
}

// joinErr is err, with also's text added when it is not nil.
func joinErr(err, also error) error {
	if also == nil {
		return err
	}
	return fmt.Errorf("%w (and releasing its claim: %v)", err, also)
}

// firstLine is the first line of err's text (libtorch's CUDA errors go on
// with advice over several lines).
func firstLine(err error) string {
	s, _, _ := strings.Cut(err.Error(), "\n")
	return s
}
