package opset

import (
	"errors"
	"fmt"
	"math"
	"reflect"
	"slices"

	"github.com/optlab/optlab/sdk/optim"
)

// NameHandles makes the *optim.VecError inside err (if any) print its
// handle by its name in p (Program.Name): the SDK calls it on the errors
// Exec returns, the host on the errors of the program it ran.
func NameHandles(err error, p *optim.Program) {
	var ve *optim.VecError
	if p != nil && errors.As(err, &ve) {
		ve.Name = p.Name(ve.Vec)
	}
}

// Checker checks the arguments of a program's ops before a host runs them,
// one op at a time and in order (an op may use the vectors and registers of
// the ops before it). The engine and optimtest's exact host both run every
// op through it, so they accept and refuse the same programs with the same
// messages: handles that name no vector, vectors of different layouts,
// unknown kinds (wrapping errors.ErrUnsupported), registers that no earlier
// op set or of the wrong kind, and the arguments of the register and
// segment ops. What only a host can know (the current batch, memory) stays
// with the host.
type Checker struct {
	p    *optim.Program
	l    optim.Layout
	ops  []optim.OpSpec // the op table
	regs []regInfo      // by register index − 1
	// ends are the ends (exclusive op indices) of the If blocks open at
	// the op being checked, innermost last.
	ends []int
	i    int // the index of the op being checked
}

// Allocated tells the Checker the layout of an allocated vector (false:
// the handle names none): the host's view of its vectors.
type Allocated func(optim.Vec) (optim.VecLayout, bool)

// regInfo is what the Checker knows of a register.
type regInfo struct {
	segs   bool
	layout optim.VecLayout // segment registers: the layout they segment
	by     optim.Segmentation
}

// NewChecker returns a Checker of p's ops for a host with layout l.
func NewChecker(p *optim.Program, l optim.Layout) *Checker {
	return &Checker{p: p, l: l, ops: optim.OpSet()}
}

// Check checks op i (the next op in order) before it runs; allocated tells
// which layout an allocated vector has (false: not allocated). It
// returns nil or the error to wrap in an *optim.OpError; a
// *optim.VecError in it has its handle named by p (NameHandles).
func (c *Checker) Check(i int, op optim.Op, allocated Allocated) error {
	c.i = i
	for len(c.ends) > 0 && i >= c.ends[len(c.ends)-1] {
		c.ends = c.ends[:len(c.ends)-1]
	}
	err := c.check(op, allocated)
	if err == nil {
		c.record(op, allocated)
		if o, ok := op.(optim.If); ok {
			c.ends = append(c.ends, i+1+int(o.Len))
		}
	}
	NameHandles(err, c.p)
	return err
}

// vec resolves a handle to its layout.
func (c *Checker) vec(v optim.Vec, allocated Allocated) (optim.VecLayout, error) {
	if m, ok := v.Rho(); ok {
		if m >= len(c.l.Members) || !c.l.Members[m].Variational {
			return optim.VecLayout{}, &optim.VecError{Vec: v, Msg: fmt.Sprintf("names the ρ of member %d, which is not variational", m)}
		}
		return optim.VecLayout{Member: m}, nil
	}
	if m, ok := v.Member(); ok {
		if m >= len(c.l.Members) {
			return optim.VecLayout{}, &optim.VecError{Vec: v, Msg: fmt.Sprintf("names member %d; the run has %d", m, len(c.l.Members))}
		}
		return optim.VecLayout{Member: m}, nil
	}
	l, ok := allocated(v)
	if !ok {
		return optim.VecLayout{}, &optim.VecError{Vec: v, Msg: "is not allocated"}
	}
	return l, nil
}

// describe names layout l in an error: "member 1's layout (N parameters)",
// "member 0's left factors (block 256, N elements)".
func (c *Checker) describe(l optim.VecLayout) string {
	n := c.l.Of(l).Numel
	if l.Shape == optim.ParamShape {
		return fmt.Sprintf("member %d's layout (%d parameters)", l.Member, n)
	}
	if l.Shape == optim.SampleShape {
		return fmt.Sprintf("member %d's sample vectors (%d samples)", l.Member, n)
	}
	return fmt.Sprintf("member %d's %s factors (block %d, %d elements)", l.Member, l.Shape, l.Block, n)
}

