package wire

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	pb "github.com/optlab/optlab/sdk/internal/pluginpb"
	"github.com/optlab/optlab/sdk/optim"
)

// allOps has one op of every type with every field set to a non-zero value,
// so a dropped field shows up in the round trip.
func allOps() []optim.Op {
	return []optim.Op{
		optim.Alloc{ID: 7, Member: 2},
		optim.Free{ID: 7},
		optim.Copy{Dst: 3, Src: optim.ParamsOf(2)},
		optim.Copy{Dst: 4, Src: optim.ParamsOf(1), BN: true},
		optim.Fill{Dst: 3, Value: -1.5},
		optim.FillRange{Dst: 3, Offset: 17, Len: 4, Value: 0.5},
		optim.Scale{Dst: 3, Alpha: 0.25},
		optim.AddConst{Dst: 3, Value: 1e-8},
		optim.Axpy{Dst: optim.ParamsOf(1), Alpha: -0.1, X: 4},
		optim.LinComb{Dst: 5, Terms: []optim.Term{{Coef: 0.5, X: 5}, {Coef: -2, X: optim.ParamsOf(3)}}},
		optim.Unary{Dst: 6, Src: 5, Kind: optim.Softplus},
		optim.Binary{Dst: 6, A: 5, B: 4, Kind: optim.Min},
		optim.RandN{Dst: 8, Std: 0.01, Seed: -1234567890123},
		optim.Dot{A: 4, B: optim.ParamsOf(1)},
		optim.Norm{X: 4},
		optim.Grad{Out: 4, At: 9, Batch: optim.Batch{Part: 1, Of: 2, Shuffle: 99}, BN: optim.BNFreeze},
		optim.Grad{Out: 4, At: 0, Eps: 7, OutRho: 8},
		optim.JointGrad{Outs: []optim.Vec{4, 0}, Ats: []optim.Vec{0, -1}, Batch: optim.Batch{Part: 1, Of: 2, Shuffle: 5}, BN: optim.BNFreeze},
		optim.BaseStep{Params: optim.ParamsOf(1), Grad: 4},
		optim.SetLR{Member: 3, LR: 0.05},
	}
}

func TestProgramRoundTripEveryOp(t *testing.T) {
	seen := map[string]bool{}
	for _, op := range allOps() {
		t.Run(fmt.Sprintf("%T", op), func(t *testing.T) {
			p := &optim.Program{Ops: []optim.Op{op}}
			enc, err := ProgramToProto(p)
			if err != nil {
				t.Fatalf("ProgramToProto: %v", err)
			}
			// Through the real encoding, as on the wire.
			b, err := proto.Marshal(enc)
			if err != nil {
				t.Fatalf("Marshal: %v", err)
			}
			var dec pb.Program
			if err := proto.Unmarshal(b, &dec); err != nil {
				t.Fatalf("Unmarshal: %v", err)
			}
			seen[string(dec.Ops[0].ProtoReflect().WhichOneof(dec.Ops[0].ProtoReflect().Descriptor().Oneofs().ByName("kind")).Name())] = true
			got, err := ProgramFromProto(&dec)
			if err != nil {
				t.Fatalf("ProgramFromProto: %v", err)
			}
			if !reflect.DeepEqual(got, p) {
				t.Fatalf("round trip:\n got %#v\nwant %#v", got, p)
			}
			// A pointer op encodes the same.
			ptr := reflect.New(reflect.TypeOf(op))
			ptr.Elem().Set(reflect.ValueOf(op))
			enc2, err := ProgramToProto(&optim.Program{Ops: []optim.Op{ptr.Interface().(optim.Op)}})
			if err != nil {
				t.Fatalf("ProgramToProto(pointer): %v", err)
			}
			if !proto.Equal(enc, enc2) {
				t.Fatalf("pointer op encodes as %v, value as %v", enc2, enc)
			}
		})
	}
	// Every oneof member of pb.Op must be covered by allOps.
	fields := (&pb.Op{}).ProtoReflect().Descriptor().Oneofs().ByName("kind").Fields()
	for i := 0; i < fields.Len(); i++ {
		if name := string(fields.Get(i).Name()); !seen[name] {
			t.Errorf("op kind %q has no round-trip case", name)
		}
	}
}

