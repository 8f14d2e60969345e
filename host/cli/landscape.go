package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"path/filepath"
	"strings"
	"text/tabwriter"

	"github.com/optlab/optlab/host/checkpoint"
	"github.com/optlab/optlab/host/checkpoint/statedict"
	"github.com/optlab/optlab/host/data/devset"
	"github.com/optlab/optlab/host/engine"
	"github.com/optlab/optlab/host/experiment"
	"github.com/optlab/optlab/host/grid"
	"github.com/optlab/optlab/host/landscape"
	"github.com/optlab/optlab/host/model"
	"github.com/optlab/optlab/host/results"
	"github.com/optlab/optlab/host/tensor"
	"github.com/optlab/optlab/host/train"
)

// Checkpoint metadata keys the landscape command reads: the run a
// checkpoint belongs to (its key in runs.jsonl), its experiment and the
// members' architectures. Each is looked up under the bare name first,
// then with the "optlab." prefix the engine's own keys use.
const (
	metaRunKey     = "run_key"
	metaExperiment = "experiment"
	metaArchs      = "archs"
	metaPrefix     = "optlab."
)

// landscapeUsage is the synopsis of host landscape.
const landscapeUsage = "usage: host landscape --checkpoint A.safetensors [--checkpoint B.safetensors …] --experiment E.toml [--steps 21] [--radius 1] [--2d] [--samples 2048] [--out DIR]"

// stringList is a repeatable string flag.
type stringList []string

func (l *stringList) String() string { return strings.Join(*l, ",") }

func (l *stringList) Set(v string) error {
	*l = append(*l, v)
	return nil
}

// landscapeOpts are the parsed flags of host landscape.
type landscapeOpts struct {
	checkpoints           []string
	experiment            string
	steps                 int
	radius                float64
	plane                 bool
	samples, testSamples  int64
	seed                  uint64
	out, resultsDir, arch string
	device                string
	batch                 int64
	quiet                 bool
	// num is how the models compute: the experiment's train.precision and
	// model.memory_format, as in its runs.
	num model.Numerics
}

// loadedCheckpoint is a checkpoint file's first member, ready to import.
type loadedCheckpoint struct {
	path, label, arch, runKey, experiment string
	tensors                               map[string]checkpoint.Tensor
}

