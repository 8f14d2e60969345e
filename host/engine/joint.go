package engine

import (
	"errors"
	"fmt"
	"slices"

	"github.com/optlab/optlab/host/tensor"
	"github.com/optlab/optlab/sdk/optim"
)

// jointGrad evaluates several members as one model: one cross-entropy on
// the average of their probabilities (clamped at 1e-40 before the log, as
// the OT-MDR reference code's EnsembleWrap), differentiated with respect to
// every member's parameters in one backward pass.
func (e *Engine) jointGrad(s *tensor.Scope, o optim.JointGrad) ([]tensor.T, error) {
	n := len(o.Ats)
	if n == 0 {
		return nil, errors.New("joint_grad: no members")
	}
	if len(o.Outs) != 0 && len(o.Outs) != n {
		return nil, fmt.Errorf("joint_grad: %d outputs for %d members", len(o.Outs), n)
	}
	for i, h := range o.Outs {
		if h != 0 && slices.Contains(o.Outs[:i], h) {
			return nil, fmt.Errorf("joint_grad: Outs[%d] = %d: want a distinct allocated vector (> 0) or 0", i, h)
		}
	}
	if e.cfg.MicroBatches > 1 {
		return nil, fmt.Errorf("joint_grad: train.micro_batches = %d: a joint pass is not cut into micro-batches", e.cfg.MicroBatches)
	}
	mem0 := e.members[0]
	x, y, err := e.selectBatch(s, mem0, o.Batch)
	if err != nil {
		return nil, err
	}
	if sh := x.Shape(); len(sh) > 0 {
		e.count.gradSamples.Add(sh[0] * int64(n))
	}
	mom, err := e.bnMomentum(o.BN)
	if err != nil {
		return nil, err
	}
	leaves := make([]tensor.T, n)
	owners := make([]int, n)
	var sum tensor.T
	for i, h := range o.Ats {
		at, m, err := e.get(h)
		if err != nil {
			return nil, fmt.Errorf("joint_grad: %w", err)
		}
		if j := slices.Index(owners[:i], m); j >= 0 {
			return nil, fmt.Errorf("joint_grad: Ats[%d] and Ats[%d] both belong to member %d", j, i, m)
		}
		mem := e.members[m]
		if mem.vi != nil {
			return nil, fmt.Errorf("joint_grad: member %d is variational, which joint passes do not support", m)
		}
		if !mem.x.Same(mem0.x) {
			return nil, fmt.Errorf("joint_grad: member %d does not share member 0's batch", m)
		}
		owners[i] = m
		if o.BN == optim.BNUpdate {
			mem.bnBatches++
		}
		leaves[i] = s.RequiresGrad(e.toDevice(s, at))
		p := s.Softmax(mem.Model.Forward(s, leaves[i], mem.Buf, x, true, mom), 1)
		if sum.Valid() {
			sum = s.Add(sum, p)
		} else {
			sum = p
		}
	}
	pbar := s.Scale(sum, 1/float64(n))
	loss := s.CrossEntropy(s.Log(s.ClampMin(pbar, 1e-40)), y, e.cfg.LabelSmoothing)
	if len(o.Outs) > 0 {
		g := s.Gradients(loss, leaves...)
		for i, h := range o.Outs {
			if h == 0 {
				continue
			}
			d, _, err := e.get(h)
			if err != nil {
				return nil, fmt.Errorf("joint_grad: %w", err)
			}
			s.CopyFrom(d, g[i])
		}
	}
	acc := s.Mean(s.Cast(s.Eq(s.Argmax(pbar, 1), y), tensor.Float32))
	return []tensor.T{s.Detach(loss), acc}, nil
}
