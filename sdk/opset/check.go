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
}

// regInfo is what the Checker knows of a register.
type regInfo struct {
	segs   bool
	member int // segment registers: the member whose layout they segment
	by     optim.Segmentation
}

// NewChecker returns a Checker of p's ops for a host with layout l.
func NewChecker(p *optim.Program, l optim.Layout) *Checker {
	return &Checker{p: p, l: l, ops: optim.OpSet()}
}

// Check checks op i (the next op in order) before it runs; allocated tells
// which member's layout an allocated vector has (false: not allocated). It
// returns nil or the error to wrap in an *optim.OpError; a
// *optim.VecError in it has its handle named by p (NameHandles).
func (c *Checker) Check(i int, op optim.Op, allocated func(optim.Vec) (int, bool)) error {
	err := c.check(op, allocated)
	if err == nil {
		c.record(op, allocated)
	}
	NameHandles(err, c.p)
	return err
}

// vec resolves a handle to its member.
func (c *Checker) vec(v optim.Vec, allocated func(optim.Vec) (int, bool)) (int, error) {
	if m, ok := v.Rho(); ok {
		if m >= len(c.l.Members) || !c.l.Members[m].Variational {
			return 0, &optim.VecError{Vec: v, Msg: fmt.Sprintf("names the ρ of member %d, which is not variational", m)}
		}
		return m, nil
	}
	if m, ok := v.Member(); ok {
		if m >= len(c.l.Members) {
			return 0, &optim.VecError{Vec: v, Msg: fmt.Sprintf("names member %d; the run has %d", m, len(c.l.Members))}
		}
		return m, nil
	}
	m, ok := allocated(v)
	if !ok {
		return 0, &optim.VecError{Vec: v, Msg: "is not allocated"}
	}
	return m, nil
}

// same resolves handles that must share one layout and returns the member
// of the first.
func (c *Checker) same(allocated func(optim.Vec) (int, bool), vs ...optim.Vec) (int, error) {
	first := -1
	for _, v := range vs {
		m, err := c.vec(v, allocated)
		if err != nil {
			return 0, err
		}
		if first < 0 {
			first = m
			continue
		}
		if m != first && c.l.Members[m].Numel != c.l.Members[first].Numel {
			return 0, &optim.VecError{Vec: v, Msg: fmt.Sprintf("has the layout of member %d (%d parameters), %s has member %d's (%d)",
				m, c.l.Members[m].Numel, c.p.Name(vs[0]), first, c.l.Members[first].Numel)}
		}
	}
	return first, nil
}