func TestProgramBuilderRoundTrip(t *testing.T) {
	p := optim.Prog().Alloc(1, 0).Alloc(2, 1)
	p.Grad(1, optim.Params, optim.Batch{}, optim.BNUpdate)
	p.Norm(1)
	p.Copy(2, 1).Scale(2, 0.5).Axpy(optim.Params, 1, 2).BaseStep(optim.Params, 1).SetLR(0, 0.1).Free(2)
	enc, err := ProgramToProto(p)
	if err != nil {
		t.Fatal(err)
	}
	got, err := ProgramFromProto(enc)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got.Ops, p.Ops) {
		t.Fatalf("got %#v, want %#v", got.Ops, p.Ops)
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

func TestProgramToProtoNilOp(t *testing.T) {
	var nilAxpy *optim.Axpy
	for _, op := range []optim.Op{nil, nilAxpy} {
		_, err := ProgramToProto(&optim.Program{Ops: []optim.Op{optim.Norm{X: 1}, op}})
		if Code(err) != codes.InvalidArgument || opIndex(err) != 1 {
			t.Fatalf("nil op %#v: err = %v, want InvalidArgument at op 1", op, err)
		}
	}
}

// unknownOp builds an Op as a newer minor version would send it: a oneof
// field number this version does not know, kept as unknown bytes.
func unknownOp(t *testing.T) *pb.Op {
	t.Helper()
	var raw []byte
	raw = protowire.AppendTag(raw, 99, protowire.BytesType)
	raw = protowire.AppendBytes(raw, []byte{0x08, 0x01})
	var op pb.Op
	if err := proto.Unmarshal(raw, &op); err != nil {
		t.Fatal(err)
	}
	return &op
}

func TestProgramFromProtoUnknown(t *testing.T) {
	tests := []struct {
		name string
		op   *pb.Op
	}{
		{"newer op kind", unknownOp(t)},
		{"empty op", &pb.Op{}},
		{"unknown unary kind", &pb.Op{Kind: &pb.Op_Unary{Unary: &pb.UnaryOp{Dst: 1, Src: 1, Kind: 42}}}},
		{"unspecified unary kind", &pb.Op{Kind: &pb.Op_Unary{Unary: &pb.UnaryOp{Dst: 1, Src: 1}}}},
		{"unknown binary kind", &pb.Op{Kind: &pb.Op_Binary{Binary: &pb.BinaryOp{Kind: 7}}}},
		{"unknown BN mode", &pb.Op{Kind: &pb.Op_Grad{Grad: &pb.GradOp{Bn: 5}}}},
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

func TestResultRoundTrip(t *testing.T) {
	for _, r := range []optim.Result{{}, {Scalars: []float64{1, -2.5, 3e300}}} {
		if got := ResultFromProto(ResultToProto(r)); !reflect.DeepEqual(got, r) {
			t.Fatalf("got %v, want %v", got, r)
		}
	}
}

func TestValues(t *testing.T) {
	tests := []struct {
		in      any
		want    any
		wantErr bool
	}{
		{0.5, 0.5, false},
		{float32(0.5), 0.5, false},
		{int64(-3), int64(-3), false},
		{3, int64(3), false},
		{int32(3), int64(3), false},
		{uint8(3), int64(3), false},
		{uint64(1 << 63), nil, true},
		{true, true, false},
		{"adam", "adam", false},
		{[]int{1}, nil, true},
		{nil, nil, true},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%T(%v)", tt.in, tt.in), func(t *testing.T) {
			v, err := ValueToProto(tt.in)
			if tt.wantErr {
				if err == nil {
					t.Fatalf("ValueToProto(%v) succeeded, want error", tt.in)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got, err := ValueFromProto(v)
			if err != nil || got != tt.want {
				t.Fatalf("round trip = %v (%T), %v; want %v (%T)", got, got, err, tt.want, tt.want)
			}
		})
	}
	if _, err := ValueFromProto(&pb.Value{}); err == nil {
		t.Fatal("ValueFromProto(empty) succeeded")
	}
}

func TestInfoRoundTrip(t *testing.T) {
	in := optim.Info{
		Name:          "sam",
		Version:       "1.2.3",
		ProtocolMinor: 0,
		Capabilities:  []optim.Capability{"members", "state"},
		Params: []optim.ParamSpec{
			{Name: "rho", Type: optim.Float, Default: 0.05, Doc: "radius"},
			{Name: "k", Type: optim.Int, Default: int64(4)},
			{Name: "adaptive", Type: optim.Bool, Default: false},
			{Name: "mode", Type: optim.String, Default: "sum"},
			{Name: "required", Type: optim.Float},
		},
	}
	enc, err := InfoToProto(in)
	if err != nil {
		t.Fatal(err)
	}
	got, err := InfoFromProto(enc)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, in) {
		t.Fatalf("got %#v\nwant %#v", got, in)
	}
}

func TestParamSpecDefaults(t *testing.T) {
	tests := []struct {
		spec    optim.ParamSpec
		want    any
		wantErr string
	}{
		{optim.ParamSpec{Name: "a", Type: optim.Float, Default: 1}, 1.0, ""},
		{optim.ParamSpec{Name: "a", Type: optim.Float, Default: float32(0.5)}, 0.5, ""},
		{optim.ParamSpec{Name: "a", Type: optim.Int, Default: 3}, int64(3), ""},
		{optim.ParamSpec{Name: "a", Type: optim.Int, Default: 3.5}, nil, "does not match type int"},
		{optim.ParamSpec{Name: "a", Type: optim.Bool, Default: "yes"}, nil, "does not match type bool"},
		{optim.ParamSpec{Name: "a", Type: optim.String, Default: 1}, nil, "does not match type string"},
		{optim.ParamSpec{Name: "a", Type: "complex"}, nil, `unknown type "complex"`},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%s_%v", tt.spec.Type, tt.spec.Default), func(t *testing.T) {
			enc, err := ParamSpecToProto(tt.spec)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got, err := ParamSpecFromProto(enc)
			if err != nil || got.Default != tt.want {
				t.Fatalf("default = %v (%T), %v; want %v", got.Default, got.Default, err, tt.want)
			}
		})
	}
	if _, err := ParamSpecFromProto(&pb.ParamSpec{Name: "x", Type: 17}); err == nil {
		t.Fatal("unknown pb param type accepted")
	}
}