// compatible tells whether vectors of layouts a and b may meet in an
// elementwise op: parameter vectors of members with the same number of
// parameters, or factor vectors of one shape and size.
func (c *Checker) compatible(a, b optim.VecLayout) bool {
	if a == b {
		return true
	}
	if (a.Shape == optim.ParamShape) != (b.Shape == optim.ParamShape) {
		return false
	}
	if (a.Shape == optim.SampleShape) != (b.Shape == optim.SampleShape) {
		return false
	}
	return c.l.Of(a).Numel == c.l.Of(b).Numel
}

// same resolves handles that must share one layout and returns the layout
// of the first.
func (c *Checker) same(allocated Allocated, vs ...optim.Vec) (optim.VecLayout, error) {
	var first optim.VecLayout
	for i, v := range vs {
		l, err := c.vec(v, allocated)
		if err != nil {
			return optim.VecLayout{}, err
		}
		if i == 0 {
			first = l
			continue
		}
		if !c.compatible(first, l) {
			if l.Shape == optim.ParamShape && first.Shape == optim.ParamShape {
				return optim.VecLayout{}, &optim.VecError{Vec: v, Msg: fmt.Sprintf("has the layout of member %d (%d parameters), %s has member %d's (%d)",
					l.Member, c.l.Members[l.Member].Numel, c.p.Name(vs[0]), first.Member, c.l.Members[first.Member].Numel)}
			}
			return optim.VecLayout{}, &optim.VecError{Vec: v, Msg: fmt.Sprintf("has %s, %s has %s", c.describe(l), c.p.Name(vs[0]), c.describe(first))}
		}
	}
	return first, nil
}

// params resolves handles that must hold parameters (not factor vectors):
// what a gradient, a base step, BatchNorm statistics or a model evaluation
// reads or writes.
func (c *Checker) params(op string, allocated Allocated, vs ...optim.Vec) error {
	for _, v := range vs {
		l, err := c.vec(v, allocated)
		if err != nil {
			return err
		}
		if l.Shape == optim.SampleShape {
			return &optim.VecError{Vec: v, Msg: fmt.Sprintf("is a sample vector; %s takes parameter-shaped vectors", op)}
		}
		if l.Shape != optim.ParamShape {
			return &optim.VecError{Vec: v, Msg: fmt.Sprintf("is a %s factor vector; %s takes parameter-shaped vectors", l.Shape, op)}
		}
	}
	return nil
}

// sameTensors tells whether layouts a and b have the same tensor shapes (a
// segmentation of one applies to the other).
func (c *Checker) sameTensors(a, b optim.VecLayout) bool {
	if a == b {
		return true
	}
	ta, tb := c.l.Of(a).Tensors, c.l.Of(b).Tensors
	return slices.EqualFunc(ta, tb, func(x, y optim.Tensor) bool { return slices.Equal(x.Shape, y.Shape) })
}

// reg returns what is known of register r, or an error when no earlier op
// set it.
func (c *Checker) reg(r optim.Reg) (regInfo, error) {
	if r.Index() < 1 || r.Index() > len(c.regs) {
		return regInfo{}, fmt.Errorf("register %s is not set by an earlier op of this program (%d so far)", r, len(c.regs))
	}
	return c.regs[r.Index()-1], nil
}

// coef checks an operand that scales or fills a vector of layout m:
// an immediate, a scalar register, or a segment register of m's layout.
func (c *Checker) coef(n optim.Num, m optim.VecLayout) error {
	r, ok := n.(optim.Reg)
	if !ok {
		return nil
	}
	ri, err := c.reg(r)
	if err != nil {
		return err
	}
	if ri.segs && !c.sameTensors(ri.layout, m) {
		return fmt.Errorf("segment register %s segments %s, not %s", r, c.describe(ri.layout), c.describe(m))
	}
	return nil
}

// scalar checks that r is a scalar register set by an earlier op.
func (c *Checker) scalar(r optim.Reg) error {
	ri, err := c.reg(r)
	if err != nil {
		return err
	}
	if ri.segs {
		return fmt.Errorf("register %s holds one value per segment; this op takes a scalar", r)
	}
	return nil
}

func segmentation(by optim.Segmentation) error {
	if by != optim.PerTensor && by != optim.PerRow && by != optim.PerColumn {
		return fmt.Errorf("unknown segmentation %d: %w", by, errors.ErrUnsupported)
	}
	return nil
}

// check checks op before it runs: a value of a known op kind whose
// handles, registers and arguments are valid here.
func (c *Checker) check(op optim.Op, allocated Allocated) error {
	if op == nil {
		return errors.New("nil op")
	}
	if reflect.TypeOf(op).Kind() == reflect.Pointer {
		return fmt.Errorf("op %T is a pointer: programs hold op values (%s{…}, not &%s{…})", op, optim.OpName(op), optim.OpName(op))
	}
	if _, ok := specIn(c.ops, op); !ok {
		return fmt.Errorf("unknown op %T: %w", op, errors.ErrUnsupported)
	}
	return c.checkVecOp(op, allocated)
}

