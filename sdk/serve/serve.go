// Package serve turns an optim.Optimizer into an optlab optimizer plugin:
// a separate process that the host launches with hashicorp/go-plugin and
// talks to over gRPC. A plugin's main is one line:
//
//	func main() { serve.Serve(sam.New) }
//
// Serve owns the process: it never writes to stdout itself (stdout carries
// the go-plugin handshake, so a plugin must not print to it before Serve
// either), raises the gRPC message limits to wire.MaxMessageSize, recovers
// panics in the optimizer's methods (the error names the panic; the stack
// goes to the plugin's stderr log, which the host keeps for crash reports),
// dials the host's Host service once per Configure and keeps that connection,
// and exits when its host process dies, so no plugin outlives its host.
package serve

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"

	pb "github.com/optlab/optlab/sdk/internal/pluginpb"
	"github.com/optlab/optlab/sdk/internal/wire"
	"github.com/optlab/optlab/sdk/opset"
	"github.com/optlab/optlab/sdk/optim"
)

// ParentPollInterval is how often a served plugin checks that its host
// process is still alive.
const ParentPollInterval = 500 * time.Millisecond

// Serve serves the optimizer that newOpt returns as a plugin and returns
// when the host closes the plugin. newOpt is called once, as serving
// starts: one plugin process serves one optimizer instance.
//
// Run by hand (without the host's handshake cookie), the binary says that
// it is a plugin and exits with status 1. If the host process dies, the
// plugin removes its socket directory and exits with status 3 within about
// ParentPollInterval.
func Serve(newOpt func() optim.Optimizer) {
	// go-plugin points os.Stderr at a pipe once serving; keep the real one
	// so that logs (panic stacks included) reach the host's stderr reader.
	logger := hclog.New(&hclog.LoggerOptions{
		Level:      hclog.Info,
		Output:     os.Stderr,
		JSONFormat: true,
	})
	go watchParent(logger, os.Getppid(), hostPID(), ParentPollInterval, os.Exit)
	plugin.Serve(&plugin.ServeConfig{
		HandshakeConfig:  wire.Handshake(),
		VersionedPlugins: map[int]plugin.PluginSet{optim.ProtocolMajor: pluginSet(newOpt, logger)},
		GRPCServer:       NewGRPCServer,
		Logger:           logger,
	})
}

// hostPID is the host's process ID as the host passed it (0 when absent).
func hostPID() int {
	pid, err := strconv.Atoi(os.Getenv(wire.HostPIDEnv))
	if err != nil || pid <= 0 {
		return 0
	}
	return pid
}

// hostGone reports whether the host has died: the process hostPID no longer
// exists when the host named itself (the plugin may be a wrapper script's
// child, whose parent outlives the host), else the plugin was reparented
// away from ppid.
func hostGone(ppid, hostPID int) (bool, int) {
	if hostPID > 0 {
		return errors.Is(syscall.Kill(hostPID, 0), syscall.ESRCH), hostPID
	}
	now := os.Getppid()
	return now != ppid, now
}

// watchParent calls exit(3) once the host has died (even by SIGKILL); see
// hostGone.
func watchParent(logger hclog.Logger, ppid, hostPID int, every time.Duration, exit func(int)) {
	t := time.NewTicker(every)
	defer t.Stop()
	for range t.C {
		if gone, now := hostGone(ppid, hostPID); gone {
			// The dead host cannot remove the socket directory it made
			// for this plugin (go-plugin passes it in
			// PLUGIN_UNIX_SOCKET_DIR). Do it before logging: with nobody
			// reading stderr, the write may end the process (SIGPIPE).
			if dir := os.Getenv(plugin.EnvUnixSocketDir); dir != "" {
				_ = os.RemoveAll(dir)
			}
			logger.Error("host process died; plugin exiting", "host_pid", max(hostPID, ppid), "parent", now)
			exit(3)
			return
		}
	}
}

