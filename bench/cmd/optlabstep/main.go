// Command optlabstep is the optlab side of bench/compare.sh: it times
// training steps of the built-in models through the engine with an
// in-process optimizer (sgd: one Grad + BaseStep program per step; sam: two
// programs) on a fixed synthetic CIFAR-shaped batch, and prints one line per
// model in bench/torch_step.py's format:
//
//	optlab model=cnn batch=128 device=cpu threads=2 steps=30 warmup=5 layout=flat opt=sgd median_ms=…
//
// median_ms is the median over -steps timed steps after -warmup untimed
// ones. The base optimizer is SGD with momentum 0.9 and weight decay 5e-4,
// as in torch_step.py.
//
// With -serve it times steps on request instead, for a driver that runs
// optlab and PyTorch in lockstep (bench/compare.sh): after building the
// model and the warm-up steps it prints "ready"; then every input line
// "step N" runs N steps and prints "ms W1 … WN cpu C1 … CN": the wall time
// and the CPU time of the process (user + system, all threads) of each step
// in milliseconds. "quit" or the end of the input ends it.
//
// Usage:
//
//	go run ./bench/cmd/optlabstep -model cnn -steps 30 -warmup 5
package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"os"
	"runtime/pprof"
	"strconv"
	"strings"

	"github.com/optlab/optlab/bench"
	"github.com/optlab/optlab/host/tensor"
	"github.com/optlab/optlab/plugins/sam"
	"github.com/optlab/optlab/plugins/sgd"
	"github.com/optlab/optlab/sdk/optim"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "optlabstep:", err)
		os.Exit(1)
	}
}

func run() error {
	models := flag.String("model", "resnet18,cnn", "comma-separated architectures")
	batch := flag.Int("batch", 128, "batch size")
	steps := flag.Int("steps", 10, "timed steps")
	warmup := flag.Int("warmup", 2, "untimed steps first")
	threads := flag.Int("threads", 0, "torch intra-op threads (0: number of cores)")
	optName := flag.String("opt", "sgd", "optimizer, in-process: sgd or sam")
	devName := flag.String("device", "cpu", "device: cpu, cuda, cuda:N or auto")
	cpuProfile := flag.String("cpuprofile", "", "write a Go CPU profile of the timed steps to this file")
	serveMode := flag.Bool("serve", false, "time steps on request from stdin (see the package doc)")
	inFlag := flag.String("in", "3x32x32", "per-sample input shape, e.g. 1x28x28 (Fashion-MNIST) or 784")
	flag.Parse()
	if flag.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", flag.Args())
	}
	in, err := parseShape(*inFlag)
	if err != nil {
		return err
	}
	var newOpt func() optim.Optimizer
	switch *optName {
	case "sgd":
		newOpt = sgd.New
	case "sam":
		newOpt = sam.New
	default:
		return fmt.Errorf("-opt %q: want sgd or sam", *optName)
	}
	ctx := context.Background()
	w := tensor.NewWorker(*threads)
	defer w.Close()
	var nthreads int
	if err := w.Do(ctx, func() error { nthreads = tensor.Threads(); return nil }); err != nil {
		return err
	}
	dev, err := bench.Device(ctx, w, *devName)
	if err != nil {
		return err
	}
	if *serveMode {
		if strings.Contains(*models, ",") {
			return fmt.Errorf("-serve takes one -model, got %q", *models)
		}
		return serve(ctx, w, dev, *models, in, *batch, *warmup, newOpt)
	}
	for arch := range strings.SplitSeq(*models, ",") {
		t, err := measure(ctx, w, dev, arch, in, *batch, *steps, *warmup, newOpt, *cpuProfile)
		if err != nil {
			return fmt.Errorf("%s: %w", arch, err)
		}
		fmt.Printf("optlab model=%s in=%s batch=%d device=%s threads=%d steps=%d warmup=%d layout=flat opt=%s median_ms=%.3f mean_ms=%.3f min_ms=%.3f\n",
			arch, *inFlag, *batch, dev, nthreads, *steps, *warmup, *optName, t.MedianMs(), t.MeanMs(), t.MinMs())
	}
	return nil
}

// measure times steps of arch after warm-up steps.
func measure(ctx context.Context, w *tensor.Worker, dev tensor.Device, arch string, in []int64, batch, steps, warmup int, newOpt func() optim.Optimizer, profile string) (bench.Timings, error) {
	r, err := bench.NewRigIn(ctx, w, dev, arch, in, batch, 1)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	opt := newOpt()
	if err := r.Configure(ctx, opt, int64(steps+warmup)); err != nil {
		return nil, err
	}
	for range warmup {
		if _, err := r.Step(ctx, opt); err != nil {
			return nil, err
		}
	}
	if profile != "" {
		f, err := os.Create(profile)
		if err != nil {
			return nil, err
		}
		defer func() { _ = f.Close() }()
		if err := pprof.StartCPUProfile(f); err != nil {
			return nil, err
		}
		defer pprof.StopCPUProfile()
	}
	var t bench.Timings
	for range steps {
		err := t.Time(func() error {
			_, err := r.Step(ctx, opt)
			return err
		})
		if err != nil {
			return nil, err
		}
	}
	return t, nil
}

// serve answers "step N" lines on stdin with the N step times (see the
// package doc).
func serve(ctx context.Context, w *tensor.Worker, dev tensor.Device, arch string, in []int64, batch, warmup int, newOpt func() optim.Optimizer) error {
	r, err := bench.NewRigIn(ctx, w, dev, arch, in, batch, 1)
	if err != nil {
		return err
	}
	defer r.Close()
	opt := newOpt()
	if err := r.Configure(ctx, opt, 1<<30); err != nil {
		return err
	}
	for range warmup {
		if _, err := r.Step(ctx, opt); err != nil {
			return err
		}
	}
	out := bufio.NewWriter(os.Stdout)
	fmt.Fprintln(out, "ready")
	if err := out.Flush(); err != nil {
		return err
	}
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		switch {
		case len(f) == 1 && f[0] == "quit":
			return nil
		case len(f) == 2 && f[0] == "step":
			n, err := strconv.Atoi(f[1])
			if err != nil || n < 1 {
				return fmt.Errorf("bad request %q", sc.Text())
			}
			wall, cpu := make([]float64, n), make([]float64, n)
			for i := range n {
				c0, err := bench.CPUTime()
				if err != nil {
					return err
				}
				var t bench.Timings
				if err := t.Time(func() error { _, err := r.Step(ctx, opt); return err }); err != nil {
					return err
				}
				c1, err := bench.CPUTime()
				if err != nil {
					return err
				}
				wall[i], cpu[i] = t.MeanMs(), float64(c1-c0)/1e6
			}
			fmt.Fprint(out, "ms")
			for _, v := range wall {
				fmt.Fprintf(out, " %.3f", v)
			}
			fmt.Fprint(out, " cpu")
			for _, v := range cpu {
				fmt.Fprintf(out, " %.3f", v)
			}
			fmt.Fprintln(out)
			if err := out.Flush(); err != nil {
				return err
			}
		default:
			return fmt.Errorf("bad request %q (want \"step N\" or \"quit\")", sc.Text())
		}
	}
	return sc.Err()
}

// parseShape reads a shape written as dimensions joined by "x".
func parseShape(s string) ([]int64, error) {
	var out []int64
	for d := range strings.SplitSeq(s, "x") {
		n, err := strconv.ParseInt(d, 10, 64)
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("-in %q: want positive dimensions joined by x, e.g. 1x28x28", s)
		}
		out = append(out, n)
	}
	return out, nil
}