// landscapeCmd implements host landscape: the loss of each checkpoint along
// filter-normalized random directions (the same ones for every
// checkpoint), written as CSV, PNG and landscape.json, with the train-loss
// sharpness within the radius added to the checkpoint's run in runs.jsonl
// when its metadata names the run.
func landscapeCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var o landscapeOpts
	var cks stringList
	fs := flag.NewFlagSet("landscape", flag.ContinueOnError)
	fs.Var(&cks, "checkpoint", "safetensors checkpoint to probe (repeat for several; each is probed along the same directions)")
	fs.StringVar(&o.experiment, "experiment", "", "experiment file whose dataset (and arch, when the checkpoint does not name it) the checkpoints belong to")
	fs.IntVar(&o.steps, "steps", 21, "points per axis on [−radius, radius] (0 is always included)")
	fs.Float64Var(&o.radius, "radius", 1, "largest |α| (and |β|), in units of the filter-normalized direction")
	fs.BoolVar(&o.plane, "2d", false, "also scan the plane of two directions (steps² points)")
	fs.Int64Var(&o.samples, "samples", 2048, "training samples evaluated at every point (the first n; 0 = all)")
	fs.Int64Var(&o.testSamples, "test-samples", 0, "test samples evaluated at every point (the first n; 0 = all)")
	fs.Uint64Var(&o.seed, "seed", 1, "seed of the random directions")
	fs.StringVar(&o.out, "out", "", "output folder (default <results_dir>/<experiment>/landscape)")
	fs.StringVar(&o.resultsDir, "results", "", "results folder (default: the experiment's results_dir)")
	fs.StringVar(&o.arch, "arch", "", "architecture of the checkpoints (default: from their metadata, else the experiment's only arch)")
	fs.StringVar(&o.device, "device", "", "override train.device: auto, cpu, cuda or cuda:N")
	fs.Int64Var(&o.batch, "batch", 0, "evaluation batch size (default train.eval_batch_size)")
	fs.BoolVar(&o.quiet, "q", false, "no progress output")
	pos, err := parseInterleaved(fs, args, stdout)
	if err != nil {
		return err
	}
	o.checkpoints = cks
	switch {
	case len(pos) > 0:
		return fmt.Errorf("unexpected arguments %q\n%s", pos, landscapeUsage)
	case len(o.checkpoints) == 0 || o.experiment == "":
		return errors.New(landscapeUsage)
	case o.steps < 1:
		return fmt.Errorf("--steps %d: want at least 1", o.steps)
	case !(o.radius > 0) || math.IsInf(o.radius, 0):
		return fmt.Errorf("--radius %v: want a positive number", o.radius)
	case o.samples < 0 || o.testSamples < 0:
		return errors.New("--samples and --test-samples must be ≥ 0")
	}
	exp, err := grid.Load(o.experiment)
	if err != nil {
		return err
	}
	if o.device != "" {
		exp.Train.Device = o.device
	}
	if o.resultsDir != "" {
		exp.ResultsDir = o.resultsDir
	}
	if o.out == "" {
		o.out = results.NewLayout(exp.ResultsDir, exp.Name).Landscape()
	}
	if o.batch <= 0 {
		o.batch = int64(exp.Train.EvalBatchSize)
	}
	cps, err := loadCheckpoints(o.checkpoints, o.arch, exp)
	if err != nil {
		return err
	}
	if o.num, err = train.ModelNumerics(exp); err != nil {
		return err
	}
	axis, err := landscape.Axis(o.steps, o.radius)
	if err != nil {
		return err
	}
	sess, err := grid.Open(ctx, exp)
	if err != nil {
		return err
	}
	defer sess.Close()
	w, dev := sess.W, sess.Dev
	if note := sess.DeviceNote(); note != "" {
		fmt.Fprintln(stderr, "host: note:", note)
	}
	// The forward passes use the experiment's determinism and precision.
	tr := exp.Train
	if err := tensor.SetNumerics(tensor.Numerics{Deterministic: tr.Deterministic, CudnnBenchmark: tr.CudnnBenchmark, TF32: tr.TF32}); err != nil {
		return err
	}
	if err := sess.Upload(ctx); err != nil {
		return err
	}
	d := sess.Data
	var progress io.Writer = stderr
	if o.quiet {
		progress = io.Discard
	}
	sum := landscape.Summary{
		Experiment: exp.Name,
		Directions: "Gaussian, filter-normalized per conv/linear output filter (Li et al. 2018); biases and BatchNorm parameters 0",
		Loss:       "mean cross-entropy without label smoothing; BatchNorm in eval mode (the checkpoint's running statistics); no augmentation" + numericsNote(o.num),
		Seed:       o.seed, Steps: o.steps, Radius: o.radius, Plane: o.plane,
		TrainSamples: evaluated(o.samples, d.Train.N), TestSamples: evaluated(o.testSamples, d.Test.N),
		Metric: landscape.MetricName(o.radius),
	}
	var lines []landscape.Line
	runsPath := results.NewLayout(exp.ResultsDir, exp.Name).Runs()
	for _, cp := range cps {
		fmt.Fprintf(progress, "host: landscape of %s (%s) on %s\n", cp.path, cp.arch, dev)
		cs, line, err := probeCheckpoint(ctx, w, dev, d, cp, axis, o, progress)
		if err != nil {
			return fmt.Errorf("%s: %w", cp.path, err)
		}
		if cp.runKey != "" {
			switch {
			case cp.experiment != "" && cp.experiment != exp.Name:
				fmt.Fprintf(stderr, "host: %s belongs to experiment %q, not %q: its sharpness is not recorded in %s\n", cp.path, cp.experiment, exp.Name, runsPath)
			case math.IsNaN(cs.Sharpness.Increase) || math.IsInf(cs.Sharpness.Increase, 0):
				fmt.Fprintf(stderr, "host: %s: the sharpness is not finite; not recorded in %s\n", cp.path, runsPath)
			default:
				ok, err := landscape.RecordMetric(runsPath, exp.Name, cp.runKey, sum.Metric, cs.Sharpness.Increase)
				if err != nil {
					return fmt.Errorf("%s: recording %s: %w", cp.path, sum.Metric, err)
				}
				if !ok {
					fmt.Fprintf(stderr, "host: %s: %s has no finished run %q; its sharpness is only in landscape.json\n", cp.path, runsPath, cp.runKey)
				}
				cs.Recorded = ok
			}
		}
		sum.Checkpoints = append(sum.Checkpoints, cs)
		lines = append(lines, line)
	}
	if err := landscape.PlotLines(filepath.Join(o.out, "landscape_1d.png"), lines); err != nil {
		return err
	}
	if err := landscape.WriteSummary(filepath.Join(o.out, "landscape.json"), sum); err != nil {
		return err
	}
	printLandscape(stdout, sum, o.out)
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

