package bench

import (
	"context"
	"fmt"
	"testing"

	"github.com/optlab/optlab/host/model"
	"github.com/optlab/optlab/plugins/sgd"
	"github.com/optlab/optlab/sdk/optim"
)

// bf16Variants are the numerics BenchmarkBF16 compares, by the names of
// its metrics: float32, bf16 autocast, and bf16 with channels_last.
var bf16Variants = []struct {
	name string
	num  model.Numerics
}{
	{"fp32", model.Numerics{}},
	{"bf16", model.Numerics{BF16: true}},
	{"bf16cl", model.Numerics{BF16: true, ChannelsLast: true}},
}

// BenchmarkBF16 times an SGD step (in-process, Grad + BaseStep) of one
// model in float32, in bf16 mixed precision (train.precision = "bf16":
// the engine's forward under libtorch's autocast) and in bf16 with
// channels_last (model.memory_format), on three rigs with identical
// models, initial values and batch of 128, stepping each once per
// iteration and rotating which goes first, so that all see the same
// machine load. lenet5 takes Fashion-MNIST-shaped 1×28×28 samples, the
// others CIFAR-shaped ones. Metrics: each variant's median wall ms/step
// and CPU ms/step (user + system of the process, all threads), and
// bf16/fp32, bf16cl/fp32 (ratios of wall medians), the ratios of the
// fastest steps (…-min) and of the CPU-time medians (…-cpu). bench/torch_bf16.py --autocast bf16 --interleave
// is the same comparison for PyTorch's own autocast.
func BenchmarkBF16(b *testing.B) {
	for _, c := range []struct {
		arch string
		in   []int64
	}{{"lenet5", []int64{1, 28, 28}}, {"cnn", InShape}, {"resnet18", InShape}} {
		b.Run(c.arch, func(b *testing.B) {
			ctx := context.Background()
			rigs := make([]*Rig, len(bf16Variants))
			opts := make([]optim.Optimizer, len(bf16Variants))
			for i, v := range bf16Variants {
				r, err := NewRigIn(ctx, worker, device, c.arch, c.in, 128, 1)
				if err != nil {
					b.Fatal(err)
				}
				b.Cleanup(r.Close)
				if err := r.Model.SetNumerics(v.num); err != nil {
					b.Fatal(err)
				}
				opts[i] = sgd.New()
				if err := r.Configure(ctx, opts[i], 1<<30); err != nil {
					b.Fatal(err)
				}
				rigs[i] = r
			}
			wall, cpu := interleave(b, rigs, opts)
			for i, v := range bf16Variants {
				b.ReportMetric(wall[i].MedianMs(), v.name+"-ms/step")
				b.ReportMetric(cpu[i].MedianMs(), v.name+"-cpu-ms/step")
				if i > 0 {
					b.ReportMetric(wall[i].MedianMs()/wall[0].MedianMs(), v.name+"/fp32")
					b.ReportMetric(wall[i].MinMs()/wall[0].MinMs(), v.name+"/fp32-min")
					b.ReportMetric(cpu[i].MedianMs()/cpu[0].MedianMs(), v.name+"/fp32-cpu")
				}
			}
			b.Logf("%s: %d steps each; wall ms/step (median, min): %s", c.arch, len(wall[0]), summary(wall))
		})
	}
}

// interleave steps every rig once per benchmark iteration, rotating which
// goes first, after one untimed warm-up step each, and returns each rig's
// wall and CPU times per step.
func interleave(b *testing.B, rigs []*Rig, opts []optim.Optimizer) (wall, cpu []Timings) {
	b.Helper()
	k := len(rigs)
	wall, cpu = make([]Timings, k), make([]Timings, k)
	for i := range rigs {
		step(b, rigs[i], opts[i])
	}
	for r := 0; b.Loop(); r++ {
		for j := range k {
			i := (r + j) % k
			c0, err := CPUTime()
			if err != nil {
				b.Fatal(err)
			}
			_ = wall[i].Time(func() error { step(b, rigs[i], opts[i]); return nil })
			c1, err := CPUTime()
			if err != nil {
				b.Fatal(err)
			}
			cpu[i] = append(cpu[i], c1-c0)
		}
	}
	return wall, cpu
}

func summary(ts []Timings) string {
	s := ""
	for i, t := range ts {
		s += fmt.Sprintf(" %s %.1f, %.1f;", bf16Variants[i].name, t.MedianMs(), t.MinMs())
	}
	return s
}
