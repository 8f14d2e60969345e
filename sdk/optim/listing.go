package optim

import (
	"fmt"
	"strconv"
	"strings"
)

// String lists the program one op a line: its index, its kind and its
// operands, with handles by name when the program was started by
// Handles.Prog, and for ops that emit scalars the slots they fill ("→ #3").
func (p *Program) String() string {
	if p == nil {
		return "<nil program>\n"
	}
	var b strings.Builder
	slot := 1
	for i, op := range p.Ops {
		fmt.Fprintf(&b, "%2d %-9s %s", i, OpName(op), p.operands(op))
		switch n := Emits(op); n {
		case 1:
			fmt.Fprintf(&b, "  → #%d", slot)
		case 2:
			fmt.Fprintf(&b, "  → loss #%d, acc #%d", slot, slot+1)
		}
		slot += Emits(op)
		b.WriteByte('\n')
	}
	return b.String()
}

// vec names a handle for a listing.
func (p *Program) vec(v Vec) string { return p.names.Name(v) }

func num(f float64) string { return strconv.FormatFloat(f, 'g', 6, 64) }

func (b Batch) String() string {
	switch {
	case b.Of == 0 && b.Part == 0, b.Of == 1 && b.Part == 0 && b.Shuffle == 0:
		return "all"
	case b.Shuffle != 0:
		return fmt.Sprintf("%d/%d shuffle=%d", b.Part, b.Of, b.Shuffle)
	}
	return fmt.Sprintf("%d/%d", b.Part, b.Of)
}

func (m BNMode) String() string {
	switch m {
	case BNUpdate:
		return "update"
	case BNFreeze:
		return "freeze"
	}
	return fmt.Sprintf("BNMode(%d)", int32(m))
}

var unaryNames = [...]string{Abs: "abs", Sign: "sign", Sqrt: "sqrt", Square: "square",
	Softplus: "softplus", Exp: "exp", Log: "log", Reciprocal: "reciprocal"}

func (k UnaryKind) String() string {
	if k > 0 && int(k) < len(unaryNames) {
		return unaryNames[k]
	}
	return fmt.Sprintf("UnaryKind(%d)", int32(k))
}

var binaryNames = [...]string{Mul: "mul", Div: "div", Add: "add", Sub: "sub", Max: "max", Min: "min"}

func (k BinaryKind) String() string {
	if k > 0 && int(k) < len(binaryNames) {
		return binaryNames[k]
	}
	return fmt.Sprintf("BinaryKind(%d)", int32(k))
}

// operands formats an op's fields.
func (p *Program) operands(op Op) string {
	v := p.vec
	vecs := func(vs []Vec) string {
		s := make([]string, len(vs))
		for i, x := range vs {
			s[i] = v(x)
		}
		return "[" + strings.Join(s, " ") + "]"
	}
	out := func(x Vec) string { // a gradient target: 0 is none, not params[0]
		if x == 0 {
			return "_"
		}
		return v(x)
	}
	switch o := op.(type) {
	case Alloc:
		return fmt.Sprintf("%s member=%d", v(o.ID), o.Member)
	case Free:
		return v(o.ID)
	case Copy:
		if o.BN {
			return fmt.Sprintf("%s = %s (with BatchNorm statistics)", v(o.Dst), v(o.Src))
		}
		return fmt.Sprintf("%s = %s", v(o.Dst), v(o.Src))
	case Fill:
		return fmt.Sprintf("%s = %s", v(o.Dst), num(o.Value))
	case FillRange:
		return fmt.Sprintf("%s[%d:%d] = %s", v(o.Dst), o.Offset, o.Offset+o.Len, num(o.Value))
	case Scale:
		return fmt.Sprintf("%s *= %s", v(o.Dst), num(o.Alpha))
	case AddConst:
		return fmt.Sprintf("%s += %s", v(o.Dst), num(o.Value))
	case Axpy:
		return fmt.Sprintf("%s += %s·%s", v(o.Dst), num(o.Alpha), v(o.X))
	case LinComb:
		terms := make([]string, len(o.Terms))
		for i, t := range o.Terms {
			terms[i] = num(t.Coef) + "·" + v(t.X)
		}
		return fmt.Sprintf("%s = %s", v(o.Dst), strings.Join(terms, " + "))
	case Unary:
		return fmt.Sprintf("%s = %s(%s)", v(o.Dst), o.Kind, v(o.Src))
	case Binary:
		return fmt.Sprintf("%s = %s(%s, %s)", v(o.Dst), o.Kind, v(o.A), v(o.B))
	case RandN:
		return fmt.Sprintf("%s ~ N(0, %s²) seed=%d", v(o.Dst), num(o.Std), o.Seed)
	case Dot:
		return fmt.Sprintf("%s · %s", v(o.A), v(o.B))
	case Norm:
		return v(o.X)
	case Grad:
		s := fmt.Sprintf("%s = ∇L(%s) batch=%s bn=%s", out(o.Out), v(o.At), o.Batch, o.BN)
		if o.Eps != 0 {
			s += " eps=" + v(o.Eps)
		}
		if o.OutRho != 0 {
			s += " rho-grad=" + v(o.OutRho)
		}
		return s
	case JointGrad:
		outs := make([]string, len(o.Outs))
		for i, x := range o.Outs {
			outs[i] = out(x)
		}
		return fmt.Sprintf("[%s] = ∇L(%s) batch=%s bn=%s", strings.Join(outs, " "), vecs(o.Ats), o.Batch, o.BN)
	case BaseStep:
		return fmt.Sprintf("%s with gradient %s", v(o.Params), v(o.Grad))
	case SetLR:
		return fmt.Sprintf("member=%d lr=%s", o.Member, num(o.LR))
	}
	return fmt.Sprintf("%+v", op)
}
