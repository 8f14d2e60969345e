package wire

import (
	"fmt"
	"reflect"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/reflect/protoreflect"

	pb "github.com/optlab/optlab/sdk/internal/pluginpb"
	"github.com/optlab/optlab/sdk/opset"
	"github.com/optlab/optlab/sdk/optim"
)

// Ops cross the wire by the op table (optim.OpSet): an op is the field
// spec.Wire of the Op oneof, and each of its Go fields is the field of that
// message named by its wire name, converted by its protocol kind. A Num
// field F is the Num message field f_num when the message has one (ops
// older than minor 5, whose double f then also carries an immediate for
// older receivers; a receiver reads f as an immediate when f_num is
// absent), else the Num message field f. Batch and Term are messages whose
// fields map the same way.

// codec maps the fields of one Go struct (an op, Batch or Term) to the
// fields of its message.
type codec struct {
	typ    reflect.Type
	msg    protoreflect.MessageDescriptor
	fields []fieldCodec
}

// fieldCodec maps one Go field.
type fieldCodec struct {
	spec   opset.FieldSpec
	index  int                          // Go field index
	fd     protoreflect.FieldDescriptor // the field (for a Num, the Num message)
	legacy protoreflect.FieldDescriptor // a Num's double field before minor 5, or nil
	sub    *codec                       // batch: Batch; terms: Term
}

// opCodec is one op's codec and the oneof field of pb.Op that carries it.
type opCodec struct {
	spec  optim.OpSpec
	field protoreflect.FieldDescriptor
	codec *codec
}

// opCodecs is the codec of every op of the table, built once and never
// modified.
type opCodecs struct {
	byType map[reflect.Type]*opCodec
	byWire map[protoreflect.Name]*opCodec
	err    error // the first disagreement of the table and the proto
}

var (
	opDesc   = (&pb.Op{}).ProtoReflect().Descriptor()
	opOneof  = opDesc.Oneofs().ByName("kind")
	numDesc  = (&pb.Num{}).ProtoReflect().Descriptor()
	numK     = numDesc.Fields().ByName("k")
	numReg   = numDesc.Fields().ByName("reg")
	codecs   = buildCodecs()
	opsEnums = opset.Enums()
)

func buildCodecs() opCodecs {
	cs := opCodecs{byType: map[reflect.Type]*opCodec{}, byWire: map[protoreflect.Name]*opCodec{}}
	for _, s := range optim.OpSet() {
		fd := opDesc.Fields().ByName(protoreflect.Name(s.Wire))
		if fd == nil || fd.ContainingOneof() != opOneof || fd.Message() == nil {
			if cs.err == nil {
				cs.err = fmt.Errorf("op %s: pb.Op has no message field %q in its oneof", s.Name, s.Wire)
			}
			continue
		}
		c, err := newCodec(s.Type, opset.Fields(s.Type), fd.Message())
		if err != nil && cs.err == nil {
			cs.err = fmt.Errorf("op %s: %w", s.Name, err)
		}
		oc := &opCodec{spec: s, field: fd, codec: c}
		cs.byType[s.Type], cs.byWire[fd.Name()] = oc, oc
	}
	return cs
}

// newCodec maps t's fields to msg's by wire name and kind. It returns the
// codec of the fields that agree and the first that does not.
func newCodec(t reflect.Type, fields []opset.FieldSpec, msg protoreflect.MessageDescriptor) (*codec, error) {
	c := &codec{typ: t, msg: msg}
	var first error
	fail := func(f opset.FieldSpec, format string, args ...any) {
		if first == nil {
			first = fmt.Errorf("field %s (%s %s): %s", f.Name, f.Wire, f.Kind, fmt.Sprintf(format, args...))
		}
	}
	for _, f := range fields {
		sf, _ := t.FieldByName(f.Name)
		fc := fieldCodec{spec: f, index: sf.Index[0]}
		if f.Kind == "num" {
			if fd := msg.Fields().ByName(protoreflect.Name(f.Wire + "_num")); fd != nil {
				fc.fd = fd
				fc.legacy = msg.Fields().ByName(protoreflect.Name(f.Wire))
				if fc.legacy == nil || fc.legacy.Kind() != protoreflect.DoubleKind || fc.legacy.IsList() {
					fail(f, "%s has %s_num but no double %s", msg.Name(), f.Wire, f.Wire)
					continue
				}
			}
		}
		if fc.fd == nil {
			fc.fd = msg.Fields().ByName(protoreflect.Name(f.Wire))
		}
		if fc.fd == nil {
			fail(f, "%s has no field %q", msg.Name(), f.Wire)
			continue
		}
		if err := checkKind(f.Kind, fc.fd); err != nil {
			fail(f, "%v", err)
			continue
		}
		switch f.Kind {
		case "batch", "terms":
			st := f.Type
			if st.Kind() == reflect.Slice {
				st = st.Elem()
			}
			sub, err := newCodec(st, opset.Fields(st), fc.fd.Message())
			if err != nil {
				fail(f, "%v", err)
				continue
			}
			fc.sub = sub
		}
		c.fields = append(c.fields, fc)
	}
	return c, first
}

