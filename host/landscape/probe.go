package landscape

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/optlab/optlab/host/checkpoint/statedict"
	"github.com/optlab/optlab/host/engine"
	"github.com/optlab/optlab/host/model"
	"github.com/optlab/optlab/sdk/optim"
)

// probe scans one checkpoint: the line (and plane) around it, its CSV
// (and plane PNG) files, and its summary.
func (s *scan) probe(ctx context.Context, cp loadedCheckpoint) (CheckpointSummary, Line, error) {
	cs := CheckpointSummary{Label: cp.label, Path: cp.path, Arch: cp.arch, RunKey: cp.runKey}
	eng, err := s.engine(ctx, cp)
	if err != nil {
		return cs, Line{}, err
	}
	defer eng.Close()
	sc, layout, err := s.scanner(ctx, eng)
	if err != nil {
		return cs, Line{}, err
	}
	dx, err := Direction(sc.Theta, layout, s.o.Seed, 0)
	if err != nil {
		return cs, Line{}, err
	}
	pts, err := s.line(ctx, sc, dx, cp.label, &cs)
	if err != nil {
		return cs, Line{}, err
	}
	if s.o.Plane {
		if err := s.plane(ctx, sc, layout, dx, cp.label, &cs); err != nil {
			return cs, Line{}, err
		}
	}
	return cs, Line{Label: cp.label, Points: pts}, nil
}

// engine builds a one-member engine of the checkpoint's architecture on
// the session's device, with the scan's numerics, and imports the
// checkpoint's tensors into it. The caller closes it.
func (s *scan) engine(ctx context.Context, cp loadedCheckpoint) (*engine.Engine, error) {
	d := s.sess.Data
	mod, err := model.Builtin().Make(ctx, s.sess.W, s.sess.Dev, cp.arch, d.Classes, d.Shape)
	if err != nil {
		return nil, err
	}
	err = mod.SetNumerics(s.num)
	var eng *engine.Engine
	if err == nil {
		eng, err = engine.New(ctx, s.sess.W, engine.Config{Device: s.sess.Dev}, []*model.Model{mod})
	}
	if err != nil {
		_ = s.sess.W.Do(ctx, func() error { mod.Release(); return nil })
		return nil, err
	}
	if err := statedict.Import(ctx, eng, 0, cp.tensors); err != nil {
		eng.Close()
		return nil, err
	}
	return eng, nil
}

// scanner returns a Scanner around the parameters of eng's member and
// their layout.
func (s *scan) scanner(ctx context.Context, eng *engine.Engine) (*Scanner, []optim.Tensor, error) {
	theta, err := HostParams(ctx, eng, 0)
	if err != nil {
		return nil, nil, err
	}
	lay, err := eng.Layout(ctx)
	if err != nil {
		return nil, nil, err
	}
	return &Scanner{Theta: theta, Eval: s.evaluator(eng)}, lay.Members[0].Tensors, nil
}

// evaluator evaluates eng's member on the training subset and the test
// set, as the options say.
func (s *scan) evaluator(eng *engine.Engine) Evaluator {
	d := s.sess.Data
	return func(ctx context.Context, params []float32) (Metrics, error) {
		tr, err := EvalAt(ctx, eng, 0, params, d.Train, EvalOptions{Samples: s.o.Samples, Batch: s.o.Batch})
		if err != nil {
			return Metrics{}, fmt.Errorf("training subset: %w", err)
		}
		te, err := EvalAt(ctx, eng, 0, params, d.Test, EvalOptions{Samples: s.o.TestSamples, Batch: s.o.Batch})
		if err != nil {
			return Metrics{}, fmt.Errorf("test set: %w", err)
		}
		return Metrics{TrainLoss: tr.Loss, TrainAcc: tr.Acc, TestLoss: te.Loss, TestAcc: te.Acc}, nil
	}
}

// line scans along dx, sets the centre and the line's sharpness in cs and
// writes the points to label's _1d.csv, added to cs.Files.
func (s *scan) line(ctx context.Context, sc *Scanner, dx []float64, label string, cs *CheckpointSummary) ([]Point, error) {
	sc.Progress = progressPrinter(s.o.Progress, label+" 1-D")
	pts, err := sc.Line(ctx, dx, s.axis)
	if err != nil {
		return nil, err
	}
	for _, p := range pts {
		if p.Alpha == 0 {
			cs.Centre = p.Metrics
		}
	}
	if cs.Sharpness, err = SharpnessOf(pts, s.o.Radius, TrainLoss); err != nil {
		return nil, err
	}
	if cs.TestSharpness, err = SharpnessOf(pts, s.o.Radius, TestLoss); err != nil {
		return nil, err
	}
	name := fileLabel(label) + "_1d.csv"
	if err := WriteCSV(filepath.Join(s.o.Out, name), pts, false); err != nil {
		return nil, err
	}
	cs.Files = append(cs.Files, name)
	return pts, nil
}

// plane scans the plane of dx and a second direction, sets the plane's
// sharpness in cs and writes label's _2d.csv and _2d.png, added to
// cs.Files.
func (s *scan) plane(ctx context.Context, sc *Scanner, layout []optim.Tensor, dx []float64, label string, cs *CheckpointSummary) error {
	dy, err := Direction(sc.Theta, layout, s.o.Seed, 1)
	if err != nil {
		return err
	}
	sc.Progress = progressPrinter(s.o.Progress, label+" 2-D")
	plane, err := sc.Plane(ctx, dx, dy, s.axis, s.axis)
	if err != nil {
		return err
	}
	ps, err := SharpnessOf(plane, s.o.Radius, TrainLoss)
	if err != nil {
		return err
	}
	cs.PlaneSharpness = &ps
	file := fileLabel(label)
	csvName, pngName := file+"_2d.csv", file+"_2d.png"
	if err := WriteCSV(filepath.Join(s.o.Out, csvName), plane, true); err != nil {
		return err
	}
	if err := PlotPlane(filepath.Join(s.o.Out, pngName), label, plane); err != nil {
		return err
	}
	cs.Files = append(cs.Files, csvName, pngName)
	return nil
}
