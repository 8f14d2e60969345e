package landscape

import (
	"context"
	"fmt"

	"github.com/optlab/optlab/host/data/devset"
	"github.com/optlab/optlab/host/engine"
	"github.com/optlab/optlab/host/tensor"
)

// EvalOptions says what EvalAt evaluates.
type EvalOptions struct {
	// Samples limits the evaluation to the set's first Samples samples;
	// zero (or more than the set holds) evaluates all of them.
	Samples int64
	// Batch is the number of samples per forward pass (1000 when zero).
	Batch int64
	// LabelSmoothing is PyTorch's label smoothing of the loss; zero gives
	// the plain cross-entropy (the negative log-likelihood).
	LabelSmoothing float64
}

// EvalResult is a model's mean loss and accuracy on (part of) a set.
type EvalResult struct {
	// Loss is the mean cross-entropy over the evaluated samples.
	Loss float64
	// Acc is the fraction of them classified correctly (argmax).
	Acc float64
	// N is the number of samples evaluated.
	N int64
}

// HostParams returns a host copy of member m's flat parameter vector, in
// the layout the engine's Layout describes: the θ a Scanner starts from.
func HostParams(ctx context.Context, eng *engine.Engine, m int) ([]float32, error) {
	members := eng.Members()
	if m < 0 || m >= len(members) {
		return nil, fmt.Errorf("host params: no member %d (run has %d)", m, len(members))
	}
	var out []float32
	err := eng.Worker().Do(ctx, func() error {
		s := tensor.NewScope()
		defer s.Close()
		out = s.Float32s(members[m].Params)
		if err := s.Err(); err != nil {
			return fmt.Errorf("host params of member %d: %w", m, err)
		}
		return nil
	})
	return out, err
}

// EvalAt evaluates member m of eng at the flat parameter vector params
// (host memory, the member's layout; nil means the member's own
// parameters) on set: the mean cross-entropy and the accuracy, with
// BatchNorm in eval mode (the member's running statistics) and nothing
// recorded for autograd. Inputs are prepared as for any evaluation (no
// augmentation, see devset.Set.Range). params is uploaded once per call.
// An Evaluator is built from two calls, on the training subset and on the
// test set.
func EvalAt(ctx context.Context, eng *engine.Engine, m int, params []float32, set *devset.Set, opts EvalOptions) (EvalResult, error) {
	members := eng.Members()
	if m < 0 || m >= len(members) {
		return EvalResult{}, fmt.Errorf("eval: no member %d (run has %d)", m, len(members))
	}
	mem := members[m]
	if params != nil && int64(len(params)) != mem.Model.Numel {
		return EvalResult{}, fmt.Errorf("eval: %d parameters given, member %d (%s) has %d", len(params), m, mem.Model.Arch, mem.Model.Numel)
	}
	n := set.N
	if opts.Samples > 0 && opts.Samples < n {
		n = opts.Samples
	}
	if n == 0 {
		return EvalResult{}, fmt.Errorf("eval: empty set")
	}
	batch := opts.Batch
	if batch <= 0 {
		batch = 1000
	}
	var res EvalResult
	err := eng.Worker().Do(ctx, func() error {
		restore, err := tensor.NoGrad()
		if err != nil {
			return err
		}
		defer restore()
		outer := tensor.NewScope()
		defer outer.Close()
		p := mem.Params
		if params != nil {
			p = outer.FromFloat32(params, []int64{int64(len(params))}, eng.Device())
			if err := outer.Err(); err != nil {
				return fmt.Errorf("eval: uploading parameters: %w", err)
			}
		}
		var sumLoss, correct float64
		for start := int64(0); start < n; start += batch {
			k := min(batch, n-start)
			l, c, err := evalBatch(mem, p, set, start, k, opts.LabelSmoothing)
			if err != nil {
				return fmt.Errorf("eval: samples %d–%d: %w", start, start+k, err)
			}
			sumLoss += l * float64(k)
			correct += c
		}
		res = EvalResult{Loss: sumLoss / float64(n), Acc: correct / float64(n), N: n}
		return nil
	})
	return res, err
}

// evalBatch returns the mean loss and the number of correct predictions on
// samples [start, start+n) of set. Call on the worker.
func evalBatch(mem *engine.Member, params tensor.T, set *devset.Set, start, n int64, smoothing float64) (loss, correct float64, err error) {
	s := tensor.NewScope()
	defer s.Close()
	x, y := set.Range(s, start, n)
	logits := mem.Model.Forward(s, params, mem.Buf, x, false, 0)
	l := s.CrossEntropy(logits, y, smoothing)
	c := s.Sum(s.Cast(s.Eq(s.Argmax(logits, 1), y), tensor.Float32), tensor.Float64)
	v := s.Scalars(l, c)
	if err := s.Err(); err != nil {
		return 0, 0, err
	}
	return v[0], v[1], nil
}
