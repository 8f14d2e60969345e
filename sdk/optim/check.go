package optim

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
)

// VecError is an error about one vector handle of an op. It prints the
// handle by its namespaced name ("handle sam/g[0] is not allocated") when
// the program that named it was built with Handles.Prog, also on the far
// side of the wire, where the SDK names it from the plugin's program.
type VecError struct {
	Vec Vec
	// Name is the handle's name in the program that used it
	// (Program.Name), which the host or SDK reporting the error fills in;
	// "" prints the bare name ("v3", "params[0]").
	Name string
	// Msg follows the handle: "is not allocated".
	Msg string
}

// Error implements error.
func (e *VecError) Error() string {
	name := e.Name
	if name == "" {
		name = vecName(e.Vec)
	}
	return "handle " + name + " " + e.Msg
}

// NameHandles makes the VecError inside err (if any) print its handle with
// the names of p's namespace: the SDK calls it on the errors Exec returns.
func NameHandles(err error, p *Program) {
	var ve *VecError
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
	p    *Program
	l    Layout
	regs []regInfo // by register index − 1
}

// regInfo is what the Checker knows of a register.
type regInfo struct {
	segs   bool
	member int // segment registers: the member whose layout they segment
	by     Segmentation
}

// NewChecker returns a Checker of p's ops for a host with layout l.
func NewChecker(p *Program, l Layout) *Checker { return &Checker{p: p, l: l} }

// Check checks op i (the next op in order) before it runs; allocated tells
// which member's layout an allocated vector has (false: not allocated). It
// returns nil or the error to wrap in an *OpError.
func (c *Checker) Check(i int, op Op, allocated func(Vec) (int, bool)) error {
	err := c.check(op, allocated)
	if err == nil {
		c.record(op, allocated)
	}
	NameHandles(err, c.p)
	return err
}

// vec resolves a handle to its member.
func (c *Checker) vec(v Vec, allocated func(Vec) (int, bool)) (int, error) {
	if m, ok := v.Rho(); ok {
		if m >= len(c.l.Members) || !c.l.Members[m].Variational {
			return 0, &VecError{Vec: v, Msg: fmt.Sprintf("names the ρ of member %d, which is not variational", m)}
		}
		return m, nil
	}
	if m, ok := v.Member(); ok {
		if m >= len(c.l.Members) {
			return 0, &VecError{Vec: v, Msg: fmt.Sprintf("names member %d; the run has %d", m, len(c.l.Members))}
		}
		return m, nil
	}
	m, ok := allocated(v)
	if !ok {
		return 0, &VecError{Vec: v, Msg: "is not allocated"}
	}
	return m, nil
}