func TestConfigRoundTrip(t *testing.T) {
	tests := []struct {
		name string
		in   optim.Config
		want optim.Config
	}{
		{"empty", optim.Config{}, optim.Config{}},
		{
			"full",
			optim.Config{
				Params: map[string]any{"rho": 0.05, "k": 4, "adaptive": true, "mode": "sum", "n": int64(-2)},
				Seed:   42, TotalSteps: 1000, StepsPerEpoch: 100, Members: 3,
			},
			optim.Config{
				Params: map[string]any{"rho": 0.05, "k": int64(4), "adaptive": true, "mode": "sum", "n": int64(-2)},
				Seed:   42, TotalSteps: 1000, StepsPerEpoch: 100, Members: 3,
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			enc, err := ConfigToProto(tt.in)
			if err != nil {
				t.Fatal(err)
			}
			got, err := ConfigFromProto(enc)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("got %#v\nwant %#v", got, tt.want)
			}
		})
	}
	if _, err := ConfigToProto(optim.Config{Params: map[string]any{"bad": struct{}{}}}); err == nil {
		t.Fatal("unsupported param value accepted")
	}
}

func TestStepRoundTrip(t *testing.T) {
	in := optim.StepInput{Step: 12345, Epoch: 7, LR: 0.1}
	if got := StepInputFromProto(StepInputToProto(in)); got != in {
		t.Fatalf("got %v, want %v", got, in)
	}
	out := optim.StepOutput{Metrics: map[string]float64{"loss": 0.5, "acc": 0.9}}
	if got := StepOutputFromProto(StepOutputToProto(out)); !reflect.DeepEqual(got, out) {
		t.Fatalf("got %v, want %v", got, out)
	}
}

func TestPredictiveRoundTrip(t *testing.T) {
	tests := []optim.Predictive{
		{Kind: optim.Point},
		{Kind: optim.Members, Vecs: []optim.Vec{0, optim.ParamsOf(1), 5}, Weights: []float64{0.2, 0.3, 0.5}},
		{Kind: optim.Samples, Mean: 3, Std: 4, N: 30},
		{Kind: optim.Samples, N: 10},
	}
	for _, p := range tests {
		got, err := PredictiveFromProto(PredictiveToProto(p))
		if err != nil || !reflect.DeepEqual(got, p) {
			t.Fatalf("got %#v, %v; want %#v", got, err, p)
		}
	}
	_, err := PredictiveFromProto(&pb.Predictive{Kind: 9})
	if Code(err) != codes.Unimplemented {
		t.Fatalf("unknown kind: err = %v, want Unimplemented", err)
	}
}

