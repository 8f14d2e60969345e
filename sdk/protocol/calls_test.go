package protocol

import (
	"context"
	"errors"
	"net"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	pb "github.com/optlab/optlab/sdk/internal/pluginpb"
	"github.com/optlab/optlab/sdk/internal/wire"
	"github.com/optlab/optlab/sdk/protocoltest"
)

// The Host service admits an Exec only when it belongs to one of the
// host's calls in flight: one that names such a call (protocol minor 11),
// or, from a plugin older than call ids, one sent while some call is in
// flight. Every other is refused with FailedPrecondition before it runs,
// and the first refusal is kept (hardening4/08: an Exec from a thread
// left running after Step returned zeroed the parameters).
func TestExecAdmittedOnlyWithinItsCall(t *testing.T) {
	lis, err := net.Listen("unix", filepath.Join(t.TempDir(), "h.sock"))
	if err != nil {
		t.Fatal(err)
	}
	host := protocoltest.NewFakeHost(10)
	var cs calls
	s := grpc.NewServer()
	pb.RegisterHostServer(s, &hostServer{h: host, logger: hclog.NewNullLogger(), calls: &cs})
	go func() { _ = s.Serve(lis) }()
	t.Cleanup(s.Stop)
	conn, err := grpc.NewClient("unix://"+lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	hc := pb.NewHostClient(conn)

	// The ids a host has handed out: call 1 returned, call 2 in flight.
	_, end := cs.begin(context.Background(), "Configure")
	end()
	open, end := cs.begin(context.Background(), "Step")
	defer end()
	openID := metadata.ValueFromOutgoingContext(open, wire.CallIDKey)[0]
	norm := &pb.Op{Kind: &pb.Op_Norm{Norm: &pb.NormOp{X: 0}}}

	tests := []struct {
		name  string
		id    string // "" sends none
		minor int32
		open  bool // whether a call is in flight
		want  string
	}{
		{"its call in flight", openID, 11, true, ""},
		{"no id while a call is in flight", "", 11, true, "it carries no call id"},
		{"a call that returned", "1", 11, true, "the host's call 1, which had returned"},
		{"an id never handed out", "7", 11, true, `its call id "7" names none of the host's calls`},
		{"an id that is no number", "x", 11, true, `its call id "x" names none`},
		{"older plugin within a call", "", 10, true, ""},
		{"older plugin outside every call", "", 10, false, "none of the host's calls into the plugin was in flight"},
		{"older plugin naming a returned call", "1", 10, true, "which had returned"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cs.mu.Lock()
			saved := cs.open
			if !tt.open {
				cs.open = nil
			}
			cs.mu.Unlock()
			defer func() { cs.mu.Lock(); cs.open = saved; cs.mu.Unlock() }()
			ctx := context.Background()
			if tt.id != "" {
				ctx = metadata.AppendToOutgoingContext(ctx, wire.CallIDKey, tt.id)
			}
			before := len(host.Programs())
			_, err := hc.Exec(ctx, &pb.ExecRequest{Program: &pb.Program{Ops: []*pb.Op{norm}}, ProtocolMinor: tt.minor})
			ran := len(host.Programs()) - before
			if tt.want == "" {
				if err != nil || ran != 1 {
					t.Fatalf("Exec: %v (%d programs run), want it run", err, ran)
				}
				return
			}
			st := status.Convert(err)
			if st.Code() != codes.FailedPrecondition || !strings.Contains(st.Message(), tt.want) || ran != 0 {
				t.Fatalf("Exec: %v (%d programs run), want it refused with FailedPrecondition: %q", err, ran, tt.want)
			}
		})
	}
	if err := cs.err(); !errors.Is(err, ErrStrayExec) || !strings.Contains(err.Error(), "carries no call id") {
		t.Errorf("first refusal kept = %v, want the first case's", err)
	}
}
