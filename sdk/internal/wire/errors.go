package wire

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/optlab/optlab/sdk/internal/pluginpb"
	"github.com/optlab/optlab/sdk/optim"
)

// Error is a protocol error that carries a gRPC code and, when a program
// failed, the *optim.OpError that says which op. It converts to a gRPC
// status (with a pb.OpError detail when it has an op), so it survives any
// number of hops between host and plugin.
type Error struct {
	// Code is the gRPC status code.
	Code codes.Code
	// Msg is the whole message.
	Msg string
	// Op is the failing op, or nil.
	Op *optim.OpError

	// vec, when set, is the error's *optim.VecError, and Msg ends with its
	// text as the sender printed it, after prefix: Error prints the handle
	// with the names opset.NameHandles gives the VecError.
	vec    *optim.VecError
	prefix string
}

// OpErrorf returns the *optim.OpError of op index i (kind name op) of a
// program, whose Err is an *Error with code and the formatted message.
func OpErrorf(code codes.Code, i int, op, format string, args ...any) *optim.OpError {
	return &optim.OpError{Index: i, Op: op, Err: &Error{Code: code, Msg: fmt.Sprintf(format, args...)}}
}

// Error returns the message.
func (e *Error) Error() string {
	if e.vec != nil {
		return e.prefix + e.vec.Error()
	}
	return e.Msg
}

// GRPCStatus returns the gRPC status equivalent of e.
func (e *Error) GRPCStatus() *status.Status {
	return withOp(status.New(e.Code, e.Msg), e.Op)
}

// Unwrap returns the failing op's *optim.OpError, if any, and maps the codes
// that have a Go equivalent to it, so that errors.Is(err,
// context.DeadlineExceeded), context.Canceled and errors.ErrUnsupported (for
// Unimplemented) work across the wire.
func (e *Error) Unwrap() []error {
	var errs []error
	if e.Op != nil {
		errs = append(errs, e.Op)
	}
	if e.vec != nil && e.Op == nil {
		errs = append(errs, e.vec)
	}
	switch e.Code {
	case codes.DeadlineExceeded:
		errs = append(errs, context.DeadlineExceeded)
	case codes.Canceled:
		errs = append(errs, context.Canceled)
	case codes.Unimplemented:
		errs = append(errs, errors.ErrUnsupported)
	}
	return errs
}

func withOp(st *status.Status, op *optim.OpError) *status.Status {
	if op == nil {
		return st
	}
	detail := &pb.OpError{OpIndex: int32(op.Index), Op: op.Op}
	if op.Err != nil {
		detail.Message = BoundMessage(op.Err.Error())
		// An error that is a VecError (not one wrapped with more text)
		// crosses as its handle and the text after it, for the receiver to
		// name the handle.
		var ve *optim.VecError
		if errors.As(op.Err, &ve) && ve.Error() == detail.Message {
			detail.VecError, detail.Vec, detail.Message = true, int32(ve.Vec), ve.Msg
		}
	}
	if d, err := st.WithDetails(detail); err == nil {
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

// ToStatus converts err into a gRPC status error for a server handler to
// return: the code from Code, the whole message of err, and an OpError detail
// when an *optim.OpError is in the chain. A nil err gives nil.
func ToStatus(err error) error {
	if err == nil {
		return nil
	}
	var op *optim.OpError
	errors.As(err, &op)
	return withOp(status.New(Code(err), BoundMessage(err.Error())), op).Err()
}

// MaxStatusMessage bounds the text of an error that crosses the wire, in
// the status message and again in its OpError detail: gRPC carries both
// in the response's trailers, and a client refuses trailers beyond its
// metadata limit (8 KiB in Python's and C++'s gRPC: the plugin then sees
// only "Received RST_STREAM with error code 2", not the error).
const MaxStatusMessage = 2048

// BoundMessage cuts msg to MaxStatusMessage bytes (at a UTF-8 boundary),
// saying how much was left out.
func BoundMessage(msg string) string {
	if len(msg) <= MaxStatusMessage {
		return msg
	}
	cut := MaxStatusMessage - 40
	for cut > 0 && !utf8.RuneStart(msg[cut]) {
		cut--
	}
	return fmt.Sprintf("%s… (%d bytes more)", msg[:cut], len(msg)-cut)
}

// FromStatus converts an error returned by a gRPC call into an *Error with
// the same code and message, and with an *optim.OpError (whose Err carries
// the code and the op's own message) when the status names a failing op.
// Errors that are not gRPC statuses are returned unchanged; nil gives nil.
func FromStatus(err error) error {
	if err == nil {
		return nil
	}
	st, ok := status.FromError(err)
	if !ok {
		return err
	}
	e := &Error{Code: st.Code(), Msg: st.Message()}
	for _, d := range st.Details() {
		oe, ok := d.(*pb.OpError)
		if !ok {
			continue
		}
		inner := &Error{Code: st.Code(), Msg: oe.GetMessage()}
		if oe.GetVecError() {
			ve := &optim.VecError{Vec: optim.Vec(oe.GetVec()), Msg: oe.GetMessage()}
			inner.vec, inner.Msg = ve, ve.Error()
			// The sender printed the handle without names (a host's
			// program has none); when the whole message ends with that
			// text, it too prints the names the receiver gives.
			if prefix, ok := strings.CutSuffix(e.Msg, ve.Error()); ok {
				e.vec, e.prefix = ve, prefix
			}
		}
		e.Op = &optim.OpError{Index: int(oe.GetOpIndex()), Op: oe.GetOp(), Err: inner}
	}
	return e
}
