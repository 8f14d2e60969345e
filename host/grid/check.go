package grid

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/optlab/optlab/host/data"
	"github.com/optlab/optlab/host/data/devset"
	"github.com/optlab/optlab/host/experiment"
	"github.com/optlab/optlab/host/model"
	"github.com/optlab/optlab/host/results"
	"github.com/optlab/optlab/host/train"
)

// Preflight fails on what would make runs fail at their start: a batch
// larger than the training set, a missing or mismatched model.init_from, a
// hyperparameter the plugin rejects when configured, a run's file names too
// long for the file system, a results folder that cannot be written. Each
// setting of each method is configured once, on its first run, through the
// same code a run uses (train.Runner.Preflight), so the messages are the
// run's.
func Preflight(ctx context.Context, p *Plan, sp data.Split) error {
	shape := make([]int64, len(sp.Train.Shape))
	for i, v := range sp.Train.Shape {
		shape[i] = int64(v)
	}
	var errs []error
	keys := make([]string, len(p.Runs))
	for i, r := range p.Runs {
		keys[i] = r.Key
	}
	l := results.NewLayout(p.Exp.ResultsDir, p.Exp.Name)
	if err := l.CheckPaths(keys); err != nil {
		errs = append(errs, fmt.Errorf("%s: %w", p.Exp.File, err))
	}
	if err := checkWritable(l.Dir); err != nil {
		errs = append(errs, fmt.Errorf("results_dir: %w", err))
	} else if err := checkRunFolders(l, p.Exp.Eval.TensorBoard); err != nil {
		errs = append(errs, err)
	}
	sess, err := Open(ctx, p.Exp)
	if err != nil {
		return errors.Join(append(errs, err)...)
	}
	defer sess.Close()
	r := &train.Runner{W: sess.W, Dev: sess.Dev, Exp: p.Exp, Zoo: model.Builtin(),
		Data: &devset.Data{Classes: sp.Train.Classes, Shape: shape, TrainSize: sp.Train.Len(), TestSize: sp.Test.Len(), LabelNoise: sp.Noise}}
	seen := map[string]bool{}
	for _, run := range p.Runs {
		if seen[run.Label] {
			continue
		}
		seen[run.Label] = true
		if err := preflightRun(ctx, r, p, run); err != nil {
			errs = append(errs, fmt.Errorf("%s:%d: %s: %w", p.Exp.File, run.Method.Line, run.Key, err))
		}
	}
	return errors.Join(errs...)
}

// preflightRun configures run's method on its first run.
func preflightRun(ctx context.Context, r *train.Runner, p *Plan, run experiment.Run) error {
	m := p.Method(run)
	c, err := p.Launch(ctx, run.Method)
	if err != nil {
		return err
	}
	defer func() { _ = c.Close() }()
	m.Optimizer = c.AsOptimizer()
	return r.Preflight(ctx, run, m)
}

// checkRunFolders tries the folders of the results folder that runs create
// files in (curves, training state, final models, TensorBoard when
// eval.tensorboard is on, superseded): one that is a file or cannot be
// written fails every run at its start.
func checkRunFolders(l results.Layout, tensorBoard bool) error {
	var errs []error
	for _, sub := range results.RunFolders(tensorBoard) {
		if err := checkWritable(filepath.Join(l.Dir, sub)); err != nil {
			if sub == results.TensorBoardDir {
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
