package protocol

import (
	"context"
	"errors"
	"fmt"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"

	pb "github.com/optlab/optlab/sdk/internal/pluginpb"
	"github.com/optlab/optlab/sdk/internal/wire"
	"github.com/optlab/optlab/sdk/optim"
)

// HostPlugin is the host side of the go-plugin Plugin: put it in the
// client's plugin set under PluginName; Dispense returns a *Conn.
type HostPlugin struct {
	plugin.NetRPCUnsupportedPlugin
}

// GRPCServer is not used: the plugin side lives in sdk/serve.
func (HostPlugin) GRPCServer(*plugin.GRPCBroker, *grpc.Server) error {
	return errors.New("protocol: the host side cannot serve an optimizer; use sdk/serve")
}

// GRPCClient returns the *Conn of a dispensed plugin.
func (HostPlugin) GRPCClient(_ context.Context, broker *plugin.GRPCBroker, conn *grpc.ClientConn) (any, error) {
	return &Conn{rpc: pb.NewOptimizerClient(conn), broker: broker}, nil
}

// Conn calls a plugin's Optimizer service. Its errors are the gRPC errors
// of the calls, unchanged: RemoteError turns one into the error the plugin
// returned (with its op index), and status.Code reads its code. Conn adds no
// deadlines; the caller's context bounds every call.
//
// Every call carries a fresh call id (wire.CallIDKey in its gRPC
// metadata), and the Host service that Configure serves admits an Exec
// only when it names a call in flight (a plugin older than protocol minor
// 10, which names none, only while some call is in flight); Refused
// returns the first Exec refused.
type Conn struct {
	rpc    pb.OptimizerClient
	broker *plugin.GRPCBroker
	calls  calls
}

// Refused returns the refusal of the first Exec that the plugin sent
// outside the host's calls into it (it wraps ErrStrayExec), or nil. The
// refused program did nothing; a host fails the run with it.
func (c *Conn) Refused() error { return c.calls.err() }

// Info calls the plugin's Info. Its Features are those the plugin
// declares, also those that a plugin built before features had names says
// in the reply's booleans (wire.InfoFromResponse).
func (c *Conn) Info(ctx context.Context) (optim.Info, error) {
	ctx, end := c.calls.begin(ctx, "Info")
	defer end()
	resp, err := c.rpc.Info(ctx, &pb.InfoRequest{})
	if err != nil {
		return optim.Info{}, err
	}
	return wire.InfoFromResponse(resp)
}

// HostOptions are the options of the Host service that Configure serves.
type HostOptions struct {
	// Logger receives the stacks of panics recovered in the host's code.
	Logger hclog.Logger
	// Interceptors are added to the Host service's gRPC server (e.g. to
	// count the plugin's calls).
	Interceptors []grpc.UnaryServerInterceptor
}

// Configure serves h to the plugin (a Host service on a new broker ID, for
// the life of the plugin) and calls the plugin's Configure with cfg. The
// plugin sends all its Layout and Exec calls to h, from goroutines of the
// gRPC server: the goroutine that calls Step must not hold a lock that
// h.Exec takes. An error converting cfg is returned as it is, before any
// call. A host that implements ProgramChecker sees the size of every
// program before it is decoded. resolved is what the plugin's optimizer resolved in Configure
// (Optimizer.Resolved; nil for none, and from plugins that predate it).
func (c *Conn) Configure(ctx context.Context, h optim.Host, cfg optim.Config, opts HostOptions) (resolved map[string]any, err error) {
	if h == nil {
		return nil, errors.New("nil host")
	}
	pcfg, err := wire.ConfigToProto(cfg)
	if err != nil {
		return nil, err
	}
	logger := opts.Logger
	if logger == nil {
		logger = hclog.NewNullLogger()
	}
	id := c.broker.NextId()
	srv := &hostServer{h: h, logger: logger, calls: &c.calls}
	go c.broker.AcceptAndServe(id, func(so []grpc.ServerOption) *grpc.Server {
		so = append(so,
			grpc.MaxRecvMsgSize(MaxMessageSize),
			grpc.MaxSendMsgSize(MaxMessageSize),
			grpc.ChainUnaryInterceptor(opts.Interceptors...))
		if pc, ok := h.(ProgramChecker); ok {
			so = append(so, grpc.ForceServerCodecV2(newCheckingCodec(pc)))
		}
		s := grpc.NewServer(so...)
		pb.RegisterHostServer(s, srv)
		return s
	})
	ctx, end := c.calls.begin(ctx, "Configure")
	defer end()
	resp, err := c.rpc.Configure(ctx, &pb.ConfigureRequest{HostBrokerId: id, Config: pcfg})
	if err != nil {
		return nil, err
	}
	resolved, err = wire.ParamsFromProto(resp.GetResolved())
	if err != nil {
		return nil, fmt.Errorf("resolved: %w", err)
	}
	return resolved, nil
}

// Step calls the plugin's Step.
func (c *Conn) Step(ctx context.Context, in optim.StepInput) (optim.StepOutput, error) {
	ctx, end := c.calls.begin(ctx, "Step")
	defer end()
	resp, err := c.rpc.Step(ctx, &pb.StepRequest{Input: wire.StepInputToProto(in)})
	if err != nil {
		return optim.StepOutput{}, err
	}
	return wire.StepOutputFromProto(resp.GetOutput()), nil
}

// Predictive calls the plugin's Predictive; for an optimizer without one
// the error's code is Unimplemented.
func (c *Conn) Predictive(ctx context.Context) (optim.Predictive, error) {
	ctx, end := c.calls.begin(ctx, "Predictive")
	defer end()
	resp, err := c.rpc.Predictive(ctx, &pb.PredictiveRequest{})
	if err != nil {
		return optim.Predictive{}, err
	}
	return wire.PredictiveFromProto(resp.GetPredictive())
}

// SaveState calls the plugin's SaveState.
func (c *Conn) SaveState(ctx context.Context) ([]byte, []optim.Vec, error) {
	ctx, end := c.calls.begin(ctx, "SaveState")
	defer end()
	resp, err := c.rpc.SaveState(ctx, &pb.SaveStateRequest{})
	if err != nil {
		return nil, nil, err
	}
	blob, vecs := wire.SaveStateFromProto(resp)
	return blob, vecs, nil
}

// LoadState calls the plugin's LoadState.
func (c *Conn) LoadState(ctx context.Context, blob []byte) error {
	ctx, end := c.calls.begin(ctx, "LoadState")
	defer end()
	_, err := c.rpc.LoadState(ctx, &pb.LoadStateRequest{Blob: blob})
	return err
}

// Finalize calls the plugin's Finalize; for an optimizer without one the
// error's code is Unimplemented.
func (c *Conn) Finalize(ctx context.Context) error {
	ctx, end := c.calls.begin(ctx, "Finalize")
	defer end()
	_, err := c.rpc.Finalize(ctx, &pb.FinalizeRequest{})
	return err
}

// RemoteError converts the error of a call into the error the other side
// returned: same gRPC code, message and op index (as an *optim.OpError
// when the failure names an op). Errors that are not gRPC statuses are
// returned unchanged.
func RemoteError(err error) error { return wire.FromStatus(err) }
