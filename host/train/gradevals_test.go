package train

import (
	"context"
	"strings"
	"testing"

	"github.com/optlab/optlab/host/experiment"
	"github.com/optlab/optlab/host/tensor"
	"github.com/optlab/optlab/plugins/builtin"
	"github.com/optlab/optlab/plugins/esam"
	"github.com/optlab/optlab/plugins/msam"
	"github.com/optlab/optlab/plugins/sam"
	"github.com/optlab/optlab/plugins/sgd"
	"github.com/optlab/optlab/sdk/optim"
)

// A record counts the gradient evaluations its training cost, in samples
// of forward-backward passes (#42): SGD's one pass per step, SAM's two,
// m-sharpness SAM's two over sub-batches that add up to the batch.
func TestGradEvalsRecorded(t *testing.T) {
	w := tensor.NewWorker(2)
	defer w.Close()
	short := strings.NewReplacer("epochs = 3", "epochs = 1\nmax_steps = 6").Replace(digitsTOML)
	for _, c := range []struct {
		name   string
		opt    func() optim.Optimizer
		params map[string]any
		want   float64
	}{
		{"sgd", sgd.New, nil, 6 * 64},
		{"sam", sam.New, map[string]any{"rho": 0.05}, 2 * 6 * 64},
		{"sam m=2", sam.New, map[string]any{"rho": 0.05, "m": int64(2)}, 2 * 6 * 64},
		{"msam", msam.New, map[string]any{"rho": 0.3}, 6 * 64},
		// ESAM's forward-only pass is not counted; its second pass
		// back-propagates ⌊64·0.5⌋ − 1 = 31 samples.
		{"esam", esam.New, map[string]any{"beta": 0.5, "gamma": 0.5}, 6 * (64 + 31)},
	} {
		t.Run(c.name, func(t *testing.T) {
			r, exp := newRunner(t, w, short)
			rec := runOnce(t, r, exp, c.opt(), c.params)
			if got := rec.Metrics["grad_evals"]; got != c.want {
				t.Errorf("grad_evals = %v, want %v", got, c.want)
			}
		})
	}
}

// train.micro_batches (#42): SAM trains with its batch cut into 4
// micro-batches, costing the same gradient evaluations, and a
// variational run, whose passes are not cut, fails naming the setting.
func TestMicroBatchesRun(t *testing.T) {
	w := tensor.NewWorker(2)
	defer w.Close()
	short := strings.NewReplacer("epochs = 3", "epochs = 1\nmax_steps = 6\nmicro_batches = 4").Replace(digitsTOML)
	r, exp := newRunner(t, w, short)
	rec := runOnce(t, r, exp, sam.New(), map[string]any{"rho": 0.05})
	if got := rec.Metrics["grad_evals"]; got != 2*6*64 {
		t.Errorf("grad_evals = %v, want %v", got, 2*6*64)
	}
	vi := strings.Replace(short, "[train]", "variational = true\n[train]", 1)
	r, exp = newRunner(t, w, vi)
	run := experiment.Grid(exp)[0]
	opt, err := builtin.Registry().New("sgvb")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Run(context.Background(), run, method(t, opt, nil)); err == nil || !strings.Contains(err.Error(), "micro_batches") {
		t.Errorf("variational run with micro-batches: %v, want an error naming train.micro_batches", err)
	}
}
