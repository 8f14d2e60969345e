package plugin

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/optlab/optlab/sdk/optim"
	"github.com/optlab/optlab/sdk/protocoltest"
	"github.com/optlab/optlab/sdk/serve"
)

// BenchmarkStepRoundTrip measures one toy Step (Step → Exec [Grad, Norm] →
// Exec [Axpy]: 1 host→plugin and 2 plugin→host calls) through the real
// plugin binary, through in-process gRPC (go-plugin reattach), and as a
// direct call of the same optimizer, for several model sizes. The fake host
// does no arithmetic, so the figures are protocol overhead only. B/step is
// the protocol's bytes per step (proto.Size of all requests and responses)
// and must not depend on the model size. baseline/process-ping is one bare
// go-plugin call, for scale (its µs/step is µs per call).
func BenchmarkStepRoundTrip(b *testing.B) {
	b.Run("baseline/process-ping", func(b *testing.B) {
		// One bare go-plugin health check to the same binary: the floor of
		// a host→plugin call on this machine, to read the step figures by.
		c, err := Launch(context.Background(), LaunchSpec{Name: "toy", Dir: binDir, Logger: quietLogger(b)})
		if err != nil {
			b.Fatal(err)
		}
		defer c.Close()
		benchSteps(b, func(int) error { return c.proto.Ping() }, nil)
	})
	for _, n := range []int64{1_000, 1_000_000, 1_000_000_000} {
		b.Run(fmt.Sprintf("direct/params=%d", n), func(b *testing.B) {
			ctx := context.Background()
			host := protocoltest.NewFakeHost(n)
			host.Discard = true
			opt := protocoltest.New()
			if err := opt.Configure(ctx, host, optim.Config{Members: 1}); err != nil {
				b.Fatal(err)
			}
			benchSteps(b, func(i int) error {
				_, err := opt.Step(ctx, optim.StepInput{Step: int64(i), LR: 0.1})
				return err
			}, nil)
		})
		b.Run(fmt.Sprintf("inprocess-grpc/params=%d", n), func(b *testing.B) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			rc, _, err := serve.ServeInProcess(ctx, protocoltest.New)
			if err != nil {
				b.Fatal(err)
			}
			c, err := Launch(ctx, LaunchSpec{Reattach: rc, Logger: quietLogger(b)})
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			benchClient(b, c, n)
		})
		b.Run(fmt.Sprintf("process/params=%d", n), func(b *testing.B) {
			c, err := Launch(context.Background(), LaunchSpec{Name: "toy", Dir: binDir, Logger: quietLogger(b)})
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			benchClient(b, c, n)
		})
	}
}

func benchClient(b *testing.B, c *Client, n int64) {
	ctx := context.Background()
	host := protocoltest.NewFakeHost(n)
	host.Discard = true
	if err := c.Configure(ctx, host, optim.Config{Members: 1}); err != nil {
		b.Fatal(err)
	}
	benchSteps(b, func(i int) error {
		_, err := c.Step(ctx, optim.StepInput{Step: int64(i), LR: 0.1})
		return err
	}, c)
}

func benchSteps(b *testing.B, step func(int) error, c *Client) {
	var before Stats
	if c != nil {
		before = c.Stats()
	}
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	for i := 0; b.Loop(); i++ {
		if err := step(i); err != nil {
			b.Fatal(err)
		}
	}
	elapsed := time.Since(start)
	b.StopTimer()
	b.ReportMetric(float64(elapsed.Microseconds())/float64(b.N), "µs/step")
	if c != nil {
		after := c.Stats()
		b.ReportMetric(float64(after.Bytes-before.Bytes)/float64(b.N), "B/step")
		b.ReportMetric(float64(after.HostCalls-before.HostCalls)/float64(b.N), "exec/step")
	}
}
