package train

import (
	"testing"

	"github.com/optlab/optlab/host/results"
	"github.com/optlab/optlab/host/tensor"
	"github.com/optlab/optlab/plugins/muon"
)

// Muon (its NewtonSchulz on the engine, in float32, on the CNN's conv
// filters and linear weights; AdamW on its biases and BatchNorm) trains the
// small CNN on the UCI digits as SGD does (TestSGDTrainsOnDigits): 3
// epochs at the experiment's lr 0.05 with its cosine schedule.
func TestMuonTrainsOnDigits(t *testing.T) {
	w := tensor.NewWorker(2)
	defer w.Close()
	r, exp := newRunner(t, w, digitsTOML)
	rec := runOnce(t, r, exp, muon.New(), map[string]any{"adamw_lr": 0.01})
	if rec.Status != results.StatusOK {
		t.Fatalf("status %q", rec.Status)
	}
	t.Logf("test accuracy %.3f, nll %.3f, train loss %.3f", rec.Metrics["acc"], rec.Metrics["nll"], rec.Metrics["train_loss"])
	if acc := rec.Metrics["acc"]; acc < 0.85 {
		t.Errorf("test accuracy %.3f after 3 epochs, want ≥ 0.85", acc)
	}
}