// probeCheckpoint scans one checkpoint: the line (and plane) around it,
// its CSV (and plane PNG) files, and its summary.
func probeCheckpoint(ctx context.Context, w *tensor.Worker, dev tensor.Device, d *devset.Data, cp loadedCheckpoint,
	axis []float64, o landscapeOpts, progress io.Writer) (landscape.CheckpointSummary, landscape.Line, error) {
	cs := landscape.CheckpointSummary{Label: cp.label, Path: cp.path, Arch: cp.arch, RunKey: cp.runKey}
	mod, err := model.Builtin().New(cp.arch, d.Classes, d.Shape)
	if err != nil {
		return cs, landscape.Line{}, err
	}
	if err := mod.SetNumerics(o.num); err != nil {
		return cs, landscape.Line{}, err
	}
	eng, err := engine.New(ctx, w, engine.Config{Device: dev}, []*model.Model{mod})
	if err != nil {
		return cs, landscape.Line{}, err
	}
	defer eng.Close()
	if err := statedict.Import(ctx, eng, 0, cp.tensors); err != nil {
		return cs, landscape.Line{}, err
	}
	theta, err := landscape.HostParams(ctx, eng, 0)
	if err != nil {
		return cs, landscape.Line{}, err
	}
	lay, err := eng.Layout(ctx)
	if err != nil {
		return cs, landscape.Line{}, err
	}
	layout := lay.Members[0].Tensors
	eval := func(ctx context.Context, params []float32) (landscape.Metrics, error) {
		tr, err := landscape.EvalAt(ctx, eng, 0, params, d.Train, landscape.EvalOptions{Samples: o.samples, Batch: o.batch})
		if err != nil {
			return landscape.Metrics{}, fmt.Errorf("training subset: %w", err)
		}
		te, err := landscape.EvalAt(ctx, eng, 0, params, d.Test, landscape.EvalOptions{Samples: o.testSamples, Batch: o.batch})
		if err != nil {
			return landscape.Metrics{}, fmt.Errorf("test set: %w", err)
		}
		return landscape.Metrics{TrainLoss: tr.Loss, TrainAcc: tr.Acc, TestLoss: te.Loss, TestAcc: te.Acc}, nil
	}
	sc := &landscape.Scanner{Theta: theta, Eval: eval}
	dx, err := landscape.Direction(theta, layout, o.seed, 0)
	if err != nil {
		return cs, landscape.Line{}, err
	}
	sc.Progress = progressPrinter(progress, cp.label+" 1-D")
	pts, err := sc.Line(ctx, dx, axis)
	if err != nil {
		return cs, landscape.Line{}, err
	}
	for _, p := range pts {
		if p.Alpha == 0 {
			cs.Centre = p.Metrics
		}
	}
	if cs.Sharpness, err = landscape.SharpnessOf(pts, o.radius, landscape.TrainLoss); err != nil {
		return cs, landscape.Line{}, err
	}
	if cs.TestSharpness, err = landscape.SharpnessOf(pts, o.radius, landscape.TestLoss); err != nil {
		return cs, landscape.Line{}, err
	}
	file := fileLabel(cp.label)
	name := file + "_1d.csv"
	if err := landscape.WriteCSV(filepath.Join(o.out, name), pts, false); err != nil {
		return cs, landscape.Line{}, err
	}
	cs.Files = append(cs.Files, name)
	if o.plane {
		dy, err := landscape.Direction(theta, layout, o.seed, 1)
		if err != nil {
			return cs, landscape.Line{}, err
		}
		sc.Progress = progressPrinter(progress, cp.label+" 2-D")
		plane, err := sc.Plane(ctx, dx, dy, axis, axis)
		if err != nil {
			return cs, landscape.Line{}, err
		}
		ps, err := landscape.SharpnessOf(plane, o.radius, landscape.TrainLoss)
		if err != nil {
			return cs, landscape.Line{}, err
		}
		cs.PlaneSharpness = &ps
		csvName, pngName := file+"_2d.csv", file+"_2d.png"
		if err := landscape.WriteCSV(filepath.Join(o.out, csvName), plane, true); err != nil {
			return cs, landscape.Line{}, err
		}
		if err := landscape.PlotPlane(filepath.Join(o.out, pngName), cp.label, plane); err != nil {
			return cs, landscape.Line{}, err
		}
		cs.Files = append(cs.Files, csvName, pngName)
	}
	return cs, landscape.Line{Label: cp.label, Points: pts}, nil
}

