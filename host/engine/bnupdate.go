package engine

import (
	"context"
	"errors"
	"fmt"

	"github.com/optlab/optlab/host/tensor"
	"github.com/optlab/optlab/sdk/optim"
)

// BNData is the training set that an UpdateBN op passes over: N samples
// read in order, Batch at a time (the run's training batch size, the last
// batch the remainder). Inputs returns samples [start, start+n) in s, ready
// for the models (on the device, normalized, not augmented); it is called
// on the worker.
type BNData struct {
	N, Batch int64
	Inputs   func(s *tensor.Scope, start, n int64) tensor.T
}

// SetBNData gives the engine the training set that UpdateBN passes over
// (host/train sets it when it builds a run). Call it off the worker,
// before the programs that use it.
func (e *Engine) SetBNData(d BNData) { e.bnData = d }

// updateBN runs an UpdateBN (see optim.UpdateBN): the BatchNorm running
// statistics that o.X carries (its member's live ones for live
// parameters; a vector's own, made if it has none) are reset to the
// model's initial values (mean 0, variance 1), then every training batch is
// passed forward in train mode at the parameters o.X holds, with no
// gradient, the k-th (0-based) with BatchNorm momentum 1/(k+1): the running
// mean and variance become the average over the batches of the batch means
// and unbiased batch variances, as PyTorch's cumulative average
// (momentum = None) gives; their counter (BNBatches) becomes the number of
// batches, as update_bn leaves num_batches_tracked. A model without
// BatchNorm has nothing to update.
func (e *Engine) updateBN(ctx context.Context, o optim.UpdateBN) error {
	if _, ok := o.X.Rho(); ok {
		return fmt.Errorf("update_bn of ρ handle %d: X must hold parameters (a variational member's means μ)", o.X)
	}
	params, m, err := e.get(o.X)
	if err != nil {
		return err
	}
	mem := e.members[m]
	d := e.bnData
	if mem.Model.BufNumel > 0 && (d.Inputs == nil || d.N <= 0 || d.Batch <= 0) {
		return errors.New("update_bn: this host has no training data to pass over")
	}
	buf, count := mem.Buf, &mem.bnBatches
	if _, live := o.X.Member(); !live {
		v := e.vecs[o.X]
		if !v.bn.Valid() {
			s := tensor.NewScope()
			t := s.Zeros(mem.Buf.Shape(), tensor.Float32, v.t.Device())
			if err := s.Err(); err != nil {
				s.Close()
				return fmt.Errorf("update_bn: statistics of vector %d: %w", o.X, err)
			}
			v.bn = s.Keep(t)
			s.Close()
		}
		buf, count = v.bn, &v.bnBatches
	}
	if mem.Model.BufNumel == 0 {
		return nil // no BatchNorm: the (empty) statistics are exact
	}
	restore, err := tensor.NoGrad()
	if err != nil {
		return err
	}
	defer restore()
	s := tensor.NewScope()
	defer s.Close()
	// The pass runs where the model does; a spilled vector's parameters
	// and statistics move there and the statistics move back at the end.
	work := e.toDevice(s, buf)
	at := e.toDevice(s, params)
	mem.Model.InitBuffers(s, work)
	if err := s.Err(); err != nil {
		return err
	}
	*count = 0
	for k, start := int64(0), int64(0); start < d.N; k, start = k+1, start+d.Batch {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("update_bn: stopped after %d of %d samples: %w", start, d.N, err)
		}
		bs := tensor.NewScope()
		x := d.Inputs(bs, start, min(d.Batch, d.N-start))
		mem.Model.Forward(bs, at, work, x, true, 1/float64(k+1))
		err := bs.Err()
		bs.Close()
		if err != nil {
			return fmt.Errorf("update_bn: batch %d: %w", k, err)
		}
		*count = k + 1
	}
	if !work.Same(buf) {
		s.CopyFrom(buf, work)
	}
	return s.Err()
}
