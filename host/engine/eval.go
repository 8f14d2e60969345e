package engine

import (
	"context"
	"errors"
	"fmt"

	"github.com/optlab/optlab/host/tensor"
	"github.com/optlab/optlab/sdk/optim"
)

// Predict returns the predictive distribution over set (N×C probabilities,
// row-major, float64) formed as the optimizer asked: the point estimate of
// member 0, the average of the probabilities of several parameter vectors,
// or the average over Monte-Carlo samples of a Gaussian. BatchNorm uses
// running statistics: a vector's own when a Copy with BN gave it some (a
// snapshot), else its member's live ones. Nothing is recorded for autograd.
func (e *Engine) Predict(ctx context.Context, pred optim.Predictive, set *DeviceSet, batch int64, seed int64) ([]float64, error) {
	if batch <= 0 {
		batch = 1000
	}
	var out []float64
	err := e.w.Do(ctx, func() error {
		prev, err := tensor.SetGradEnabled(false)
		if err != nil {
			return err
		}
		defer func() { _, _ = tensor.SetGradEnabled(prev) }()
		out = make([]float64, 0, set.N*int64(set.Classes))
		for start := int64(0); start < set.N; start += batch {
			n := min(batch, set.N-start)
			p, err := e.predictBatch(pred, set, start, n, seed)
			if err != nil {
				return err
			}
			out = append(out, p...)
		}
		return nil
	})
	return out, err
}

func (e *Engine) predictBatch(pred optim.Predictive, set *DeviceSet, start, n, seed int64) ([]float64, error) {
	s := tensor.NewScope()
	defer s.Close()
	x := s.Narrow(set.x, 0, start, n)
	x = s.Cast(x, tensor.Float32)
	if set.raw8 {
		x = s.Scale(x, 1.0/255)
	}
	if set.mean.Valid() {
		x = s.Div(s.Sub(x, set.mean), set.std)
	}
	// Each member or sample is evaluated in its own scope, which keeps only
	// the running sum: its weights and activations are freed right away.
	var sum tensor.T
	var ferr error
	// params returns the weights, the member, and the BatchNorm statistics
	// to evaluate with (invalid: the member's live ones).
	add := func(w float64, params func(cs *tensor.Scope) (tensor.T, int, tensor.T)) {
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
			return nil, errors.New("predictive: members kind with no vectors")
		}
		if len(pred.Weights) != 0 && len(pred.Weights) != len(pred.Vecs) {
			return nil, fmt.Errorf("predictive: %d weights for %d vectors", len(pred.Weights), len(pred.Vecs))
		}
		for i, h := range pred.Vecs {
			t, m, err := e.get(h)
			if err != nil {
				return nil, fmt.Errorf("predictive: %w", err)
			}
			w := 1 / float64(len(pred.Vecs))
			if len(pred.Weights) > 0 {
				w = pred.Weights[i]
			}
			add(w, fixed(t, m, e.evalStats(h, m)))
		}
	case optim.Samples:
		if pred.N <= 0 {
			return nil, fmt.Errorf("predictive: %d samples", pred.N)
		}
		if pred.Std == 0 {
			mem := e.members[0]
			if mem.vi == nil {
				return nil, errors.New("predictive: samples of the variational weights asked for, but the model is not variational (set model.variational = true)")
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
			return nil, fmt.Errorf("predictive mean: %w", err)
		}
		_, std, err := e.same(s, pred.Mean, pred.Std)
		if err != nil {
			return nil, fmt.Errorf("predictive std: %w", err)
		}
		for j := 0; j < pred.N; j++ {
			add(1/float64(pred.N), func(cs *tensor.Scope) (tensor.T, int, tensor.T) {
				tensor.ManualSeed(seed*7919 + int64(j) + 1)
				xi := cs.Randn(mean.Shape(), tensor.Float32, e.cfg.Device)
				return cs.Add(mean, cs.Mul(std, xi)), m, e.evalStats(pred.Mean, m)
			})
		}
	default:
		return nil, fmt.Errorf("predictive: unknown kind %d", pred.Kind)
	}
	if ferr != nil {
		return nil, ferr
	}
	v := s.Float64s(sum)
	return v, s.Err()
}
