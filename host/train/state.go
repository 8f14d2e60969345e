package train

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/optlab/optlab/host/checkpoint"
	"github.com/optlab/optlab/host/engine"
	"github.com/optlab/optlab/host/tensor"
	"github.com/optlab/optlab/sdk/optim"
)

// The engine's part of the training state (for resuming a run mid-way) is
// a set of flat vectors: unlike a checkpoint's PyTorch state dict it holds
// everything the engine needs to continue bitwise: every member's
// parameters, buffers, base-optimizer state and ρ, the plugin vectors named
// by the optimizer's SaveState (with the BatchNorm statistics a Copy with
// BN gave them), the counters of the passes that updated each set of
// BatchNorm statistics (engine.BNBatches, metaBNBatches), and the host
// random stream. saveState and loadState add
// the loop's and the optimizer's state and write the file.

// bnSuffix names the BatchNorm statistics a plugin vector carries (see
// optim.Copy) in the training state: "vecs.<handle>.bn".
const bnSuffix = ".bn"

// metaBNBatches is the training-state metadata key of the BatchNorm
// counters (engine.BNBatches), a JSON object: "members.<m>" for member
// m's live statistics, "vecs.<handle>" for a saved plugin vector's own.
// A state saved before counters were kept lacks it: they restart at 0.
const metaBNBatches = "optlab.bn_batches"

// moduleBufferKey names, in the training state, a buffer of member m's
// TorchScript module that optlab does not keep in its flat vectors
// (model.Model.ModuleBuffers): "members.<m>.module.<dotted name>", saved
// as float64 (exact for its float32, int64 up to 2^53 and bool values)
// and copied back in the buffer's own dtype.
func moduleBufferKey(m int, name string) string { return fmt.Sprintf("members.%d.module.%s", m, name) }

// stateVec is one flat vector of the training state.
type stateVec struct {
	name string
	t    *tensor.T
}

// optStateSlots names the tensors of a base-optimizer state, created or
// not: prefix + buf (SGD's momentum), m and v (Adam's moments).
func optStateSlots(prefix string, st engine.OptState) []stateVec {
	return []stateVec{{prefix + "buf", st.Buf}, {prefix + "m", st.M}, {prefix + "v", st.V}}
}

// optStateVecs lists the tensors of a base-optimizer state that exist.
func optStateVecs(prefix string, st engine.OptState) []stateVec {
	var out []stateVec
	for _, v := range optStateSlots(prefix, st) {
		if v.t.Valid() {
			out = append(out, v)
		}
	}
	return out
}

// engineStateVecs lists the engine's own vectors of the training state.
// Call on the worker.
func engineStateVecs(eng *engine.Engine) []stateVec {
	var out []stateVec
	for i, m := range eng.Members() {
		p := fmt.Sprintf("members.%d.", i)
		out = append(out, stateVec{p + "params", &m.Params}, stateVec{p + "buffers", &m.Buf})
		out = append(out, optStateVecs(p+"base.", m.BaseState())...)
		if rho, st, ok := m.Rho(); ok {
			out = append(out, stateVec{p + "rho", rho})
			out = append(out, optStateVecs(p+"rho_base.", st)...)
		}
	}
	return out
}