// checkVecOp checks an op that frees, writes or reads vectors; the others
// go to checkRegOp.
func (c *Checker) checkVecOp(op optim.Op, allocated Allocated) error {
	switch o := op.(type) {
	case optim.Alloc:
		if len(c.ends) > 0 {
			return errors.New("alloc inside an If block: which vectors exist must not depend on the device (allocate before the If)")
		}
		return c.alloc(o)
	case optim.If:
		return c.ifBlock(o)
	case optim.Copy:
		if o.BN {
			if err := c.params("a copy with BatchNorm statistics", allocated, o.Dst, o.Src); err != nil {
				return err
			}
		}
		return c.sameLayout(allocated, o.Dst, o.Src)
	case optim.Free:
		if len(c.ends) > 0 {
			return errors.New("free inside an If block: which vectors exist must not depend on the device (free after the block)")
		}
		return c.handle(o.ID, allocated)
	case optim.Grad:
		return c.grad(o, allocated)
	case optim.JointGrad:
		return c.jointGrad(o, allocated)
	case optim.BaseState:
		return c.baseState(o, allocated)
	case optim.BaseStep:
		if err := c.params("base_step", allocated, o.Params, o.Grad); err != nil {
			return err
		}
		return c.sameLayout(allocated, o.Params, o.Grad)
	case optim.Fill:
		return c.withCoef(o.Dst, o.Value, allocated)
	case optim.FillRange:
		return c.handle(o.Dst, allocated)
	case optim.Scale:
		return c.withCoef(o.Dst, o.Alpha, allocated)
	case optim.AddConst:
		return c.withCoef(o.Dst, o.Value, allocated)
	case optim.Axpy:
		return c.axpy(o, allocated)
	case optim.LinComb:
		return c.linComb(o, allocated)
	case optim.Unary:
		return c.unary(o, allocated)
	case optim.Binary:
		return c.binary(o, allocated)
	case optim.RandN:
		return c.handle(o.Dst, allocated)
	case optim.TopKMask:
		return c.topKMask(o, allocated)
	case optim.NewtonSchulz:
		return c.newtonSchulz(o, allocated)
	case optim.Gram:
		return c.gram(o, allocated)
	case optim.MatMul:
		return c.matMul(o, allocated)
	case optim.MatFunc:
		return c.matFunc(o, allocated)
	case optim.SortColumns:
		return c.sortColumns(o, allocated)
	case optim.UpdateBN:
		if _, ok := o.X.Rho(); ok {
			return fmt.Errorf("update_bn of ρ handle %d: X must hold parameters", o.X)
		}
		return c.params("update_bn", allocated, o.X)
	}
	return c.checkRegOp(op, allocated)
}

// checkRegOp checks an op that sets or reads registers; other ops (Alloc,
// SetLR) have nothing to check here.
func (c *Checker) checkRegOp(op optim.Op, allocated Allocated) error {
	switch o := op.(type) {
	case optim.Dot:
		return c.sameLayout(allocated, o.A, o.B)
	case optim.Norm:
		return c.handle(o.X, allocated)
	case optim.Arith:
		return c.arith(o)
	case optim.SegReduce:
		return c.segReduce(o, allocated)
	case optim.Read:
		return c.scalar(o.X)
	case optim.Report:
		if o.Name == "" {
			return errors.New("report needs a metric name")
		}
		return c.scalar(o.X)
	}
	return nil
}

// handle checks that v names a vector: a member's parameters or ρ, or an
// allocated vector.
func (c *Checker) handle(v optim.Vec, allocated Allocated) error {
	_, err := c.vec(v, allocated)
	return err
}

// sameLayout checks that vs name vectors of one layout.
func (c *Checker) sameLayout(allocated Allocated, vs ...optim.Vec) error {
	_, err := c.same(allocated, vs...)
	return err
}

// withCoef checks an op that writes vector dst with operand n (Fill, Scale,
// AddConst).
func (c *Checker) withCoef(dst optim.Vec, n optim.Num, allocated Allocated) error {
	m, err := c.vec(dst, allocated)
	if err != nil {
		return err
	}
	return c.coef(n, m)
}