// ServeInProcess serves the optimizer inside the calling process in
// go-plugin's test mode (no handshake cookie, no stdio redirection, no
// parent watch) until ctx is cancelled. It returns the ReattachConfig that a
// host passes as host/plugin LaunchSpec.Reattach to connect to it, and a
// channel closed when serving has stopped. Use it for tests and debuggers.
func ServeInProcess(ctx context.Context, newOpt func() optim.Optimizer) (*plugin.ReattachConfig, <-chan struct{}, error) {
	logger := hclog.New(&hclog.LoggerOptions{Level: hclog.Warn, Output: os.Stderr})
	reattach := make(chan *plugin.ReattachConfig, 1)
	closed := make(chan struct{})
	go plugin.Serve(&plugin.ServeConfig{
		HandshakeConfig:  wire.Handshake(),
		VersionedPlugins: map[int]plugin.PluginSet{optim.ProtocolMajor: pluginSet(newOpt, logger)},
		GRPCServer:       NewGRPCServer,
		Logger:           logger,
		Test:             &plugin.ServeTestConfig{Context: ctx, ReattachConfigCh: reattach, CloseCh: closed},
	})
	select {
	case rc := <-reattach:
		return rc, closed, nil
	case <-closed:
		return nil, nil, errors.New("serve: in-process plugin server stopped before it was ready")
	case <-ctx.Done():
		return nil, nil, fmt.Errorf("serve: in-process plugin: %w", ctx.Err())
	}
}

// NewGRPCServer is the plugin's gRPC server factory: grpc.NewServer with
// opts plus receive and send limits of wire.MaxMessageSize (grpc-go's
// default receive limit is 4 MiB).
func NewGRPCServer(opts []grpc.ServerOption) *grpc.Server {
	opts = append(opts,
		grpc.MaxRecvMsgSize(wire.MaxMessageSize),
		grpc.MaxSendMsgSize(wire.MaxMessageSize))
	return grpc.NewServer(opts...)
}

// PluginMap returns the go-plugin plugin set that serves the optimizer
// newOpt returns, for a caller that runs plugin.Serve itself (with
// ServeConfig.GRPCServer set to NewGRPCServer) or wires the plugin in
// process with plugin.TestPluginGRPCConn. Panics are logged to os.Stderr as
// it is when the server starts. The set's plugin implements only the plugin
// side; dispensing it on the host side is an error.
func PluginMap(newOpt func() optim.Optimizer) map[string]plugin.Plugin {
	return pluginSet(newOpt, nil)
}

func pluginSet(newOpt func() optim.Optimizer, logger hclog.Logger) plugin.PluginSet {
	return plugin.PluginSet{wire.PluginName: &optimizerPlugin{newOpt: newOpt, logger: logger}}
}

// optimizerPlugin is the plugin side of the go-plugin Plugin.
type optimizerPlugin struct {
	plugin.NetRPCUnsupportedPlugin
	newOpt func() optim.Optimizer
	logger hclog.Logger
}

// GRPCServer registers the Optimizer service backed by a new optimizer.
func (p *optimizerPlugin) GRPCServer(broker *plugin.GRPCBroker, s *grpc.Server) (err error) {
	logger := p.logger
	if logger == nil {
		logger = hclog.New(&hclog.LoggerOptions{Level: hclog.Info, Output: os.Stderr, JSONFormat: true})
	}
	srv := &server{broker: broker, log: logger}
	if err := srv.guard("constructor", func() error {
		srv.opt = p.newOpt()
		if srv.opt == nil {
			return errors.New("constructor returned a nil optimizer")
		}
		return nil
	}); err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	pb.RegisterOptimizerServer(s, srv)
	return nil
}

// GRPCClient is not used: the host side lives in host/plugin.
func (p *optimizerPlugin) GRPCClient(context.Context, *plugin.GRPCBroker, *grpc.ClientConn) (any, error) {
	return nil, errors.New("serve: the plugin side cannot be dispensed as a client; use host/plugin")
}

// server implements pb.OptimizerServer over an optim.Optimizer.
type server struct {
	pb.UnimplementedOptimizerServer
	opt    optim.Optimizer
	broker *plugin.GRPCBroker
	log    hclog.Logger

	mu   sync.Mutex
	host *hostClient // set by Configure; nil before
	view optim.Host  // host as the optimizer sees it (traced with OPTLAB_TRACE=1)
}

// guard runs fn, turning a panic into an Internal error and logging the
// panic with its stack to the plugin's stderr.
func (s *server) guard(method string, fn func() error) error {
	return wire.Guard(s.log, "optimizer", method, fn)
}

func (s *server) currentHost() (optim.Host, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.host == nil {
		return nil, &wire.Error{Code: codes.FailedPrecondition, Msg: "optimizer used before Configure"}
	}
	return s.view, nil
}

