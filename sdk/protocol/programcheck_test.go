package protocol

import (
	"errors"
	"strings"
	"testing"

	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"

	pb "github.com/optlab/optlab/sdk/internal/pluginpb"
)

type opLimit struct {
	max    int
	called int // ops of the last call
	bytes  int
}

func (l *opLimit) CheckProgram(ops, wireBytes int) error {
	l.called, l.bytes = ops, wireBytes
	if ops > l.max {
		return errors.New("too many ops")
	}
	return nil
}

// TestCheckingCodec: an ExecRequest's ops are counted on the wire and the
// checker refuses a long program before it is decoded; other messages and
// short programs decode as with the proto codec.
func TestCheckingCodec(t *testing.T) {
	free := &pb.Op{Kind: &pb.Op_Free{Free: &pb.FreeOp{}}}
	mk := func(n int) []byte {
		req := &pb.ExecRequest{Program: &pb.Program{}, ProtocolMinor: 6}
		for range n {
			req.Program.Ops = append(req.Program.Ops, free)
		}
		b, err := proto.Marshal(req)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	tests := []struct {
		name    string
		wire    []byte
		ops     int
		wantErr string
	}{
		{"empty", mk(0), 0, ""},
		{"within", mk(10), 10, ""},
		{"over", mk(11), 11, "too many ops"},
		{"truncated", mk(5)[:7], 0, "exec request"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			lim := &opLimit{max: 10, called: -1}
			var req pb.ExecRequest
			err := newCheckingCodec(lim).Unmarshal(mem.BufferSlice{mem.SliceBuffer(tc.wire)}, &req)
			if tc.wantErr == "" {
				if err != nil || len(req.GetProgram().GetOps()) != tc.ops || lim.called != tc.ops || lim.bytes != len(tc.wire) {
					t.Fatalf("err %v, %d ops decoded, checker saw %d ops %d bytes; want %d ops, %d bytes", err, len(req.GetProgram().GetOps()), lim.called, lim.bytes, tc.ops, len(tc.wire))
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("err = %v, want %q", err, tc.wantErr)
			}
			if len(req.GetProgram().GetOps()) != 0 {
				t.Errorf("a refused program was decoded (%d ops)", len(req.GetProgram().GetOps()))
			}
		})
	}
	// other messages pass through unchecked
	lim := &opLimit{max: 0, called: -1}
	b, _ := proto.Marshal(&pb.LayoutRequest{})
	if err := newCheckingCodec(lim).Unmarshal(mem.BufferSlice{mem.SliceBuffer(b)}, &pb.LayoutRequest{}); err != nil || lim.called != -1 {
		t.Errorf("LayoutRequest: err %v, checker called %d", err, lim.called)
	}
}