// grad checks a Grad: its Out, Eps and OutRho are allocated vectors or 0,
// of At's layout.
func (c *Checker) grad(o optim.Grad, allocated Allocated) error {
	vs := []optim.Vec{o.At}
	for _, v := range []optim.Vec{o.Out, o.Eps, o.OutRho} {
		if v < 0 {
			if _, err := c.vec(v, allocated); err != nil {
				return err
			}
			return &optim.VecError{Vec: v, Msg: "is reserved: a gradient's Out, Eps and OutRho are allocated vectors (> 0), or 0 for none"}
		}
		if v != 0 {
			vs = append(vs, v)
		}
	}
	if err := c.params("grad", allocated, vs...); err != nil {
		return err
	}
	if err := c.sameLayout(allocated, vs...); err != nil {
		return err
	}
	return c.gradSamples(o, allocated)
}

// gradSamples checks a Grad's per-sample fields (minor 10): OutLosses and
// Rank are sample vectors of At's member (or 0), Keep is in [1, BatchSize]
// with Rank and 0 without, and they take the whole batch.
func (c *Checker) gradSamples(o optim.Grad, allocated Allocated) error {
	if o.OutLosses == 0 && o.Rank == 0 {
		if o.Keep != 0 {
			return fmt.Errorf("grad: keep = %d without a rank vector (keep applies to Rank's top samples)", o.Keep)
		}
		return nil
	}
	at, _ := c.vec(o.At, allocated)
	for _, v := range []optim.Vec{o.OutLosses, o.Rank} {
		if v == 0 {
			continue
		}
		l, err := c.vec(v, allocated)
		if err != nil {
			return err
		}
		if v < 0 || l.Shape != optim.SampleShape {
			return &optim.VecError{Vec: v, Msg: "is not a sample vector: a gradient's OutLosses and Rank are vectors allocated with Shape samples"}
		}
		if l.Member != at.Member {
			return &optim.VecError{Vec: v, Msg: fmt.Sprintf("is a sample vector of member %d; the pass is member %d's", l.Member, at.Member)}
		}
	}
	if o.Batch.Of > 1 {
		return fmt.Errorf("grad: per-sample losses and a ranked sub-batch take the whole batch, not part %d of %d", o.Batch.Part, o.Batch.Of)
	}
	if o.Eps != 0 || o.OutRho != 0 || c.l.Members[at.Member].Variational {
		return errors.New("grad: per-sample losses and a ranked sub-batch are for deterministic members")
	}
	if o.Rank == 0 {
		if o.Keep != 0 {
			return fmt.Errorf("grad: keep = %d without a rank vector (keep applies to Rank's top samples)", o.Keep)
		}
		return nil
	}
	if o.Keep < 1 || o.Keep > c.l.BatchSize {
		return fmt.Errorf("grad: keep = %d is outside [1, %d] (the batch size)", o.Keep, c.l.BatchSize)
	}
	return nil
}

// baseState checks a BaseState: Dst an allocated parameter vector of the
// layout of Of, the live parameters (or ρ) of a member, and a known name.
// Whether the base optimizer keeps that state the host says.
func (c *Checker) baseState(o optim.BaseState, allocated Allocated) error {
	if o.Dst <= 0 {
		if _, err := c.vec(o.Dst, allocated); err != nil {
			return err
		}
		return &optim.VecError{Vec: o.Dst, Msg: "is reserved: base_state copies into an allocated vector (> 0)"}
	}
	if _, ok := o.Of.Member(); !ok {
		if _, ok := o.Of.Rho(); !ok {
			if _, err := c.vec(o.Of, allocated); err != nil {
				return err
			}
			return &optim.VecError{Vec: o.Of, Msg: "is not a member's live parameters or ρ: the base optimizer keeps state for those only"}
		}
	}
	switch o.Name {
	case optim.MomentumBuffer, optim.ExpAvg, optim.ExpAvgSq:
	default:
		return fmt.Errorf("base_state: unknown state %q (momentum_buffer, exp_avg or exp_avg_sq): %w", o.Name, errors.ErrUnsupported)
	}
	if err := c.params("base_state", allocated, o.Dst, o.Of); err != nil {
		return err
	}
	return c.sameLayout(allocated, o.Dst, o.Of)
}