func TestSaveStateRoundTrip(t *testing.T) {
	blob, vecs := SaveStateFromProto(SaveStateToProto([]byte("state"), []optim.Vec{1, 2, optim.ParamsOf(1)}))
	if string(blob) != "state" || !reflect.DeepEqual(vecs, []optim.Vec{1, 2, -1}) {
		t.Fatalf("got %q %v", blob, vecs)
	}
}

func TestLayoutRoundTrip(t *testing.T) {
	l := optim.Layout{
		Members: []optim.MemberLayout{
			{Arch: "resnet18", Numel: 110, Tensors: []optim.Tensor{
				{Name: "conv.weight", Shape: []int64{10, 1, 3, 3}, Offset: 0, Kind: "weight"},
				{Name: "bn.bias", Shape: []int64{20}, Offset: 90, Kind: "bn"},
			}},
			{Arch: "mlp", Numel: 3},
		},
		TrainSize: 50000, BatchSize: 128,
	}
	if got := LayoutFromProto(LayoutToProto(l)); !reflect.DeepEqual(got, l) {
		t.Fatalf("got %#v\nwant %#v", got, l)
	}
}

// opIndex is the index of the *optim.OpError in err's chain, or -1.
func opIndex(err error) int {
	var oe *optim.OpError
	if errors.As(err, &oe) {
		return oe.Index
	}
	return -1
}

func TestStatusMapping(t *testing.T) {
	tests := []struct {
		name   string
		err    error
		code   codes.Code
		op     int
		target error
	}{
		{"plain", errors.New("boom"), codes.Unknown, -1, nil},
		{"deadline", fmt.Errorf("exec: %w", context.DeadlineExceeded), codes.DeadlineExceeded, -1, context.DeadlineExceeded},
		{"canceled", context.Canceled, codes.Canceled, -1, context.Canceled},
		{"unsupported", fmt.Errorf("x: %w", errors.ErrUnsupported), codes.Unimplemented, -1, errors.ErrUnsupported},
		{"wire op error", OpErrorf(codes.InvalidArgument, 4, "Axpy", "bad handle"), codes.InvalidArgument, 4, nil},
		{"host op error", fmt.Errorf("exec: %w", &optim.OpError{Index: 3, Op: "Norm", Err: errors.New("handle 9 not allocated")}), codes.Unknown, 3, nil},
		{"status", status.Error(codes.ResourceExhausted, "oom"), codes.ResourceExhausted, -1, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := status.Convert(ToStatus(tt.err))
			if st.Code() != tt.code || st.Message() != tt.err.Error() {
				t.Fatalf("status = %v %q, want %v %q", st.Code(), st.Message(), tt.code, tt.err.Error())
			}
			back := FromStatus(st.Err())
			var we *Error
			if !errors.As(back, &we) || we.Code != tt.code || opIndex(back) != tt.op || we.Error() != tt.err.Error() {
				t.Fatalf("FromStatus = %#v, want code %v op %d", back, tt.code, tt.op)
			}
			var sent, got *optim.OpError
			if errors.As(tt.err, &sent) && (!errors.As(back, &got) || got.Error() != sent.Error()) {
				t.Fatalf("the op's error did not survive: got %v, want %v", got, sent)
			}
			if tt.target != nil && !errors.Is(back, tt.target) {
				t.Fatalf("errors.Is(%v, %v) = false", back, tt.target)
			}
			// A second hop keeps everything.
			again := FromStatus(ToStatus(fmt.Errorf("step: %w", back)))
			if !errors.As(again, &we) || we.Code != tt.code || opIndex(again) != tt.op {
				t.Fatalf("second hop = %#v", again)
			}
		})
	}
	if ToStatus(nil) != nil || FromStatus(nil) != nil {
		t.Fatal("nil errors must stay nil")
	}
	plain := errors.New("not a status")
	if FromStatus(plain) != plain {
		t.Fatal("FromStatus changed a non-status error")
	}
}

func TestHandshake(t *testing.T) {
	h := Handshake()
	if h.ProtocolVersion != optim.ProtocolMajor || h.MagicCookieKey == "" || h.MagicCookieValue == "" {
		t.Fatalf("bad handshake %+v", h)
	}
}
