package engine

import (
	"context"
	"errors"
	"fmt"

	"github.com/optlab/optlab/host/tensor"
	"github.com/optlab/optlab/sdk/optim"
)

// Probs returns the predictive distribution pred on the inputs x (one batch,
// prepared for evaluation): an N×C tensor of probabilities in s, formed as
// the optimizer asked: the point estimate of member 0, the average of the
// probabilities of several parameter vectors, or the average over
// Monte-Carlo samples of a Gaussian (sample j drawn with seed·7919 + j + 1,
// the same for every batch). BatchNorm uses running statistics: a vector's
// own when a Copy with BN gave it some (a snapshot), else its member's live
// ones. Call on the worker, with grad mode off (see tensor.SetGradEnabled);
// host/eval's Predict runs it over a whole set. Once ctx is done (Ctrl-C,
// SIGTERM) it stops before the next member or sample and returns ctx's
// error: a predictive of many Monte-Carlo samples (bSAM's test_mc, SGVB's
// mc_samples) can take minutes on one batch.
func (e *Engine) Probs(ctx context.Context, s *tensor.Scope, pred optim.Predictive, x tensor.T, seed int64) (tensor.T, error) {
	// Each member or sample is evaluated in its own scope, which keeps only
	// the running sum: its weights and activations are freed right away.
	var sum tensor.T
	var ferr error
	// params returns the weights, the member, and the BatchNorm statistics
	// to evaluate with (invalid: the member's live ones).
	add := func(w float64, params func(cs *tensor.Scope) (tensor.T, int, tensor.T)) {
		if ferr != nil {
			return
		}
		if err := ctx.Err(); err != nil {
			ferr = err
			return
		}
		cs := tensor.NewScope()
		defer cs.Close()
		t, m, buf := params(cs)
		mem := e.members[m]
		if !buf.Valid() {
			buf = mem.Buf
		}
		logits := mem.Model.Forward(cs, e.toDevice(cs, t), e.toDevice(cs, buf), x, false, 0)
		p := cs.Scale(cs.Softmax(logits, 1), w)
		if sum.Valid() {
			p = cs.Add(sum, p)
		}
		if err := cs.Err(); err != nil {
			if ferr == nil {
				ferr = err
			}
			return
		}
		sum = s.Adopt(cs.Keep(p))
	}
	fixed := func(t tensor.T, m int, buf tensor.T) func(*tensor.Scope) (tensor.T, int, tensor.T) {
		return func(*tensor.Scope) (tensor.T, int, tensor.T) { return t, m, buf }
	}
	switch pred.Kind {
	case optim.Point:
		add(1, fixed(e.members[0].Params, 0, tensor.T{}))
	case optim.Members:
		if len(pred.Vecs) == 0 {
			return tensor.T{}, errors.New("predictive: members kind with no vectors")
		}
		if len(pred.Weights) != 0 && len(pred.Weights) != len(pred.Vecs) {
			return tensor.T{}, fmt.Errorf("predictive: %d weights for %d vectors", len(pred.Weights), len(pred.Vecs))
		}
		for i, h := range pred.Vecs {
			t, m, err := e.get(h)
			if err != nil {
				return tensor.T{}, fmt.Errorf("predictive: %w", err)
			}
			w := 1 / float64(len(pred.Vecs))
			if len(pred.Weights) > 0 {
				w = pred.Weights[i]
			}
			add(w, fixed(t, m, e.evalStats(h, m)))
		}
	case optim.Samples:
		if pred.N <= 0 {
			return tensor.T{}, fmt.Errorf("predictive: %d samples", pred.N)
		}
		if pred.Std == 0 {
			mem := e.members[0]
			if mem.vi == nil {
				return tensor.T{}, errors.New("predictive: samples of the variational weights asked for, but the model is not variational (set model.variational = true)")
			}
			for j := 0; j < pred.N; j++ {
				add(1/float64(pred.N), func(cs *tensor.Scope) (tensor.T, int, tensor.T) {
					return e.sampleWeights(cs, mem, seed*7919+int64(j)+1), 0, tensor.T{}
				})
			}
			break
		}
		mean, m, err := e.get(pred.Mean)
		if err != nil {
			return tensor.T{}, fmt.Errorf("predictive mean: %w", err)
		}
		_, std, err := e.same(s, pred.Mean, pred.Std)
		if err != nil {
			return tensor.T{}, fmt.Errorf("predictive std: %w", err)
		}
		for j := 0; j < pred.N; j++ {
			add(1/float64(pred.N), func(cs *tensor.Scope) (tensor.T, int, tensor.T) {
				tensor.ManualSeed(seed*7919 + int64(j) + 1)
				// Drawn on the device whatever the vectors' place (the
				// CUDA and CPU generators differ), then formed where the
				// mean lives (std is there already): one vector moves.
				xi := cs.Randn(mean.Shape(), tensor.Float32, e.cfg.Device)
				return cs.Add(mean, cs.Mul(std, e.align(cs, xi, mean))), m, e.evalStats(pred.Mean, m)
			})
		}
	default:
		return tensor.T{}, fmt.Errorf("predictive: unknown kind %d", pred.Kind)
	}
	if ferr != nil {
		return tensor.T{}, ferr
	}
	return sum, s.Err()
}