// jointGrad checks a JointGrad: its Outs are allocated vectors or 0, each
// of its At's layout.
func (c *Checker) jointGrad(o optim.JointGrad, allocated Allocated) error {
	for _, v := range o.Outs {
		if v < 0 {
			if _, err := c.vec(v, allocated); err != nil {
				return err
			}
			return &optim.VecError{Vec: v, Msg: "is reserved: a gradient target is an allocated vector (> 0), or 0 for none"}
		}
	}
	for i, v := range o.Ats {
		vs := []optim.Vec{v}
		if i < len(o.Outs) && o.Outs[i] != 0 {
			vs = append(vs, o.Outs[i])
		}
		if err := c.params("joint_grad", allocated, vs...); err != nil {
			return err
		}
		if _, err := c.same(allocated, vs...); err != nil {
			return err
		}
	}
	return nil
}

// axpy checks an Axpy: Dst and X of one layout, Alpha an operand for it.
func (c *Checker) axpy(o optim.Axpy, allocated Allocated) error {
	m, err := c.same(allocated, o.Dst, o.X)
	if err != nil {
		return err
	}
	return c.coef(o.Alpha, m)
}

// linComb checks a LinComb: Dst and every term's X of one layout, every
// coefficient an operand for it.
func (c *Checker) linComb(o optim.LinComb, allocated Allocated) error {
	vs := []optim.Vec{o.Dst}
	for _, t := range o.Terms {
		vs = append(vs, t.X)
	}
	m, err := c.same(allocated, vs...)
	if err != nil {
		return err
	}
	for _, t := range o.Terms {
		if err := c.coef(t.Coef, m); err != nil {
			return err
		}
	}
	return nil
}

// unary checks a Unary: a known kind, Dst and Src of one layout.
func (c *Checker) unary(o optim.Unary, allocated Allocated) error {
	if o.Kind < optim.Abs || o.Kind > optim.Reciprocal {
		return fmt.Errorf("unknown unary kind %d: %w", o.Kind, errors.ErrUnsupported)
	}
	return c.sameLayout(allocated, o.Dst, o.Src)
}

// binary checks a Binary: a known kind, Dst, A and B of one layout.
func (c *Checker) binary(o optim.Binary, allocated Allocated) error {
	if o.Kind < optim.Mul || o.Kind > optim.Min {
		return fmt.Errorf("unknown binary kind %d: %w", o.Kind, errors.ErrUnsupported)
	}
	return c.sameLayout(allocated, o.Dst, o.A, o.B)
}

// segReduce checks a SegReduce: a known kind and segmentation, and X (and
// Y, for SegDot, of X's layout).
func (c *Checker) segReduce(o optim.SegReduce, allocated Allocated) error {
	if o.Kind < optim.SegSumSq || o.Kind > optim.SegMaxAbs {
		return fmt.Errorf("unknown segment reduction %d: %w", o.Kind, errors.ErrUnsupported)
	}
	if err := segmentation(o.By); err != nil {
		return err
	}
	if o.Kind == optim.SegDot {
		return c.sameLayout(allocated, o.X, o.Y)
	}
	return c.handle(o.X, allocated)
}

// topKMask checks a TopKMask: a known segmentation, Dst and X of one
// layout, and a fraction in [0, 1] or a register of the mask's
// segmentation.
func (c *Checker) topKMask(o optim.TopKMask, allocated Allocated) error {
	if err := segmentation(o.By); err != nil {
		return err
	}
	m, err := c.same(allocated, o.Dst, o.X)
	if err != nil {
		return err
	}
	if k, ok := Imm(o.Frac); ok && !(k >= 0 && k <= 1) {
		return fmt.Errorf("top-k fraction %v is outside [0, 1]", k)
	}
	r, ok := o.Frac.(optim.Reg)
	if !ok {
		return nil
	}
	ri, err := c.reg(r)
	if err != nil {
		return err
	}
	if ri.segs && (ri.by != o.By || !c.sameTensors(ri.layout, m)) {
		return fmt.Errorf("segment register %s segments %s per %s; the mask is per %s of %s", r, c.describe(ri.layout), ri.by, o.By, c.describe(m))
	}
	return nil
}

// MaxNewtonSchulzSteps is the most iterations a NewtonSchulz op may ask
// for.
const MaxNewtonSchulzSteps = 100

