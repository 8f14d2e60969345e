// Package plugin is the host side of optlab's optimizer plugins: it launches
// a plugin binary with hashicorp/go-plugin (gRPC only), serves the host's
// optim.Host to it over the go-plugin broker, and calls the plugin's
// Optimizer service with a deadline on every call.
//
// Errors say what happened to the plugin: "plugin sam crashed (exit status
// 2) during Step; last stderr lines: …" when the process died (the last 50
// lines of its stderr are kept), "plugin sam did not answer Step within
// 10m0s" when a call ran past its deadline, and "plugin sam: Step: …" with
// the plugin's own error otherwise. errors.Is works with ErrCrashed,
// ErrTimeout, ErrUnknownPlugin, ErrIncompatible, errors.ErrUnsupported (an
// optional method the optimizer does not implement) and the context errors.
//
// The host's main must make sure no plugin outlives it:
//
//	func main() {
//		defer plugin.CleanupAll()
//		ctx, stop := plugin.CleanupOnSignal(context.Background())
//		defer stop()
//		…
//	}
//
// Plugins also exit by themselves within about half a second when the host
// process dies without cleaning up (sdk/serve watches the parent process).
package plugin

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	goplugin "github.com/hashicorp/go-plugin"
	"github.com/hashicorp/go-plugin/runner"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	pb "github.com/optlab/optlab/internal/pluginpb"
	"github.com/optlab/optlab/internal/wire"
	"github.com/optlab/optlab/sdk/optim"
)

// DefaultDir is where Launch looks up a plugin by name, relative to the
// working directory.
const DefaultDir = "bin/plugins"

// DefaultStartTimeout bounds the start of a plugin process (spawn and
// go-plugin handshake).
const DefaultStartTimeout = 15 * time.Second

// Errors that the errors of this package wrap, for errors.Is.
var (
	// ErrCrashed: the plugin process exited while the host needed it.
	ErrCrashed = errors.New("plugin crashed")
	// ErrTimeout: a call ran past its deadline (Timeouts); the process may
	// still be running until Close kills it.
	ErrTimeout = errors.New("plugin did not answer in time")
	// ErrUnknownPlugin: no plugin binary of that name is installed.
	ErrUnknownPlugin = errors.New("unknown plugin")
	// ErrIncompatible: the plugin speaks a protocol version this host does
	// not (a different major, or a newer minor).
	ErrIncompatible = errors.New("incompatible plugin")
)

// Timeouts are the deadlines of the calls into a plugin, by kind. A zero
// field takes its value from DefaultTimeouts. The deadline of a call also
// bounds the Host.Exec calls the plugin makes while serving it.
type Timeouts struct {
	Info       time.Duration
	Configure  time.Duration
	Step       time.Duration
	Predictive time.Duration
	// State bounds SaveState and LoadState.
	State time.Duration
}

// DefaultTimeouts returns the default deadlines: Info 30 s, Configure 5 min,
// Step 10 min, Predictive 1 min, SaveState/LoadState 5 min.
func DefaultTimeouts() Timeouts {
	return Timeouts{
		Info:       30 * time.Second,
		Configure:  5 * time.Minute,
		Step:       10 * time.Minute,
		Predictive: time.Minute,
		State:      5 * time.Minute,
	}
}

func (t Timeouts) withDefaults() Timeouts {
	d := DefaultTimeouts()
	for _, f := range []struct{ v, def *time.Duration }{
		{&t.Info, &d.Info}, {&t.Configure, &d.Configure}, {&t.Step, &d.Step},
		{&t.Predictive, &d.Predictive}, {&t.State, &d.State},
	} {
		if *f.v <= 0 {
			*f.v = *f.def
		}
	}
	return t
}

