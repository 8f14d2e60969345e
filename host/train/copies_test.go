package train

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/optlab/optlab/host/engine"
	"github.com/optlab/optlab/host/tensor"
	"github.com/optlab/optlab/plugins/builtin"
	"github.com/optlab/optlab/sdk/optim"
)

// copyCounted wraps an optimizer and reads the engine's host→device copy
// counter when each step begins and ends: between two step beginnings lie
// the step, the loop's reading of the step before, and the next batch's
// feed.
type copyCounted struct {
	optim.Optimizer
	begin, end []int64 // engine.Counters().HostToDevice per step
}

func (c *copyCounted) Step(ctx context.Context, h optim.Host, in optim.StepInput) (optim.StepOutput, error) {
	e, ok := h.(*engine.Engine)
	if !ok {
		return optim.StepOutput{}, fmt.Errorf("the host is a %T, not the engine", h)
	}
	c.begin = append(c.begin, e.Counters().HostToDevice)
	out, err := c.Optimizer.Step(ctx, h, in)
	c.end = append(c.end, e.Counters().HostToDevice)
	return out, err
}

func (c *copyCounted) Predictive(ctx context.Context) (optim.Predictive, error) {
	if p, ok := c.Optimizer.(optim.Predictor); ok {
		return p.Predictive(ctx)
	}
	return optim.Predictive{Kind: optim.Point}, nil
}

// No host→device copy in a steady-state step: the training loop uploads
// each epoch's data orders, crop offsets and flips once, at the epoch's
// start, and cuts every batch out of them on the device, and the engine
// draws sub-batch permutations (OT-MDR's random halves) on the device.
// Through the real loop and engine, with crop and flip augmentation, for
// SGD, OT-MDR with K = 2 random halves, and a deep ensemble (a data order
// per member): exactly one copy at each epoch's first step, none at any
// other.
func TestNoHostToDeviceCopyPerStep(t *testing.T) {
	w := tensor.NewWorker(2)
	defer w.Close()
	// 1437 training samples, batches of 256: 5 steps per epoch, 3 epochs.
	src := strings.NewReplacer("batch_size = 64", "batch_size = 256", "[data]", "[data]\naugment = [\"crop\", \"flip\"]").Replace(digitsTOML)
	two := strings.Replace(src, `archs = ["cnn"]`, `archs = ["cnn*2"]`, 1)
	reg := builtin.Registry()
	for _, c := range []struct {
		name, method, toml string
		params             map[string]any
	}{
		{"sgd", "sgd", src, nil},
		{"otmdr K=2 random halves", "otmdr", src, map[string]any{"particles": int64(2), "split": "random"}},
		{"deep ensemble of otmdr", "ensembles", two, map[string]any{"kind": "deep", "member": "otmdr"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			opt, err := reg.New(c.method)
			if err != nil {
				t.Fatal(err)
			}
			r, exp := newRunner(t, w, c.toml)
			perEpoch, total := r.Steps()
			if perEpoch != 5 || total != 15 {
				t.Fatalf("%d steps per epoch, %d in all; want 5 and 15", perEpoch, total)
			}
			cc := &copyCounted{Optimizer: opt}
			runOnce(t, r, exp, cc, c.params)
			if len(cc.begin) != int(total) {
				t.Fatalf("%d steps, want %d", len(cc.begin), total)
			}
			var in, between []int64
			for i := range cc.begin {
				in = append(in, cc.end[i]-cc.begin[i])
				if i > 0 {
					between = append(between, cc.begin[i]-cc.end[i-1])
				}
			}
			t.Logf("host→device copies in each step: %v; from each step's end to the next one's start (feed): %v", in, between)
			for i := range in {
				if in[i] != 0 {
					t.Errorf("step %d made %d host→device copies, want 0", i, in[i])
				}
				if i == 0 {
					continue
				}
				want := int64(0)
				if i%int(perEpoch) == 0 {
					want = 1 // the epoch's orders, crops and flips
				}
				if between[i-1] != want {
					t.Errorf("before step %d (epoch %d, step %d of it): %d host→device copies, want %d", i, i/int(perEpoch)+1, i%int(perEpoch), between[i-1], want)
				}
			}
		})
	}
}