// saveEngineState copies the engine's training state and the given plugin
// vectors to host memory. The metadata receives the scalar state.
func saveEngineState(ctx context.Context, eng *engine.Engine, vecs []optim.Vec) ([]checkpoint.Tensor, map[string]string, error) {
	var ts []checkpoint.Tensor
	meta := map[string]string{}
	err := eng.Worker().Do(ctx, func() error {
		s := tensor.NewScope()
		defer s.Close()
		for _, v := range engineStateVecs(eng) {
			ts = append(ts, checkpoint.NewF32(v.name, v.t.Shape(), s.Float32s(*v.t)))
		}
		for i, m := range eng.Members() {
			names, live := m.Model.ModuleBuffers(s)
			for k, name := range names {
				ts = append(ts, checkpoint.NewF64(moduleBufferKey(i, name), []int64{live[k].Numel()}, s.Float64s(live[k])))
			}
		}
		for _, h := range vecs {
			t, _, err := eng.Vec(h)
			if err != nil {
				return fmt.Errorf("save state: %w", err)
			}
			name := "vecs." + strconv.Itoa(int(h))
			ts = append(ts, checkpoint.NewF32(name, t.Shape(), s.Float32s(t)))
			if bn, ok := eng.VecStats(h); ok && bn.Valid() {
				ts = append(ts, checkpoint.NewF32(name+bnSuffix, bn.Shape(), s.Float32s(*bn)))
			}
		}
		counts := map[string]int64{}
		for i := range eng.Members() {
			counts[fmt.Sprintf("members.%d", i)] = eng.BNBatches(optim.ParamsOf(i))
		}
		for _, h := range vecs {
			if bn, ok := eng.VecStats(h); ok && bn.Valid() {
				counts["vecs."+strconv.Itoa(int(h))] = eng.BNBatches(h)
			}
		}
		c, err := json.Marshal(counts)
		if err != nil {
			return err
		}
		meta[metaBNBatches] = string(c)
		steps := map[string]int64{}
		for i, m := range eng.Members() {
			steps[fmt.Sprintf("members.%d.base", i)] = *m.BaseState().Steps
			if _, st, ok := m.Rho(); ok {
				steps[fmt.Sprintf("members.%d.rho_base", i)] = *st.Steps
			}
		}
		b, err := json.Marshal(steps)
		if err != nil {
			return err
		}
		meta["optlab.adam_steps"] = string(b)
		rng, err := eng.RandSource().MarshalBinary()
		if err != nil {
			return err
		}
		meta["optlab.host_rng"] = base64.StdEncoding.EncodeToString(rng)
		return s.Err()
	})
	return ts, meta, err
}