// LaunchSpec says which plugin to start and how.
type LaunchSpec struct {
	// Name is the plugin's name: the file name of its binary in Dir. With
	// Path or Reattach set it only names the plugin in messages.
	Name string
	// Path is an explicit path of a plugin binary; it wins over Name.
	Path string
	// Dir is the plugin directory searched by Name (default DefaultDir).
	Dir string
	// Reattach connects to a plugin that is already being served, e.g. by
	// sdk/serve.ServeInProcess in a test, instead of starting a process.
	Reattach *goplugin.ReattachConfig

	// Timeouts are the per-call deadlines (zero fields: DefaultTimeouts).
	Timeouts Timeouts
	// StartTimeout bounds the process start (default DefaultStartTimeout).
	StartTimeout time.Duration
	// Logger receives go-plugin's and the plugin's log lines. The default
	// is a logger named "optlab" at Warn level on os.Stderr: quiet, but
	// plugin errors and panics still show.
	Logger hclog.Logger
	// Output receives what the plugin writes to its stdout and stderr
	// after it started serving (default os.Stderr; never the host's stdout).
	Output io.Writer
	// SocketDir is the directory under which the Unix sockets of the
	// connection are created. Socket paths must stay under about 100
	// bytes; the default is os.TempDir() when that is short, else /tmp.
	SocketDir string
}

// Client is a running plugin: one process serving one optimizer instance.
// Its methods may be called from several goroutines.
type Client struct {
	name     string
	pc       *goplugin.Client
	proto    goplugin.ClientProtocol
	rpc      pb.OptimizerClient
	broker   *goplugin.GRPCBroker
	proc     *procRunner // nil when reattached
	pid      int
	stderr   *ring
	timeouts Timeouts
	logger   hclog.Logger
	reattach bool

	mu        sync.Mutex
	info      optim.Info
	predictor bool
	stateful  bool

	closed    atomic.Bool
	closeOnce sync.Once

	calls     atomic.Int64
	hostCalls atomic.Int64
	bytes     atomic.Int64
}

// Launch starts the plugin that spec names, connects to it, and calls its
// Info: a plugin whose protocol minor version is newer than
// optim.ProtocolMinor is rejected (ErrIncompatible). An unknown plugin name
// gives an error (ErrUnknownPlugin) that lists the installed plugins. ctx
// bounds the start; cancelling it later does not stop the plugin (Close
// does).
func Launch(ctx context.Context, spec LaunchSpec) (*Client, error) {
	path, name, err := spec.resolve()
	if err != nil {
		return nil, err
	}
	c := &Client{
		name:     name,
		stderr:   newRing(stderrLines),
		timeouts: spec.Timeouts.withDefaults(),
		logger:   spec.Logger,
		reattach: spec.Reattach != nil,
	}
	if c.logger == nil {
		c.logger = hclog.New(&hclog.LoggerOptions{Name: "optlab", Level: hclog.Warn, Output: os.Stderr})
	}
	output := spec.Output
	if output == nil {
		output = os.Stderr
	}
	startTimeout := spec.StartTimeout
	if startTimeout <= 0 {
		startTimeout = DefaultStartTimeout
	}
	plugins := goplugin.PluginSet{wire.PluginName: hostPlugin{}}
	cfg := &goplugin.ClientConfig{
		HandshakeConfig:  wire.Handshake(),
		Plugins:          plugins, // used when reattaching
		VersionedPlugins: map[int]goplugin.PluginSet{optim.ProtocolMajor: plugins},
		AllowedProtocols: []goplugin.Protocol{goplugin.ProtocolGRPC},
		Managed:          true,
		StartTimeout:     startTimeout,
		Logger:           c.logger,
		Stderr:           c.stderr.writer(),
		SyncStdout:       io.MultiWriter(c.stderr.writer(), output),
		SyncStderr:       io.MultiWriter(c.stderr.writer(), output),
		GRPCDialOptions:  []grpc.DialOption{grpc.WithChainUnaryInterceptor(c.countOptimizerCall)},
		UnixSocketConfig: &goplugin.UnixSocketConfig{TempDir: socketDir(spec.SocketDir)},
	}
	if spec.Reattach != nil {
		cfg.Reattach = spec.Reattach
		c.pid = spec.Reattach.Pid
	} else {
		cfg.RunnerFunc = func(_ hclog.Logger, cmd *exec.Cmd, _ string) (runner.Runner, error) {
			r, err := newProcRunner(path, nil, cmd.Env)
			c.proc = r
			return r, err
		}
	}
	c.pc = goplugin.NewClient(cfg)

	type started struct {
		proto goplugin.ClientProtocol
		raw   any
		err   error
	}
	ch := make(chan started, 1)
	go func() {
		var s started
		if s.proto, s.err = c.pc.Client(); s.err == nil {
			s.raw, s.err = s.proto.Dispense(wire.PluginName)
		}
		ch <- s
	}()
	var s started
	select {
	case <-ctx.Done():
		go func() { <-ch; c.pc.Kill() }()
		return nil, fmt.Errorf("launch plugin %s: %w", name, ctx.Err())
	case s = <-ch:
	}
	if s.err != nil {
		c.pc.Kill()
		kind := ErrCrashed
		if strings.Contains(s.err.Error(), "incompatible") {
			kind = ErrIncompatible
		}
		return nil, &pluginError{
			msg:  fmt.Sprintf("launch plugin %s (%s): %v; last stderr lines:\n%s", name, path, s.err, c.stderr.tail()),
			errs: []error{kind, s.err},
		}
	}
	d := s.raw.(*dispensed)
	c.proto, c.rpc, c.broker = s.proto, d.client, d.broker
	if c.proc != nil {
		c.pid = c.proc.pid
	}

	info, err := c.Info(ctx)
	if err != nil {
		_ = c.Close()
		return nil, err
	}
	if info.ProtocolMinor > optim.ProtocolMinor {
		_ = c.Close()
		return nil, &pluginError{
			msg: fmt.Sprintf("plugin %s (%s %s) speaks protocol %d.%d, newer than this host's %d.%d: rebuild the host",
				name, info.Name, info.Version, optim.ProtocolMajor, info.ProtocolMinor, optim.ProtocolMajor, optim.ProtocolMinor),
			errs: []error{ErrIncompatible},
		}
	}
	return c, nil
}