// sameTensors tells whether members a and b have the same tensor shapes (a
// segmentation of one applies to the other).
func (c *Checker) sameTensors(a, b int) bool {
	if a == b {
		return true
	}
	ta, tb := c.l.Members[a].Tensors, c.l.Members[b].Tensors
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

// coef checks an operand that scales or fills a vector of member m:
// an immediate, a scalar register, or a segment register of m's layout.
func (c *Checker) coef(n optim.Num, m int) error {
	r, ok := n.(optim.Reg)
	if !ok {
		return nil
	}
	ri, err := c.reg(r)
	if err != nil {
		return err
	}
	if ri.segs && !c.sameTensors(ri.member, m) {
		return fmt.Errorf("segment register %s segments member %d's layout, not member %d's", r, ri.member, m)
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
	if by != optim.PerTensor && by != optim.PerRow {
		return fmt.Errorf("unknown segmentation %d: %w", by, errors.ErrUnsupported)
	}
	return nil
}

// check checks op before it runs: a value of a known op kind whose
// handles, registers and arguments are valid here.
func (c *Checker) check(op optim.Op, allocated func(optim.Vec) (int, bool)) error {
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
func (c *Checker) checkVecOp(op optim.Op, allocated func(optim.Vec) (int, bool)) error {
	switch o := op.(type) {
	case optim.Copy:
		return c.sameLayout(allocated, o.Dst, o.Src)
	case optim.Free:
		return c.handle(o.ID, allocated)
	case optim.Grad:
		return c.grad(o, allocated)
	case optim.JointGrad:
		return c.jointGrad(o, allocated)
	case optim.BaseStep:
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
	case optim.UpdateBN:
		if _, ok := o.X.Rho(); ok {
			return fmt.Errorf("update_bn of ρ handle %d: X must hold parameters", o.X)
		}
		return c.handle(o.X, allocated)
	}
	return c.checkRegOp(op, allocated)
}

// checkRegOp checks an op that sets or reads registers; other ops (Alloc,
// SetLR) have nothing to check here.
func (c *Checker) checkRegOp(op optim.Op, allocated func(optim.Vec) (int, bool)) error {
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
func (c *Checker) handle(v optim.Vec, allocated func(optim.Vec) (int, bool)) error {
	_, err := c.vec(v, allocated)
	return err
}

// sameLayout checks that vs name vectors of one layout.
func (c *Checker) sameLayout(allocated func(optim.Vec) (int, bool), vs ...optim.Vec) error {
	_, err := c.same(allocated, vs...)
	return err
}

// withCoef checks an op that writes vector dst with operand n (Fill, Scale,
// AddConst).
func (c *Checker) withCoef(dst optim.Vec, n optim.Num, allocated func(optim.Vec) (int, bool)) error {
	m, err := c.vec(dst, allocated)
	if err != nil {
		return err
	}
	return c.coef(n, m)
}

// grad checks a Grad: its Out, Eps and OutRho are allocated vectors or 0,
// of At's layout.
func (c *Checker) grad(o optim.Grad, allocated func(optim.Vec) (int, bool)) error {
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
	return c.sameLayout(allocated, vs...)
}

// jointGrad checks a JointGrad: its Outs are allocated vectors or 0, each
// of its At's layout.
func (c *Checker) jointGrad(o optim.JointGrad, allocated func(optim.Vec) (int, bool)) error {
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
		if _, err := c.same(allocated, vs...); err != nil {
			return err
		}
	}
	return nil
}

// axpy checks an Axpy: Dst and X of one layout, Alpha an operand for it.
func (c *Checker) axpy(o optim.Axpy, allocated func(optim.Vec) (int, bool)) error {
	m, err := c.same(allocated, o.Dst, o.X)
	if err != nil {
		return err
	}
	return c.coef(o.Alpha, m)
}

// linComb checks a LinComb: Dst and every term's X of one layout, every
// coefficient an operand for it.
func (c *Checker) linComb(o optim.LinComb, allocated func(optim.Vec) (int, bool)) error {
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
func (c *Checker) unary(o optim.Unary, allocated func(optim.Vec) (int, bool)) error {
	if o.Kind < optim.Abs || o.Kind > optim.Reciprocal {
		return fmt.Errorf("unknown unary kind %d: %w", o.Kind, errors.ErrUnsupported)
	}
	return c.sameLayout(allocated, o.Dst, o.Src)
}

// binary checks a Binary: a known kind, Dst, A and B of one layout.
func (c *Checker) binary(o optim.Binary, allocated func(optim.Vec) (int, bool)) error {
	if o.Kind < optim.Mul || o.Kind > optim.Min {
		return fmt.Errorf("unknown binary kind %d: %w", o.Kind, errors.ErrUnsupported)
	}
	return c.sameLayout(allocated, o.Dst, o.A, o.B)
}

// segReduce checks a SegReduce: a known kind and segmentation, and X (and
// Y, for SegDot, of X's layout).
func (c *Checker) segReduce(o optim.SegReduce, allocated func(optim.Vec) (int, bool)) error {
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
func (c *Checker) topKMask(o optim.TopKMask, allocated func(optim.Vec) (int, bool)) error {
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
	if ri.segs && (ri.by != o.By || !c.sameTensors(ri.member, m)) {
		return fmt.Errorf("segment register %s segments member %d per %s; the mask is per %s of member %d", r, ri.member, ri.by, o.By, m)
	}
	return nil
}

// MaxNewtonSchulzSteps is the most iterations a NewtonSchulz op may ask
// for.
const MaxNewtonSchulzSteps = 100

// newtonSchulz checks a NewtonSchulz: Dst and Src of one member's tensor
// shapes, Steps in [1, MaxNewtonSchulzSteps], finite coefficients and a
// finite Eps ≥ 0.
func (c *Checker) newtonSchulz(o optim.NewtonSchulz, allocated func(optim.Vec) (int, bool)) error {
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
		return &optim.VecError{Vec: o.Src, Msg: fmt.Sprintf("has member %d's tensor shapes, %s has member %d's (newton_schulz takes one member's matrices)",
			ms, c.p.Name(o.Dst), md)}
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
		if seg != nil && (seg.by != ri.by || !c.sameTensors(seg.member, ri.member)) {
			return fmt.Errorf("segment registers of different segmentations: member %d per %s and member %d per %s", seg.member, seg.by, ri.member, ri.by)
		}
		seg = &ri
	}
	return nil
}

// record notes the registers op sets.
func (c *Checker) record(op optim.Op, allocated func(optim.Vec) (int, bool)) {
	switch o := op.(type) {
	case optim.SegReduce:
		m, _ := c.vec(o.X, allocated)
		c.regs = append(c.regs, regInfo{segs: true, member: m, by: o.By})
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