// loadEngineState restores what saveEngineState saved. The plugin vectors
// must already be allocated (by the optimizer's Configure) with the same
// handles.
func loadEngineState(ctx context.Context, eng *engine.Engine, ts map[string]checkpoint.Tensor, meta map[string]string) error {
	return eng.Worker().Do(ctx, func() error {
		s := tensor.NewScope()
		defer s.Close()
		used := map[string]bool{}
		load := func(name string, dst *tensor.T) error {
			c, ok := ts[name]
			if !ok {
				return fmt.Errorf("training state has no %q", name)
			}
			used[name] = true
			f, err := c.Float32s()
			if err != nil {
				return fmt.Errorf("training state %q: %w", name, err)
			}
			src := s.FromFloat32(f, []int64{int64(len(f))}, tensor.CPU)
			if !dst.Valid() {
				*dst = s.Keep(s.To(src, eng.Device()))
				return s.Err()
			}
			if dst.Numel() != int64(c.Len()) {
				return fmt.Errorf("training state %q has %d elements, want %d", name, c.Len(), dst.Numel())
			}
			s.CopyFrom(*dst, src)
			return s.Err()
		}
		// Optimizer state exists in the file only once it was created.
		for i, m := range eng.Members() {
			p := fmt.Sprintf("members.%d.", i)
			slots := optStateSlots(p+"base.", m.BaseState())
			if _, st, ok := m.Rho(); ok {
				slots = append(slots, optStateSlots(p+"rho_base.", st)...)
			}
			for _, v := range slots {
				if _, ok := ts[v.name]; ok {
					if err := load(v.name, v.t); err != nil {
						return err
					}
				}
			}
		}
		for _, v := range engineStateVecs(eng) {
			if used[v.name] {
				continue
			}
			if err := load(v.name, v.t); err != nil {
				return err
			}
		}
		// A TorchScript module's own buffers (a state saved before they
		// were kept lacks them: they start from the file's).
		for i, m := range eng.Members() {
			names, live := m.Model.ModuleBuffers(s)
			for k, name := range names {
				key := moduleBufferKey(i, name)
				c, ok := ts[key]
				if !ok {
					continue
				}
				used[key] = true
				if c.DType != checkpoint.F64 || c.Numel() != live[k].Numel() {
					return fmt.Errorf("training state %q: %s of %d values, want F64 of %d", key, c.DType, c.Numel(), live[k].Numel())
				}
				n := live[k].Numel()
				s.CopyFrom(s.Reshape(live[k], -1), s.FromFloat64(c.F64, []int64{n}, tensor.CPU))
				if err := s.Err(); err != nil {
					return fmt.Errorf("training state %q: %w", key, err)
				}
			}
		}
		for name := range ts {
			if used[name] {
				continue
			}
			id, isBN := strings.CutSuffix(strings.TrimPrefix(name, "vecs."), bnSuffix)
			h, err := strconv.Atoi(id)
			if err != nil || !strings.HasPrefix(name, "vecs.") {
				return fmt.Errorf("training state: unexpected %q", name)
			}
			t, _, err := eng.Vec(optim.Vec(h))
			if err != nil {
				return fmt.Errorf("training state vector %q: %w (the optimizer's Configure must allocate it)", name, err)
			}
			if !isBN {
				if err := load(name, &t); err != nil {
					return err
				}
				continue
			}
			bn, ok := eng.VecStats(optim.Vec(h))
			if !ok {
				return fmt.Errorf("training state: %q belongs to a vector the optimizer did not allocate", name)
			}
			if err := load(name, bn); err != nil {
				return err
			}
		}
		steps := map[string]int64{}
		if err := json.Unmarshal([]byte(meta["optlab.adam_steps"]), &steps); err != nil {
			return fmt.Errorf("training state: optimizer steps: %w", err)
		}
		for i, m := range eng.Members() {
			*m.BaseState().Steps = steps[fmt.Sprintf("members.%d.base", i)]
			if _, st, ok := m.Rho(); ok {
				*st.Steps = steps[fmt.Sprintf("members.%d.rho_base", i)]
			}
		}
		if err := loadBNBatches(eng, meta); err != nil {
			return err
		}
		rng, err := base64.StdEncoding.DecodeString(meta["optlab.host_rng"])
		if err != nil {
			return fmt.Errorf("training state: host random stream: %w", err)
		}
		if err := eng.RandSource().UnmarshalBinary(rng); err != nil {
			return fmt.Errorf("training state: host random stream: %w", err)
		}
		return s.Err()
	})
}

// loadBNBatches restores the BatchNorm counters of metaBNBatches (after
// the vectors and their statistics). Call on the worker.
func loadBNBatches(eng *engine.Engine, meta map[string]string) error {
	raw, ok := meta[metaBNBatches]
	if !ok {
		return nil
	}
	counts := map[string]int64{}
	if err := json.Unmarshal([]byte(raw), &counts); err != nil {
		return fmt.Errorf("training state: BatchNorm counters: %w", err)
	}
	for name, n := range counts {
		var h optim.Vec
		if m, ok := strings.CutPrefix(name, "members."); ok {
			i, err := strconv.Atoi(m)
			if err != nil || i < 0 || i >= len(eng.Members()) {
				return fmt.Errorf("training state: BatchNorm counter of %q: no such member", name)
			}
			h = optim.ParamsOf(i)
		} else if v, ok := strings.CutPrefix(name, "vecs."); ok {
			i, err := strconv.Atoi(v)
			if err != nil {
				return fmt.Errorf("training state: BatchNorm counter of %q: not a vector", name)
			}
			h = optim.Vec(i)
		} else {
			return fmt.Errorf("training state: unexpected BatchNorm counter %q", name)
		}
		if err := eng.SetBNBatches(h, n); err != nil {
			return fmt.Errorf("training state: BatchNorm counter of %q: %w", name, err)
		}
	}
	return nil
}
