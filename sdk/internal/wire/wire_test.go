package wire

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/optlab/optlab/sdk/internal/pluginpb"
	"github.com/optlab/optlab/sdk/optim"
)

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
		Features:      optim.Features{Members: true, State: true},
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
		{Kind: optim.Members, Vecs: []optim.Vec{0, optim.ParamsOf(1)}, Masks: []optim.Vec{7, 8}},
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

// Every feature of optim.FeatureSet crosses the wire alone and comes back
// alone, under its name; a plugin built before features had names
// (booleans only, the capabilities of its day) gives the same Features.
func TestFeaturesOverTheWire(t *testing.T) {
	for _, s := range optim.FeatureSet() {
		f := s.Set(optim.Features{}, true)
		resp, err := InfoResponseToProto(optim.Info{Name: "x", Features: f})
		if err != nil {
			t.Fatal(err)
		}
		if got := resp.GetInfo().GetCapabilities(); !slices.Equal(got, []string{s.Name}) {
			t.Errorf("%s: capabilities on the wire %q", s.Field, got)
		}
		back, err := InfoFromResponse(resp)
		if err != nil || back.Features != f {
			t.Errorf("%s: back %+v, %v", s.Field, back.Features, err)
		}
	}
	old := &pb.InfoResponse{Info: &pb.Info{Name: "old", Capabilities: []string{"members", "owns-update"}},
		Predictor: true, Stateful: true, Finalizer: true}
	got, err := InfoFromResponse(old)
	want := optim.Features{Members: true, OwnsUpdate: true, Predictive: true, State: true, Finalize: true}
	if err != nil || got.Features != want {
		t.Errorf("a previous release's reply: %+v, %v; want %+v", got.Features, err, want)
	}
}

// An error's text crosses the wire bounded, in the status and in its
// OpError detail, so that a client's metadata limit never turns it into a
// bare RST_STREAM (hardening4/18).
func TestStatusMessageBounded(t *testing.T) {
	tests := []struct {
		name string
		msg  string
		max  int // longest the status message may be
	}{
		{"short", "cross_entropy: Target 7 is out of bounds.", 100},
		{"long", strings.Repeat("frame #0: c10::something\n", 400), MaxStatusMessage + 40},
		{"long multibyte", strings.Repeat("ρ", 3000), MaxStatusMessage + 40},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := ToStatus(&optim.OpError{Index: 3, Op: "grad", Err: errors.New(tc.msg)})
			st, _ := status.FromError(err)
			if len(st.Message()) > tc.max || !utf8.ValidString(st.Message()) {
				t.Errorf("status message of %d bytes (valid UTF-8: %v), want at most %d", len(st.Message()), utf8.ValidString(st.Message()), tc.max)
			}
			if len(tc.msg) <= MaxStatusMessage && !strings.Contains(st.Message(), tc.msg) {
				t.Errorf("a short message was cut: %q", st.Message())
			}
			if len(tc.msg) > MaxStatusMessage && !strings.Contains(st.Message(), "bytes more)") {
				t.Errorf("a cut message does not say so: …%q", st.Message()[len(st.Message())-30:])
			}
			var op *optim.OpError
			back := FromStatus(err)
			if !errors.As(back, &op) || op.Index != 3 || len(op.Err.Error()) > tc.max {
				t.Errorf("detail: %v", back)
			}
		})
	}
}
