package engine

import (
	"context"
	"fmt"
	"math"
	"slices"

	"github.com/optlab/optlab/host/tensor"
	"github.com/optlab/optlab/sdk/opset"
	"github.com/optlab/optlab/sdk/optim"
)

// register is one register of an Exec: a 0-d float64 tensor (a scalar
// register) or a float64 tensor of one value per segment (a segment
// register), on the engine's device, owned by the Exec's register scope.
type register struct {
	t tensor.T
	// seg is the segmentation of a segment register (nil for a scalar).
	seg *segKey
}

// segKey names a segmentation: a vector layout cut by a Segmentation.
type segKey struct {
	layout optim.VecLayout
	by     optim.Segmentation
}

// execState is the state of one Exec: its checker, its register file and
// what its Read and Report ops collected.
type execState struct {
	// ctx is the Exec's: a long op (UpdateBN) stops when it is done.
	ctx   context.Context
	p     *optim.Program
	check *opset.Checker
	rs    *tensor.Scope // owns the registers
	regs  []register
	reads []tensor.T // registers of the Read ops, in order
	// reports are the Report ops' values (owned: detached aliases of their
	// registers), handed to the engine when the Exec succeeds.
	reports []report
}

// report is one reported metric.
type report struct {
	name string
	t    tensor.T // 0-d float64, owned
}

func (x *execState) close() {
	for i := range x.reports {
		x.reports[i].t.Drop()
	}
	x.reports = nil
	x.rs.Close()
}

// reg returns register r (the Checker made sure an earlier op set it).
func (x *execState) reg(r optim.Reg) register { return x.regs[r.Index()-1] }

// coef returns a coefficient operand that is a register, as a tensor for
// the tensor-coefficient kernels applied to dst: the register itself for a
// scalar one, the per-element float32 vector of a segment register's
// values (ExpandSegs). Immediates never come here: they take the scalar
// kernels.
func (e *Engine) coef(s *tensor.Scope, x *execState, n optim.Num, dst tensor.T) tensor.T {
	r, _ := opset.RegOf(n)
	reg := x.reg(r)
	c := reg.t
	if reg.seg != nil {
		g, err := e.segs(*reg.seg)
		if err != nil {
			return s.Fail(err)
		}
		c = s.ExpandSegs(c, g)
	}
	return e.align(s, c, dst)
}

// operand returns an Arith operand as a float64 tensor on the device.
func (e *Engine) operand(s *tensor.Scope, x *execState, n optim.Num) register {
	if v, ok := opset.Imm(n); ok {
		return register{t: s.ScalarTensor(v, e.cfg.Device)}
	}
	r, _ := opset.RegOf(n)
	return x.reg(r)
}

// arith computes an Arith op in float64: a scalar register, or a segment
// register when an operand is one (immediates and scalar registers
// broadcast).
func (e *Engine) arith(s *tensor.Scope, x *execState, o optim.Arith) (register, error) {
	n := o.Kind.Arity()
	ops := make([]tensor.T, n)
	var seg *segKey
	for i, v := range []optim.Num{o.A, o.B, o.C}[:n] {
		r := e.operand(s, x, v)
		ops[i] = r.t
		if r.seg != nil {
			seg = r.seg
		}
	}
	var t tensor.T
	switch o.Kind {
	case optim.ArithAdd:
		t = s.Add(ops[0], ops[1])
	case optim.ArithSub:
		t = s.Sub(ops[0], ops[1])
	case optim.ArithMul:
		t = s.Mul(ops[0], ops[1])
	case optim.ArithDiv:
		t = s.Div(ops[0], ops[1])
	case optim.ArithMin:
		t = goMin(s, ops[0], ops[1])
	case optim.ArithMax:
		t = goMax(s, ops[0], ops[1])
	case optim.ArithSqrt:
		t = s.Sqrt(ops[0])
	case optim.ArithRecip:
		t = s.Reciprocal(ops[0])
	case optim.ArithClamp:
		t = goMin(s, goMax(s, ops[0], ops[1]), ops[2])
	default:
		return register{}, fmt.Errorf("unknown arith kind %d", o.Kind) // the Checker refuses it first
	}
	return register{t: t, seg: seg}, nil
}