// resolve finds the binary and the display name of the plugin.
func (s LaunchSpec) resolve() (path, name string, err error) {
	switch {
	case s.Reattach != nil:
		name = s.Name
		if name == "" {
			name = "reattached"
		}
		return "", name, nil
	case s.Path != "":
		name = s.Name
		if name == "" {
			name = filepath.Base(s.Path)
		}
		if err := checkExecutable(s.Path); err != nil {
			return "", "", fmt.Errorf("plugin %s: %w", name, err)
		}
		return s.Path, name, nil
	case s.Name == "":
		return "", "", errors.New("launch plugin: LaunchSpec names no plugin (set Name or Path)")
	}
	if s.Name == "." || s.Name == ".." || strings.ContainsAny(s.Name, `/\`) {
		return "", "", fmt.Errorf("launch plugin: invalid plugin name %q (use LaunchSpec.Path for a path)", s.Name)
	}
	dir := s.Dir
	if dir == "" {
		dir = DefaultDir
	}
	path = filepath.Join(dir, s.Name)
	if err := checkExecutable(path); err != nil {
		installed, lerr := installedNames(dir)
		list := "none"
		switch {
		case lerr != nil:
			list = fmt.Sprintf("cannot read %s: %v", dir, lerr)
		case len(installed) > 0:
			list = strings.Join(installed, ", ")
		}
		return "", "", &pluginError{
			msg:  fmt.Sprintf("unknown plugin %q: %v; installed plugins in %s: %s", s.Name, err, dir, list),
			errs: []error{ErrUnknownPlugin, err},
		}
	}
	return path, s.Name, nil
}

// checkExecutable reports whether path is a regular file with an
// execute bit.
func checkExecutable(path string) error {
	fi, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("%s does not exist: %w", path, fs.ErrNotExist)
	}
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() || fi.Mode().Perm()&0o111 == 0 {
		return fmt.Errorf("%s is not an executable file", path)
	}
	return nil
}

// socketDir picks the base directory of the plugin's Unix sockets. go-plugin
// creates "plugin-dirNNN/pluginNNN" (about 35 bytes) under it, and a Unix
// socket path must fit in about 104 bytes.
func socketDir(dir string) string {
	if dir != "" {
		return dir
	}
	if t := os.TempDir(); len(t) <= 48 {
		return t
	}
	return "/tmp"
}

// Name returns the plugin's name as used in messages.
func (c *Client) Name() string { return c.name }

// Pid returns the plugin process's ID.
func (c *Client) Pid() int { return c.pid }

// Exited reports whether the plugin process has exited.
func (c *Client) Exited() bool {
	if c.proc != nil {
		select {
		case <-c.proc.exited:
			return true
		default:
			return false
		}
	}
	return c.pc.Exited()
}

// Close stops the plugin: it asks it to shut down, waits up to 2 s, then
// kills the process. Closing twice is harmless; it always returns nil.
func (c *Client) Close() error {
	c.closeOnce.Do(func() {
		c.closed.Store(true)
		done := make(chan struct{})
		go func() {
			defer close(done)
			c.pc.Kill()
		}()
		// go-plugin's Kill waits for the plugin's output to end; it cannot
		// hang once the process group is dead, but never wait unbounded.
		select {
		case <-done:
		case <-time.After(closeTimeout):
			c.logger.Warn("plugin did not stop in time; abandoned", "plugin", c.name, "pid", c.pid)
		}
		if c.proc != nil {
			// Whatever the plugin started is ended with it.
			killGroup(c.proc.pid)
		}
		if c.reattach && c.proto != nil {
			// Kill does nothing to a reattached test-mode plugin; closing
			// the connection asks it to stop serving.
			_ = c.proto.Close()
		}
	})
	return nil
}

// closeTimeout bounds Close: go-plugin's graceful stop (2 s) and forced
// kill, plus the wait for the output pipes.
const closeTimeout = 10 * time.Second

// Stats counts the traffic of the optlab protocol through a Client: calls
// of the Optimizer service (host→plugin), calls of the Host service
// (plugin→host) and the bytes of their messages (proto.Size of every request
// and response, both directions). go-plugin's own traffic (broker, stdio,
// health, shutdown) is not counted.
type Stats struct {
	Calls     int64
	HostCalls int64
	Bytes     int64
}

// Stats returns the traffic so far.
func (c *Client) Stats() Stats {
	return Stats{Calls: c.calls.Load(), HostCalls: c.hostCalls.Load(), Bytes: c.bytes.Load()}
}

func msgSize(m any) int64 {
	if pm, ok := m.(proto.Message); ok && pm != nil {
		return int64(proto.Size(pm))
	}
	return 0
}

// countOptimizerCall is a client interceptor counting Optimizer calls.
func (c *Client) countOptimizerCall(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoke grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	err := invoke(ctx, method, req, reply, cc, opts...)
	if strings.HasPrefix(method, "/"+pb.Optimizer_ServiceDesc.ServiceName+"/") {
		c.calls.Add(1)
		n := msgSize(req)
		if err == nil {
			n += msgSize(reply)
		}
		c.bytes.Add(n)
	}
	return err
}

// countHostCall is a server interceptor counting Host calls.
func (c *Client) countHostCall(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	resp, err := handler(ctx, req)
	c.hostCalls.Add(1)
	c.bytes.Add(msgSize(req) + msgSize(resp))
	return resp, err
}

// call runs fn with the deadline limit and explains its error.
func (c *Client) call(ctx context.Context, method string, limit time.Duration, fn func(context.Context) error) error {
	if c.closed.Load() {
		return fmt.Errorf("plugin %s: %s: plugin is closed", c.name, method)
	}
	if err := c.exitError(method); err != nil {
		return err
	}
	cctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	err := fn(cctx)
	if err == nil {
		return nil
	}
	return c.explain(ctx, cctx, method, limit, err)
}

// explain turns a failed call's error into one that says what happened to
// the plugin.
func (c *Client) explain(ctx, cctx context.Context, method string, limit time.Duration, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("plugin %s: %s: %w", c.name, method, context.Cause(ctx))
	}
	code := status.Code(err)
	if code == codes.Unavailable || code == codes.Canceled {
		// A dropped connection mostly means that the process died: give
		// it a moment to be reaped, so that the report can say so.
		c.waitExit(2 * time.Second)
	}
	if e := c.exitError(method); e != nil {
		return e
	}
	// The plugin's side of the call sees the same deadline and may reset the
	// stream a moment before our own timer fires.
	deadline, _ := cctx.Deadline()
	if cctx.Err() != nil || time.Until(deadline) < 100*time.Millisecond {
		if cd, ok := ctx.Deadline(); ok && !cd.After(deadline) {
			// The caller's deadline, whose timer has not fired yet.
			return fmt.Errorf("plugin %s: %s: %w", c.name, method, context.DeadlineExceeded)
		}
		msg := fmt.Sprintf("plugin %s did not answer %s within %v", c.name, method, limit)
		if lines := c.stderr.snapshot(); len(lines) > 0 {
			msg += "; last stderr lines:\n" + c.stderr.tail()
		}
		return &pluginError{msg: msg, errs: []error{ErrTimeout, context.DeadlineExceeded}}
	}
	remote := wire.FromStatus(err)
	msg := fmt.Sprintf("plugin %s: %s: %v", c.name, method, remote)
	if code == codes.Internal && strings.Contains(msg, "panic in "+method) {
		// A panic recovered by sdk/serve: its stack is in the plugin's
		// stderr, which may arrive a moment after the reply.
		c.stderr.waitFor("recovered panic", time.Second)
		msg += "; last stderr lines:\n" + c.stderr.tail()
	}
	return &pluginError{msg: msg, errs: []error{remote}}
}

// waitExit waits up to d for the process to exit.
func (c *Client) waitExit(d time.Duration) {
	if c.proc == nil {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-c.proc.exited:
	case <-t.C:
	}
}

// exitError returns the crash report if the process has exited.
func (c *Client) exitError(method string) error {
	if !c.Exited() {
		return nil
	}
	how := "exited"
	if c.proc != nil {
		how = c.proc.exitStatus()
	}
	verb := "crashed"
	if how == "exit status 0" {
		verb = "exited unexpectedly"
	}
	return &pluginError{
		msg:  fmt.Sprintf("plugin %s %s (%s) during %s; last stderr lines:\n%s", c.name, verb, how, method, c.stderr.tail()),
		errs: []error{ErrCrashed},
	}
}

// pluginError is an error with a complete message that wraps several
// errors for errors.Is/As.
type pluginError struct {
	msg  string
	errs []error
}

func (e *pluginError) Error() string   { return e.msg }
func (e *pluginError) Unwrap() []error { return e.errs }

// Info calls the plugin's Info and remembers the answer (AsOptimizer's
// Info returns it).
func (c *Client) Info(ctx context.Context) (optim.Info, error) {
	var resp *pb.InfoResponse
	err := c.call(ctx, "Info", c.timeouts.Info, func(ctx context.Context) (err error) {
		resp, err = c.rpc.Info(ctx, &pb.InfoRequest{})
		return err
	})
	if err != nil {
		return optim.Info{}, err
	}
	info, err := wire.InfoFromProto(resp.GetInfo())
	if err != nil {
		return optim.Info{}, fmt.Errorf("plugin %s: Info: %w", c.name, err)
	}
	c.mu.Lock()
	c.info, c.predictor, c.stateful = info, resp.GetPredictor(), resp.GetStateful()
	c.mu.Unlock()
	return info, nil
}

// Configure serves h to the plugin (a Host gRPC service on a new broker ID,
// for the life of the plugin) and calls the plugin's Configure with cfg.
// The plugin dials that ID once and sends all its Layout and Exec calls to
// h, from goroutines of the gRPC server: the goroutine that calls Step must
// not hold a lock that h.Exec takes.
func (c *Client) Configure(ctx context.Context, h optim.Host, cfg optim.Config) error {
	if h == nil {
		return fmt.Errorf("plugin %s: Configure: nil host", c.name)
	}
	pcfg, err := wire.ConfigToProto(cfg)
	if err != nil {
		return fmt.Errorf("plugin %s: Configure: %w", c.name, err)
	}
	id := c.broker.NextId()
	srv := &hostServer{h: h, logger: c.logger}
	go c.broker.AcceptAndServe(id, func(opts []grpc.ServerOption) *grpc.Server {
		opts = append(opts,
			grpc.MaxRecvMsgSize(wire.MaxMessageSize),
			grpc.MaxSendMsgSize(wire.MaxMessageSize),
			grpc.ChainUnaryInterceptor(c.countHostCall))
		s := grpc.NewServer(opts...)
		pb.RegisterHostServer(s, srv)
		return s
	})
	return c.call(ctx, "Configure", c.timeouts.Configure, func(ctx context.Context) error {
		_, err := c.rpc.Configure(ctx, &pb.ConfigureRequest{HostBrokerId: id, Config: pcfg})
		return err
	})
}

// Step calls the plugin's Step.
func (c *Client) Step(ctx context.Context, in optim.StepInput) (optim.StepOutput, error) {
	var resp *pb.StepResponse
	err := c.call(ctx, "Step", c.timeouts.Step, func(ctx context.Context) (err error) {
		resp, err = c.rpc.Step(ctx, &pb.StepRequest{Input: wire.StepInputToProto(in)})
		return err
	})
	if err != nil {
		return optim.StepOutput{}, err
	}
	return wire.StepOutputFromProto(resp.GetOutput()), nil
}

// Predictive calls the plugin's Predictive. For an optimizer that does not
// implement optim.Predictor the error wraps errors.ErrUnsupported (the
// predictive is then the point estimate of member 0).
func (c *Client) Predictive(ctx context.Context) (optim.Predictive, error) {
	var resp *pb.PredictiveResponse
	err := c.call(ctx, "Predictive", c.timeouts.Predictive, func(ctx context.Context) (err error) {
		resp, err = c.rpc.Predictive(ctx, &pb.PredictiveRequest{})
		return err
	})
	if err != nil {
		return optim.Predictive{}, err
	}
	p, err := wire.PredictiveFromProto(resp.GetPredictive())
	if err != nil {
		return optim.Predictive{}, fmt.Errorf("plugin %s: Predictive: %w", c.name, err)
	}
	return p, nil
}

// SaveState calls the plugin's SaveState. For an optimizer that does not
// implement optim.Stateful the error wraps errors.ErrUnsupported.
func (c *Client) SaveState(ctx context.Context) ([]byte, []optim.Vec, error) {
	var resp *pb.SaveStateResponse
	err := c.call(ctx, "SaveState", c.timeouts.State, func(ctx context.Context) (err error) {
		resp, err = c.rpc.SaveState(ctx, &pb.SaveStateRequest{})
		return err
	})
	if err != nil {
		return nil, nil, err
	}
	blob, vecs := wire.SaveStateFromProto(resp)
	return blob, vecs, nil
}

// LoadState calls the plugin's LoadState. For an optimizer that does not
// implement optim.Stateful the error wraps errors.ErrUnsupported.
func (c *Client) LoadState(ctx context.Context, blob []byte) error {
	return c.call(ctx, "LoadState", c.timeouts.State, func(ctx context.Context) error {
		_, err := c.rpc.LoadState(ctx, &pb.LoadStateRequest{Blob: blob})
		return err
	})
}

// hostPlugin is the host side of the go-plugin Plugin.
type hostPlugin struct {
	goplugin.NetRPCUnsupportedPlugin
}

// dispensed is what hostPlugin.GRPCClient returns.
type dispensed struct {
	client pb.OptimizerClient
	broker *goplugin.GRPCBroker
}

// GRPCServer is not used: the plugin side lives in sdk/serve.
func (hostPlugin) GRPCServer(*goplugin.GRPCBroker, *grpc.Server) error {
	return errors.New("host/plugin: the host side cannot serve an optimizer; use sdk/serve")
}

// GRPCClient returns the Optimizer client and the broker.
func (hostPlugin) GRPCClient(_ context.Context, broker *goplugin.GRPCBroker, conn *grpc.ClientConn) (any, error) {
	return &dispensed{client: pb.NewOptimizerClient(conn), broker: broker}, nil
}

// hostServer serves an optim.Host as the Host gRPC service.
type hostServer struct {
	pb.UnimplementedHostServer
	h      optim.Host
	logger hclog.Logger
}

// guard turns a panic in the host's code into an Internal error (logged
// with its stack) instead of a crash of the host from a gRPC goroutine.
func (s *hostServer) guard(method string, fn func() error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			s.logger.Error("recovered panic in host", "method", method, "panic", fmt.Sprint(r), "stack", string(debug.Stack()))
			err = &wire.Error{Code: codes.Internal, Op: -1, Msg: fmt.Sprintf("host panic in %s: %v", method, r)}
		}
	}()
	return fn()
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
// host keep their op index when they have an OpIndex() int method.
func (s *hostServer) Exec(ctx context.Context, req *pb.ExecRequest) (*pb.ExecResponse, error) {
	p, err := wire.ProgramFromProto(req.GetProgram())
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
