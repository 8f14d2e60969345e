package engine

import (
	"context"
	"fmt"

	"github.com/optlab/optlab/host/tensor"
)

// EvalAtOptions says what EvalAt evaluates.
type EvalAtOptions struct {
	// Samples limits the evaluation to the set's first Samples samples;
	// zero (or more than the set holds) evaluates all of them.
	Samples int64
	// Batch is the number of samples per forward pass (1000 when zero).
	Batch int64
	// LabelSmoothing is PyTorch's label smoothing of the loss; zero gives
	// the plain cross-entropy (the negative log-likelihood).
	LabelSmoothing float64
}

// EvalAtResult is a model's mean loss and accuracy on (part of) a set.
type EvalAtResult struct {
	// Loss is the mean cross-entropy over the evaluated samples.
	Loss float64
	// Acc is the fraction of them classified correctly (argmax).
	Acc float64
	// N is the number of samples evaluated.
	N int64
}

// HostParams returns a host copy of member m's flat parameter vector, in
// the layout Layout describes.
func (e *Engine) HostParams(ctx context.Context, m int) ([]float32, error) {
	if m < 0 || m >= len(e.members) {
		return nil, fmt.Errorf("host params: no member %d (run has %d)", m, len(e.members))
	}
	var out []float32
	err := e.w.Do(ctx, func() error {
		s := tensor.NewScope()
		defer s.Close()
		out = s.Float32s(e.members[m].Params)
		if err := s.Err(); err != nil {
			return fmt.Errorf("host params of member %d: %w", m, err)
		}
		return nil
	})
	return out, err
}

// EvalAt evaluates member m's model at the flat parameter vector params
// (host memory, the member's layout; nil means the member's own
// parameters) on set: the mean cross-entropy and the accuracy, with
// BatchNorm in eval mode (the member's running statistics) and nothing
// recorded for autograd. Inputs are prepared as Predict prepares them (no
// augmentation). params is uploaded once per call.
func (e *Engine) EvalAt(ctx context.Context, m int, params []float32, set *DeviceSet, opts EvalAtOptions) (EvalAtResult, error) {
	if m < 0 || m >= len(e.members) {
		return EvalAtResult{}, fmt.Errorf("eval: no member %d (run has %d)", m, len(e.members))
	}
	mem := e.members[m]
	if params != nil && int64(len(params)) != mem.Model.Numel {
		return EvalAtResult{}, fmt.Errorf("eval: %d parameters given, member %d (%s) has %d", len(params), m, mem.Model.Arch, mem.Model.Numel)
	}
	n := set.N
	if opts.Samples > 0 && opts.Samples < n {
		n = opts.Samples
	}
	if n == 0 {
		return EvalAtResult{}, fmt.Errorf("eval: empty set")
	}
	batch := opts.Batch
	if batch <= 0 {
		batch = 1000
	}
	var res EvalAtResult
	err := e.w.Do(ctx, func() error {
		prev, err := tensor.SetGradEnabled(false)
		if err != nil {
			return err
		}
		defer func() { _, _ = tensor.SetGradEnabled(prev) }()
		outer := tensor.NewScope()
		defer outer.Close()
		p := mem.Params
		if params != nil {
			p = outer.FromFloat32(params, []int64{int64(len(params))}, e.cfg.Device)
			if err := outer.Err(); err != nil {
				return fmt.Errorf("eval: uploading parameters: %w", err)
			}
		}
		var sumLoss, correct float64
		for start := int64(0); start < n; start += batch {
			k := min(batch, n-start)
			l, c, err := e.evalBatch(mem, p, set, start, k, opts.LabelSmoothing)
			if err != nil {
				return fmt.Errorf("eval: samples %d–%d: %w", start, start+k, err)
			}
			sumLoss += l * float64(k)
			correct += c
		}
		res = EvalAtResult{Loss: sumLoss / float64(n), Acc: correct / float64(n), N: n}
		return nil
	})
	return res, err
}

// evalBatch returns the mean loss and the number of correct predictions on
// samples [start, start+n) of set. Call on the worker.
func (e *Engine) evalBatch(mem *Member, params tensor.T, set *DeviceSet, start, n int64, smoothing float64) (loss, correct float64, err error) {
	s := tensor.NewScope()
	defer s.Close()
	x := s.Cast(s.Narrow(set.x, 0, start, n), tensor.Float32)
	if set.raw8 {
		x = s.Scale(x, 1.0/255)
	}
	if set.mean.Valid() {
		x = s.Div(s.Sub(x, set.mean), set.std)
	}
	y := s.Narrow(set.y, 0, start, n)
	logits := mem.Model.Forward(s, params, mem.Buf, x, false, 0)
	l := s.CrossEntropy(logits, y, smoothing)
	c := s.Sum(s.Cast(s.Eq(s.Argmax(logits, 1), y), tensor.Float32), tensor.Float64)
	v := s.Scalars(l, c)
	if err := s.Err(); err != nil {
		return 0, 0, err
	}
	return v[0], v[1], nil
}
