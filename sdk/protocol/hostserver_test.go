package protocol

import (
	"context"
	"math"
	"net"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/hashicorp/go-hclog"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	pb "github.com/optlab/optlab/sdk/internal/pluginpb"
	"github.com/optlab/optlab/sdk/protocoltest"
)

// TestHostServiceUnimplementedOp sends the host's Host service, over real
// gRPC, a program whose op 1 has a kind from a newer protocol minor.
func TestHostServiceUnimplementedOp(t *testing.T) {
	lis, err := net.Listen("unix", filepath.Join(t.TempDir(), "h.sock"))
	if err != nil {
		t.Fatal(err)
	}
	host := protocoltest.NewFakeHost(10)
	s := grpc.NewServer()
	pb.RegisterHostServer(s, &hostServer{h: host, logger: hclog.NewNullLogger()})
	go func() { _ = s.Serve(lis) }()
	t.Cleanup(s.Stop)
	conn, err := grpc.NewClient("unix://"+lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	hc := pb.NewHostClient(conn)

	var raw []byte
	raw = protowire.AppendTag(raw, 42, protowire.BytesType)
	raw = protowire.AppendBytes(raw, nil)
	newer := &pb.Op{}
	if err := proto.Unmarshal(raw, newer); err != nil {
		t.Fatal(err)
	}
	norm := &pb.Op{Kind: &pb.Op_Norm{Norm: &pb.NormOp{X: 0}}}
	tests := []struct {
		name string
		ops  []*pb.Op
		code codes.Code
		op   int32
	}{
		{"newer op kind", []*pb.Op{norm, newer}, codes.Unimplemented, 1},
		{"unknown unary kind", []*pb.Op{norm, norm, {Kind: &pb.Op_Unary{Unary: &pb.UnaryOp{Kind: 99}}}}, codes.Unimplemented, 2},
		{"host error with op index", []*pb.Op{norm, {Kind: &pb.Op_Norm{Norm: &pb.NormOp{X: 5}}}}, codes.Unknown, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := hc.Exec(context.Background(), &pb.ExecRequest{Program: &pb.Program{Ops: tt.ops}})
			st := status.Convert(err)
			if st.Code() != tt.code {
				t.Fatalf("code = %v (%v), want %v", st.Code(), err, tt.code)
			}
			var idx int32 = -1
			for _, d := range st.Details() {
				if oe, ok := d.(*pb.OpError); ok {
					idx = oe.GetOpIndex()
				}
			}
			if idx != tt.op {
				t.Fatalf("OpError index = %d, want %d (%v)", idx, tt.op, err)
			}
		})
	}
	// A plugin older than minor 5 gets every scalar; a current one the
	// values of its Read ops.
	res, err := hc.Exec(context.Background(), &pb.ExecRequest{Program: &pb.Program{Ops: []*pb.Op{norm}}})
	if err != nil || !reflect.DeepEqual(res.GetResult().GetScalars(), []float64{math.Sqrt(10)}) {
		t.Fatalf("valid program of minor 0: %v, %v", res, err)
	}
	read := &pb.Op{Kind: &pb.Op_Read{Read: &pb.ReadOp{X: 2}}}
	res, err = hc.Exec(context.Background(), &pb.ExecRequest{Program: &pb.Program{Ops: []*pb.Op{norm, norm, read}}, ProtocolMinor: 5})
	if err != nil || !reflect.DeepEqual(res.GetResult().GetScalars(), []float64{math.Sqrt(10)}) {
		t.Fatalf("valid program of minor 5: %v, %v", res, err)
	}
}