// goMin is math.Min elementwise: torch's minimum, except that −Inf wins
// over NaN and that the minimum of two zeros is −0 when either is.
func goMin(s *tensor.Scope, a, b tensor.T) tensor.T {
	zeros := s.LogicalAnd(s.EqScalar(a, 0), s.EqScalar(b, 0))
	r := s.Where(zeros, s.Neg(s.Add(s.Neg(a), s.Neg(b))), s.Minimum(a, b))
	r = s.Where(s.EqScalar(b, math.Inf(-1)), b, r)
	return s.Where(s.EqScalar(a, math.Inf(-1)), a, r)
}

// goMax is math.Max elementwise: torch's maximum, except that +Inf wins
// over NaN and that the maximum of two zeros is +0 when either is.
func goMax(s *tensor.Scope, a, b tensor.T) tensor.T {
	zeros := s.LogicalAnd(s.EqScalar(a, 0), s.EqScalar(b, 0))
	r := s.Where(zeros, s.Add(a, b), s.Maximum(a, b))
	r = s.Where(s.EqScalar(b, math.Inf(1)), b, r)
	return s.Where(s.EqScalar(a, math.Inf(1)), a, r)
}

// segs returns the segmentation k on the engine's device, built on first
// use and cached until Close; members whose tensors have the same shapes
// share one.
func (e *Engine) segs(k segKey) (tensor.Segs, error) {
	if g, ok := e.segCache[k]; ok {
		return *g, nil
	}
	ml := e.layout.Of(k.layout)
	sizes := ml.Segments(k.by)
	if sizes == nil {
		return tensor.Segs{}, fmt.Errorf("unknown segmentation %d", k.by)
	}
	var n int64
	for _, z := range sizes {
		n += z
	}
	if n != ml.Numel {
		return tensor.Segs{}, fmt.Errorf("member %d's tensors hold %d of its %d parameters: they do not tile its vector", k.layout.Member, n, ml.Numel)
	}
	sig := fmt.Sprint(k.by, sizes)
	g, ok := e.segShared[sig]
	if !ok {
		s := tensor.NewScope()
		defer s.Close()
		var gg tensor.Segs
		if k.by == optim.PerColumn {
			gg = s.SegmentsOf(sizes, ml.SegmentOf(k.by), e.cfg.Device)
		} else {
			gg = s.Segments(sizes, e.cfg.Device)
		}
		if err := s.Err(); err != nil {
			return tensor.Segs{}, fmt.Errorf("segments of member %d: %w", k.layout.Member, err)
		}
		gg = s.KeepSegs(gg)
		g = &gg
		e.segShared[sig] = g
	}
	e.segCache[k] = g
	return *g, nil
}

// dropSegs frees the cached segmentations.
func (e *Engine) dropSegs() {
	for _, g := range e.segShared {
		g.Drop()
	}
	clear(e.segShared)
	clear(e.segCache)
}

var segKinds = map[optim.SegKind]tensor.SegKind{
	optim.SegSumSq:  tensor.SegSumSq,
	optim.SegDot:    tensor.SegDot,
	optim.SegSumAbs: tensor.SegSumAbs,
	optim.SegMaxAbs: tensor.SegMaxAbs,
}

// segReduce computes a SegReduce op into a segment register.
func (e *Engine) segReduce(s *tensor.Scope, o optim.SegReduce) (register, error) {
	v, _, err := e.get(o.X)
	if err != nil {
		return register{}, err
	}
	var w tensor.T
	if o.Kind == optim.SegDot {
		if _, w, err = e.same(s, o.X, o.Y); err != nil {
			return register{}, err
		}
	}
	k := segKey{layout: e.vecLayout(o.X), by: o.By}
	g, err := e.segs(k)
	if err != nil {
		return register{}, err
	}
	v = e.toDevice(s, v)
	if w.Valid() {
		w = e.toDevice(s, w)
	}
	return register{t: s.SegReduce(v, w, g, segKinds[o.Kind]), seg: &k}, nil
}

