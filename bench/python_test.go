package bench

import (
	"context"
	"math"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/optlab/optlab/host/plugin"
)

// BenchmarkPythonSAMStep times SAM through the Python plugin
// (examples/python-sam/sam.py, sdk/python) against SAM through the Go plugin
// binary (plugins/sam/cmd/sam): two engines with identical models, initial
// values and batch (128 samples), on the same worker; every iteration runs
// one step of each, alternating which goes first, so both see the same
// machine load. Metrics: python-ms/step and go-ms/step (medians), python/go
// (their ratio; issue goal on resnet18 ≤ 1.05), and per plugin RPC/step
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
			var tp, tg Timings
			var maxDiff float64
			pb, gb := py.Stats(), gp.Stats()
			for i := 0; b.Loop(); i++ {
				var lp, lg float64
				pyStep := func() error { lp = step(b, viaPython, popt); return nil }
				goStep := func() error { lg = step(b, viaGo, gopt); return nil }
				if i%2 == 0 {
					_, _ = tp.Time(pyStep), tg.Time(goStep)
				} else {
					_, _ = tg.Time(goStep), tp.Time(pyStep)
				}
				maxDiff = max(maxDiff, math.Abs(lp-lg))
			}
			pa, ga := py.Stats(), gp.Stats()
			n := float64(len(tp))
			b.ReportMetric(tp.MedianMs(), "python-ms/step")
			b.ReportMetric(tg.MedianMs(), "go-ms/step")
			b.ReportMetric(tp.MedianMs()/tg.MedianMs(), "python/go")
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
