package wire

import (
	"fmt"
	"maps"
	"math"
	"slices"

	"google.golang.org/grpc/codes"

	pb "github.com/optlab/optlab/sdk/internal/pluginpb"
	"github.com/optlab/optlab/sdk/optim"
)

// ValueToProto converts one hyperparameter value. It accepts float64 and
// float32, every Go integer type (uint64 and uint only up to MaxInt64),
// bool and string; anything else is an error.
func ValueToProto(v any) (*pb.Value, error) {
	if f, ok := asFloat(v); ok {
		return &pb.Value{Kind: &pb.Value_FloatValue{FloatValue: f}}, nil
	}
	if n, ok, err := asInt(v); err != nil {
		return nil, err
	} else if ok {
		return &pb.Value{Kind: &pb.Value_IntValue{IntValue: n}}, nil
	}
	switch x := v.(type) {
	case bool:
		return &pb.Value{Kind: &pb.Value_BoolValue{BoolValue: x}}, nil
	case string:
		return &pb.Value{Kind: &pb.Value_StringValue{StringValue: x}}, nil
	}
	return nil, fmt.Errorf("unsupported hyperparameter value %v of type %T (want float64, int64, bool or string)", v, v)
}

// ValueFromProto converts a received value into float64, int64, bool or
// string. A Value with no kind set is an error.
func ValueFromProto(v *pb.Value) (any, error) {
	switch k := v.GetKind().(type) {
	case *pb.Value_FloatValue:
		return k.FloatValue, nil
	case *pb.Value_IntValue:
		return k.IntValue, nil
	case *pb.Value_BoolValue:
		return k.BoolValue, nil
	case *pb.Value_StringValue:
		return k.StringValue, nil
	}
	return nil, errorf(codes.Unimplemented, "hyperparameter value with no known kind")
}

func asFloat(v any) (float64, bool) {
	switch x := v.(type) {
	case float64:
		return x, true
	case float32:
		return float64(x), true
	}
	return 0, false
}

func asInt(v any) (int64, bool, error) {
	switch x := v.(type) {
	case int:
		return int64(x), true, nil
	case int8:
		return int64(x), true, nil
	case int16:
		return int64(x), true, nil
	case int32:
		return int64(x), true, nil
	case int64:
		return x, true, nil
	case uint8:
		return int64(x), true, nil
	case uint16:
		return int64(x), true, nil
	case uint32:
		return int64(x), true, nil
	case uint:
		if uint64(x) > math.MaxInt64 {
			return 0, false, fmt.Errorf("hyperparameter value %d overflows int64", x)
		}
		return int64(x), true, nil
	case uint64:
		if x > math.MaxInt64 {
			return 0, false, fmt.Errorf("hyperparameter value %d overflows int64", x)
		}
		return int64(x), true, nil
	}
	return 0, false, nil
}

// paramTypeToProto and paramTypeFromProto map the hyperparameter types;
// unknown ones give PARAM_TYPE_UNSPECIFIED and "".
func paramTypeToProto(t optim.ParamType) pb.ParamType {
	switch t {
	case optim.Float:
		return pb.ParamType_PARAM_TYPE_FLOAT
	case optim.Int:
		return pb.ParamType_PARAM_TYPE_INT
	case optim.Bool:
		return pb.ParamType_PARAM_TYPE_BOOL
	case optim.String:
		return pb.ParamType_PARAM_TYPE_STRING
	}
	return pb.ParamType_PARAM_TYPE_UNSPECIFIED
}

func paramTypeFromProto(t pb.ParamType) optim.ParamType {
	switch t {
	case pb.ParamType_PARAM_TYPE_FLOAT:
		return optim.Float
	case pb.ParamType_PARAM_TYPE_INT:
		return optim.Int
	case pb.ParamType_PARAM_TYPE_BOOL:
		return optim.Bool
	case pb.ParamType_PARAM_TYPE_STRING:
		return optim.String
	}
	return ""
}