// newtonSchulz checks a NewtonSchulz: Dst and Src of one member's tensor
// shapes, Steps in [1, MaxNewtonSchulzSteps], finite coefficients and a
// finite Eps ≥ 0.
func (c *Checker) newtonSchulz(o optim.NewtonSchulz, allocated Allocated) error {
	if o.Steps < 1 || o.Steps > MaxNewtonSchulzSteps {
		return fmt.Errorf("newton_schulz: steps = %d is outside [1, %d]", o.Steps, MaxNewtonSchulzSteps)
	}
	for _, k := range []struct {
		name string
		v    float64
	}{{"a", o.A}, {"b", o.B}, {"c", o.C}, {"eps", o.Eps}} {
		if math.IsNaN(k.v) || math.IsInf(k.v, 0) {
			return fmt.Errorf("newton_schulz: %s = %v is not finite", k.name, k.v)
		}
	}
	if o.Eps < 0 {
		return fmt.Errorf("newton_schulz: eps = %v is negative", o.Eps)
	}
	md, err := c.same(allocated, o.Dst, o.Src)
	if err != nil {
		return err
	}
	if ms, _ := c.vec(o.Src, allocated); !c.sameTensors(md, ms) {
		return &optim.VecError{Vec: o.Src, Msg: fmt.Sprintf("has the tensor shapes of %s, %s has those of %s (newton_schulz takes one layout's matrices)",
			c.describe(ms), c.p.Name(o.Dst), c.describe(md))}
	}
	return nil
}

func (c *Checker) arith(o optim.Arith) error {
	n := o.Kind.Arity()
	if n == 0 {
		return fmt.Errorf("unknown arith kind %d: %w", o.Kind, errors.ErrUnsupported)
	}
	var seg *regInfo
	for j, x := range []optim.Num{o.A, o.B, o.C} {
		if j >= n {
			if x != nil {
				return fmt.Errorf("%s takes %d operand(s); operand %d is set", o.Kind, n, j+1)
			}
			continue
		}
		r, ok := x.(optim.Reg)
		if !ok {
			continue
		}
		ri, err := c.reg(r)
		if err != nil {
			return err
		}
		if !ri.segs {
			continue
		}
		if seg != nil && (seg.by != ri.by || !c.sameTensors(seg.layout, ri.layout)) {
			return fmt.Errorf("segment registers of different segmentations: %s per %s and %s per %s", c.describe(seg.layout), seg.by, c.describe(ri.layout), ri.by)
		}
		seg = &ri
	}
	return nil
}

// record notes the registers op sets.
func (c *Checker) record(op optim.Op, allocated Allocated) {
	switch o := op.(type) {
	case optim.SegReduce:
		m, _ := c.vec(o.X, allocated)
		c.regs = append(c.regs, regInfo{segs: true, layout: m, by: o.By})
		return
	case optim.Arith:
		ri := regInfo{}
		for _, x := range []optim.Num{o.A, o.B, o.C} {
			if r, ok := x.(optim.Reg); ok {
				if r2, err := c.reg(r); err == nil && r2.segs {
					ri = r2
				}
			}
		}
		c.regs = append(c.regs, ri)
		return
	}
	spec, _ := specIn(c.ops, op)
	for range spec.Regs {
		c.regs = append(c.regs, regInfo{})
	}
}

// alloc checks an Alloc's member, shape and block (the handle is the
// host's to check: it knows which are allocated).
func (c *Checker) alloc(o optim.Alloc) error {
	if o.Member < 0 || int(o.Member) >= len(c.l.Members) {
		return fmt.Errorf("alloc: no member %d (the run has %d)", o.Member, len(c.l.Members))
	}
	if o.Shape < optim.ParamShape || o.Shape > optim.SampleShape {
		return fmt.Errorf("alloc: unknown vector shape %d: %w", o.Shape, errors.ErrUnsupported)
	}
	if o.Shape == optim.SampleShape && c.l.BatchSize <= 0 {
		return errors.New("alloc of a sample vector: the host's layout has no batch size (a data-free problem)")
	}
	if err := c.l.Members[o.Member].CheckFactors(o.Shape, o.Block); err != nil {
		return fmt.Errorf("alloc of member %d's %s vector: %w", o.Member, o.Shape, err)
	}
	return nil
}

// finite checks that the named immediates of op are finite.
func finite(op string, kv ...any) error {
	for i := 0; i+1 < len(kv); i += 2 {
		if v := kv[i+1].(float64); math.IsNaN(v) || math.IsInf(v, 0) {
			return fmt.Errorf("%s: %s = %v is not finite", op, kv[i], v)
		}
	}
	return nil
}

// factor resolves a handle that must be a factor vector.
func (c *Checker) factor(op, role string, v optim.Vec, allocated Allocated) (optim.VecLayout, error) {
	l, err := c.vec(v, allocated)
	if err != nil {
		return l, err
	}
	if l.Shape == optim.SampleShape {
		return l, &optim.VecError{Vec: v, Msg: fmt.Sprintf("is a sample vector; %s's %s is a factor vector (Alloc with a factor shape)", op, role)}
	}
	if l.Shape == optim.ParamShape {
		return l, &optim.VecError{Vec: v, Msg: fmt.Sprintf("holds parameters; %s's %s is a factor vector (Alloc with a shape)", op, role)}
	}
	return l, nil
}

