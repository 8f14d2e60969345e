package engine

import (
	"fmt"
	"math/rand/v2"

	"github.com/optlab/optlab/host/tensor"
	"github.com/optlab/optlab/sdk/optim"
)

// Accessors for the packages that work on an engine's vectors without
// interpreting programs: host/checkpoint/statedict (state dicts),
// host/train (the training state), host/landscape and host/eval
// (evaluation). Tensors they return stay the engine's: use them only on the
// worker (Worker().Do) and never drop them.

// Vec returns the tensor behind handle h (a plugin vector, a member's live
// parameters or its ρ) and the member whose layout it has. Call on the
// worker.
func (e *Engine) Vec(h optim.Vec) (tensor.T, int, error) { return e.get(h) }

// VecStats returns where plugin vector h keeps the BatchNorm statistics a
// Copy with BN gave it (an invalid tensor when it holds none), or false when
// h is not an allocated plugin vector. Setting the tensor gives the vector
// statistics (restoring a training state does). Call on the worker.
func (e *Engine) VecStats(h optim.Vec) (*tensor.T, bool) {
	v, ok := e.vecs[h]
	if !ok {
		return nil, false
	}
	return &v.bn, true
}

// BNBatches returns how many passes updated the BatchNorm running
// statistics that handle h carries (a member's live ones for its live
// parameters, optim.ParamsOf(m); a plugin vector's own), as PyTorch's
// num_batches_tracked counts the train-mode forward passes that update
// them: one per gradient pass with BNUpdate (GradOp, JointGrad: one per
// member), none with BNFreeze; UpdateBN sets it to the number of batches
// it passed, as torch.optim.swa_utils.update_bn does (it resets the
// statistics and their counter first); a Copy with BN carries it with the
// statistics, and a Copy without BN into a vector drops both. A handle
// without statistics gives 0. Counters start at 0 (SetBNBatches restores
// one).
func (e *Engine) BNBatches(h optim.Vec) int64 {
	if n := e.bnBatches(h); n != nil {
		return *n
	}
	return 0
}

// SetBNBatches sets the counter BNBatches returns for handle h (restoring
// a training state, loading a checkpoint). It fails for a handle that is
// neither a member's live parameters nor an allocated plugin vector.
func (e *Engine) SetBNBatches(h optim.Vec, n int64) error {
	c := e.bnBatches(h)
	if c == nil {
		return fmt.Errorf("handle %d holds no BatchNorm statistics", h)
	}
	*c = n
	return nil
}

// bnBatches returns the counter of the BatchNorm-updating passes of the
// statistics that handle h carries (see BNBatches): its member's for live
// parameters, a vector's own otherwise; nil for any other handle.
func (e *Engine) bnBatches(h optim.Vec) *int64 {
	if m, ok := h.Member(); ok && m < len(e.members) {
		return &e.members[m].bnBatches
	}
	if v, ok := e.vecs[h]; ok {
		return &v.bnBatches
	}
	return nil
}

// RandSource returns the host random stream that RandN ops with seed 0 draw
// from; the training state saves and restores it. Use it on the worker.
func (e *Engine) RandSource() *rand.PCG { return e.src }

// Step returns the training step BeginStep last started.
func (e *Engine) Step() int64 { return e.step }

// OptState is the base optimizer's state for one vector (a member's
// parameters or its ρ), by reference: SGD's momentum buffer, Adam's moments
// and step count. The tensors are invalid until the first BaseStep creates
// them; setting them (and Steps) restores a saved state.
type OptState struct {
	Buf, M, V *tensor.T
	Steps     *int64
}

func (b *baseState) ref() OptState { return OptState{Buf: &b.buf, M: &b.m, V: &b.v, Steps: &b.t} }

// BaseState returns the base optimizer's state for the member's parameters.
func (m *Member) BaseState() OptState { return m.base.ref() }

// Rho returns the member's ρ vector (σ = softplus(ρ)) and the base
// optimizer's state for it; ok is false when the member is not variational.
func (m *Member) Rho() (rho *tensor.T, st OptState, ok bool) {
	if m.vi == nil {
		return nil, OptState{}, false
	}
	return &m.vi.rho, m.vi.base.ref(), true
}

// VecBytes returns the bytes of the plugin's vectors (factor vectors
// included) the engine holds, on the device and spilled to host memory:
// what a plugin's state costs beside the model. Call it between Execs.
func (e *Engine) VecBytes() int64 {
	var n int64
	for _, v := range e.vecs {
		n += 4 * v.t.Numel()
	}
	return n
}