// defaultToProto converts a ParamSpec default, coercing it to the declared
// type where that is lossless (an integer default of a float parameter).
func defaultToProto(t optim.ParamType, d any) (*pb.Value, error) {
	if d == nil {
		return nil, nil
	}
	mismatch := fmt.Errorf("default %v (%T) does not match type %s", d, d, t)
	switch t {
	case optim.Float:
		if f, ok := asFloat(d); ok {
			return &pb.Value{Kind: &pb.Value_FloatValue{FloatValue: f}}, nil
		}
		if n, ok, err := asInt(d); err == nil && ok {
			return &pb.Value{Kind: &pb.Value_FloatValue{FloatValue: float64(n)}}, nil
		}
		return nil, mismatch
	case optim.Int:
		n, ok, err := asInt(d)
		if err != nil {
			return nil, err
		}
		if !ok {
			return nil, mismatch
		}
		return &pb.Value{Kind: &pb.Value_IntValue{IntValue: n}}, nil
	case optim.Bool:
		if _, ok := d.(bool); !ok {
			return nil, mismatch
		}
	case optim.String:
		if _, ok := d.(string); !ok {
			return nil, mismatch
		}
	}
	return ValueToProto(d)
}

// ParamSpecToProto converts a hyperparameter spec. The type must be one of
// the optim ParamType constants, and a non-nil default must fit it: an
// integer default of a float parameter becomes a float.
func ParamSpecToProto(s optim.ParamSpec) (*pb.ParamSpec, error) {
	out := &pb.ParamSpec{Name: s.Name, Type: paramTypeToProto(s.Type), Doc: s.Doc, Enum: s.Enum, Range: s.Range}
	if out.Type == pb.ParamType_PARAM_TYPE_UNSPECIFIED {
		return nil, fmt.Errorf("hyperparameter %q: unknown type %q (want float, int, bool or string)", s.Name, s.Type)
	}
	d, err := defaultToProto(s.Type, s.Default)
	if err != nil {
		return nil, fmt.Errorf("hyperparameter %q: %w", s.Name, err)
	}
	out.Default = d
	return out, nil
}

// ParamSpecFromProto converts a received hyperparameter spec. The default
// comes back as float64, int64, bool or string, or nil when absent.
func ParamSpecFromProto(s *pb.ParamSpec) (optim.ParamSpec, error) {
	out := optim.ParamSpec{Name: s.GetName(), Type: paramTypeFromProto(s.GetType()), Doc: s.GetDoc(), Enum: s.GetEnum(), Range: s.GetRange()}
	if out.Type == "" {
		return optim.ParamSpec{}, errorf(codes.Unimplemented, "hyperparameter %q: unknown type %v", s.GetName(), s.GetType())
	}
	if s.GetDefault() != nil {
		d, err := ValueFromProto(s.GetDefault())
		if err != nil {
			return optim.ParamSpec{}, fmt.Errorf("hyperparameter %q default: %w", s.GetName(), err)
		}
		out.Default = d
	}
	return out, nil
}

// InfoToProto converts a plugin's Info, its features as their names
// (optim.FeatureSet) among the capabilities; see ParamSpecToProto for the
// checks.
func InfoToProto(in optim.Info) (*pb.Info, error) {
	out := &pb.Info{
		Name:          in.Name,
		Version:       in.Version,
		ProtocolMinor: int32(in.ProtocolMinor),
		Capabilities:  in.Features.Names(),
	}
	if in.Params != nil {
		out.Params = make([]*pb.ParamSpec, len(in.Params))
	}
	for i, s := range in.Params {
		p, err := ParamSpecToProto(s)
		if err != nil {
			return nil, fmt.Errorf("info of %q: %w", in.Name, err)
		}
		out.Params[i] = p
	}
	return out, nil
}

// InfoFromProto converts a received Info; capability names that this SDK
// does not know (a newer one's) are ignored.
func InfoFromProto(in *pb.Info) (optim.Info, error) {
	f, _ := optim.FeaturesOf(in.GetCapabilities())
	out := optim.Info{
		Name:          in.GetName(),
		Version:       in.GetVersion(),
		ProtocolMinor: int(in.GetProtocolMinor()),
		Features:      f,
	}
	if in.GetParams() != nil {
		out.Params = make([]optim.ParamSpec, len(in.GetParams()))
	}
	for i, s := range in.GetParams() {
		p, err := ParamSpecFromProto(s)
		if err != nil {
			return optim.Info{}, fmt.Errorf("info of %q: %w", in.GetName(), err)
		}
		out.Params[i] = p
	}
	return out, nil
}

