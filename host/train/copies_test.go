package train

import (
	"strings"
	"testing"

	"github.com/optlab/optlab/host/tensor"
	"github.com/optlab/optlab/plugins/builtin"
)

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
			cc := &counted{Optimizer: opt}
			runOnce(t, r, exp, cc, c.params)
			if len(cc.begin) != int(total) {
				t.Fatalf("%d steps, want %d", len(cc.begin), total)
			}
			var in, between []int64
			for i := range cc.begin {
				in = append(in, cc.during(i).HostToDevice)
				if i > 0 {
					between = append(between, cc.begin[i].HostToDevice-cc.end[i-1].HostToDevice)
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
