package train

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/optlab/optlab/host/experiment"
	"github.com/optlab/optlab/host/tensor"
	"github.com/optlab/optlab/sdk/optim"
)

// gd is plain gradient descent whose metrics take one of the ways to the
// training loop: read back and returned in the StepOutput (the way of
// protocol minor 4), or reported from the device (Report).
type gd struct {
	optim.Defaults
	h      optim.Host
	report bool
	nanAt  int64 // the step whose reported loss is NaN (−1: none)
	dup    bool  // also return the reported loss in the StepOutput
	huge   bool  // report every loss times 1e307: finite, but their sum is not
	hs     *optim.Handles
	g      optim.Vec
}

func (o *gd) Info() optim.Info { return optim.Info{Name: "gd"} }

func (o *gd) Configure(ctx context.Context, h optim.Host, cfg optim.Config) error {
	o.h, o.hs = h, cfg.Namespace("gd")
	o.g = o.hs.New("g")
	_, err := h.Exec(ctx, o.hs.Prog().Alloc(o.g, 0))
	return err
}

func (o *gd) Step(ctx context.Context, in optim.StepInput) (optim.StepOutput, error) {
	p := o.hs.Prog()
	ev := p.Grad(o.g, optim.Params, optim.Batch{}, optim.BNUpdate)
	p.BaseStep(optim.Params, o.g)
	if !o.report {
		p.Read(ev.Loss, ev.Acc)
		r, err := o.h.Exec(ctx, p)
		if err != nil {
			return optim.StepOutput{}, err
		}
		return optim.Metrics(r.Get(ev.Loss), r.Get(ev.Acc)), nil
	}
	loss := ev.Loss
	if in.Step == o.nanAt {
		loss = p.Mul(loss, optim.K(math.NaN()))
	}
	if o.huge {
		loss = p.Mul(loss, optim.K(1e307))
	}
	p.ReportMetrics(loss, ev.Acc)
	p.Report("gd_norm", p.Norm(o.g))
	if _, err := o.h.Exec(ctx, p); err != nil {
		return optim.StepOutput{}, err
	}
	if o.dup {
		return optim.StepOutput{Metrics: map[string]float64{"loss": 1}}, nil
	}
	return optim.StepOutput{}, nil
}

// Metrics reported from the device give the run the training curve that
// the same metrics read back and returned give, bitwise.
func TestReportedMetricsEqualReturnedOnes(t *testing.T) {
	w := tensor.NewWorker(2)
	defer w.Close()
	src := strings.Replace(digitsTOML, "epochs = 3", "epochs = 2", 1)
	r, exp := newRunner(t, w, src)
	read := runOnce(t, r, exp, &gd{nanAt: -1}, nil)
	rep := runOnce(t, r, exp, &gd{report: true, nanAt: -1}, nil)
	for _, k := range []string{"train_loss", "acc", "nll"} {
		if math.Float64bits(read.Metrics[k]) != math.Float64bits(rep.Metrics[k]) {
			t.Errorf("%s: reported %v, returned %v", k, rep.Metrics[k], read.Metrics[k])
		}
	}
}

// A non-finite reported loss fails the run naming the step that produced
// it (although the loop reads it one step late), in the middle of an epoch
// and at its last step; a metric both reported and returned is an error.
func TestReportedLossNotFinite(t *testing.T) {
	w := tensor.NewWorker(2)
	defer w.Close()
	src := strings.Replace(digitsTOML, "epochs = 3", "epochs = 2", 1)
	r, exp := newRunner(t, w, src)
	perEpoch, _ := r.Steps()
	for _, step := range []int64{5, perEpoch - 1, perEpoch} {
		t.Run(fmt.Sprint(step), func(t *testing.T) {
			_, err := r.Run(context.Background(), experiment.Grid(exp)[0], method(t, &gd{report: true, nanAt: step}, nil))
			want := fmt.Sprintf("step %d (epoch %d, lr ", step, step/perEpoch+1)
			if !errors.Is(err, ErrNaN) || !strings.Contains(err.Error(), want) {
				t.Errorf("error %v, want %q… wrapping ErrNaN", err, want)
			}
		})
	}
	// Finite losses whose epoch mean overflows (hardening 26): not a run
	// recorded ok with a training loss of +Inf.
	_, err := r.Run(context.Background(), experiment.Grid(exp)[0], method(t, &gd{report: true, nanAt: -1, huge: true}, nil))
	if !errors.Is(err, ErrNaN) || !strings.Contains(err.Error(), "epoch 1: the mean training loss of the epoch is not finite") {
		t.Errorf("losses of 1e307: %v, want the epoch's mean named, wrapping ErrNaN", err)
	}
	_, err = r.Run(context.Background(), experiment.Grid(exp)[0], method(t, &gd{report: true, nanAt: -1, dup: true}, nil))
	if err == nil || !strings.Contains(err.Error(), `metric "loss" is both reported`) || !strings.Contains(err.Error(), "step 0 ") {
		t.Errorf("a metric reported and returned: %v", err)
	}
}