// matchTiles checks that factor vector f (of layout fl) has one matrix per
// tile, of the tiles' rows (a left factor's role) or columns, and names the
// first that does not match.
func (c *Checker) matchTiles(op, role string, f optim.Vec, fl optim.VecLayout, tl optim.MemberLayout, tiles []optim.Tile, rows bool) error {
	ft := c.l.Of(fl).Tensors
	if len(ft) != len(tiles) {
		return &optim.VecError{Vec: f, Msg: fmt.Sprintf("has %d matrices (%s); %s's %s needs one per block: %d", len(ft), c.describe(fl), op, role, len(tiles))}
	}
	for i, t := range tiles {
		side, what := t.Cols, "columns"
		if rows {
			side, what = t.Rows, "rows"
		}
		if got := ft[i].Shape; len(got) != 2 || got[0] != side || got[1] != side {
			return &optim.VecError{Vec: f, Msg: fmt.Sprintf("has matrix %s of shape %v; %s's %s for block %d of tensor %s (%d×%d) must be %d×%d (its %s)",
				ft[i].Name, got, op, role, i, tl.Tensors[t.Matrix.Tensor].Name, t.Rows, t.Cols, side, side, what)}
		}
	}
	return nil
}

// gram checks a Gram: Dst a factor vector whose matrices match Src's tiles
// cut by Dst's blocks, finite coefficients.
func (c *Checker) gram(o optim.Gram, allocated Allocated) error {
	if err := finite("gram", "beta", o.Beta, "alpha", o.Alpha); err != nil {
		return err
	}
	dl, err := c.factor("gram", "dst", o.Dst, allocated)
	if err != nil {
		return err
	}
	sl, err := c.vec(o.Src, allocated)
	if err != nil {
		return err
	}
	if o.Dst == o.Src {
		return &optim.VecError{Vec: o.Dst, Msg: "is both gram's dst and src"}
	}
	return c.matchTiles("gram", "dst", o.Dst, dl, c.l.Of(sl), c.l.TilesOf(sl, dl.Block), dl.Shape == optim.LeftFactor)
}

// matMul checks a MatMul: Dst and Src of one layout, at least one factor,
// each a factor vector whose matrices match Src's tiles, neither Dst.
func (c *Checker) matMul(o optim.MatMul, allocated Allocated) error {
	sl, err := c.same(allocated, o.Src, o.Dst)
	if err != nil {
		return err
	}
	if o.Left == 0 && o.Right == 0 {
		return errors.New("mat_mul needs a left or a right factor (0 is the identity)")
	}
	var block int64
	ls := map[string]optim.VecLayout{}
	for _, f := range []struct {
		role string
		v    optim.Vec
	}{{"left", o.Left}, {"right", o.Right}} {
		if f.v == 0 {
			continue
		}
		if f.v == o.Dst {
			return &optim.VecError{Vec: f.v, Msg: fmt.Sprintf("is both mat_mul's dst and its %s factor", f.role)}
		}
		l, err := c.factor("mat_mul", f.role+" factor", f.v, allocated)
		if err != nil {
			return err
		}
		if len(ls) == 0 {
			block = l.Block
		}
		ls[f.role] = l
	}
	tiles := c.l.TilesOf(sl, block)
	if len(tiles) == 0 {
		return &optim.VecError{Vec: o.Src, Msg: "has no matrix tensors (2+ dims) for mat_mul"}
	}
	if l, ok := ls["left"]; ok {
		if err := c.matchTiles("mat_mul", "left factor", o.Left, l, c.l.Of(sl), tiles, true); err != nil {
			return err
		}
	}
	if l, ok := ls["right"]; ok {
		if err := c.matchTiles("mat_mul", "right factor", o.Right, l, c.l.Of(sl), tiles, false); err != nil {
			return err
		}
	}
	return nil
}

