package landscape

import (
	"context"
	"fmt"
	"io"
	"math"
	"path/filepath"

	"github.com/optlab/optlab/host/experiment"
	"github.com/optlab/optlab/host/grid"
	"github.com/optlab/optlab/host/model"
	"github.com/optlab/optlab/host/results"
	"github.com/optlab/optlab/host/tensor"
	"github.com/optlab/optlab/host/train"
)

// Options say what Run scans, how and where it writes.
type Options struct {
	// Checkpoints are the safetensors files to probe, each along the same
	// directions.
	Checkpoints []string
	// Arch is the checkpoints' architecture; empty: each one's metadata,
	// else the experiment's only architecture.
	Arch string
	// Steps is the number of points per axis on [−Radius, Radius]; Radius
	// the largest |α| (and |β|), in units of the filter-normalized
	// direction, and the radius of the sharpness.
	Steps  int
	Radius float64
	// Plane also scans the plane of two directions (Steps² points).
	Plane bool
	// Samples and TestSamples limit the evaluation at every point to the
	// first samples of the training and test sets (0: all).
	Samples, TestSamples int64
	// Seed is the seed of the random directions.
	Seed uint64
	// Out is the output folder.
	Out string
	// Batch is the evaluation batch size (EvalAt's default when 0).
	Batch int64
	// Log receives the notices (how the device was chosen, a sharpness not
	// recorded); Progress the progress lines (nil: none).
	Log, Progress io.Writer
	// LockWait says how to wait for the results lock when the sharpness
	// is recorded.
	LockWait results.LockWait
}

// Run probes each checkpoint of the experiment exp along filter-normalized
// random directions (the same ones for every checkpoint) and writes, to
// o.Out, each one's scan as CSV (and its plane as PNG), the lines' plot
// landscape_1d.png and the Summary it returns, landscape.json. A
// checkpoint whose metadata names its run gets its train-loss sharpness
// within the radius added to that run's record in runs.jsonl.
func Run(ctx context.Context, exp *experiment.Experiment, o Options) (Summary, error) {
	cps, err := loadCheckpoints(o.Checkpoints, o.Arch, exp)
	if err != nil {
		return Summary{}, err
	}
	s := &scan{o: o, exp: exp, runs: results.NewLayout(exp.ResultsDir, exp.Name).Runs()}
	if s.o.Progress == nil {
		s.o.Progress = io.Discard
	}
	if s.num, err = train.ModelNumerics(exp); err != nil {
		return Summary{}, err
	}
	if s.axis, err = Axis(o.Steps, o.Radius); err != nil {
		return Summary{}, err
	}
	if s.sess, err = openSession(ctx, exp, o.Log); err != nil {
		return Summary{}, err
	}
	defer s.sess.Close()
	sum, lines, err := s.checkpoints(ctx, cps)
	if err != nil {
		return Summary{}, err
	}
	if err := PlotLines(filepath.Join(o.Out, "landscape_1d.png"), lines); err != nil {
		return Summary{}, err
	}
	if err := WriteSummary(filepath.Join(o.Out, "landscape.json"), sum); err != nil {
		return Summary{}, err
	}
	return sum, nil
}

// openSession opens a session for exp, notes on log how its device was
// chosen, sets the experiment's determinism and precision for the forward
// passes and uploads the data.
func openSession(ctx context.Context, exp *experiment.Experiment, log io.Writer) (*grid.Session, error) {
	sess, err := grid.Open(ctx, exp)
	if err != nil {
		return nil, err
	}
	if note := sess.DeviceNote(); note != "" {
		fmt.Fprintln(log, "host: note:", note)
	}
	tr := exp.Train
	if err := tensor.SetNumerics(tensor.Numerics{Deterministic: tr.Deterministic, CudnnBenchmark: tr.CudnnBenchmark, TF32: tr.TF32}); err != nil {
		sess.Close()
		return nil, err
	}
	if _, err := sess.Upload(ctx, exp.Data); err != nil {
		sess.Close()
		return nil, err
	}
	return sess, nil
}