// progressPrinter prints "label: done/total" about ten times per scan.
func progressPrinter(w io.Writer, label string) func(done, total int) {
	return func(done, total int) {
		if step := max(total/10, 1); done%step == 0 || done == total {
			fmt.Fprintf(w, "host:   %s: %d/%d points\n", label, done, total)
		}
	}
}

// loadCheckpoints reads every checkpoint's first member and metadata and
// gives each a unique label (its file name without extension).
func loadCheckpoints(paths []string, arch string, exp *experiment.Experiment) ([]loadedCheckpoint, error) {
	var out []loadedCheckpoint
	used := map[string]int{}
	for _, p := range paths {
		ts, meta, err := checkpoint.Read(p)
		if err != nil {
			return nil, err
		}
		cp := loadedCheckpoint{path: p, runKey: metaValue(meta, metaRunKey), experiment: metaValue(meta, metaExperiment)}
		if cp.tensors, err = statedict.MemberTensors(ts, 0); err != nil {
			return nil, fmt.Errorf("checkpoint %s: %w", p, err)
		}
		cp.arch = arch
		if cp.arch == "" {
			if a := metaValue(meta, metaArchs); a != "" {
				cp.arch, _, _ = strings.Cut(a, ",")
			}
		}
		if cp.arch == "" {
			if cp.arch, err = onlyArch(exp); err != nil {
				return nil, fmt.Errorf("checkpoint %s: %w", p, err)
			}
		}
		base := strings.TrimSuffix(filepath.Base(p), filepath.Ext(p))
		used[base]++
		cp.label = base
		if n := used[base]; n > 1 {
			cp.label = fmt.Sprintf("%s-%d", base, n)
		}
		out = append(out, cp)
	}
	return out, nil
}

// metaValue returns metadata key k, bare or with the "optlab." prefix.
func metaValue(meta map[string]string, k string) string {
	if v, ok := meta[k]; ok {
		return v
	}
	return meta[metaPrefix+k]
}

// onlyArch returns the experiment's architecture when it has exactly one.
func onlyArch(exp *experiment.Experiment) (string, error) {
	archs := map[string]bool{}
	var first string
	for _, spec := range exp.Model.Archs {
		_, members, err := experiment.ParseArch(spec)
		if err != nil {
			return "", err
		}
		for _, m := range members {
			if first == "" {
				first = m
			}
			archs[m] = true
		}
	}
	if len(archs) != 1 {
		return "", fmt.Errorf("the checkpoint does not name its architecture and the experiment has %d; pass --arch", len(archs))
	}
	return first, nil
}

// fileLabel makes a label safe as a file name.
func fileLabel(s string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case 'a' <= r && r <= 'z', 'A' <= r && r <= 'Z', '0' <= r && r <= '9', r == '.', r == '-', r == '_', r == '=', r == '+':
			return r
		}
		return '_'
	}, s)
}

// printLandscape prints the sharpness table.
func printLandscape(w io.Writer, s landscape.Summary, out string) {
	fmt.Fprintf(w, "loss landscape of %s along filter-normalized random directions (seed %d, %d points per axis, |α| ≤ %g; %d train / %d test samples)\n\n",
		s.Experiment, s.Seed, s.Steps, s.Radius, s.TrainSamples, s.TestSamples)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	head := "checkpoint\ttrain loss\ttest loss\ttest acc\t" + s.Metric + " (train)\tat α\ttest increase"
	if s.Plane {
		head += "\t2-D (train)"
	}
	fmt.Fprintln(tw, head+"\trecorded")
	for _, c := range s.Checkpoints {
		row := fmt.Sprintf("%s\t%.4g\t%.4g\t%.4f\t%.4g\t%+g\t%.4g", c.Label, c.Centre.TrainLoss, c.Centre.TestLoss, c.Centre.TestAcc,
			c.Sharpness.Increase, c.Sharpness.Alpha, c.TestSharpness.Increase)
		if s.Plane && c.PlaneSharpness != nil {
			row += fmt.Sprintf("\t%.4g", c.PlaneSharpness.Increase)
		}
		rec := "-"
		if c.Recorded {
			rec = c.RunKey
		}
		fmt.Fprintln(tw, row+"\t"+rec)
	}
	_ = tw.Flush()
	fmt.Fprintf(w, "\nwrote %s (landscape.json, landscape_1d.png, per-checkpoint CSV%s)\n", out, map[bool]string{true: " and 2-D PNG", false: ""}[s.Plane])
}
