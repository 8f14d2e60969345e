package wire

import (
	"errors"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	pb "github.com/optlab/optlab/sdk/internal/pluginpb"
	"github.com/optlab/optlab/sdk/opset"
	"github.com/optlab/optlab/sdk/optim"
)

// filler sets every field of an op to a non-zero value, so that a dropped
// field shows up in a round trip. With regs its Num operands are registers
// of p, else immediates.
type filler struct {
	p    *optim.Program
	regs bool
	n    int // counter that makes the values distinct
}

func (f *filler) fill(v reflect.Value) {
	f.n++
	n := f.n
	switch x := v.Addr().Interface().(type) {
	case *optim.Vec:
		*x = optim.Vec(n)
		if n%3 == 0 {
			*x = optim.ParamsOf(1 + n%4)
		}
	case *[]optim.Vec:
		*x = []optim.Vec{optim.Vec(n), 0, optim.ParamsOf(1)}
	case *optim.Num:
		if f.regs {
			*x = f.p.Reg(n)
		} else {
			*x = optim.K(-0.25 * float64(n))
		}
	case *optim.Reg:
		*x = f.p.Reg(n)
	case *[]optim.Term:
		*x = make([]optim.Term, 2)
		for i := range *x {
			f.fill(reflect.ValueOf(&(*x)[i]).Elem())
		}
	case *string:
		*x = fmt.Sprintf("metric%d", n)
	default:
		switch v.Kind() {
		case reflect.Struct:
			for i := range v.NumField() {
				f.fill(v.Field(i))
			}
		case reflect.Bool:
			v.SetBool(true)
		case reflect.Int32, reflect.Int64:
			if name := v.Type().Name(); opset.Enums()[name] != nil {
				// The largest value of the enumeration: never 0.
				var last int32
				for _, e := range opset.Enums()[name] {
					last = max(last, e)
				}
				v.SetInt(int64(last))
				return
			}
			v.SetInt(int64(n) * 1_000_003 * int64(1-2*(n%2)))
		case reflect.Float64:
			v.SetFloat(0.1 * float64(n))
		default:
			panic(fmt.Sprintf("filler: %v", v.Type()))
		}
	}
}

// tableOps returns one op of every type of the table with every field set,
// with immediate and (regs) register operands.
func tableOps(p *optim.Program, regs bool) []optim.Op {
	f := &filler{p: p, regs: regs}
	var ops []optim.Op
	for _, s := range optim.OpSet() {
		v := reflect.New(s.Type).Elem()
		f.fill(v)
		for i := range v.NumField() {
			if v.Field(i).IsZero() {
				panic(fmt.Sprintf("%s.%s not filled", s.Name, s.Type.Field(i).Name))
			}
		}
		ops = append(ops, v.Interface().(optim.Op))
	}
	return ops
}

// roundTrip sends p through the real encoding, as on the wire.
func roundTrip(t *testing.T, p *optim.Program) (*pb.Program, *optim.Program) {
	t.Helper()
	enc, err := ProgramToProto(p)
	if err != nil {
		t.Fatalf("ProgramToProto: %v", err)
	}
	b, err := proto.Marshal(enc)
	if err != nil {
		t.Fatalf("Marshal: %v", err)
	}
	var dec pb.Program
	if err := proto.Unmarshal(b, &dec); err != nil {
		t.Fatalf("Unmarshal: %v", err)
	}
	got, err := ProgramFromProto(&dec)
	if err != nil {
		t.Fatalf("ProgramFromProto: %v", err)
	}
	return &dec, got
}

// Every op of the table survives the wire with every field set, with
// immediate and register operands; a new op is covered by its table row.
func TestProgramRoundTripEveryOp(t *testing.T) {
	for _, regs := range []bool{false, true} {
		p := optim.Prog()
		for _, op := range tableOps(p, regs) {
			t.Run(fmt.Sprintf("%s/regs=%v", optim.OpName(op), regs), func(t *testing.T) {
				one := optim.Prog()
				one.Ops = []optim.Op{op}
				dec, got := roundTrip(t, one)
				spec, _ := opset.SpecOf(op)
				if w := dec.Ops[0].ProtoReflect().WhichOneof(opOneof); w == nil || string(w.Name()) != spec.Wire {
					t.Fatalf("encoded as %v, want %s", w, spec.Wire)
				}
				if !reflect.DeepEqual(got.Ops, one.Ops) {
					t.Fatalf("round trip:\n got %#v\nwant %#v", got.Ops, one.Ops)
				}
				if got.String() != one.String() {
					t.Fatalf("listing after the round trip:\n%s\nwant\n%s", got, one)
				}
			})
		}
	}
}

