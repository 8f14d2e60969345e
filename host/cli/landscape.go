package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"strings"
	"text/tabwriter"

	"github.com/optlab/optlab/host/experiment"
	"github.com/optlab/optlab/host/grid"
	"github.com/optlab/optlab/host/landscape"
	"github.com/optlab/optlab/host/results"
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

// landscapeOpts are the parsed flags of host landscape: the scan's options
// and what is done to the experiment before it.
type landscapeOpts struct {
	landscape.Options
	experiment, resultsDir, device string
	quiet                          bool
}

// landscapeCmd implements host landscape: the loss of each checkpoint along
// filter-normalized random directions (the same ones for every
// checkpoint), written as CSV, PNG and landscape.json, with the train-loss
// sharpness within the radius added to the checkpoint's run in runs.jsonl
// when its metadata names the run (see landscape.Run).
func landscapeCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	o, err := parseLandscape(args, stdout)
	if err != nil {
		return err
	}
	exp, err := o.load()
	if err != nil {
		return err
	}
	o.Log, o.Progress = stderr, stderr
	// A wait for the results lock ends with the first SIGTERM or Ctrl-C,
	// and says who holds the lock.
	o.LockWait = results.LockWait{Ctx: ctx, Log: stderr}
	if o.quiet {
		o.Progress = nil
	}
	sum, err := landscape.Run(ctx, exp, o.Options)
	if err != nil {
		return err
	}
	printLandscape(stdout, sum, o.Out)
	return nil
}

// parseLandscape parses and checks the flags of host landscape; -h writes
// their documentation to help.
func parseLandscape(args []string, help io.Writer) (landscapeOpts, error) {
	var o landscapeOpts
	fs := flag.NewFlagSet("landscape", flag.ContinueOnError)
	fs.Var((*stringList)(&o.Checkpoints), "checkpoint", "safetensors checkpoint to probe (repeat for several; each is probed along the same directions)")
	fs.StringVar(&o.experiment, "experiment", "", "experiment file whose dataset (and arch, when the checkpoint does not name it) the checkpoints belong to")
	fs.IntVar(&o.Steps, "steps", 21, "points per axis on [−radius, radius] (0 is always included)")
	fs.Float64Var(&o.Radius, "radius", 1, "largest |α| (and |β|), in units of the filter-normalized direction")
	fs.BoolVar(&o.Plane, "2d", false, "also scan the plane of two directions (steps² points)")
	fs.Int64Var(&o.Samples, "samples", 2048, "training samples evaluated at every point (the first n; 0 = all)")
	fs.Int64Var(&o.TestSamples, "test-samples", 0, "test samples evaluated at every point (the first n; 0 = all)")
	fs.Uint64Var(&o.Seed, "seed", 1, "seed of the random directions")
	fs.StringVar(&o.Out, "out", "", "output folder (default <results_dir>/<experiment>/landscape)")
	fs.StringVar(&o.resultsDir, "results", "", "results folder (default: the experiment's results_dir)")
	fs.StringVar(&o.Arch, "arch", "", "architecture of the checkpoints (default: from their metadata, else the experiment's only arch)")
	fs.StringVar(&o.device, "device", "", "override train.device: auto, cpu, cuda or cuda:N")
	fs.Int64Var(&o.Batch, "batch", 0, "evaluation batch size (default train.eval_batch_size)")
	fs.BoolVar(&o.quiet, "q", false, "no progress output")
	pos, err := parseInterleaved(fs, args, help)
	if err != nil {
		return o, err
	}
	return o, o.check(pos)
}

// check refuses positional arguments pos, missing and out-of-range flags.
func (o *landscapeOpts) check(pos []string) error {
	switch {
	case len(pos) > 0:
		return fmt.Errorf("unexpected arguments %q\n%s", pos, landscapeUsage)
	case len(o.Checkpoints) == 0 || o.experiment == "":
		return errors.New(landscapeUsage)
	case o.Steps < 1:
		return fmt.Errorf("--steps %d: want at least 1", o.Steps)
	case !(o.Radius > 0) || math.IsInf(o.Radius, 0):
		return fmt.Errorf("--radius %v: want a positive number", o.Radius)
	case o.Samples < 0 || o.TestSamples < 0:
		return errors.New("--samples and --test-samples must be ≥ 0")
	}
	return nil
}

// load loads the experiment with the --device and --results overrides and
// fills in the defaults --out and --batch take from it.
func (o *landscapeOpts) load() (*experiment.Experiment, error) {
	exp, err := grid.Load(o.experiment)
	if err != nil {
		return nil, err
	}
	if o.device != "" {
		exp.Train.Device = o.device
	}
	if o.resultsDir != "" {
		exp.ResultsDir = o.resultsDir
	}
	if o.Out == "" {
		o.Out = results.NewLayout(exp.ResultsDir, exp.Name).Landscape()
	}
	if o.Batch <= 0 {
		o.Batch = int64(exp.Train.EvalBatchSize)
	}
	return exp, nil
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