// scan is one call of Run, with what its checkpoints share.
type scan struct {
	o    Options
	exp  *experiment.Experiment
	sess *grid.Session
	// num is how the models compute: the experiment's train.precision and
	// model.memory_format, as in its runs.
	num model.Numerics
	// axis are the points of every axis.
	axis []float64
	// runs is the experiment's runs.jsonl, where sharpness is recorded.
	runs string
}

// checkpoints probes every checkpoint and records its sharpness, returning
// the summary and the lines to plot.
func (s *scan) checkpoints(ctx context.Context, cps []loadedCheckpoint) (Summary, []Line, error) {
	sum := s.summary()
	var lines []Line
	for _, cp := range cps {
		fmt.Fprintf(s.o.Progress, "host: landscape of %s (%s) on %s\n", cp.path, cp.arch, s.sess.Dev)
		cs, line, err := s.probe(ctx, cp)
		if err != nil {
			return Summary{}, nil, fmt.Errorf("%s: %w", cp.path, err)
		}
		if err := s.record(cp, &cs, sum.Metric); err != nil {
			return Summary{}, nil, err
		}
		sum.Checkpoints = append(sum.Checkpoints, cs)
		lines = append(lines, line)
	}
	return sum, lines, nil
}

// summary is the scan's Summary before any checkpoint is probed.
func (s *scan) summary() Summary {
	d := s.sess.Data
	return Summary{
		Experiment: s.exp.Name,
		Directions: "Gaussian, filter-normalized per conv/linear output filter (Li et al. 2018); biases and BatchNorm parameters 0",
		Loss:       "mean cross-entropy without label smoothing; BatchNorm in eval mode (the checkpoint's running statistics); no augmentation" + numericsNote(s.num),
		Seed:       s.o.Seed, Steps: s.o.Steps, Radius: s.o.Radius, Plane: s.o.Plane,
		TrainSamples: evaluated(s.o.Samples, d.Train.N), TestSamples: evaluated(s.o.TestSamples, d.Test.N),
		Metric: MetricName(s.o.Radius),
	}
}

// record adds the train-loss sharpness of cs to the record of the run cp's
// metadata names, as metric, and sets cs.Recorded when it did. A
// checkpoint of another experiment, a sharpness that is not finite and a
// run with no finished record are noted on the log and left out.
func (s *scan) record(cp loadedCheckpoint, cs *CheckpointSummary, metric string) error {
	if cp.runKey == "" {
		return nil
	}
	switch {
	case cp.experiment != "" && cp.experiment != s.exp.Name:
		fmt.Fprintf(s.o.Log, "host: %s belongs to experiment %q, not %q: its sharpness is not recorded in %s\n", cp.path, cp.experiment, s.exp.Name, s.runs)
	case math.IsNaN(cs.Sharpness.Increase) || math.IsInf(cs.Sharpness.Increase, 0):
		fmt.Fprintf(s.o.Log, "host: %s: the sharpness is not finite; not recorded in %s\n", cp.path, s.runs)
	default:
		ok, err := RecordMetric(s.o.LockWait, s.runs, s.exp.Name, cp.runKey, metric, cs.Sharpness.Increase)
		if err != nil {
			return fmt.Errorf("%s: recording %s: %w", cp.path, metric, err)
		}
		if !ok {
			fmt.Fprintf(s.o.Log, "host: %s: %s has no finished run %q; its sharpness is only in landscape.json\n", cp.path, s.runs, cp.runKey)
		}
		cs.Recorded = ok
	}
	return nil
}

// numericsNote names non-default numerics for the landscape's summary.
func numericsNote(n model.Numerics) string {
	if n == (model.Numerics{}) {
		return ""
	}
	return "; " + n.String()
}

// evaluated returns how many of n samples a limit of k evaluates.
func evaluated(k, n int64) int64 {
	if k > 0 && k < n {
		return k
	}
	return n
}

// progressPrinter prints "label: done/total" about ten times per scan.
func progressPrinter(w io.Writer, label string) func(done, total int) {
	return func(done, total int) {
		if step := max(total/10, 1); done%step == 0 || done == total {
			fmt.Fprintf(w, "host:   %s: %d/%d points\n", label, done, total)
		}
	}
}
