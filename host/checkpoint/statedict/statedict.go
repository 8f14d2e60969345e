// Package statedict converts between an engine's members and PyTorch state
// dicts, the content of optlab's model checkpoints (host/checkpoint is their
// file format, and stays free of torch).
//
// A checkpoint holds, for each member, the parameters and BatchNorm running
// statistics under the model's PyTorch names (F32), plus a
// num_batches_tracked I64 scalar per BatchNorm, so that the twin in
// bench/torch_models.py loads the file with strict load_state_dict. A run
// with several members prefixes member m's names with "members.<m>.".
// num_batches_tracked is, as in PyTorch, the number of passes that updated
// the statistics saved beside it (engine.BNBatches: gradient passes with
// BNUpdate, or the batches of the last UpdateBN), the same for every
// BatchNorm of a member.
//
// The helpers work on host copies so that later checkpoint kinds (plugin
// vectors, base-optimizer state: all with a member's parameter layout)
// reuse them: vecState/splitVector to export, joinVector to import,
// uploadMember-style single copies to upload.
package statedict

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/optlab/optlab/host/checkpoint"
	"github.com/optlab/optlab/host/engine"
	"github.com/optlab/optlab/host/model"
	"github.com/optlab/optlab/host/tensor"
	"github.com/optlab/optlab/sdk/optim"
)

// Suffixes of BatchNorm state names: optlab's running_mean buffer, and the
// counter PyTorch keeps next to it (see the package documentation).
const (
	runningMean       = ".running_mean"
	numBatchesTracked = ".num_batches_tracked"
)

// MemberPrefix returns the prefix of member m's names in a checkpoint of a
// run with n members: "" for a single member, else "members.<m>.".
func MemberPrefix(m, n int) string {
	if n == 1 {
		return ""
	}
	return "members." + strconv.Itoa(m) + "."
}

// Export copies member m's parameters and BatchNorm buffers to host memory
// (one device-to-host copy per flat vector) and returns them as named
// tensors with the model's PyTorch names. The tensors' data are slices of
// one host copy per vector.
func Export(ctx context.Context, eng *engine.Engine, m int) ([]checkpoint.Tensor, error) {
	members := eng.Members()
	if m < 0 || m >= len(members) {
		return nil, fmt.Errorf("export: no member %d (run has %d)", m, len(members))
	}
	var out []checkpoint.Tensor
	err := eng.Worker().Do(ctx, func() error {
		mod := members[m].Model
		params, buf, _, err := vecState(eng, optim.ParamsOf(m))
		if err != nil {
			return fmt.Errorf("export member %d (%s): %w", m, mod.Arch, err)
		}
		if int64(len(params)) != mod.Numel || int64(len(buf)) != mod.BufNumel {
			return fmt.Errorf("export member %d (%s): device vectors of %d and %d elements, want %d and %d", m, mod.Arch, len(params), len(buf), mod.Numel, mod.BufNumel)
		}
		out = stateDict(mod, params, buf, eng.BNBatches(optim.ParamsOf(m)), "")
		return nil
	})
	return out, err
}

// stateDict names slices of a member's host copies: parameters, buffers and
// a num_batches_tracked scalar per BatchNorm (batches, the passes that
// updated the buffers), each name prefixed.
func stateDict(mod *model.Model, params, buf []float32, batches int64, prefix string) []checkpoint.Tensor {
	out := splitVector(mod, params, prefix)
	for i, b := range mod.Buffers {
		off := mod.BufOffsets[i]
		n := model.Numel(b.Shape)
		out = append(out, checkpoint.NewF32(prefix+b.Name, cloneShape(b.Shape), buf[off:off+n:off+n]))
	}
	for _, name := range bnCounters(mod) {
		out = append(out, checkpoint.NewI64(prefix+name, []int64{}, []int64{batches}))
	}
	return out
}

// splitVector names the slices of a flat vector with a member's parameter
// layout (parameters, or any plugin vector or optimizer state of that
// layout) by the parameters' names, each prefixed.
func splitVector(mod *model.Model, flat []float32, prefix string) []checkpoint.Tensor {
	out := make([]checkpoint.Tensor, 0, len(mod.Params))
	for i, p := range mod.Params {
		off := mod.Offsets[i]
		n := p.Numel()
		out = append(out, checkpoint.NewF32(prefix+p.Name, cloneShape(p.Shape), flat[off:off+n:off+n]))
	}
	return out
}

// bnCounters returns the num_batches_tracked names of a model's BatchNorms
// (one per running_mean buffer).
func bnCounters(mod *model.Model) []string {
	var out []string
	for _, b := range mod.Buffers {
		if base, ok := strings.CutSuffix(b.Name, runningMean); ok {
			out = append(out, base+numBatchesTracked)
		}
	}
	return out
}

