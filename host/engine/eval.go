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
// or the average over Monte-Carlo samples of a Gaussian. BatchNorm uses its
// running statistics; nothing is recorded for autograd.
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
	probs := func(params tensor.T, m int) tensor.T {
		mem := e.members[m]
		return s.Softmax(mem.Model.Forward(s, e.toDevice(s, params), mem.Buf, x, false, 0), 1)
	}
	var sum tensor.T
	add := func(p tensor.T, w float64) {
		p = s.Scale(p, w)
		if sum.Valid() {
			sum = s.Add(sum, p)
		} else {
			sum = p
		}
	}
	switch pred.Kind {
	case optim.Point:
		sum = probs(e.members[0].Params, 0)
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
			add(probs(t, m), w)
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
				add(probs(e.sampleWeights(s, mem, seed*7919+int64(j)+1), 0), 1/float64(pred.N))
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
			tensor.ManualSeed(seed*7919 + int64(j) + 1)
			xi := s.Randn(mean.Shape(), tensor.Float32, e.cfg.Device)
			add(probs(s.Add(mean, s.Mul(std, xi)), m), 1/float64(pred.N))
		}
	default:
		return nil, fmt.Errorf("predictive: unknown kind %d", pred.Kind)
	}
	v := s.Float64s(sum)
	return v, s.Err()
}