// traced wraps h with optim.Trace, writing to stderr, when the plugin runs
// with OPTLAB_TRACE=1.
func traced(h optim.Host) optim.Host {
	if os.Getenv(optim.TraceEnv) == "1" {
		return optim.Trace(h, os.Stderr, true)
	}
	return h
}

// Info implements pb.OptimizerServer: the optimizer's Info, stamped with
// this SDK's protocol minor when it leaves it 0 (optim.Info.Stamped).
func (s *server) Info(context.Context, *pb.InfoRequest) (*pb.InfoResponse, error) {
	var resp *pb.InfoResponse
	err := s.guard("Info", func() (err error) {
		resp, err = wire.InfoResponseToProto(s.opt.Info().Stamped())
		if err != nil {
			return &wire.Error{Code: codes.Internal, Msg: fmt.Sprintf("invalid Info: %v", err)}
		}
		return nil
	})
	if err != nil {
		return nil, wire.ToStatus(err)
	}
	return resp, nil
}

// declared returns nil when the optimizer's Info declares the feature
// that has returns, else the Unimplemented error of a call of its method:
// the host calls a feature's method only when it is declared.
func (s *server) declared(name string, has func(optim.Features) bool) error {
	var f optim.Features
	if err := s.guard("Info", func() error { f = s.opt.Info().Features; return nil }); err != nil {
		return err
	}
	if !has(f) {
		return &wire.Error{Code: codes.Unimplemented, Msg: fmt.Sprintf("optimizer does not declare the %q feature", name)}
	}
	return nil
}

// Configure implements pb.OptimizerServer: it dials the host's broker ID
// once, keeps the connection (closing the one of an earlier Configure) and
// calls the optimizer's Configure with it; the reply carries what its
// Resolved returns.
func (s *server) Configure(ctx context.Context, req *pb.ConfigureRequest) (*pb.ConfigureResponse, error) {
	cfg, err := wire.ConfigFromProto(req.GetConfig())
	if err != nil {
		return nil, wire.ToStatus(fmt.Errorf("config: %w", err))
	}
	conn, err := s.broker.Dial(req.GetHostBrokerId())
	if err != nil {
		return nil, wire.ToStatus(&wire.Error{
			Code: codes.Unavailable,
			Msg:  fmt.Sprintf("dial host broker ID %d: %v", req.GetHostBrokerId(), err),
		})
	}
	hc := &hostClient{conn: conn, c: pb.NewHostClient(conn)}
	h := traced(hc)
	s.mu.Lock()
	old := s.host
	s.host, s.view = hc, h
	s.mu.Unlock()
	if old != nil {
		_ = old.conn.Close()
	}
	resp := &pb.ConfigureResponse{}
	err = s.guard("Configure", func() error {
		if err := s.opt.Configure(ctx, h, cfg); err != nil {
			return err
		}
		resolved, err := wire.ParamsToProto(s.opt.Resolved())
		if err != nil {
			return &wire.Error{Code: codes.Internal, Msg: fmt.Sprintf("invalid Resolved: %v", err)}
		}
		resp.Resolved = resolved
		return nil
	})
	if err != nil {
		return nil, wire.ToStatus(err)
	}
	return resp, nil
}

// Step implements pb.OptimizerServer.
func (s *server) Step(ctx context.Context, req *pb.StepRequest) (*pb.StepResponse, error) {
	if _, err := s.currentHost(); err != nil {
		return nil, wire.ToStatus(err)
	}
	var out optim.StepOutput
	err := s.guard("Step", func() (err error) {
		out, err = s.opt.Step(ctx, wire.StepInputFromProto(req.GetInput()))
		return err
	})
	if err != nil {
		return nil, wire.ToStatus(err)
	}
	return &pb.StepResponse{Output: wire.StepOutputToProto(out)}, nil
}

// Predictive implements pb.OptimizerServer; an optimizer that does not
// declare optim.Features.Predictive answers Unimplemented.
func (s *server) Predictive(ctx context.Context, _ *pb.PredictiveRequest) (*pb.PredictiveResponse, error) {
	if err := s.declared("predictive", func(f optim.Features) bool { return f.Predictive }); err != nil {
		return nil, wire.ToStatus(err)
	}
	var pred optim.Predictive
	err := s.guard("Predictive", func() (err error) {
		pred, err = s.opt.Predictive(ctx)
		return err
	})
	if err != nil {
		return nil, wire.ToStatus(err)
	}
	return &pb.PredictiveResponse{Predictive: wire.PredictiveToProto(pred)}, nil
}

