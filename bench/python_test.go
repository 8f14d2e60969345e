package bench

import (
	"context"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/optlab/optlab/host/plugin"
	"github.com/optlab/optlab/sdk/optim"
)

// BenchmarkPythonSAMStep times SAM through the Python plugin
// (examples/python-sam/sam.py, sdk/python) against SAM through the Go plugin
// binary (plugins/sam/cmd/sam): two engines with identical models, initial
// values and batch (128 samples), on the same worker; every iteration runs
// one step of each, alternating which goes first, so both see the same
// machine load. Metrics: python-ms/step and go-ms/step (medians of the
// wall time), python/go (their ratio; issue goal on resnet18 ≤ 1.05);
// python-cpu-ms/step, go-cpu-ms/step and python/go-cpu, the same for the
// CPU time of a step (the host process's and the plugin process's
// together), which the other work on a shared machine disturbs much less;
// per plugin, plugin-cpu-ms/step (the plugin process alone, idle time
// between steps included: what the optimizer's language costs), RPC/step
// (host→plugin plus plugin→host calls) and B/step (protocol bytes both
// ways). The two plugins send the same ops, so their losses must be
// bitwise equal: the benchmark fails otherwise.
func BenchmarkPythonSAMStep(b *testing.B) {
	if err := exec.Command("/usr/bin/python3", "-c", "import grpc, google.protobuf").Run(); err != nil {
		b.Skipf("/usr/bin/python3 cannot import grpc and protobuf (%v): apt-get install python3-grpcio python3-protobuf", err)
	}
	script, err := filepath.Abs(filepath.Join("..", "examples", "python-sam", "sam.py"))
	if err != nil {
		b.Fatal(err)
	}
	for _, arch := range []string{"cnn", "resnet18"} {
		b.Run(arch+"/bs128", func(b *testing.B) {
			ctx := context.Background()
			viaPython, viaGo := newRig(b, arch, 128), newRig(b, arch, 128)
			py, err := plugin.Launch(ctx, plugin.LaunchSpec{Path: script,
				Logger: hclog.New(&hclog.LoggerOptions{Name: "bench", Level: hclog.Error})})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { _ = py.Close() })
			gp := launch(b, "sam")
			popt, gopt := py.AsOptimizer(), gp.AsOptimizer()
			for _, x := range []struct {
				r *Rig
				c *plugin.Client
			}{{viaPython, py}, {viaGo, gp}} {
				if err := x.r.Configure(ctx, x.c.AsOptimizer(), 1<<30); err != nil {
					b.Fatal(err)
				}
			}
			step(b, viaPython, popt) // warm-up
			step(b, viaGo, gopt)
			var tp, tg Timings // wall time of each step
			var cp, cg Timings // CPU time of each step: host process + plugin process
			var maxDiff float64
			pb, gb := py.Stats(), gp.Stats()
			pcpu, gcpu := procCPU(b, py.Pid()), procCPU(b, gp.Pid())
			timed := func(wall, cpu *Timings, r *Rig, opt optim.Optimizer, pid int) float64 {
				var loss float64
				h0, p0 := hostCPU(b), procCPU(b, pid)
				_ = wall.Time(func() error { loss = step(b, r, opt); return nil })
				*cpu = append(*cpu, hostCPU(b)-h0+procCPU(b, pid)-p0)
				return loss
			}
			for i := 0; b.Loop(); i++ {
				var lp, lg float64
				if i%2 == 0 {
					lp = timed(&tp, &cp, viaPython, popt, py.Pid())
					lg = timed(&tg, &cg, viaGo, gopt, gp.Pid())
				} else {
					lg = timed(&tg, &cg, viaGo, gopt, gp.Pid())
					lp = timed(&tp, &cp, viaPython, popt, py.Pid())
				}
				maxDiff = max(maxDiff, math.Abs(lp-lg))
			}
			pa, ga := py.Stats(), gp.Stats()
			n := float64(len(tp))
			b.ReportMetric(tp.MedianMs(), "python-ms/step")
			b.ReportMetric(tg.MedianMs(), "go-ms/step")
			b.ReportMetric(tp.MedianMs()/tg.MedianMs(), "python/go")
			b.ReportMetric(cp.MedianMs(), "python-cpu-ms/step")
			b.ReportMetric(cg.MedianMs(), "go-cpu-ms/step")
			b.ReportMetric(cp.MedianMs()/cg.MedianMs(), "python/go-cpu")
			b.ReportMetric(float64((procCPU(b, py.Pid())-pcpu).Microseconds())/1e3/n, "python-plugin-cpu-ms/step")
			b.ReportMetric(float64((procCPU(b, gp.Pid())-gcpu).Microseconds())/1e3/n, "go-plugin-cpu-ms/step")
			b.ReportMetric(float64(pa.Calls-pb.Calls+pa.HostCalls-pb.HostCalls)/n, "python-RPC/step")
			b.ReportMetric(float64(ga.Calls-gb.Calls+ga.HostCalls-gb.HostCalls)/n, "go-RPC/step")
			b.ReportMetric(float64(pa.Bytes-pb.Bytes)/n, "python-B/step")
			b.ReportMetric(float64(ga.Bytes-gb.Bytes)/n, "go-B/step")
			b.Logf("%s: %d parameters; per-step ratios python/go: min %.3f, max %.3f; largest |loss(python) − loss(go)| over %d steps: %g",
				arch, viaGo.Model.Numel, minRatio(tp, tg), maxRatio(tp, tg), len(tp), maxDiff)
			if maxDiff != 0 {
				b.Errorf("the Python and the Go SAM disagree: loss difference %g", maxDiff)
			}
		})
	}
}

// procCPU returns the CPU time that the threads of process pid have used
// (the sum of their /proc/PID/task/*/schedstat run times, in nanoseconds;
// Linux). Threads that have exited are not counted: gRPC's and the Go
// runtime's threads live as long as the plugin.
func procCPU(tb testing.TB, pid int) time.Duration {
	tb.Helper()
	tasks, err := filepath.Glob("/proc/" + strconv.Itoa(pid) + "/task/*/schedstat")
	if err != nil || len(tasks) == 0 {
		tb.Fatalf("no threads of process %d: %v", pid, err)
	}
	var sum time.Duration
	for _, t := range tasks {
		b, err := os.ReadFile(t)
		if err != nil {
			continue // the thread has exited
		}
		f := strings.Fields(string(b))
		ns, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			tb.Fatalf("%s: %q", t, b)
		}
		sum += time.Duration(ns)
	}
	return sum
}

// hostCPU is CPUTime for a benchmark.
func hostCPU(tb testing.TB) time.Duration {
	tb.Helper()
	d, err := CPUTime()
	if err != nil {
		tb.Fatal(err)
	}
	return d
}

// minRatio and maxRatio are the extremes of the per-iteration ratios a/b.
func minRatio(a, b Timings) float64 {
	r := math.Inf(1)
	for i := range min(len(a), len(b)) {
		r = min(r, float64(a[i])/float64(b[i]))
	}
	return r
}

func maxRatio(a, b Timings) float64 {
	r := math.Inf(-1)
	for i := range min(len(a), len(b)) {
		r = max(r, float64(a[i])/float64(b[i]))
	}
	return r
}
