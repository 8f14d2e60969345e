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
	"github.com/optlab/optlab/host/tensor"
	"github.com/optlab/optlab/host/train"
)

// Check is host check's work on a plan, in steps, so that the host
// command can print what each step found before it takes the next:
// NewCheck loads the data of the grid's first data setting into host
// memory and checks it against the experiment; LabelNoise says what the
// label noise of each data setting does; Params counts an arch's
// parameters; Preflight tries what every run needs at its start. The
// torch worker that Params (for a TorchScript arch) and Preflight need is
// a Session's, started the first time one of them needs it. Close the
// Check when done.
type Check struct {
	// Plan is the plan checked.
	Plan *Plan
	// Split is the data of the plan's first data setting (DataSettings),
	// in host memory.
	Split data.Split
	// datas are the data settings of the plan's runs (DataSettings).
	datas []experiment.Data
	// sess is the session of Params and Preflight (nil until one needs
	// it); its device is parsed by Preflight.
	sess *Session
	// params are the parameter counts of the archs counted so far.
	params map[string]int64
}

// NewCheck loads the data of the first data setting of p's runs (data.Load,
// into host memory, not onto the device) and checks the experiment's keys
// that need it (experiment.CheckSplit).
func NewCheck(p *Plan) (*Check, error) {
	c := &Check{Plan: p, datas: DataSettings(p.Exp, p.Runs), params: map[string]int64{}}
	sp, err := data.Load(c.datas[0].Spec())
	if err != nil {
		return nil, fmt.Errorf("%s: data: %w", p.Exp.File, err)
	}
	if err := experiment.CheckSplit(p.Exp, sp); err != nil {
		return nil, fmt.Errorf("%s: %w", p.Exp.File, err)
	}
	c.Split = sp
	return c, nil
}

// Shape is the shape of one input sample of the checked data.
func (c *Check) Shape() []int64 {
	shape := make([]int64, len(c.Split.Train.Shape))
	for i, v := range c.Split.Train.Shape {
		shape[i] = int64(v)
	}
	return shape
}

// NoiseEffect is the label noise of one data setting and what it does to
// the training labels.
type NoiseEffect struct {
	// Noise is the setting's [data.label_noise].
	Noise experiment.LabelNoise
	// Stats is what the noise did; nil when Noise is not Active.
	Stats *data.NoiseStats
}

// LabelNoise returns the label noise of each data setting of the plan's
// runs (DataSettings: several when the runs sweep the noise's rate or
// seed), in grid order, and what it does: the data of each setting with
// noise but the first is loaded again for it.
func (c *Check) LabelNoise() ([]NoiseEffect, error) {
	out := make([]NoiseEffect, len(c.datas))
	for i, d := range c.datas {
		out[i].Noise = d.LabelNoise
		if !d.LabelNoise.Active() {
			continue
		}
		out[i].Stats = c.Split.Noise
		if i > 0 {
			sp, err := data.Load(d.Spec())
			if err != nil {
				return nil, fmt.Errorf("%s: data: %w", c.Plan.Exp.File, err)
			}
			out[i].Stats = sp.Noise
		}
	}
	return out, nil
}

// Params counts the parameters of one member of arch for the checked
// data, once per arch. A TorchScript file is loaded to count them, on the
// CPU, by the Check's session's worker.
func (c *Check) Params(ctx context.Context, arch string) (int64, error) {
	if n, ok := c.params[arch]; ok {
		return n, nil
	}
	var w *tensor.Worker
	if _, script := model.TorchScriptPath(arch); script {
		w = c.session().W
	}
	m, err := model.Builtin().Make(ctx, w, tensor.CPU, arch, c.Split.Train.Classes, c.Shape())
	if err != nil {
		return 0, err
	}
	if w != nil {
		_ = w.Do(ctx, func() error { m.Release(); return nil })
	}
	c.params[arch] = m.Numel
	return m.Numel, nil
}

// session returns the Check's session, starting its worker when there is
// none yet (its device is left to Preflight).
func (c *Check) session() *Session {
	if c.sess == nil {
		c.sess = start(c.Plan.Exp)
	}
	return c.sess
}

// Close stops the Check's session, if it started one.
func (c *Check) Close() {
	if c.sess != nil {
		c.sess.Close()
		c.sess = nil
	}
}

// Preflight fails on what would make runs fail at their start: a batch
// larger than the training set, a missing or mismatched model.init_from, a
// hyperparameter the plugin rejects when configured, a run's file names too
// long for the file system, a results folder that cannot be written, a
// train.device that cannot be used. Each setting of each method is
// configured once, on its first run, through the same code a run uses
// (train.Runner.Preflight), so the messages are the run's.
func (c *Check) Preflight(ctx context.Context) error {
	p, sp := c.Plan, c.Split
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
	} else if err := checkRunFolders(l, p.Exp.Eval.TensorBoard, p.Exp.Train.DumpParamsEvery > 0); err != nil {
		errs = append(errs, err)
	}
	sess := c.session()
	if err := sess.openDevice(ctx); err != nil {
		return errors.Join(append(errs, err)...)
	}
	r := &train.Runner{W: sess.W, Dev: sess.Dev, Exp: p.Exp, Zoo: model.Builtin(),
		Data: &devset.Data{Classes: sp.Train.Classes, Shape: c.Shape(), TrainSize: sp.Train.Len(), TestSize: sp.Test.Len(), LabelNoise: sp.Noise}}
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
// eval.tensorboard is on, parameter dumps when train.dump_params_every is,
// superseded): one that is a file or cannot be written fails every run at
// its start.
func checkRunFolders(l results.Layout, tensorBoard, dumps bool) error {
	var errs []error
	for _, sub := range results.RunFolders(tensorBoard, dumps) {
		if err := checkWritable(filepath.Join(l.Dir, sub)); err != nil {
			switch sub {
			case results.TensorBoardDir:
				err = fmt.Errorf("%w (TensorBoard files go there; make it a writable folder or set eval.tensorboard = false)", err)
			case results.ParamsDir:
				err = fmt.Errorf("%w (the parameter dumps go there; make it a writable folder or set train.dump_params_every = 0)", err)
			default:
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