func cloneShape(s []int64) []int64 { return append([]int64{}, s...) }

// Import sets member m's parameters and BatchNorm buffers from named
// tensors (F32, or F64 converted to float32) with the model's PyTorch names.
// Every parameter and buffer must be present with its exact shape and no
// other name may appear; num_batches_tracked scalars are accepted but not
// required: the member's counter (engine.BNBatches) becomes the largest of
// them (PyTorch counts per BatchNorm, optlab per member), or 0 without
// them. All problems are reported in one error, and nothing is changed
// unless every check passes. The flat vectors are built on the host and
// uploaded with one copy each.
func Import(ctx context.Context, eng *engine.Engine, m int, tensors map[string]checkpoint.Tensor) error {
	members := eng.Members()
	if m < 0 || m >= len(members) {
		return fmt.Errorf("import: no member %d (run has %d)", m, len(members))
	}
	mem := members[m]
	params, buf, batches, err := joinStateDict(mem.Model, tensors)
	if err != nil {
		return fmt.Errorf("member %d (%s): %w", m, mem.Model.Arch, err)
	}
	return eng.Worker().Do(ctx, func() error {
		if err := uploadMember(mem, params, buf); err != nil {
			return fmt.Errorf("member %d (%s): uploading: %w", m, mem.Model.Arch, err)
		}
		return eng.SetBNBatches(optim.ParamsOf(m), batches)
	})
}

// uploadMember copies host vectors into a member's flat parameter and buffer
// vectors, one host-to-device copy each (none for an empty buf). Call on the
// worker.
func uploadMember(mem *engine.Member, params, buf []float32) error {
	s := tensor.NewScope()
	defer s.Close()
	s.CopyFrom(mem.Params, s.FromFloat32(params, []int64{int64(len(params))}, tensor.CPU))
	if len(buf) > 0 {
		s.CopyFrom(mem.Buf, s.FromFloat32(buf, []int64{int64(len(buf))}, tensor.CPU))
	}
	return s.Err()
}

// stateMismatch collects what is wrong with a state dict.
type stateMismatch struct {
	missing, extra, bad []string
}

// err returns nil when nothing is wrong, else one error listing every
// problem (at most 20 names of each kind).
func (mm *stateMismatch) err() error {
	if len(mm.missing)+len(mm.extra)+len(mm.bad) == 0 {
		return nil
	}
	var parts []string
	add := func(what string, list []string) {
		if len(list) == 0 {
			return
		}
		sort.Strings(list)
		const show = 20
		s := fmt.Sprintf("%d %s: %s", len(list), what, strings.Join(list[:min(len(list), show)], ", "))
		if len(list) > show {
			s += fmt.Sprintf(", … (%d more)", len(list)-show)
		}
		parts = append(parts, s)
	}
	add("missing", mm.missing)
	add("unexpected", mm.extra)
	add("mismatched", mm.bad)
	return fmt.Errorf("checkpoint does not match the model: %s", strings.Join(parts, "; "))
}

// joinStateDict checks tensors against a model's layout and builds its flat
// parameter and buffer vectors, and returns the largest of its
// num_batches_tracked counters (0 without them).
func joinStateDict(mod *model.Model, tensors map[string]checkpoint.Tensor) (params, buf []float32, batches int64, err error) {
	var mm stateMismatch
	used := map[string]bool{}
	params = joinVector(&mm, used, mod, tensors, "")
	buf = make([]float32, mod.BufNumel)
	for i, b := range mod.Buffers {
		fillFromTensor(&mm, tensors, used, b.Name, b.Shape, buf[mod.BufOffsets[i]:])
	}
	for _, name := range bnCounters(mod) {
		t, ok := tensors[name]
		if !ok {
			continue
		}
		used[name] = true
		if t.Numel() != 1 || len(t.Shape) > 1 || t.Len() != 1 {
			mm.bad = append(mm.bad, fmt.Sprintf("%s (%s%s, want a scalar)", name, t.DType, checkpoint.ShapeString(t.Shape)))
			continue
		}
		n, ok := counterValue(t)
		if !ok {
			mm.bad = append(mm.bad, fmt.Sprintf("%s (%s, want a whole number ≥ 0)", name, counterString(t)))
			continue
		}
		batches = max(batches, n)
	}
	for name := range tensors {
		if !used[name] {
			mm.extra = append(mm.extra, name)
		}
	}
	if err := mm.err(); err != nil {
		return nil, nil, 0, err
	}
	return params, buf, batches, nil
}