// same resolves handles that must share one layout and returns the member
// of the first.
func (c *Checker) same(allocated func(Vec) (int, bool), vs ...Vec) (int, error) {
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
			return 0, &VecError{Vec: v, Msg: fmt.Sprintf("has the layout of member %d (%d parameters), %s has member %d's (%d)",
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
	return slices.EqualFunc(ta, tb, func(x, y Tensor) bool { return slices.Equal(x.Shape, y.Shape) })
}

// reg returns what is known of register r, or an error when no earlier op
// set it.
func (c *Checker) reg(r Reg) (regInfo, error) {
	if r.Index() < 1 || r.Index() > len(c.regs) {
		return regInfo{}, fmt.Errorf("register %s is not set by an earlier op of this program (%d so far)", r, len(c.regs))
	}
	return c.regs[r.Index()-1], nil
}

// coef checks an operand that scales or fills a vector of member m:
// an immediate, a scalar register, or a segment register of m's layout.
func (c *Checker) coef(n Num, m int) error {
	r, ok := n.(Reg)
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
func (c *Checker) scalar(r Reg) error {
	ri, err := c.reg(r)
	if err != nil {
		return err
	}
	if ri.segs {
		return fmt.Errorf("register %s holds one value per segment; this op takes a scalar", r)
	}
	return nil
}

func segmentation(by Segmentation) error {
	if by != PerTensor && by != PerRow {
		return fmt.Errorf("unknown segmentation %d: %w", by, errors.ErrUnsupported)
	}
	return nil
}

// check checks op before it runs: a value of a known op kind whose
// handles, registers and arguments are valid here.
func (c *Checker) check(op Op, allocated func(Vec) (int, bool)) error {
	if op == nil {
		return errors.New("nil op")
	}
	if reflect.TypeOf(op).Kind() == reflect.Pointer {
		return fmt.Errorf("op %T is a pointer: programs hold op values (%s{…}, not &%s{…})", op, OpName(op), OpName(op))
	}
	if _, ok := SpecOf(op); !ok {
		return fmt.Errorf("unknown op %T: %w", op, errors.ErrUnsupported)
	}
	return c.checkVecOp(op, allocated)
}

// checkVecOp checks an op that frees, writes or reads vectors; the others
// go to checkRegOp.
func (c *Checker) checkVecOp(op Op, allocated func(Vec) (int, bool)) error {
	switch o := op.(type) {
	case Copy:
		return c.sameLayout(allocated, o.Dst, o.Src)
	case Free:
		return c.handle(o.ID, allocated)
	case Grad:
		return c.grad(o, allocated)
	case JointGrad:
		return c.jointGrad(o, allocated)
	case BaseStep:
		return c.sameLayout(allocated, o.Params, o.Grad)
	case Fill:
		return c.withCoef(o.Dst, o.Value, allocated)
	case FillRange:
		return c.handle(o.Dst, allocated)
	case Scale:
		return c.withCoef(o.Dst, o.Alpha, allocated)
	case AddConst:
		return c.withCoef(o.Dst, o.Value, allocated)
	case Axpy:
		return c.axpy(o, allocated)
	case LinComb:
		return c.linComb(o, allocated)
	case Unary:
		return c.unary(o, allocated)
	case Binary:
		return c.binary(o, allocated)
	case RandN:
		return c.handle(o.Dst, allocated)
	case TopKMask:
		return c.topKMask(o, allocated)
	case UpdateBN:
		if _, ok := o.X.Rho(); ok {
			return fmt.Errorf("update_bn of ρ handle %d: X must hold parameters", o.X)
		}
		return c.handle(o.X, allocated)
	}
	return c.checkRegOp(op, allocated)
}

// checkRegOp checks an op that sets or reads registers; other ops (Alloc,
// SetLR) have nothing to check here.
func (c *Checker) checkRegOp(op Op, allocated func(Vec) (int, bool)) error {
	switch o := op.(type) {
	case Dot:
		return c.sameLayout(allocated, o.A, o.B)
	case Norm:
		return c.handle(o.X, allocated)
	case Arith:
		return c.arith(o)
	case SegReduce:
		return c.segReduce(o, allocated)
	case Read:
		return c.scalar(o.X)
	case Report:
		if o.Name == "" {
			return errors.New("report needs a metric name")
		}
		return c.scalar(o.X)
	}
	return nil
}

// handle checks that v names a vector: a member's parameters or ρ, or an
// allocated vector.
func (c *Checker) handle(v Vec, allocated func(Vec) (int, bool)) error {
	_, err := c.vec(v, allocated)
	return err
}

// sameLayout checks that vs name vectors of one layout.
func (c *Checker) sameLayout(allocated func(Vec) (int, bool), vs ...Vec) error {
	_, err := c.same(allocated, vs...)
	return err
}

// withCoef checks an op that writes vector dst with operand n (Fill, Scale,
// AddConst).
func (c *Checker) withCoef(dst Vec, n Num, allocated func(Vec) (int, bool)) error {
	m, err := c.vec(dst, allocated)
	if err != nil {
		return err
	}
	return c.coef(n, m)
}

// grad checks a Grad: its Out, Eps and OutRho are allocated vectors or 0,
// of At's layout.
func (c *Checker) grad(o Grad, allocated func(Vec) (int, bool)) error {
	vs := []Vec{o.At}
	for _, v := range []Vec{o.Out, o.Eps, o.OutRho} {
		if v < 0 {
			if _, err := c.vec(v, allocated); err != nil {
				return err
			}
			return &VecError{Vec: v, Msg: "is reserved: a gradient's Out, Eps and OutRho are allocated vectors (> 0), or 0 for none"}
		}
		if v != 0 {
			vs = append(vs, v)
		}
	}
	return c.sameLayout(allocated, vs...)
}

// jointGrad checks a JointGrad: its Outs are allocated vectors or 0, each
// of its At's layout.
func (c *Checker) jointGrad(o JointGrad, allocated func(Vec) (int, bool)) error {
	for _, v := range o.Outs {
		if v < 0 {
			if _, err := c.vec(v, allocated); err != nil {
				return err
			}
			return &VecError{Vec: v, Msg: "is reserved: a gradient target is an allocated vector (> 0), or 0 for none"}
		}
	}
	for i, v := range o.Ats {
		vs := []Vec{v}
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
func (c *Checker) axpy(o Axpy, allocated func(Vec) (int, bool)) error {
	m, err := c.same(allocated, o.Dst, o.X)
	if err != nil {
		return err
	}
	return c.coef(o.Alpha, m)
}

// linComb checks a LinComb: Dst and every term's X of one layout, every
// coefficient an operand for it.
func (c *Checker) linComb(o LinComb, allocated func(Vec) (int, bool)) error {
	vs := []Vec{o.Dst}
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
func (c *Checker) unary(o Unary, allocated func(Vec) (int, bool)) error {
	if o.Kind < Abs || o.Kind > Reciprocal {
		return fmt.Errorf("unknown unary kind %d: %w", o.Kind, errors.ErrUnsupported)
	}
	return c.sameLayout(allocated, o.Dst, o.Src)
}

// binary checks a Binary: a known kind, Dst, A and B of one layout.
func (c *Checker) binary(o Binary, allocated func(Vec) (int, bool)) error {
	if o.Kind < Mul || o.Kind > Min {
		return fmt.Errorf("unknown binary kind %d: %w", o.Kind, errors.ErrUnsupported)
	}
	return c.sameLayout(allocated, o.Dst, o.A, o.B)
}

// segReduce checks a SegReduce: a known kind and segmentation, and X (and
// Y, for SegDot, of X's layout).
func (c *Checker) segReduce(o SegReduce, allocated func(Vec) (int, bool)) error {
	if o.Kind < SegSumSq || o.Kind > SegMaxAbs {
		return fmt.Errorf("unknown segment reduction %d: %w", o.Kind, errors.ErrUnsupported)
	}
	if err := segmentation(o.By); err != nil {
		return err
	}
	if o.Kind == SegDot {
		return c.sameLayout(allocated, o.X, o.Y)
	}
	return c.handle(o.X, allocated)
}

// topKMask checks a TopKMask: a known segmentation, Dst and X of one
// layout, and a fraction in [0, 1] or a register of the mask's
// segmentation.
func (c *Checker) topKMask(o TopKMask, allocated func(Vec) (int, bool)) error {
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
	r, ok := o.Frac.(Reg)
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

func (c *Checker) arith(o Arith) error {
	n := o.Kind.Arity()
	if n == 0 {
		return fmt.Errorf("unknown arith kind %d: %w", o.Kind, errors.ErrUnsupported)
	}
	var seg *regInfo
	for j, x := range []Num{o.A, o.B, o.C} {
		if j >= n {
			if x != nil {
				return fmt.Errorf("%s takes %d operand(s); operand %d is set", o.Kind, n, j+1)
			}
			continue
		}
		r, ok := x.(Reg)
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
func (c *Checker) record(op Op, allocated func(Vec) (int, bool)) {
	switch o := op.(type) {
	case SegReduce:
		m, _ := c.vec(o.X, allocated)
		c.regs = append(c.regs, regInfo{segs: true, member: m, by: o.By})
		return
	case Arith:
		ri := regInfo{}
		for _, x := range []Num{o.A, o.B, o.C} {
			if r, ok := x.(Reg); ok {
				if r2, err := c.reg(r); err == nil && r2.segs {
					ri = r2
				}
			}
		}
		c.regs = append(c.regs, ri)
		return
	}
	for range Emits(op) {
		c.regs = append(c.regs, regInfo{})
	}
}

// Numel returns the number of elements of a tensor of shape t.Shape.
func (t Tensor) Numel() int64 {
	n := int64(1)
	for _, d := range t.Shape {
		n *= d
	}
	return n
}

// Segments returns the sizes of the segments of m's flat vector under by,
// in order (see Segmentation); the tensors tile the vector in Layout order.
// A layout without tensors is one tensor of shape [Numel]. An unknown
// segmentation gives nil.
func (m MemberLayout) Segments(by Segmentation) []int64 {
	ts := m.Tensors
	if len(ts) == 0 {
		ts = []Tensor{{Shape: []int64{m.Numel}}}
	}
	var out []int64
	for _, t := range ts {
		switch by {
		case PerTensor:
			out = append(out, t.Numel())
		case PerRow:
			if len(t.Shape) == 0 {
				out = append(out, 1)
				continue
			}
			row := t.Numel() / max(t.Shape[0], 1)
			for range t.Shape[0] {
				out = append(out, row)
			}
		default:
			return nil
		}
	}
	return out
}
