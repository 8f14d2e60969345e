package protocol

import (
	"context"

	"github.com/hashicorp/go-hclog"

	pb "github.com/optlab/optlab/sdk/internal/pluginpb"
	"github.com/optlab/optlab/sdk/internal/wire"
	"github.com/optlab/optlab/sdk/optim"
)

// hostServer serves an optim.Host as the Host gRPC service.
type hostServer struct {
	pb.UnimplementedHostServer
	h      optim.Host
	logger hclog.Logger
	// calls, when set, are the host's calls into the plugin in flight: an
	// Exec that belongs to none of them is refused before it runs.
	calls *calls
}

// guard turns a panic in the host's code into an Internal error (logged
// with its stack) instead of a crash of the host from a gRPC goroutine.
func (s *hostServer) guard(method string, fn func() error) error {
	return wire.Guard(s.logger, "host", method, fn)
}

// Layout implements pb.HostServer.
func (s *hostServer) Layout(ctx context.Context, _ *pb.LayoutRequest) (*pb.LayoutResponse, error) {
	var l optim.Layout
	err := s.guard("Layout", func() (err error) {
		l, err = s.h.Layout(ctx)
		return err
	})
	if err != nil {
		return nil, wire.ToStatus(err)
	}
	return &pb.LayoutResponse{Layout: wire.LayoutToProto(l)}, nil
}

// Exec implements pb.HostServer. A program with an op kind this host does
// not know is refused with Unimplemented and the op's index; errors of the
// host keep their op index (an *optim.OpError in the chain). The program
// of a plugin older than protocol minor 5 reads every register (see
// wire.ExecRequestFromProto). An Exec that belongs to none of the host's
// calls in flight is refused with FailedPrecondition before it runs
// (calls.admit).
func (s *hostServer) Exec(ctx context.Context, req *pb.ExecRequest) (*pb.ExecResponse, error) {
	if s.calls != nil {
		if err := s.calls.admit(ctx, req.GetProtocolMinor()); err != nil {
			return nil, wire.ToStatus(err)
		}
	}
	p, err := wire.ExecRequestFromProto(req)
	if err != nil {
		return nil, wire.ToStatus(err)
	}
	var r optim.Result
	err = s.guard("Exec", func() (err error) {
		r, err = s.h.Exec(ctx, p)
		return err
	})
	if err != nil {
		return nil, wire.ToStatus(err)
	}
	return &pb.ExecResponse{Result: wire.ResultToProto(r)}, nil
}