// topKMask computes a TopKMask op: the count of every segment from the
// fraction (an immediate, a scalar register or a segment register of the
// same segmentation), then the mask, on the device.
func (e *Engine) topKMask(s *tensor.Scope, x *execState, o optim.TopKMask) error {
	d, v, err := e.same(s, o.Dst, o.X)
	if err != nil {
		return err
	}
	g, err := e.segs(segKey{layout: e.vecLayout(o.X), by: o.By})
	if err != nil {
		return err
	}
	frac := e.operand(s, x, o.Frac).t
	k := s.SegCounts(frac, g)
	if d.Device() != e.cfg.Device {
		// A spilled destination: build the mask on the device, then copy.
		tmp := s.Zeros(d.Shape(), tensor.Float32, e.cfg.Device)
		s.TopKMask(tmp, e.toDevice(s, v), g, k)
		s.CopyFrom(d, tmp)
		return nil
	}
	s.TopKMask(d, e.toDevice(s, v), g, k)
	return nil
}

// report runs a Report op: the register's value becomes the step's metric
// o.Name, kept on the device until TakeReports.
func (e *Engine) report(s *tensor.Scope, x *execState, o optim.Report) error {
	for _, r := range x.reports {
		if r.name == o.Name {
			return fmt.Errorf("metric %q reported twice in one program", o.Name)
		}
	}
	for _, r := range e.reports {
		if r.name == o.Name {
			return fmt.Errorf("metric %q already reported in this step", o.Name)
		}
	}
	t := s.Detach(x.reg(o.X).t) // an alias: registers are never written in place
	if err := s.Err(); err != nil {
		return err
	}
	x.reports = append(x.reports, report{name: o.Name, t: s.Keep(t)})
	return nil
}

// commitReports hands a successful Exec's reports to the step's.
func (e *Engine) commitReports(x *execState) {
	e.reports = append(e.reports, x.reports...)
	x.reports = nil
}

// readBack reads the registers of the Read ops with one device→host
// transfer (none when there are none).
func (e *Engine) readBack(x *execState) ([]float64, error) {
	if len(x.reads) == 0 {
		return nil, nil
	}
	s := tensor.NewScope()
	defer s.Close()
	e.count.blocking.Add(1)
	vals := s.Scalars(x.reads...)
	if err := s.Err(); err != nil {
		return nil, fmt.Errorf("reading the registers back: %w", err)
	}
	return vals, nil
}

// written returns the vectors op writes (for the non-finite check).
func written(op optim.Op) []optim.Vec {
	switch o := op.(type) {
	case optim.Copy:
		return []optim.Vec{o.Dst}
	case optim.Fill:
		return []optim.Vec{o.Dst}
	case optim.FillRange:
		return []optim.Vec{o.Dst}
	case optim.Scale:
		return []optim.Vec{o.Dst}
	case optim.AddConst:
		return []optim.Vec{o.Dst}
	case optim.Axpy:
		return []optim.Vec{o.Dst}
	case optim.LinComb:
		return []optim.Vec{o.Dst}
	case optim.Unary:
		return []optim.Vec{o.Dst}
	case optim.Binary:
		return []optim.Vec{o.Dst}
	case optim.RandN:
		return []optim.Vec{o.Dst}
	case optim.TopKMask:
		return []optim.Vec{o.Dst}
	case optim.NewtonSchulz:
		return []optim.Vec{o.Dst}
	case optim.Grad:
		return slices.DeleteFunc([]optim.Vec{o.Out, o.OutRho}, func(v optim.Vec) bool { return v == 0 })
	case optim.JointGrad:
		return slices.DeleteFunc(slices.Clone(o.Outs), func(v optim.Vec) bool { return v == 0 })
	case optim.BaseStep:
		return []optim.Vec{o.Params}
	}
	return nil
}