// counterValue returns the count a one-value num_batches_tracked tensor
// holds, a whole number ≥ 0 (I64, as PyTorch saves it, or a float).
func counterValue(t checkpoint.Tensor) (int64, bool) {
	if t.DType == checkpoint.I64 {
		return t.I64[0], t.I64[0] >= 0
	}
	f, err := t.Float32s()
	if err != nil || !(f[0] >= 0) || f[0] != float32(int64(f[0])) {
		return 0, false
	}
	return int64(f[0]), true
}

// counterString prints the value of a one-value tensor for a message.
func counterString(t checkpoint.Tensor) string {
	if t.DType == checkpoint.I64 {
		return fmt.Sprint(t.I64[0])
	}
	f, err := t.Float32s()
	if err != nil {
		return string(t.DType)
	}
	return fmt.Sprint(f[0])
}

// joinVector builds a flat vector with a member's parameter layout from the
// tensors named prefix+<parameter name> (the inverse of splitVector),
// recording problems in mm and the names it used in used.
func joinVector(mm *stateMismatch, used map[string]bool, mod *model.Model, tensors map[string]checkpoint.Tensor, prefix string) []float32 {
	flat := make([]float32, mod.Numel)
	for i, p := range mod.Params {
		fillFromTensor(mm, tensors, used, prefix+p.Name, p.Shape, flat[mod.Offsets[i]:])
	}
	return flat
}

// fillFromTensor copies tensor name into dst after checking its shape and dtype.
func fillFromTensor(mm *stateMismatch, tensors map[string]checkpoint.Tensor, used map[string]bool, name string, shape []int64, dst []float32) {
	t, ok := tensors[name]
	if !ok {
		mm.missing = append(mm.missing, name)
		return
	}
	used[name] = true
	if !slices.Equal(t.Shape, shape) {
		mm.bad = append(mm.bad, fmt.Sprintf("%s (shape %s, want %s)", name, checkpoint.ShapeString(t.Shape), checkpoint.ShapeString(shape)))
		return
	}
	if t.DType != checkpoint.F32 && t.DType != checkpoint.F64 {
		mm.bad = append(mm.bad, fmt.Sprintf("%s (dtype %s, want F32 or F64)", name, t.DType))
		return
	}
	v, err := t.Float32s()
	if err != nil || int64(len(v)) != model.Numel(shape) {
		mm.bad = append(mm.bad, fmt.Sprintf("%s (%d values for shape %s)", name, len(v), checkpoint.ShapeString(shape)))
		return
	}
	copy(dst, v)
}

// Save writes every member's parameters and BatchNorm buffers to a
// safetensors file at path (atomically). A single member is stored under
// its bare PyTorch names; with several, member m's names are prefixed with
// "members.<m>.". The metadata records the format ("pt"), the members'
// architectures and the current step, plus any extra metadata given.
func Save(ctx context.Context, eng *engine.Engine, path string, extra ...map[string]string) error {
	var all []checkpoint.Tensor
	members := eng.Members()
	archs := make([]string, len(members))
	for m, mem := range members {
		ts, err := Export(ctx, eng, m)
		if err != nil {
			return fmt.Errorf("checkpoint %s: %w", path, err)
		}
		prefix := MemberPrefix(m, len(members))
		for i := range ts {
			ts[i].Name = prefix + ts[i].Name
		}
		all = append(all, ts...)
		archs[m] = mem.Model.Arch
	}
	meta := map[string]string{}
	for _, x := range extra {
		for k, v := range x {
			meta[k] = v
		}
	}
	return write(eng, path, all, archs, meta)
}

