package optim

import (
	"fmt"
	"reflect"
	"strconv"
	"strings"
)

// String lists the program one op a line: its index, its kind and its
// operands (the op table's Format), with handles by name when the program
// was started by Handles.Prog, and for ops that set registers the registers
// they set ("→ #3").
func (p *Program) String() string {
	if p == nil {
		return "<nil program>\n"
	}
	var b strings.Builder
	reg := 1
	for i, op := range p.Ops {
		fmt.Fprintf(&b, "%2d %-9s %s", i, OpName(op), p.operands(op))
		spec, _ := specOf(op)
		switch n := len(spec.Regs); {
		case n == 1:
			fmt.Fprintf(&b, "  → #%d", reg)
		case n > 1:
			parts := make([]string, n)
			for j, name := range spec.Regs {
				parts[j] = fmt.Sprintf("%s #%d", name, reg+j)
			}
			fmt.Fprintf(&b, "  → %s", strings.Join(parts, ", "))
		}
		reg += emits(op)
		b.WriteByte('\n')
	}
	return b.String()
}

// Name returns the name of handle v in p's listing (String): the name it
// was handed out with when the program was started by Handles.Prog, else
// its bare name ("params[0]", "rho[1]", "v3"). A nil program names bare
// handles.
func (p *Program) Name(v Vec) string {
	if p == nil {
		return vecName(v)
	}
	return p.names.Name(v)
}

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

// operands formats an op's fields with its Format.
func (p *Program) operands(op Op) string {
	spec, ok := specOf(op)
	if !ok || op == nil {
		return fmt.Sprintf("%+v", op)
	}
	v := reflect.ValueOf(op)
	for v.Kind() == reflect.Pointer {
		if v.IsNil() {
			return "<nil>"
		}
		v = v.Elem()
	}
	return formatOp(spec.Format, func(field, mod string) (string, bool) {
		f := v.FieldByName(field)
		if !f.IsValid() {
			return "{" + field + "?}", true
		}
		return p.value(f, mod), !f.IsZero()
	})
}

// formatOp expands an op Format: {Field} and {Field:mod} print a field,
// {Field?} prints nothing, a [group] prints only when every field it
// names is not zero, and [[ and ]] print [ and ]. field returns a field's
// text and whether it is not zero.
func formatOp(format string, field func(name, mod string) (string, bool)) string {
	var out, group strings.Builder
	inGroup, groupOK := false, true
	w := &out
	for i := 0; i < len(format); i++ {
		c := format[i]
		switch {
		case (c == '[' || c == ']') && i+1 < len(format) && format[i+1] == c:
			w.WriteByte(c)
			i++
		case c == '[':
			inGroup, groupOK = true, true
			group.Reset()
			w = &group
		case c == ']' && inGroup:
			if groupOK {
				out.WriteString(group.String())
			}
			inGroup = false
			w = &out
		case c == '{':
			j := strings.IndexByte(format[i:], '}')
			name := format[i+1 : i+j]
			i += j
			silent := strings.HasSuffix(name, "?")
			name = strings.TrimSuffix(name, "?")
			mod := ""
			if k := strings.IndexByte(name, ':'); k >= 0 {
				name, mod = name[:k], name[k+1:]
			}
			text, nonzero := field(name, mod)
			if inGroup && !nonzero {
				groupOK = false
			}
			if !silent {
				w.WriteString(text)
			}
		default:
			w.WriteByte(c)
		}
	}
	return out.String()
}

// value formats one field of an op for a listing.
func (p *Program) value(f reflect.Value, mod string) string {
	vec := func(x Vec) string {
		if mod == "out" && x == 0 { // a gradient target: 0 is none, not params[0]
			return "_"
		}
		return p.Name(x)
	}
	switch x := f.Interface().(type) {
	case Vec:
		return vec(x)
	case []Vec:
		s := make([]string, len(x))
		for i, y := range x {
			s[i] = vec(y)
		}
		return "[" + strings.Join(s, " ") + "]"
	case Num:
		return numString(x)
	case nil: // a nil Num
		return "0"
	case []Term:
		s := make([]string, len(x))
		for i, t := range x {
			s[i] = numString(t.Coef) + "·" + p.Name(t.X)
		}
		return strings.Join(s, " + ")
	case float64:
		return num(x)
	case fmt.Stringer:
		return x.String()
	}
	return fmt.Sprint(f.Interface())
}

// numString formats an operand: an immediate as a number, a register as #n.
func numString(n Num) string {
	switch x := n.(type) {
	case nil:
		return num(0)
	case K:
		return num(float64(x))
	}
	return n.(Reg).String()
}