// The op table and the proto agree: every op has its field in the Op
// oneof and every oneof field is an op; an op's message has a field of the
// same kind for each Go field, and no field besides the legacy doubles of
// Num fields.
func TestOpSetMatchesProto(t *testing.T) {
	if err := CheckOpSet(); err != nil {
		t.Fatal(err)
	}
	inTable := map[string]bool{}
	for _, s := range optim.OpSet() {
		inTable[s.Wire] = true
		fd := opDesc.Fields().ByName(protoreflect.Name(s.Wire))
		if fd == nil || fd.ContainingOneof() != opOneof {
			t.Errorf("op %s: no field %q in pb.Op's oneof", s.Name, s.Wire)
			continue
		}
		checkFields(t, s.Name, opset.Fields(s.Type), fd.Message())
	}
	fields := opOneof.Fields()
	for i := range fields.Len() {
		if name := string(fields.Get(i).Name()); !inTable[name] {
			t.Errorf("pb.Op field %q is not in the op table", name)
		}
	}
}

// checkFields checks that msg has no field that fields lack (but the
// legacy double of a Num) and recurses into Batch and Term; CheckOpSet
// checked the other direction and the kinds.
func checkFields(t *testing.T, name string, fields []opset.FieldSpec, msg protoreflect.MessageDescriptor) {
	t.Helper()
	known := map[protoreflect.Name]bool{}
	for _, f := range fields {
		known[protoreflect.Name(f.Wire)] = true
		if f.Kind == "num" { // a Num field of an op older than minor 5
			known[protoreflect.Name(f.Wire+"_num")] = true
		}
		if f.Kind == "batch" || f.Kind == "terms" {
			st := f.Type
			if st.Kind() == reflect.Slice {
				st = st.Elem()
			}
			if fd := msg.Fields().ByName(protoreflect.Name(f.Wire)); fd != nil && fd.Message() != nil {
				checkFields(t, name+"."+f.Name, opset.Fields(st), fd.Message())
			}
		}
	}
	for i := range msg.Fields().Len() {
		if fd := msg.Fields().Get(i); !known[fd.Name()] {
			t.Errorf("%s: %s field %s is not a Go field", name, msg.Name(), fd.Name())
		}
	}
}

func TestProgramBuilderRoundTrip(t *testing.T) {
	p := optim.Prog().Alloc(1, 0).Alloc(2, 1)
	ev := p.Grad(1, optim.Params, optim.Batch{}, optim.BNUpdate)
	n := p.Norm(1)
	c := p.Div(optim.K(0.05), p.Add(n, optim.K(1e-12)))
	p.Copy(2, 1).Scale(2, c).Axpy(optim.Params, optim.K(1), 2).Fill(2, nil).BaseStep(optim.Params, 1).SetLR(0, 0.1).Free(2)
	p.Read(n).Report("loss", ev.Loss)
	_, got := roundTrip(t, p)
	// A nil Num of an op older than minor 5 arrives as the immediate 0
	// (its double field), a nil operand of Arith as nil.
	want := slices.Clone(p.Ops)
	for i, op := range want {
		if f, ok := op.(optim.Fill); ok && f.Value == nil {
			f.Value = optim.K(0)
			want[i] = f
		}
	}
	if !reflect.DeepEqual(got.Ops, want) {
		t.Fatalf("got %#v, want %#v", got.Ops, want)
	}
	if got.String() != p.String() {
		t.Fatalf("listing:\n%s\nwant\n%s", got, p)
	}
}

func TestProgramEmptyAndNil(t *testing.T) {
	for _, p := range []*optim.Program{nil, {}, optim.Prog()} {
		enc, err := ProgramToProto(p)
		if err != nil || len(enc.GetOps()) != 0 {
			t.Fatalf("ProgramToProto(%v) = %v, %v", p, enc, err)
		}
	}
	got, err := ProgramFromProto(nil)
	if err != nil || len(got.Ops) != 0 {
		t.Fatalf("ProgramFromProto(nil) = %v, %v", got, err)
	}
}