// Load sets every member's parameters and BatchNorm buffers from
// the safetensors file at path (a Gaussian's posterior_std. and
// posterior_rho. tensors, which SavePredictive writes, are skipped). A file whose names carry "members.<m>."
// prefixes must hold exactly this run's members, each loaded into its own;
// a file of bare names (a single model, e.g. a PyTorch state dict) is
// loaded into every member. Nothing is loaded unless every member matches.
func Load(ctx context.Context, eng *engine.Engine, path string) error {
	ts, _, err := checkpoint.Read(path)
	if err != nil {
		return err
	}
	dropExtras(ts)
	members := eng.Members()
	perMember, err := splitMembers(ts, len(members))
	if err != nil {
		return fmt.Errorf("checkpoint %s: %w", path, err)
	}
	type flat struct {
		params, buf []float32
		batches     int64
	}
	flats := make([]flat, len(members))
	// Members that fail the same way (one file of bare names loaded into
	// several members of one architecture) are reported together.
	var msgs []string
	who := map[string][]string{}
	for m, mem := range members {
		p, b, n, err := joinStateDict(mem.Model, perMember[m])
		if err != nil {
			msg := err.Error()
			if _, ok := who[msg]; !ok {
				msgs = append(msgs, msg)
			}
			who[msg] = append(who[msg], fmt.Sprintf("%d (%s)", m, mem.Model.Arch))
			continue
		}
		flats[m] = flat{p, b, n}
	}
	if len(msgs) > 0 {
		parts := make([]string, len(msgs))
		for i, msg := range msgs {
			noun := "member"
			if len(who[msg]) > 1 {
				noun = "members"
			}
			parts[i] = fmt.Sprintf("%s %s: %s", noun, strings.Join(who[msg], ", "), msg)
		}
		return fmt.Errorf("checkpoint %s: %s", path, strings.Join(parts, "; "))
	}
	err = eng.Worker().Do(ctx, func() error {
		for m, mem := range members {
			if err := uploadMember(mem, flats[m].params, flats[m].buf); err != nil {
				return fmt.Errorf("member %d (%s): %w", m, mem.Model.Arch, err)
			}
			if err := eng.SetBNBatches(optim.ParamsOf(m), flats[m].batches); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("checkpoint %s: uploading: %w", path, err)
	}
	return nil
}

// hasMemberPrefix tells whether a file names its tensors per member.
func hasMemberPrefix(ts map[string]checkpoint.Tensor) bool {
	for name := range ts {
		if strings.HasPrefix(name, "members.") {
			return true
		}
	}
	return false
}

// dropExtras deletes from a checkpoint's tensors what SavePredictive saves
// beside the model (a Gaussian's spread, sparse members' masks).
func dropExtras(ts map[string]checkpoint.Tensor) {
	for name := range ts {
		if strings.HasPrefix(name, PosteriorStd) || strings.HasPrefix(name, PosteriorRho) || strings.HasPrefix(name, MaskPrefix) {
			delete(ts, name)
		}
	}
}

// MemberTensors returns member m's model tensors of a checkpoint under
// their bare names: those prefixed "members.<m>." in a file of several
// members, else all of them (never a Gaussian's spread or a mask).
func MemberTensors(ts map[string]checkpoint.Tensor, m int) (map[string]checkpoint.Tensor, error) {
	dropExtras(ts)
	if !hasMemberPrefix(ts) {
		return ts, nil
	}
	prefix := MemberPrefix(m, 2)
	out := map[string]checkpoint.Tensor{}
	for name, t := range ts {
		if local, ok := strings.CutPrefix(name, prefix); ok {
			out[local] = t
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no tensors of member %d (%s…)", m, prefix)
	}
	return out, nil
}

// splitMembers assigns a file's tensors to the n members of a run: by
// "members.<m>." prefix when any name has one, else all of them to every
// member.
func splitMembers(ts map[string]checkpoint.Tensor, n int) ([]map[string]checkpoint.Tensor, error) {
	out := make([]map[string]checkpoint.Tensor, n)
	if !hasMemberPrefix(ts) {
		for m := range out {
			out[m] = ts
		}
		return out, nil
	}
	for m := range out {
		out[m] = map[string]checkpoint.Tensor{}
	}
	var stray []string
	seen := map[int]bool{}
	for name, t := range ts {
		rest, ok := strings.CutPrefix(name, "members.")
		idx, local, ok2 := strings.Cut(rest, ".")
		m, err := strconv.Atoi(idx)
		if !ok || !ok2 || err != nil || m < 0 || strconv.Itoa(m) != idx {
			stray = append(stray, name)
			continue
		}
		seen[m] = true
		if m >= len(out) {
			continue
		}
		out[m][local] = t
	}
	if len(stray) > 0 {
		sort.Strings(stray)
		return nil, fmt.Errorf("names without a members.<m>. prefix in a file of several members: %s", strings.Join(stray[:min(len(stray), 20)], ", "))
	}
	complete := len(seen) == n
	for m := range out {
		complete = complete && seen[m]
	}
	if !complete {
		return nil, fmt.Errorf("the file holds members %s, the run has %d member(s)", memberList(seen), n)
	}
	return out, nil
}

// memberList renders the member indices of a file, sorted.
func memberList(seen map[int]bool) string {
	idx := make([]int, 0, len(seen))
	for m := range seen {
		idx = append(idx, m)
	}
	sort.Ints(idx)
	parts := make([]string, len(idx))
	for i, m := range idx {
		parts[i] = strconv.Itoa(m)
	}
	return strings.Join(parts, ", ")
}