// checkKind reports whether proto field fd can carry a field of protocol
// kind kind.
func checkKind(kind string, fd protoreflect.FieldDescriptor) error {
	want := map[string]protoreflect.Kind{
		"vec": protoreflect.Sint32Kind, "vecs": protoreflect.Sint32Kind,
		"num": protoreflect.MessageKind, "reg": protoreflect.Int32Kind,
		"terms": protoreflect.MessageKind, "batch": protoreflect.MessageKind,
		"bool": protoreflect.BoolKind, "int32": protoreflect.Int32Kind,
		"int64": protoreflect.Int64Kind, "float": protoreflect.DoubleKind,
		"string": protoreflect.StringKind,
	}
	k, ok := want[kind]
	enum, isEnum := strings.CutPrefix(kind, "enum:")
	switch {
	case isEnum:
		if fd.Kind() != protoreflect.EnumKind || string(fd.Enum().Name()) != enum {
			return fmt.Errorf("proto field %s is %v, want enum %s", fd.Name(), fd.Kind(), enum)
		}
	case !ok:
		return fmt.Errorf("unknown protocol kind")
	case fd.Kind() != k:
		return fmt.Errorf("proto field %s is %v, want %v", fd.Name(), fd.Kind(), k)
	}
	if list := kind == "vecs" || kind == "terms"; fd.IsList() != list {
		return fmt.Errorf("proto field %s: repeated = %v, want %v", fd.Name(), fd.IsList(), list)
	}
	msgs := map[string]protoreflect.FullName{
		"num": numDesc.FullName(), "batch": (&pb.Batch{}).ProtoReflect().Descriptor().FullName(),
		"terms": (&pb.Term{}).ProtoReflect().Descriptor().FullName(),
	}
	if m, ok := msgs[kind]; ok && fd.Message().FullName() != m {
		return fmt.Errorf("proto field %s is a %s, want %s", fd.Name(), fd.Message().FullName(), m)
	}
	return nil
}

// CheckOpSet returns nil when every op of the table has its field in pb.Op
// and its fields agree with its message's, else the first disagreement.
func CheckOpSet() error { return codecs.err }

// ProgramToProto converts a program for sending. Ops must be values of the
// optim op types: a nil or pointer op gives an *Error with code
// InvalidArgument and its index, and so does a misuse of the builder
// (p.Err: a register of another program). A nil program converts to an
// empty one.
func ProgramToProto(p *optim.Program) (*pb.Program, error) {
	if p == nil {
		return &pb.Program{}, nil
	}
	if err := p.Err(); err != nil {
		return nil, errorf(codes.InvalidArgument, "program: %v", err)
	}
	out := &pb.Program{Ops: make([]*pb.Op, len(p.Ops))}
	for i, op := range p.Ops {
		o, err := opToProto(i, op)
		if err != nil {
			return nil, err
		}
		out.Ops[i] = o
	}
	return out, nil
}

func opToProto(i int, op optim.Op) (*pb.Op, error) {
	if op == nil {
		return nil, OpErrorf(codes.InvalidArgument, i, "nil", "nil op")
	}
	t := reflect.TypeOf(op)
	if t.Kind() == reflect.Pointer {
		return nil, OpErrorf(codes.InvalidArgument, i, optim.OpName(op),
			"op %T is a pointer: programs hold op values (%s{…}, not &%s{…})", op, optim.OpName(op), optim.OpName(op))
	}
	oc, ok := codecs.byType[t]
	if !ok || oc.codec == nil {
		// Unreachable while the table and the proto agree (a test checks).
		return nil, OpErrorf(codes.Unimplemented, i, optim.OpName(op), "op type %T has no wire encoding", op)
	}
	out := &pb.Op{}
	m := out.ProtoReflect()
	oc.codec.encode(reflect.ValueOf(op), m.Mutable(oc.field).Message())
	return out, nil
}

