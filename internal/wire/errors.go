package wire

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/optlab/optlab/internal/pluginpb"
)

// Error is a protocol error that carries a gRPC code and, when a program
// failed, the 0-based index of the failing op. It converts to a gRPC status
// (with a pb.OpError detail when Op ≥ 0), so it survives any number of hops
// between host and plugin.
type Error struct {
	// Code is the gRPC status code.
	Code codes.Code
	// Op is the index of the failing op in its program, or -1.
	Op int
	// Msg is the whole message.
	Msg string
}

// OpErrorf returns an *Error for op index op of a program, with a message
// that starts with "op <index>: ".
func OpErrorf(code codes.Code, op int, format string, args ...any) *Error {
	return &Error{Code: code, Op: op, Msg: fmt.Sprintf("op %d: ", op) + fmt.Sprintf(format, args...)}
}

// Error returns the message.
func (e *Error) Error() string { return e.Msg }

// OpIndex returns the index of the failing op, or -1.
func (e *Error) OpIndex() int { return e.Op }

// GRPCStatus returns the gRPC status equivalent of e.
func (e *Error) GRPCStatus() *status.Status {
	return withOp(status.New(e.Code, e.Msg), e.Op)
}

// Unwrap maps the codes that have a Go equivalent to it, so that
// errors.Is(err, context.DeadlineExceeded), context.Canceled and
// errors.ErrUnsupported (for Unimplemented) work across the wire.
func (e *Error) Unwrap() error {
	switch e.Code {
	case codes.DeadlineExceeded:
		return context.DeadlineExceeded
	case codes.Canceled:
		return context.Canceled
	case codes.Unimplemented:
		return errors.ErrUnsupported
	}
	return nil
}

func withOp(st *status.Status, op int) *status.Status {
	if op < 0 {
		return st
	}
	if d, err := st.WithDetails(&pb.OpError{OpIndex: int32(op)}); err == nil {
		return d
	}
	return st
}

// Code returns the gRPC code that err maps to: DeadlineExceeded and Canceled
// for context errors, the code of the outermost error in the chain that has
// a GRPCStatus method, Unimplemented for errors.ErrUnsupported, else Unknown.
func Code(err error) codes.Code {
	switch {
	case err == nil:
		return codes.OK
	case errors.Is(err, context.DeadlineExceeded):
		return codes.DeadlineExceeded
	case errors.Is(err, context.Canceled):
		return codes.Canceled
	}
	var gs interface{ GRPCStatus() *status.Status }
	if errors.As(err, &gs) {
		if st := gs.GRPCStatus(); st != nil {
			return st.Code()
		}
	}
	if errors.Is(err, errors.ErrUnsupported) {
		return codes.Unimplemented
	}
	return codes.Unknown
}

// opIndex finds an error in err's chain with an OpIndex method (wire's own
// *Error, or a host error type that reports the failing op the same way).
func opIndex(err error) int {
	var oi interface{ OpIndex() int }
	if errors.As(err, &oi) {
		return oi.OpIndex()
	}
	return -1
}

// ToStatus converts err into a gRPC status error for a server handler to
// return: the code from Code, the whole message of err, and an OpError detail
// when some error in the chain has an OpIndex() int method returning ≥ 0.
// A nil err gives nil.
func ToStatus(err error) error {
	if err == nil {
		return nil
	}
	return withOp(status.New(Code(err), err.Error()), opIndex(err)).Err()
}

// FromStatus converts an error returned by a gRPC call into an *Error with
// the same code, message and op index. Errors that are not gRPC statuses are
// returned unchanged; nil gives nil.
func FromStatus(err error) error {
	if err == nil {
		return nil
	}
	st, ok := status.FromError(err)
	if !ok {
		return err
	}
	e := &Error{Code: st.Code(), Op: -1, Msg: st.Message()}
	for _, d := range st.Details() {
		if oe, ok := d.(*pb.OpError); ok {
			e.Op = int(oe.GetOpIndex())
		}
	}
	return e
}