// SaveState implements pb.OptimizerServer; an optimizer that does not
// declare optim.Features.State answers Unimplemented.
func (s *server) SaveState(ctx context.Context, _ *pb.SaveStateRequest) (*pb.SaveStateResponse, error) {
	if err := s.declared("state", func(f optim.Features) bool { return f.State }); err != nil {
		return nil, wire.ToStatus(err)
	}
	var (
		blob []byte
		vecs []optim.Vec
	)
	err := s.guard("SaveState", func() (err error) {
		blob, vecs, err = s.opt.SaveState(ctx)
		return err
	})
	if err != nil {
		return nil, wire.ToStatus(err)
	}
	return wire.SaveStateToProto(blob, vecs), nil
}

// LoadState implements pb.OptimizerServer; an optimizer that does not
// declare optim.Features.State answers Unimplemented.
func (s *server) LoadState(ctx context.Context, req *pb.LoadStateRequest) (*pb.LoadStateResponse, error) {
	if err := s.declared("state", func(f optim.Features) bool { return f.State }); err != nil {
		return nil, wire.ToStatus(err)
	}
	if err := s.guard("LoadState", func() error { return s.opt.LoadState(ctx, req.GetBlob()) }); err != nil {
		return nil, wire.ToStatus(err)
	}
	return &pb.LoadStateResponse{}, nil
}

// Finalize implements pb.OptimizerServer; an optimizer that does not
// declare optim.Features.Finalize answers Unimplemented.
func (s *server) Finalize(ctx context.Context, _ *pb.FinalizeRequest) (*pb.FinalizeResponse, error) {
	if err := s.declared("finalize", func(f optim.Features) bool { return f.Finalize }); err != nil {
		return nil, wire.ToStatus(err)
	}
	if _, err := s.currentHost(); err != nil {
		return nil, wire.ToStatus(err)
	}
	if err := s.guard("Finalize", func() error { return s.opt.Finalize(ctx) }); err != nil {
		return nil, wire.ToStatus(err)
	}
	return &pb.FinalizeResponse{}, nil
}

// hostClient is the optim.Host a plugin's optimizer drives: the Host
// service of the host, over the one broker connection of this instance.
// Calls pass the caller's ctx, so the host sees the deadline of the Step
// (or other call) that the optimizer is serving, and the id of that call
// (wire.CallIDKey, from the metadata of the call ctx derives from): the
// host refuses an Exec whose ctx is not derived from the ctx of a call it
// has in flight (docs/PROTOCOL.md §3).
type hostClient struct {
	conn *grpc.ClientConn
	c    pb.HostClient
}

// Layout implements optim.Host.
func (h *hostClient) Layout(ctx context.Context) (optim.Layout, error) {
	resp, err := h.c.Layout(forCall(ctx), &pb.LayoutRequest{})
	if err != nil {
		return optim.Layout{}, wire.FromStatus(err)
	}
	return wire.LayoutFromProto(resp.GetLayout()), nil
}

// Exec implements optim.Host. Errors keep the host's gRPC code and failing
// op index (as a *wire.Error); errors.Is works for context.DeadlineExceeded,
// context.Canceled and errors.ErrUnsupported (an op the host does not know),
// and an *optim.VecError names its handle as p's listing does. A program
// whose builder recorded a misuse (Program.Err: a register of another
// program) is refused before it is sent (by wire.ExecRequestToProto).
func (h *hostClient) Exec(ctx context.Context, p *optim.Program) (optim.Result, error) {
	req, err := wire.ExecRequestToProto(p)
	if err != nil {
		return optim.Result{}, err
	}
	resp, err := h.c.Exec(forCall(ctx), req)
	if err != nil {
		err = wire.FromStatus(err)
		opset.NameHandles(err, p)
		return optim.Result{}, err
	}
	return wire.ResultFromProto(p, resp.GetResult())
}

// forCall returns ctx with the call id of the host's call that ctx serves
// (derives from) as the id of its outgoing call; ctx unchanged when it
// serves none (the host then refuses an Exec).
func forCall(ctx context.Context) context.Context {
	if id, ok := wire.IncomingCall(ctx); ok {
		return wire.WithOutgoingCall(ctx, id)
	}
	return ctx
}
