// Package eval forms an optimizer's predictive distribution over a whole
// dataset on the device: it cuts the set into batches, prepares their inputs
// (devset.Set.Range) and lets the program interpreter (host/engine) average
// the forward passes the optimizer's optim.Predictive asks for; host/metrics
// then scores the probabilities.
package eval

import (
	"context"

	"github.com/optlab/optlab/host/data/devset"
	"github.com/optlab/optlab/host/tensor"
	"github.com/optlab/optlab/sdk/optim"
)

// Interpreter is what Predict needs of the program interpreter (an
// *engine.Engine).
type Interpreter interface {
	// Worker returns the worker the interpreter's tensors live on.
	Worker() *tensor.Worker
	// Probs returns the predictive distribution pred on one batch of
	// prepared inputs x, N×C probabilities in s (see engine.Engine.Probs).
	// It stops between members or samples once ctx is done.
	Probs(ctx context.Context, s *tensor.Scope, pred optim.Predictive, x tensor.T, seed int64) (tensor.T, error)
}

// Predict returns the predictive distribution pred over set (N×C
// probabilities, row-major, float64), evaluated batch samples at a time
// (1000 when batch ≤ 0) with grad mode off, so nothing is recorded for
// autograd. seed fixes the Monte-Carlo samples of a Samples predictive.
// It returns ctx's error between two batches once ctx is done.
func Predict(ctx context.Context, in Interpreter, pred optim.Predictive, set *devset.Set, batch, seed int64) ([]float64, error) {
	if batch <= 0 {
		batch = 1000
	}
	var out []float64
	err := in.Worker().Do(ctx, func() error {
		restore, err := tensor.NoGrad()
		if err != nil {
			return err
		}
		defer restore()
		out = make([]float64, 0, set.N*int64(set.Classes))
		for start := int64(0); start < set.N; start += batch {
			// Stop between batches when the run is cancelled (Ctrl-C,
			// SIGTERM): a whole test set can take minutes.
			if err := ctx.Err(); err != nil {
				return err
			}
			n := min(batch, set.N-start)
			p, err := predictBatch(ctx, in, pred, set, start, n, seed)
			if err != nil {
				return err
			}
			out = append(out, p...)
		}
		return nil
	})
	return out, err
}

// predictBatch returns the probabilities of samples [start, start+n) of
// set. Call on the worker.
func predictBatch(ctx context.Context, in Interpreter, pred optim.Predictive, set *devset.Set, start, n, seed int64) ([]float64, error) {
	s := tensor.NewScope()
	defer s.Close()
	x, _ := set.Range(s, start, n)
	p, err := in.Probs(ctx, s, pred, x, seed)
	if err != nil {
		return nil, err
	}
	v := s.Float64s(p)
	return v, s.Err()
}