// ConfigToProto converts a Config for sending; see ValueToProto for the
// accepted parameter value types.
func ConfigToProto(c optim.Config) (*pb.Config, error) {
	out := &pb.Config{
		Seed:          c.Seed,
		TotalSteps:    c.TotalSteps,
		StepsPerEpoch: c.StepsPerEpoch,
		Members:       int32(c.Members),
	}
	params, err := ParamsToProto(c.Params)
	if err != nil {
		return nil, err
	}
	out.Params = params
	return out, nil
}

// ConfigFromProto converts a received Config; parameter values come back as
// float64, int64, bool or string.
func ConfigFromProto(c *pb.Config) (optim.Config, error) {
	out := optim.Config{
		Seed:          c.GetSeed(),
		TotalSteps:    c.GetTotalSteps(),
		StepsPerEpoch: c.GetStepsPerEpoch(),
		Members:       int(c.GetMembers()),
	}
	params, err := ParamsFromProto(c.GetParams())
	if err != nil {
		return optim.Config{}, err
	}
	out.Params = params
	return out, nil
}

// ParamsToProto converts hyperparameter values by name (Config.Params, or
// what optim.Resolver.Resolved returned); see ValueToProto for the accepted
// types. A nil map gives a nil map.
func ParamsToProto(params map[string]any) (map[string]*pb.Value, error) {
	if params == nil {
		return nil, nil
	}
	out := make(map[string]*pb.Value, len(params))
	for _, name := range slices.Sorted(maps.Keys(params)) {
		v, err := ValueToProto(params[name])
		if err != nil {
			return nil, fmt.Errorf("hyperparameter %q: %w", name, err)
		}
		out[name] = v
	}
	return out, nil
}

// ParamsFromProto converts received hyperparameter values by name; they
// come back as float64, int64, bool or string. A nil map gives a nil map.
func ParamsFromProto(params map[string]*pb.Value) (map[string]any, error) {
	if params == nil {
		return nil, nil
	}
	out := make(map[string]any, len(params))
	for _, name := range slices.Sorted(maps.Keys(params)) {
		v, err := ValueFromProto(params[name])
		if err != nil {
			return nil, fmt.Errorf("hyperparameter %q: %w", name, err)
		}
		out[name] = v
	}
	return out, nil
}

// StepInputToProto converts a StepInput.
func StepInputToProto(in optim.StepInput) *pb.StepInput {
	return &pb.StepInput{Step: in.Step, Epoch: int64(in.Epoch), Lr: in.LR}
}

// StepInputFromProto converts a received StepInput.
func StepInputFromProto(in *pb.StepInput) optim.StepInput {
	return optim.StepInput{Step: in.GetStep(), Epoch: int(in.GetEpoch()), LR: in.GetLr()}
}

// StepOutputToProto converts a StepOutput.
func StepOutputToProto(out optim.StepOutput) *pb.StepOutput {
	return &pb.StepOutput{Metrics: out.Metrics}
}

// StepOutputFromProto converts a received StepOutput.
func StepOutputFromProto(out *pb.StepOutput) optim.StepOutput {
	return optim.StepOutput{Metrics: out.GetMetrics()}
}

// PredictiveToProto converts a Predictive.
func PredictiveToProto(p optim.Predictive) *pb.Predictive {
	return &pb.Predictive{
		Kind:    pb.PredictiveKind(p.Kind),
		Vecs:    vecsToProto(p.Vecs),
		Weights: p.Weights,
		Mean:    int32(p.Mean),
		Std:     int32(p.Std),
		N:       int64(p.N),
		Masks:   vecsToProto(p.Masks),
	}
}

// PredictiveFromProto converts a received Predictive; an unknown kind is an
// *Error with code Unimplemented.
func PredictiveFromProto(p *pb.Predictive) (optim.Predictive, error) {
	k := optim.PredictiveKind(p.GetKind())
	if k < optim.Point || k > optim.Samples {
		return optim.Predictive{}, errorf(codes.Unimplemented, "unknown predictive kind %d", k)
	}
	return optim.Predictive{
		Kind:    k,
		Vecs:    vecsFromProto(p.GetVecs()),
		Weights: p.GetWeights(),
		Mean:    optim.Vec(p.GetMean()),
		Std:     optim.Vec(p.GetStd()),
		N:       int(p.GetN()),
		Masks:   vecsFromProto(p.GetMasks()),
	}, nil
}