// Nil and pointer ops are refused with the op's index.
func TestProgramToProtoBadOp(t *testing.T) {
	var nilAxpy *optim.Axpy
	for _, op := range []optim.Op{nil, nilAxpy, &optim.Norm{X: 1}} {
		_, err := ProgramToProto(&optim.Program{Ops: []optim.Op{optim.Norm{X: 1}, op}})
		if Code(err) != codes.InvalidArgument || opIndex(err) != 1 {
			t.Fatalf("op %#v: err = %v, want InvalidArgument at op 1", op, err)
		}
	}
}

// A register of another program is refused before it is sent.
func TestProgramToProtoForeignRegister(t *testing.T) {
	other := optim.Prog()
	r := other.Norm(1)
	p := optim.Prog()
	p.Scale(1, r)
	if _, err := ProgramToProto(p); Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "another program") {
		t.Fatalf("err = %v, want InvalidArgument about another program's register", err)
	}
}

// withUnknown returns m with a field number its message does not have, as
// a newer minor version would send it.
func withUnknown[M proto.Message](t *testing.T, m M) M {
	t.Helper()
	raw, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	raw = protowire.AppendTag(raw, 99, protowire.BytesType)
	raw = protowire.AppendBytes(raw, []byte{0x08, 0x01})
	out := m.ProtoReflect().New().Interface().(M)
	if err := proto.Unmarshal(raw, out); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestProgramFromProtoUnknown(t *testing.T) {
	tests := []struct {
		name string
		op   *pb.Op
	}{
		{"newer op kind", withUnknown(t, &pb.Op{})},
		{"empty op", &pb.Op{}},
		{"newer field", &pb.Op{Kind: &pb.Op_Norm{Norm: withUnknown(t, &pb.NormOp{X: 1})}}},
		{"newer batch field", &pb.Op{Kind: &pb.Op_Grad{Grad: &pb.GradOp{Batch: withUnknown(t, &pb.Batch{})}}}},
		{"newer operand kind", &pb.Op{Kind: &pb.Op_Fill{Fill: &pb.FillOp{ValueNum: withUnknown(t, &pb.Num{})}}}},
		{"unknown unary kind", &pb.Op{Kind: &pb.Op_Unary{Unary: &pb.UnaryOp{Dst: 1, Src: 1, Kind: 42}}}},
		{"unspecified unary kind", &pb.Op{Kind: &pb.Op_Unary{Unary: &pb.UnaryOp{Dst: 1, Src: 1}}}},
		{"unknown binary kind", &pb.Op{Kind: &pb.Op_Binary{Binary: &pb.BinaryOp{Kind: 7}}}},
		{"unknown BN mode", &pb.Op{Kind: &pb.Op_Grad{Grad: &pb.GradOp{Bn: 5}}}},
		{"unknown arith kind", &pb.Op{Kind: &pb.Op_Arith{Arith: &pb.ArithOp{Kind: 10}}}},
		{"unknown segmentation", &pb.Op{Kind: &pb.Op_SegReduce{SegReduce: &pb.SegReduceOp{Kind: 1, By: 4}}}},
		{"unknown vector shape", &pb.Op{Kind: &pb.Op_Alloc{Alloc: &pb.AllocOp{Id: 1, Shape: 4}}}},
		{"unknown mat_func kind", &pb.Op{Kind: &pb.Op_MatFunc{MatFunc: &pb.MatFuncOp{Kind: 6}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			norm := &pb.Op{Kind: &pb.Op_Norm{Norm: &pb.NormOp{X: 1}}}
			_, err := ProgramFromProto(&pb.Program{Ops: []*pb.Op{norm, norm, tt.op}})
			if Code(err) != codes.Unimplemented || opIndex(err) != 2 || !strings.HasPrefix(err.Error(), "op 2 (") {
				t.Fatalf("err = %v, want Unimplemented at op 2", err)
			}
			st := status.Convert(ToStatus(fmt.Errorf("exec: %w", err)))
			if st.Code() != codes.Unimplemented {
				t.Fatalf("status code = %v, want Unimplemented", st.Code())
			}
			back := FromStatus(st.Err())
			if opIndex(back) != 2 || !errors.Is(back, errors.ErrUnsupported) {
				t.Fatalf("FromStatus = %#v, want op 2 and ErrUnsupported", back)
			}
		})
	}
}

// A Num field of an op older than minor 5 is sent twice: as a Num and, for
// older receivers, an immediate in its double; a receiver reads the double
// when the Num is absent (an older sender).
func TestNumLegacyDouble(t *testing.T) {
	p := optim.Prog()
	r := p.Norm(1)
	p.Fill(2, optim.K(2.5)).Scale(2, r).LinComb(2, optim.Term{Coef: optim.K(-3), X: 1}, optim.Term{Coef: r, X: 2})
	enc, err := ProgramToProto(p)
	if err != nil {
		t.Fatal(err)
	}
	if f := enc.Ops[1].GetFill(); f.GetValue() != 2.5 || f.GetValueNum().GetK() != 2.5 {
		t.Errorf("Fill K(2.5) encodes as %v", f)
	}
	if s := enc.Ops[2].GetScale(); s.GetAlpha() != 0 || s.GetAlphaNum().GetReg() != 1 {
		t.Errorf("Scale by #1 encodes as %v", s)
	}
	if ts := enc.Ops[3].GetLinComb().GetTerms(); ts[0].GetCoef() != -3 || ts[0].GetCoefNum().GetK() != -3 || ts[1].GetCoefNum().GetReg() != 1 {
		t.Errorf("LinComb terms encode as %v", ts)
	}

	old := &pb.Program{Ops: []*pb.Op{
		{Kind: &pb.Op_Fill{Fill: &pb.FillOp{Dst: 2, Value: 1.5}}},
		{Kind: &pb.Op_Scale{Scale: &pb.ScaleOp{Dst: 2, Alpha: -2}}},
		{Kind: &pb.Op_AddConst{AddConst: &pb.AddConstOp{Dst: 2}}},
		{Kind: &pb.Op_Axpy{Axpy: &pb.AxpyOp{Dst: 2, Alpha: 0.5, X: 1, AlphaNum: &pb.Num{Kind: &pb.Num_K{K: 7}}}}},
		{Kind: &pb.Op_LinComb{LinComb: &pb.LinCombOp{Dst: 2, Terms: []*pb.Term{{Coef: 4, X: 1}}}}},
	}}
	got, err := ProgramFromProto(old)
	if err != nil {
		t.Fatal(err)
	}
	want := []optim.Op{
		optim.Fill{Dst: 2, Value: optim.K(1.5)},
		optim.Scale{Dst: 2, Alpha: optim.K(-2)},
		optim.AddConst{Dst: 2, Value: optim.K(0)},
		optim.Axpy{Dst: 2, Alpha: optim.K(7), X: 1}, // the Num wins
		optim.LinComb{Dst: 2, Terms: []optim.Term{{Coef: optim.K(4), X: 1}}},
	}
	if !reflect.DeepEqual(got.Ops, want) {
		t.Fatalf("got %#v\nwant %#v", got.Ops, want)
	}
}

// A request of a plugin older than minor 5 reads every register, so its
// result is every scalar in op order; a current one reads what it asks.
func TestExecRequestLegacy(t *testing.T) {
	ops := []*pb.Op{
		{Kind: &pb.Op_Grad{Grad: &pb.GradOp{Out: 1}}},
		{Kind: &pb.Op_Scale{Scale: &pb.ScaleOp{Dst: 1, Alpha: 0.5}}},
		{Kind: &pb.Op_Norm{Norm: &pb.NormOp{X: 1}}},
		{Kind: &pb.Op_JointGrad{JointGrad: &pb.JointGradOp{Ats: []int32{0, -1}}}},
		{Kind: &pb.Op_Dot{Dot: &pb.DotOp{A: 1, B: 1}}},
	}
	p, err := ExecRequestFromProto(&pb.ExecRequest{Program: &pb.Program{Ops: ops}})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Ops) != len(ops)+6 {
		t.Fatalf("%d ops, want %d Reads appended:\n%s", len(p.Ops), 6, p)
	}
	for i, op := range p.Ops[len(ops):] {
		if rd, ok := op.(optim.Read); !ok || rd.X.Index() != i+1 {
			t.Fatalf("op %d is %#v, want Read #%d", len(ops)+i, op, i+1)
		}
	}
	vals := []float64{2.5, 0.9, 3, 1.25, 0.5, 9}
	r, err := opset.NewResult(p, vals)
	if err != nil {
		t.Fatal(err)
	}
	if enc := ResultToProto(r); !slices.Equal(enc.GetScalars(), vals) {
		t.Fatalf("result scalars %v, want %v (every scalar in op order)", enc.GetScalars(), vals)
	}
	for i, v := range vals {
		if got := r.Get(p.Reg(i + 1)); got != v {
			t.Errorf("register %d = %v, want %v", i+1, got, v)
		}
	}

	cur := optim.Prog()
	n := cur.Norm(1)
	cur.Dot(1, 1)
	cur.Read(n)
	req, err := ExecRequestToProto(cur)
	if err != nil || req.GetProtocolMinor() != optim.ProtocolMinor {
		t.Fatalf("ExecRequestToProto = %v, %v; want minor %d", req, err, optim.ProtocolMinor)
	}
	dec, err := ExecRequestFromProto(req)
	if err != nil || len(dec.Ops) != 3 {
		t.Fatalf("current request: %v, %v; want its 3 ops", dec, err)
	}
}

func TestResultRoundTrip(t *testing.T) {
	p := optim.Prog()
	a, b := p.Norm(1), p.Dot(1, 2)
	p.Read(b, a)
	for _, vals := range [][]float64{{1, -2.5}, {math.Inf(1), 3e300}} {
		r, err := opset.NewResult(p, vals)
		if err != nil {
			t.Fatal(err)
		}
		got, err := ResultFromProto(p, ResultToProto(r))
		if err != nil || got.Get(b) != vals[0] || got.Get(a) != vals[1] {
			t.Fatalf("got %v, %v; want %v", got.Reads, err, vals)
		}
	}
	if _, err := ResultFromProto(p, &pb.Result{Scalars: []float64{1}}); Code(err) != codes.Internal {
		t.Fatalf("a result of the wrong length: err = %v, want Internal", err)
	}
	if got, err := ResultFromProto(optim.Prog(), &pb.Result{}); err != nil || len(got.Reads) != 0 {
		t.Fatalf("empty result: %v, %v", got, err)
	}
}

// A VecError crosses as its handle: the plugin prints it with the names
// of its program, also after a second hop.
func TestVecErrorRoundTrip(t *testing.T) {
	hs := optim.NewHandles().Sub("sam")
	g := hs.New("g")
	prog := hs.Prog()
	prog.Axpy(optim.Params, optim.K(1), g)

	hostErr := fmt.Errorf("exec: %w", &optim.OpError{Index: 0, Op: "Axpy", Err: &optim.VecError{Vec: g, Msg: "is not allocated"}})
	st := status.Convert(ToStatus(hostErr))
	var detail *pb.OpError
	for _, d := range st.Details() {
		detail, _ = d.(*pb.OpError)
	}
	if !detail.GetVecError() || optim.Vec(detail.GetVec()) != g || detail.GetMessage() != "is not allocated" {
		t.Fatalf("detail %v", detail)
	}
	back := FromStatus(st.Err())
	if want := fmt.Sprintf("exec: op 0 (Axpy): handle v%d is not allocated", g); back.Error() != want {
		t.Fatalf("before naming: %q, want %q", back.Error(), want)
	}
	opset.NameHandles(back, prog)
	const want = "exec: op 0 (Axpy): handle sam/g is not allocated"
	if back.Error() != want {
		t.Fatalf("named: %q, want %q", back.Error(), want)
	}
	var ve *optim.VecError
	var oe *optim.OpError
	if !errors.As(back, &ve) || ve.Vec != g || !errors.As(back, &oe) || oe.Error() != "op 0 (Axpy): handle sam/g is not allocated" {
		t.Fatalf("chain: %#v, %#v", ve, oe)
	}
	// The plugin's Step fails with it; the host gets the named text.
	again := FromStatus(ToStatus(fmt.Errorf("step: %w", back)))
	if again.Error() != "step: "+want || !errors.As(again, &ve) || ve.Vec != g {
		t.Fatalf("second hop: %q", again)
	}
	// A VecError wrapped with more text crosses as text.
	wrapped := &optim.OpError{Index: 1, Op: "Copy", Err: fmt.Errorf("src: %w", &optim.VecError{Vec: 3, Msg: "is not allocated"})}
	back = FromStatus(ToStatus(wrapped))
	if back.Error() != wrapped.Error() || errors.As(back, &ve) {
		t.Fatalf("wrapped: %q", back)
	}
}
