package wire

import (
	"fmt"

	"google.golang.org/grpc/codes"

	pb "github.com/optlab/optlab/sdk/internal/pluginpb"
	"github.com/optlab/optlab/sdk/optim"
)

// ProgramToProto converts a program for sending. Ops may be given as values
// or pointers of the optim op types; a nil op gives an *Error with code
// InvalidArgument and its index. A nil program converts to an empty one.
func ProgramToProto(p *optim.Program) (*pb.Program, error) {
	if p == nil {
		return &pb.Program{}, nil
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
	v := func(x optim.Vec) int32 { return int32(x) }
	switch o := deref(op).(type) {
	case optim.Alloc:
		return &pb.Op{Kind: &pb.Op_Alloc{Alloc: &pb.AllocOp{Id: v(o.ID), Member: o.Member}}}, nil
	case optim.Free:
		return &pb.Op{Kind: &pb.Op_Free{Free: &pb.FreeOp{Id: v(o.ID)}}}, nil
	case optim.Copy:
		return &pb.Op{Kind: &pb.Op_Copy{Copy: &pb.CopyOp{Dst: v(o.Dst), Src: v(o.Src), Bn: o.BN}}}, nil
	case optim.Fill:
		return &pb.Op{Kind: &pb.Op_Fill{Fill: &pb.FillOp{Dst: v(o.Dst), Value: o.Value}}}, nil
	case optim.FillRange:
		return &pb.Op{Kind: &pb.Op_FillRange{FillRange: &pb.FillRangeOp{Dst: v(o.Dst), Offset: o.Offset, Len: o.Len, Value: o.Value}}}, nil
	case optim.Scale:
		return &pb.Op{Kind: &pb.Op_Scale{Scale: &pb.ScaleOp{Dst: v(o.Dst), Alpha: o.Alpha}}}, nil
	case optim.AddConst:
		return &pb.Op{Kind: &pb.Op_AddConst{AddConst: &pb.AddConstOp{Dst: v(o.Dst), Value: o.Value}}}, nil
	case optim.Axpy:
		return &pb.Op{Kind: &pb.Op_Axpy{Axpy: &pb.AxpyOp{Dst: v(o.Dst), Alpha: o.Alpha, X: v(o.X)}}}, nil
	case optim.LinComb:
		terms := make([]*pb.Term, len(o.Terms))
		for j, t := range o.Terms {
			terms[j] = &pb.Term{Coef: t.Coef, X: v(t.X)}
		}
		return &pb.Op{Kind: &pb.Op_LinComb{LinComb: &pb.LinCombOp{Dst: v(o.Dst), Terms: terms}}}, nil
	case optim.Unary:
		return &pb.Op{Kind: &pb.Op_Unary{Unary: &pb.UnaryOp{Dst: v(o.Dst), Src: v(o.Src), Kind: pb.UnaryKind(o.Kind)}}}, nil
	case optim.Binary:
		return &pb.Op{Kind: &pb.Op_Binary{Binary: &pb.BinaryOp{Dst: v(o.Dst), A: v(o.A), B: v(o.B), Kind: pb.BinaryKind(o.Kind)}}}, nil
	case optim.RandN:
		return &pb.Op{Kind: &pb.Op_RandN{RandN: &pb.RandNOp{Dst: v(o.Dst), Std: o.Std, Seed: o.Seed}}}, nil
	case optim.Dot:
		return &pb.Op{Kind: &pb.Op_Dot{Dot: &pb.DotOp{A: v(o.A), B: v(o.B)}}}, nil
	case optim.Norm:
		return &pb.Op{Kind: &pb.Op_Norm{Norm: &pb.NormOp{X: v(o.X)}}}, nil
	case optim.Grad:
		b := &pb.Batch{Part: o.Batch.Part, Of: o.Batch.Of, Shuffle: o.Batch.Shuffle}
		return &pb.Op{Kind: &pb.Op_Grad{Grad: &pb.GradOp{Out: v(o.Out), At: v(o.At), Batch: b, Bn: pb.BNMode(o.BN), Eps: v(o.Eps), OutRho: v(o.OutRho)}}}, nil
	case optim.BaseStep:
		return &pb.Op{Kind: &pb.Op_BaseStep{BaseStep: &pb.BaseStepOp{Params: v(o.Params), Grad: v(o.Grad)}}}, nil
	case optim.SetLR:
		return &pb.Op{Kind: &pb.Op_SetLr{SetLr: &pb.SetLROp{Member: o.Member, Lr: o.LR}}}, nil
	case optim.JointGrad:
		b := &pb.Batch{Part: o.Batch.Part, Of: o.Batch.Of, Shuffle: o.Batch.Shuffle}
		return &pb.Op{Kind: &pb.Op_JointGrad{JointGrad: &pb.JointGradOp{Outs: vecsToProto(o.Outs), Ats: vecsToProto(o.Ats), Batch: b, Bn: pb.BNMode(o.BN)}}}, nil
	case nil:
		return nil, OpErrorf(codes.InvalidArgument, i, "nil", "nil op")
	default:
		// Unreachable while optim.Op's method set is unexported; kept so a
		// new op type added to sdk/optim without a wire mapping fails loudly.
		return nil, OpErrorf(codes.Unimplemented, i, optim.OpName(op), "op type %T has no wire encoding", op)
	}
}

// deref turns a pointer to an op into the op value; a nil pointer gives nil.
func deref(op optim.Op) optim.Op {
	switch o := op.(type) {
	case *optim.Alloc:
		return derefOp(o)
	case *optim.Free:
		return derefOp(o)
	case *optim.Copy:
		return derefOp(o)
	case *optim.Fill:
		return derefOp(o)
	case *optim.FillRange:
		return derefOp(o)
	case *optim.Scale:
		return derefOp(o)
	case *optim.AddConst:
		return derefOp(o)
	case *optim.Axpy:
		return derefOp(o)
	case *optim.LinComb:
		return derefOp(o)
	case *optim.Unary:
		return derefOp(o)
	case *optim.Binary:
		return derefOp(o)
	case *optim.RandN:
		return derefOp(o)
	case *optim.Dot:
		return derefOp(o)
	case *optim.Norm:
		return derefOp(o)
	case *optim.Grad:
		return derefOp(o)
	case *optim.BaseStep:
		return derefOp(o)
	case *optim.SetLR:
		return derefOp(o)
	case *optim.JointGrad:
		return derefOp(o)
	}
	return op
}

func derefOp[T optim.Op](p *T) optim.Op {
	if p == nil {
		return nil
	}
	return *p
}

// ProgramFromProto converts a received program. An op with no known kind (a
// newer protocol minor version, or an empty Op) or with an unknown enum kind
// gives an *Error with code Unimplemented and the op's index. A nil program
// converts to an empty one.
func ProgramFromProto(p *pb.Program) (*optim.Program, error) {
	out := &optim.Program{Ops: make([]optim.Op, len(p.GetOps()))}
	for i, op := range p.GetOps() {
		o, err := opFromProto(i, op)
		if err != nil {
			return nil, err
		}
		out.Ops[i] = o
	}
	return out, nil
}

func opFromProto(i int, op *pb.Op) (optim.Op, error) {
	v := func(x int32) optim.Vec { return optim.Vec(x) }
	switch k := op.GetKind().(type) {
	case *pb.Op_Alloc:
		o := k.Alloc
		return optim.Alloc{ID: v(o.GetId()), Member: o.GetMember()}, nil
	case *pb.Op_Free:
		return optim.Free{ID: v(k.Free.GetId())}, nil
	case *pb.Op_Copy:
		o := k.Copy
		return optim.Copy{Dst: v(o.GetDst()), Src: v(o.GetSrc()), BN: o.GetBn()}, nil
	case *pb.Op_Fill:
		o := k.Fill
		return optim.Fill{Dst: v(o.GetDst()), Value: o.GetValue()}, nil
	case *pb.Op_FillRange:
		o := k.FillRange
		return optim.FillRange{Dst: v(o.GetDst()), Offset: o.GetOffset(), Len: o.GetLen(), Value: o.GetValue()}, nil
	case *pb.Op_Scale:
		o := k.Scale
		return optim.Scale{Dst: v(o.GetDst()), Alpha: o.GetAlpha()}, nil
	case *pb.Op_AddConst:
		o := k.AddConst
		return optim.AddConst{Dst: v(o.GetDst()), Value: o.GetValue()}, nil
	case *pb.Op_Axpy:
		o := k.Axpy
		return optim.Axpy{Dst: v(o.GetDst()), Alpha: o.GetAlpha(), X: v(o.GetX())}, nil
	case *pb.Op_LinComb:
		o := k.LinComb
		terms := make([]optim.Term, len(o.GetTerms()))
		for j, t := range o.GetTerms() {
			terms[j] = optim.Term{Coef: t.GetCoef(), X: v(t.GetX())}
		}
		return optim.LinComb{Dst: v(o.GetDst()), Terms: terms}, nil
	case *pb.Op_Unary:
		o := k.Unary
		kind := optim.UnaryKind(o.GetKind())
		if kind < optim.Abs || kind > optim.Reciprocal {
			return nil, OpErrorf(codes.Unimplemented, i, "Unary", "unknown unary kind %d", kind)
		}
		return optim.Unary{Dst: v(o.GetDst()), Src: v(o.GetSrc()), Kind: kind}, nil
	case *pb.Op_Binary:
		o := k.Binary
		kind := optim.BinaryKind(o.GetKind())
		if kind < optim.Mul || kind > optim.Min {
			return nil, OpErrorf(codes.Unimplemented, i, "Binary", "unknown binary kind %d", kind)
		}
		return optim.Binary{Dst: v(o.GetDst()), A: v(o.GetA()), B: v(o.GetB()), Kind: kind}, nil
	case *pb.Op_RandN:
		o := k.RandN
		return optim.RandN{Dst: v(o.GetDst()), Std: o.GetStd(), Seed: o.GetSeed()}, nil
	case *pb.Op_Dot:
		o := k.Dot
		return optim.Dot{A: v(o.GetA()), B: v(o.GetB())}, nil
	case *pb.Op_Norm:
		return optim.Norm{X: v(k.Norm.GetX())}, nil
	case *pb.Op_Grad:
		o := k.Grad
		bn := optim.BNMode(o.GetBn())
		if bn != optim.BNUpdate && bn != optim.BNFreeze {
			return nil, OpErrorf(codes.Unimplemented, i, "Grad", "unknown BatchNorm mode %d", bn)
		}
		b := o.GetBatch()
		return optim.Grad{
			Out:    v(o.GetOut()),
			At:     v(o.GetAt()),
			Batch:  optim.Batch{Part: b.GetPart(), Of: b.GetOf(), Shuffle: b.GetShuffle()},
			BN:     bn,
			Eps:    v(o.GetEps()),
			OutRho: v(o.GetOutRho()),
		}, nil
	case *pb.Op_BaseStep:
		o := k.BaseStep
		return optim.BaseStep{Params: v(o.GetParams()), Grad: v(o.GetGrad())}, nil
	case *pb.Op_SetLr:
		o := k.SetLr
		return optim.SetLR{Member: o.GetMember(), LR: o.GetLr()}, nil
	case *pb.Op_JointGrad:
		o := k.JointGrad
		bn := optim.BNMode(o.GetBn())
		if bn != optim.BNUpdate && bn != optim.BNFreeze {
			return nil, OpErrorf(codes.Unimplemented, i, "JointGrad", "unknown BatchNorm mode %d", bn)
		}
		b := o.GetBatch()
		return optim.JointGrad{
			Outs:  vecsFromProto(o.GetOuts()),
			Ats:   vecsFromProto(o.GetAts()),
			Batch: optim.Batch{Part: b.GetPart(), Of: b.GetOf(), Shuffle: b.GetShuffle()},
			BN:    bn,
		}, nil
	default:
		return nil, OpErrorf(codes.Unimplemented, i, "unknown", "unknown op kind (sent by a newer protocol minor version?)")
	}
}

// ResultToProto converts a program's result for sending.
func ResultToProto(r optim.Result) *pb.Result {
	return &pb.Result{Scalars: r.Scalars}
}

// ResultFromProto converts a received result.
func ResultFromProto(r *pb.Result) optim.Result {
	return optim.Result{Scalars: r.GetScalars()}
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

// errorf builds a non-op *Error.
func errorf(code codes.Code, format string, args ...any) *Error {
	return &Error{Code: code, Msg: fmt.Sprintf(format, args...)}
}