// encode writes the fields of the Go struct v into m.
func (c *codec) encode(v reflect.Value, m protoreflect.Message) {
	for _, f := range c.fields {
		x := v.Field(f.index)
		switch f.spec.Kind {
		case "vec":
			m.Set(f.fd, protoreflect.ValueOfInt32(int32(x.Interface().(optim.Vec))))
		case "vecs":
			l := m.Mutable(f.fd).List()
			for _, y := range x.Interface().([]optim.Vec) {
				l.Append(protoreflect.ValueOfInt32(int32(y)))
			}
		case "num":
			n, _ := x.Interface().(optim.Num)
			if n == nil {
				continue // absent: an immediate 0 (old ops), an unused operand (Arith)
			}
			nm := m.Mutable(f.fd).Message()
			if k, ok := opset.Imm(n); ok {
				nm.Set(numK, protoreflect.ValueOfFloat64(k))
				if f.legacy != nil {
					m.Set(f.legacy, protoreflect.ValueOfFloat64(k))
				}
			} else {
				nm.Set(numReg, protoreflect.ValueOfInt32(int32(n.(optim.Reg).Index())))
			}
		case "reg":
			m.Set(f.fd, protoreflect.ValueOfInt32(int32(x.Interface().(optim.Reg).Index())))
		case "batch":
			f.sub.encode(x, m.Mutable(f.fd).Message())
		case "terms":
			l := m.Mutable(f.fd).List()
			for j := range x.Len() {
				e := l.NewElement()
				f.sub.encode(x.Index(j), e.Message())
				l.Append(e)
			}
		case "bool":
			m.Set(f.fd, protoreflect.ValueOfBool(x.Bool()))
		case "int32":
			m.Set(f.fd, protoreflect.ValueOfInt32(int32(x.Int())))
		case "int64":
			m.Set(f.fd, protoreflect.ValueOfInt64(x.Int()))
		case "float":
			m.Set(f.fd, protoreflect.ValueOfFloat64(x.Float()))
		case "string":
			m.Set(f.fd, protoreflect.ValueOfString(x.String()))
		default: // enum
			m.Set(f.fd, protoreflect.ValueOfEnum(protoreflect.EnumNumber(x.Int())))
		}
	}
}

// ProgramFromProto converts a received program. An op with no known kind (a
// newer protocol minor version, or an empty Op), with a field this version
// does not know or with an unknown enum kind gives an *Error with code
// Unimplemented and the op's index. A nil program converts to an empty one.
func ProgramFromProto(p *pb.Program) (*optim.Program, error) {
	out := optim.Prog()
	out.Ops = make([]optim.Op, 0, len(p.GetOps()))
	for i, op := range p.GetOps() {
		o, err := opFromProto(out, i, op)
		if err != nil {
			return nil, err
		}
		out.Ops = append(out.Ops, o)
	}
	return out, nil
}

func opFromProto(p *optim.Program, i int, op *pb.Op) (optim.Op, error) {
	m := op.ProtoReflect()
	fd := m.WhichOneof(opOneof)
	var oc *opCodec
	if fd != nil {
		oc = codecs.byWire[fd.Name()]
	}
	if oc == nil || oc.codec == nil {
		return nil, OpErrorf(codes.Unimplemented, i, "unknown", "unknown op kind (sent by a newer protocol minor version?)")
	}
	v := reflect.New(oc.spec.Type).Elem()
	if err := oc.codec.decode(p, m.Get(fd).Message(), v); err != nil {
		return nil, OpErrorf(codes.Unimplemented, i, oc.spec.Name, "%v", err)
	}
	return v.Interface().(optim.Op), nil
}

