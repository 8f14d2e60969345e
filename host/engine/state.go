package engine

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/optlab/optlab/host/checkpoint"
	"github.com/optlab/optlab/host/tensor"
	"github.com/optlab/optlab/sdk/optim"
)

// The training state (for resuming a run mid-way) is a flat-vector file:
// unlike SaveCheckpoint's PyTorch state dict it holds everything the engine
// needs to continue bitwise: every member's parameters, buffers,
// base-optimizer state and ρ, the plugin vectors named by the optimizer's
// SaveState, and the host random stream.

// bnSuffix names the BatchNorm statistics a plugin vector carries (see
// optim.Copy) in the training state: "vecs.<handle>.bn".
const bnSuffix = ".bn"

// stateVec is one flat vector of the training state.
type stateVec struct {
	name string
	t    *tensor.T
}

// stateVecs lists the engine's own vectors, allocating missing optimizer
// state on load (alloc set) so that the lists match.
func (e *Engine) stateVecs(s *tensor.Scope, alloc bool) []stateVec {
	var out []stateVec
	for i, m := range e.members {
		p := fmt.Sprintf("members.%d.", i)
		out = append(out, stateVec{p + "params", &m.Params}, stateVec{p + "buffers", &m.Buf})
		add := func(name string, st *baseState) {
			for _, v := range []struct {
				n string
				t *tensor.T
			}{{"buf", &st.buf}, {"m", &st.m}, {"v", &st.v}} {
				if !v.t.Valid() && alloc {
					continue
				}
				if v.t.Valid() {
					out = append(out, stateVec{name + v.n, v.t})
				}
			}
		}
		add(p+"base.", &m.base)
		if m.vi != nil {
			out = append(out, stateVec{p + "rho", &m.vi.rho})
			add(p+"rho_base.", &m.vi.base)
		}
	}
	return out
}

// SaveState copies the engine's training state and the given plugin
// vectors to host memory. Meta receives the scalar state.
func (e *Engine) SaveState(ctx context.Context, vecs []optim.Vec) ([]checkpoint.Tensor, map[string]string, error) {
	var ts []checkpoint.Tensor
	meta := map[string]string{}
	err := e.w.Do(ctx, func() error {
		s := tensor.NewScope()
		defer s.Close()
		for _, v := range e.stateVecs(s, false) {
			ts = append(ts, checkpoint.NewF32(v.name, v.t.Shape(), s.Float32s(*v.t)))
		}
		for _, h := range vecs {
			t, _, err := e.get(h)
			if err != nil {
				return fmt.Errorf("save state: %w", err)
			}
			name := "vecs." + strconv.Itoa(int(h))
			ts = append(ts, checkpoint.NewF32(name, t.Shape(), s.Float32s(t)))
			if v, ok := e.vecs[h]; ok && v.bn.Valid() {
				ts = append(ts, checkpoint.NewF32(name+bnSuffix, v.bn.Shape(), s.Float32s(v.bn)))
			}
		}
		steps := map[string]int64{}
		for i, m := range e.members {
			steps[fmt.Sprintf("members.%d.base", i)] = m.base.t
			if m.vi != nil {
				steps[fmt.Sprintf("members.%d.rho_base", i)] = m.vi.base.t
			}
		}
		b, err := json.Marshal(steps)
		if err != nil {
			return err
		}
		meta["optlab.adam_steps"] = string(b)
		rng, err := e.src.MarshalBinary()
		if err != nil {
			return err
		}
		meta["optlab.host_rng"] = base64.StdEncoding.EncodeToString(rng)
		return s.Err()
	})
	return ts, meta, err
}

// LoadState restores what SaveState saved. The plugin vectors must already
// be allocated (by the optimizer's Configure) with the same handles.
func (e *Engine) LoadState(ctx context.Context, ts map[string]checkpoint.Tensor, meta map[string]string) error {
	return e.w.Do(ctx, func() error {
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
				*dst = s.Keep(s.To(src, e.cfg.Device))
				return s.Err()
			}
			if dst.Numel() != int64(c.Len()) {
				return fmt.Errorf("training state %q has %d elements, want %d", name, c.Len(), dst.Numel())
			}
			s.CopyFrom(*dst, src)
			return s.Err()
		}
		// Optimizer state exists in the file only once it was created.
		for i, m := range e.members {
			p := fmt.Sprintf("members.%d.", i)
			for _, st := range []struct {
				prefix string
				b      *baseState
			}{{p + "base.", &m.base}, {p + "rho_base.", viBase(m)}} {
				if st.b == nil {
					continue
				}
				for _, v := range []struct {
					n string
					t *tensor.T
				}{{"buf", &st.b.buf}, {"m", &st.b.m}, {"v", &st.b.v}} {
					if _, ok := ts[st.prefix+v.n]; ok {
						if err := load(st.prefix+v.n, v.t); err != nil {
							return err
						}
					}
				}
			}
		}
		for _, v := range e.stateVecs(s, true) {
			if used[v.name] {
				continue
			}
			if err := load(v.name, v.t); err != nil {
				return err
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
			t, _, err := e.get(optim.Vec(h))
			if err != nil {
				return fmt.Errorf("training state vector %q: %w (the optimizer's Configure must allocate it)", name, err)
			}
			if !isBN {
				if err := load(name, &t); err != nil {
					return err
				}
				continue
			}
			v, ok := e.vecs[optim.Vec(h)]
			if !ok {
				return fmt.Errorf("training state: %q belongs to a vector the optimizer did not allocate", name)
			}
			if err := load(name, &v.bn); err != nil {
				return err
			}
		}
		steps := map[string]int64{}
		if err := json.Unmarshal([]byte(meta["optlab.adam_steps"]), &steps); err != nil {
			return fmt.Errorf("training state: optimizer steps: %w", err)
		}
		for i, m := range e.members {
			m.base.t = steps[fmt.Sprintf("members.%d.base", i)]
			if m.vi != nil {
				m.vi.base.t = steps[fmt.Sprintf("members.%d.rho_base", i)]
			}
		}
		rng, err := base64.StdEncoding.DecodeString(meta["optlab.host_rng"])
		if err != nil {
			return fmt.Errorf("training state: host random stream: %w", err)
		}
		if err := e.src.UnmarshalBinary(rng); err != nil {
			return fmt.Errorf("training state: host random stream: %w", err)
		}
		return s.Err()
	})
}

func viBase(m *Member) *baseState {
	if m.vi == nil {
		return nil
	}
	return &m.vi.base
}
