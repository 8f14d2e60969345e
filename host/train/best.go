package train

import (
	"context"
	"fmt"

	"github.com/optlab/optlab/host/experiment"
	"github.com/optlab/optlab/host/metrics"
)

// BestPrefix starts the record keys of the best epoch (eval.best_epoch):
// best_epoch, best_val_acc or best_val_nll (the criterion's value on the
// validation split), and best_<m> for every test metric m of that epoch
// (uncalibrated): what early stopping on the validation split would have
// scored.
const BestPrefix = "best_"

// bestEpoch is the best epoch so far under eval.best_epoch.
type bestEpoch struct {
	Epoch int                `json:"epoch"`
	Val   float64            `json:"val"`
	Test  map[string]float64 `json:"test"`
}

// criterion returns the validation value eval.best_epoch chooses on and
// whether higher is better.
func criterion(name string, val metrics.Report) (float64, bool) {
	if name == experiment.BestNLL {
		return val.NLL, false
	}
	return val.Acc, true
}

// improves reports whether the validation report val beats the best
// epoch b (nil: none yet) under the criterion; ties keep b.
func improves(name string, val metrics.Report, b *bestEpoch) bool {
	if b == nil {
		return true
	}
	v, higher := criterion(name, val)
	if higher {
		return v > b.Val
	}
	return v < b.Val
}

// observeBest is told the validation report of an evaluated epoch; when it
// beats the best so far (ties keep the earlier epoch), the test set is
// scored and the epoch becomes the best.
func (r *Runner) observeBest(ctx context.Context, t *training, val metrics.Report) error {
	name := r.Exp.Eval.BestEpoch
	if name == "" || r.Data.Val == nil {
		return nil
	}
	if !improves(name, val, t.best) {
		return nil
	}
	v, _ := criterion(name, val)
	test, err := r.evaluate(ctx, t, r.Data.Test, metrics.CalNone)
	if err != nil {
		return fmt.Errorf("best epoch: test set: %w", err)
	}
	t.best = &bestEpoch{Epoch: t.epochs, Val: v, Test: test.Map()}
	return nil
}

// bestMetrics returns the record keys of the best epoch (nil when there is
// none).
func bestMetrics(name string, b *bestEpoch) map[string]float64 {
	if b == nil {
		return nil
	}
	out := map[string]float64{BestPrefix + "epoch": float64(b.Epoch), BestPrefix + ValPrefix + name: b.Val}
	for k, v := range b.Test {
		out[BestPrefix+k] = v
	}
	return out
}