// decode sets the fields of the Go struct v from m; registers become p's.
func (c *codec) decode(p *optim.Program, m protoreflect.Message, v reflect.Value) error {
	if len(m.GetUnknown()) > 0 {
		return fmt.Errorf("%s has a field this protocol minor does not know (sent by a newer one?)", c.msg.Name())
	}
	reg := func(i int32) optim.Reg {
		if i == 0 {
			return optim.Reg{}
		}
		return p.Reg(int(i))
	}
	for _, f := range c.fields {
		x := v.Field(f.index)
		val := m.Get(f.fd)
		switch f.spec.Kind {
		case "vec":
			x.Set(reflect.ValueOf(optim.Vec(val.Int())))
		case "vecs":
			l := val.List()
			if l.Len() == 0 {
				continue
			}
			vs := make([]optim.Vec, l.Len())
			for j := range vs {
				vs[j] = optim.Vec(l.Get(j).Int())
			}
			x.Set(reflect.ValueOf(vs))
		case "num":
			var n optim.Num
			if m.Has(f.fd) {
				nm := val.Message()
				if len(nm.GetUnknown()) > 0 {
					return fmt.Errorf("%s: an operand kind this protocol minor does not know", f.spec.Wire)
				}
				switch {
				case nm.Has(numK):
					n = optim.K(nm.Get(numK).Float())
				case nm.Has(numReg):
					n = reg(int32(nm.Get(numReg).Int()))
				}
			}
			if n == nil && f.legacy != nil {
				n = optim.K(m.Get(f.legacy).Float())
			}
			if n != nil {
				x.Set(reflect.ValueOf(&n).Elem())
			}
		case "reg":
			x.Set(reflect.ValueOf(reg(int32(val.Int()))))
		case "batch":
			if err := f.sub.decode(p, val.Message(), x); err != nil {
				return err
			}
		case "terms":
			l := val.List()
			if l.Len() == 0 {
				continue
			}
			ts := reflect.MakeSlice(x.Type(), l.Len(), l.Len())
			for j := range l.Len() {
				if err := f.sub.decode(p, l.Get(j).Message(), ts.Index(j)); err != nil {
					return err
				}
			}
			x.Set(ts)
		case "bool":
			x.SetBool(val.Bool())
		case "int32", "int64":
			x.SetInt(val.Int())
		case "float":
			x.SetFloat(val.Float())
		case "string":
			x.SetString(val.String())
		default: // enum
			enum := strings.TrimPrefix(f.spec.Kind, "enum:")
			n := int32(val.Enum())
			if !knownEnum(enum, n) {
				return fmt.Errorf("unknown %s %d", enum, n)
			}
			x.SetInt(int64(n))
		}
	}
	return nil
}

// knownEnum reports whether n is a value of the table's enumeration enum.
func knownEnum(enum string, n int32) bool {
	for _, v := range opsEnums[enum] {
		if v == n {
			return true
		}
	}
	return false
}

// ExecRequestToProto converts a program into the Exec request of this
// protocol minor.
func ExecRequestToProto(p *optim.Program) (*pb.ExecRequest, error) {
	prog, err := ProgramToProto(p)
	if err != nil {
		return nil, err
	}
	return &pb.ExecRequest{Program: prog, ProtocolMinor: optim.ProtocolMinor}, nil
}

// ExecRequestFromProto converts a received Exec request. A request of a
// plugin older than minor 5 (protocol_minor 0) gets a Read op of every
// register its ops set, in op order, appended: its Result is then every
// scalar in op order, as such plugins expect.
func ExecRequestFromProto(req *pb.ExecRequest) (*optim.Program, error) {
	p, err := ProgramFromProto(req.GetProgram())
	if err != nil {
		return nil, err
	}
	if req.GetProtocolMinor() == 0 {
		p.ReadAll()
	}
	return p, nil
}

// ResultToProto converts a program's result for sending: the values of its
// Read ops.
func ResultToProto(r optim.Result) *pb.Result {
	return &pb.Result{Scalars: r.Reads}
}

// ResultFromProto converts the result of program p: an error (Internal)
// when it has another number of values than p has Read ops.
func ResultFromProto(p *optim.Program, r *pb.Result) (optim.Result, error) {
	res, err := opset.NewResult(p, r.GetScalars())
	if err != nil {
		return optim.Result{}, errorf(codes.Internal, "host's result: %v", err)
	}
	return res, nil
}

// errorf builds a non-op *Error.
func errorf(code codes.Code, format string, args ...any) *Error {
	return &Error{Code: code, Msg: fmt.Sprintf(format, args...)}
}