// SaveStateToProto converts what optim.Stateful.SaveState returned.
func SaveStateToProto(blob []byte, vecs []optim.Vec) *pb.SaveStateResponse {
	return &pb.SaveStateResponse{Blob: blob, Vecs: vecsToProto(vecs)}
}

// SaveStateFromProto converts a received SaveState response.
func SaveStateFromProto(r *pb.SaveStateResponse) ([]byte, []optim.Vec) {
	return r.GetBlob(), vecsFromProto(r.GetVecs())
}

// LayoutToProto converts a Layout.
func LayoutToProto(l optim.Layout) *pb.Layout {
	out := &pb.Layout{TrainSize: l.TrainSize, BatchSize: l.BatchSize}
	if l.Members != nil {
		out.Members = make([]*pb.MemberLayout, len(l.Members))
	}
	for i, m := range l.Members {
		pm := &pb.MemberLayout{Arch: m.Arch, Numel: m.Numel, Variational: m.Variational}
		if m.Tensors != nil {
			pm.Tensors = make([]*pb.Tensor, len(m.Tensors))
		}
		for j, t := range m.Tensors {
			pm.Tensors[j] = &pb.Tensor{Name: t.Name, Shape: t.Shape, Offset: t.Offset, Kind: t.Kind}
		}
		out.Members[i] = pm
	}
	return out
}

// LayoutFromProto converts a received Layout.
func LayoutFromProto(l *pb.Layout) optim.Layout {
	out := optim.Layout{TrainSize: l.GetTrainSize(), BatchSize: l.GetBatchSize()}
	if l.GetMembers() != nil {
		out.Members = make([]optim.MemberLayout, len(l.GetMembers()))
	}
	for i, m := range l.GetMembers() {
		om := optim.MemberLayout{Arch: m.GetArch(), Numel: m.GetNumel(), Variational: m.GetVariational()}
		if m.GetTensors() != nil {
			om.Tensors = make([]optim.Tensor, len(m.GetTensors()))
		}
		for j, t := range m.GetTensors() {
			om.Tensors[j] = optim.Tensor{Name: t.GetName(), Shape: t.GetShape(), Offset: t.GetOffset(), Kind: t.GetKind()}
		}
		out.Members[i] = om
	}
	return out
}

// InfoResponseToProto converts a plugin's Info for the Info call's reply.
// Besides the features' names, the reply says Predictive, State and
// Finalize in the booleans by which hosts before the names knew them.
func InfoResponseToProto(in optim.Info) (*pb.InfoResponse, error) {
	info, err := InfoToProto(in)
	if err != nil {
		return nil, err
	}
	f := in.Features
	return &pb.InfoResponse{Info: info, Predictor: f.Predictive, Stateful: f.State, Finalizer: f.Finalize}, nil
}

// InfoFromResponse converts the Info call's reply: the Info's features are
// those it names and those that the booleans of earlier plugins say
// (predictor, stateful, finalizer), so that a plugin built before the
// names gives the host the same Features.
func InfoFromResponse(r *pb.InfoResponse) (optim.Info, error) {
	info, err := InfoFromProto(r.GetInfo())
	if err != nil {
		return info, err
	}
	info.Features = info.Features.Union(optim.Features{
		Predictive: r.GetPredictor(), State: r.GetStateful(), Finalize: r.GetFinalizer()})
	return info, nil
}

// vecsToProto and vecsFromProto convert handle lists.
func vecsToProto(vs []optim.Vec) []int32 {
	if vs == nil {
		return nil
	}
	out := make([]int32, len(vs))
	for i, v := range vs {
		out[i] = int32(v)
	}
	return out
}

func vecsFromProto(vs []int32) []optim.Vec {
	if vs == nil {
		return nil
	}
	out := make([]optim.Vec, len(vs))
	for i, v := range vs {
		out[i] = optim.Vec(v)
	}
	return out
}
