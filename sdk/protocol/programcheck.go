package protocol

import (
	"fmt"

	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	pb "github.com/optlab/optlab/sdk/internal/pluginpb"
)

// ProgramChecker is implemented by a host that bounds the programs it
// accepts (host/engine: optim.MaxProgramOps, and its memory budget).
// Configure serves such a host with a codec that counts the ops of each
// Exec on the wire and calls CheckProgram before the request is decoded, so
// that a program too large to hold is refused before it is expanded in
// memory (a decoded op takes some 40 times its wire size). The refusal
// reaches the plugin as its Exec's error.
type ProgramChecker interface {
	CheckProgram(ops, wireBytes int) error
}

// checkingCodec is the proto codec, with ExecRequests checked first.
type checkingCodec struct {
	base  encoding.CodecV2
	check ProgramChecker
}

func newCheckingCodec(c ProgramChecker) encoding.CodecV2 {
	return checkingCodec{base: encoding.GetCodecV2("proto"), check: c}
}

func (c checkingCodec) Name() string { return c.base.Name() }

func (c checkingCodec) Marshal(v any) (mem.BufferSlice, error) { return c.base.Marshal(v) }

func (c checkingCodec) Unmarshal(data mem.BufferSlice, v any) error {
	req, ok := v.(*pb.ExecRequest)
	if !ok {
		return c.base.Unmarshal(data, v)
	}
	buf := data.MaterializeToBuffer(mem.DefaultBufferPool())
	defer buf.Free()
	b := buf.ReadOnlyData()
	ops, err := countOps(b)
	if err != nil {
		return err
	}
	if err := c.check.CheckProgram(ops, len(b)); err != nil {
		return err
	}
	return proto.Unmarshal(b, req)
}

// countOps returns the number of ops of the program of an ExecRequest's
// wire form (field 1, program; its field 1, repeated ops), without
// decoding them.
func countOps(b []byte) (int, error) {
	n := 0
	for len(b) > 0 {
		num, typ, k := protowire.ConsumeTag(b)
		if k < 0 {
			return 0, fmt.Errorf("exec request: %w", protowire.ParseError(k))
		}
		b = b[k:]
		if num == 1 && typ == protowire.BytesType {
			prog, k := protowire.ConsumeBytes(b)
			if k < 0 {
				return 0, fmt.Errorf("exec request: program: %w", protowire.ParseError(k))
			}
			b = b[k:]
			for len(prog) > 0 {
				pnum, ptyp, k := protowire.ConsumeTag(prog)
				if k < 0 {
					return 0, fmt.Errorf("exec request: program: %w", protowire.ParseError(k))
				}
				prog = prog[k:]
				if pnum == 1 {
					n++
				}
				k = protowire.ConsumeFieldValue(pnum, ptyp, prog)
				if k < 0 {
					return 0, fmt.Errorf("exec request: program: op %d: %w", n-1, protowire.ParseError(k))
				}
				prog = prog[k:]
			}
			continue
		}
		k = protowire.ConsumeFieldValue(num, typ, b)
		if k < 0 {
			return 0, fmt.Errorf("exec request: %w", protowire.ParseError(k))
		}
		b = b[k:]
	}
	return n, nil
}