// checkFinite is the debug check (Config.DebugNonFinite) after an op: it
// fails the op when a vector it wrote or a register it set (registers from
// index first on) holds a non-finite value. It reads one flag per value
// back with one blocking transfer.
func (e *Engine) checkFinite(x *execState, op optim.Op, first int) error {
	vecs := written(op)
	regs := x.regs[first:]
	if len(vecs)+len(regs) == 0 {
		return nil
	}
	s := tensor.NewScope()
	defer s.Close()
	var flags []tensor.T
	for _, h := range vecs {
		t, _, err := e.get(h)
		if err != nil {
			return err
		}
		flags = append(flags, e.toDevice(s, s.AllFinite(t)))
	}
	for _, r := range regs {
		flags = append(flags, s.AllFinite(r.t))
	}
	e.count.blocking.Add(1)
	ok := s.Scalars(flags...)
	if err := s.Err(); err != nil {
		return fmt.Errorf("checking for non-finite values: %w", err)
	}
	for i, h := range vecs {
		if ok[i] == 0 {
			return &optim.VecError{Vec: h, Msg: "holds a non-finite value written by this op (" + DebugNonFiniteEnv + "=1)"}
		}
	}
	var names []string
	if sp, ok := opset.SpecOf(op); ok {
		names = sp.Regs
	}
	for j := range regs {
		if ok[len(vecs)+j] == 0 {
			what := fmt.Sprintf("register #%d", first+j+1)
			if j < len(names) && names[j] != "" {
				what += " (" + names[j] + ")"
			}
			return fmt.Errorf("this op set %s to a non-finite value (%s=1)", what, DebugNonFiniteEnv)
		}
	}
	return nil
}

// DebugNonFiniteEnv is the environment variable that turns on the
// engine's check for non-finite values after every op (Config.
// DebugNonFinite): host/train reads it.
const DebugNonFiniteEnv = "OPTLAB_DEBUG_NONFINITE"

// holds reads an If's condition: whether its register holds a value > 0
// (NaN does not). On a GPU it copies one scalar to the host and waits for
// it, which Counters counts as a blocking read; on the CPU it is a read of
// host memory.
func (e *Engine) holds(x *execState, o optim.If) (bool, error) {
	s := tensor.NewScope()
	defer s.Close()
	r := x.reg(o.X)
	if r.t.Device().IsCUDA() {
		e.count.blocking.Add(1)
	}
	v := s.Scalars(r.t)
	if err := s.Err(); err != nil {
		return false, fmt.Errorf("if: reading its condition: %w", err)
	}
	return v[0] > 0, nil
}

// skip appends the registers that op, skipped by an If, would set: NaN,
// and for a segment register NaN in every segment of its segmentation.
func (e *Engine) skip(x *execState, op optim.Op) error {
	var seg *segKey
	switch o := op.(type) {
	case optim.SegReduce:
		seg = &segKey{layout: e.vecLayout(o.X), by: o.By}
	case optim.Arith:
		for _, n := range []optim.Num{o.A, o.B, o.C} {
			if r, ok := n.(optim.Reg); ok && x.reg(r).seg != nil {
				seg = x.reg(r).seg
			}
		}
	}
	n := opset.Emits(op)
	if n == 0 {
		return nil
	}
	s := tensor.NewScope()
	defer s.Close()
	for range n {
		var t tensor.T
		if seg != nil {
			g, err := e.segs(*seg)
			if err != nil {
				return err
			}
			t = s.Zeros([]int64{g.Count()}, tensor.Float64, e.cfg.Device)
			s.Fill(t, math.NaN())
		} else {
			t = s.ScalarTensor(math.NaN(), e.cfg.Device)
		}
		if err := s.Err(); err != nil {
			return err
		}
		x.regs = append(x.regs, register{t: x.rs.Adopt(s.Keep(t)), seg: seg})
	}
	return nil
}