// matFunc checks a MatFunc: a known kind with valid Root and Eps, Dst and
// Src factor vectors of one layout.
func (c *Checker) matFunc(o optim.MatFunc, allocated Allocated) error {
	switch o.Kind {
	case optim.InvRoot, optim.PinvRoot:
		if err := finite("mat_func "+o.Kind.String(), "root", o.Root, "eps", o.Eps); err != nil {
			return err
		}
		if o.Root <= 0 {
			return fmt.Errorf("mat_func %s: root = %v must be > 0 (the p of A^(-1/p))", o.Kind, o.Root)
		}
		if o.Kind == optim.InvRoot && o.Eps <= 0 {
			return fmt.Errorf("mat_func inv_root: eps = %v must be > 0 (it regularizes A + eps·I; pinv_root takes 0)", o.Eps)
		}
		if o.Eps < 0 {
			return fmt.Errorf("mat_func pinv_root: eps = %v is negative", o.Eps)
		}
	case optim.EigVecs, optim.EigVals, optim.QR:
	default:
		return fmt.Errorf("unknown mat_func kind %d: %w", o.Kind, errors.ErrUnsupported)
	}
	if _, err := c.factor("mat_func", "src", o.Src, allocated); err != nil {
		return err
	}
	return c.sameLayout(allocated, o.Dst, o.Src)
}

// sortColumns checks a SortColumns: Dst and Key factor vectors of one
// layout, and Carry 0 or a parameter vector of their member.
func (c *Checker) sortColumns(o optim.SortColumns, allocated Allocated) error {
	l, err := c.factor("sort_columns", "dst", o.Dst, allocated)
	if err != nil {
		return err
	}
	if _, err := c.factor("sort_columns", "key", o.Key, allocated); err != nil {
		return err
	}
	if err := c.sameLayout(allocated, o.Dst, o.Key); err != nil {
		return err
	}
	if o.Carry == 0 {
		return nil
	}
	cl, err := c.vec(o.Carry, allocated)
	if err != nil {
		return err
	}
	if cl.Shape != optim.ParamShape || cl.Member != l.Member {
		return &optim.VecError{Vec: o.Carry, Msg: fmt.Sprintf("has %s; sort_columns's carry is a parameter vector of member %d, whose blocks %s's matrices sort", c.describe(cl), l.Member, c.p.Name(o.Dst))}
	}
	return nil
}

// ifBlock checks an If: a scalar register, Len ≥ 1, and a block that lies
// within the program and within the block that holds the If.
func (c *Checker) ifBlock(o optim.If) error {
	if err := c.scalar(o.X); err != nil {
		return err
	}
	if o.Len < 1 {
		return fmt.Errorf("if: len = %d; a block has at least one op", o.Len)
	}
	end := c.i + 1 + int(o.Len)
	if n := len(c.ends); n > 0 && end > c.ends[n-1] {
		return fmt.Errorf("if: its block (ops %d to %d) leaves the block that holds it (which ends before op %d)", c.i+1, end-1, c.ends[n-1])
	}
	if c.p != nil && end > len(c.p.Ops) {
		return fmt.Errorf("if: a block of %d ops from op %d runs past the program's end (%d ops)", o.Len, c.i+1, len(c.p.Ops))
	}
	return nil
}

// Blocks follows the If blocks of a program as a host runs it, op by op in
// order: Skipped says whether op i lies in a block whose condition did not
// hold (the host skips it, setting its registers to NaN), and If records
// the outcome of an If it ran. The zero value is ready.
type Blocks struct{ end int }

// Skipped reports whether op i is skipped.
func (b *Blocks) Skipped(i int) bool { return i < b.end }

// If records that If op i, o, held (its block runs) or not (it is skipped).
func (b *Blocks) If(i int, o optim.If, holds bool) {
	if !holds {
		b.end = i + 1 + int(o.Len)
	}
}

// BaseStateRefusal returns the error of a BaseState asking for state name
// of a base optimizer base ("sgd" or "adam") with momentum momentum (SGD's),
// or nil when that optimizer keeps that state: every host refuses with
// these words.
func BaseStateRefusal(base string, momentum float64, name string) error {
	switch base {
	case "sgd":
		if name != optim.MomentumBuffer {
			return fmt.Errorf("base_state: the base optimizer is sgd, which keeps momentum_buffer (with momentum ≠ 0), not %s", name)
		}
		if momentum == 0 {
			return errors.New("base_state: the base optimizer is sgd with momentum 0, which keeps no momentum_buffer (set the base optimizer's momentum)")
		}
		return nil
	case "adam":
		if name != optim.ExpAvg && name != optim.ExpAvgSq {
			return fmt.Errorf("base_state: the base optimizer is adam, which keeps exp_avg and exp_avg_sq, not %s", name)
		}
		return nil
	}
	return fmt.Errorf("base_state: unknown base optimizer %q", base)
}
