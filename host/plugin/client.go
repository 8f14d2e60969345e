package plugin

import (
	"context"
	"fmt"
	"maps"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	goplugin "github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/optlab/optlab/sdk/optim"
	"github.com/optlab/optlab/sdk/protocol"
)

// Client is a running plugin: one process serving one optimizer instance.
// Its methods may be called from several goroutines.
type Client struct {
	name     string
	pc       *goplugin.Client
	proto    goplugin.ClientProtocol
	conn     *protocol.Conn
	proc     *procRunner // nil when reattached
	pid      int
	stderr   *ring
	timeouts Timeouts
	logger   hclog.Logger
	reattach bool
	// stopServing ends the server of an in-process optimizer
	// (LaunchSpec.InProcess); nil otherwise.
	stopServing func()

	mu       sync.Mutex
	info     optim.Info     // its Features include those of a plugin's booleans of before they had names
	resolved map[string]any // of the last Configure

	closed    atomic.Bool
	closeOnce sync.Once

	calls     atomic.Int64
	hostCalls atomic.Int64
	bytes     atomic.Int64
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
		if c.stopServing != nil {
			c.stopServing()
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

// countOptimizerCall is a client interceptor counting Optimizer calls.
func (c *Client) countOptimizerCall(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoke grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	err := invoke(ctx, method, req, reply, cc, opts...)
	if protocol.IsOptimizerMethod(method) {
		c.calls.Add(1)
		n := protocol.MessageSize(req)
		if err == nil {
			n += protocol.MessageSize(reply)
		}
		c.bytes.Add(n)
	}
	return err
}

// countHostCall is a server interceptor counting Host calls.
func (c *Client) countHostCall(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	resp, err := handler(ctx, req)
	c.hostCalls.Add(1)
	c.bytes.Add(protocol.MessageSize(req) + protocol.MessageSize(resp))
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
	if err := c.Refused(); err != nil {
		return fmt.Errorf("%s: %w", method, err)
	}
	cctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	err := fn(cctx)
	if err == nil {
		return nil
	}
	return c.explain(ctx, cctx, method, limit, err)
}

// Refused returns the error of the first Exec that the plugin sent
// outside the host's calls into it, which the host refused (it wraps
// protocol.ErrStrayExec; docs/PROTOCOL.md §3), or nil. Every later call
// fails with it, and a run whose plugin sent one fails with it too: such
// an Exec comes from a thread or goroutine of the plugin that outlived
// its call, and may have meant to change the parameters while the host
// evaluated or saved them.
func (c *Client) Refused() error {
	if err := c.conn.Refused(); err != nil {
		return fmt.Errorf("plugin %s: %w", c.name, err)
	}
	return nil
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
	remote := protocol.RemoteError(err)
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
	var info optim.Info
	err := c.call(ctx, "Info", c.timeouts.Info, func(ctx context.Context) (err error) {
		info, err = c.conn.Info(ctx)
		return err
	})
	if err != nil {
		return optim.Info{}, err
	}
	c.mu.Lock()
	c.info = info
	c.mu.Unlock()
	return info, nil
}

// features returns the features of the latest Info.
func (c *Client) features() optim.Features {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.info.Features
}

// Configure serves h to the plugin (a Host gRPC service on a new broker ID,
// for the life of the plugin) and calls the plugin's Configure with cfg.
// The plugin dials that ID once and sends all its Layout and Exec calls to
// h, from goroutines of the gRPC server: the goroutine that calls Step must
// not hold a lock that h.Exec takes. What the plugin's optimizer resolved
// (Optimizer.Resolved) is kept for Resolved.
func (c *Client) Configure(ctx context.Context, h optim.Host, cfg optim.Config) error {
	if h == nil {
		return fmt.Errorf("plugin %s: Configure: nil host", c.name)
	}
	opts := protocol.HostOptions{Logger: c.logger, Interceptors: []grpc.UnaryServerInterceptor{c.countHostCall}}
	var resolved map[string]any
	err := c.call(ctx, "Configure", c.timeouts.Configure, func(ctx context.Context) (err error) {
		resolved, err = c.conn.Configure(ctx, h, cfg, opts)
		return err
	})
	c.mu.Lock()
	c.resolved = resolved
	c.mu.Unlock()
	return err
}

// Resolved returns the hyperparameter values that the plugin's optimizer
// derived in the last Configure (Optimizer.Resolved): nil before a
// successful Configure, for an optimizer that derived none, and for a
// plugin built before the protocol carried them.
func (c *Client) Resolved() map[string]any {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.resolved)
}

// Step calls the plugin's Step.
func (c *Client) Step(ctx context.Context, in optim.StepInput) (optim.StepOutput, error) {
	var out optim.StepOutput
	err := c.call(ctx, "Step", c.timeouts.Step, func(ctx context.Context) (err error) {
		out, err = c.conn.Step(ctx, in)
		return err
	})
	return out, err
}

// Predictive calls the plugin's Predictive. For an optimizer that does not
// declare optim.Features.Predictive the error wraps errors.ErrUnsupported
// (the predictive is then the point estimate of member 0).
func (c *Client) Predictive(ctx context.Context) (optim.Predictive, error) {
	var p optim.Predictive
	err := c.call(ctx, "Predictive", c.timeouts.Predictive, func(ctx context.Context) (err error) {
		p, err = c.conn.Predictive(ctx)
		return err
	})
	return p, err
}

// SaveState calls the plugin's SaveState. For an optimizer that does not
// declare optim.Features.State the error wraps errors.ErrUnsupported.
func (c *Client) SaveState(ctx context.Context) ([]byte, []optim.Vec, error) {
	var blob []byte
	var vecs []optim.Vec
	err := c.call(ctx, "SaveState", c.timeouts.State, func(ctx context.Context) (err error) {
		blob, vecs, err = c.conn.SaveState(ctx)
		return err
	})
	return blob, vecs, err
}

// LoadState calls the plugin's LoadState. For an optimizer that does not
// declare optim.Features.State the error wraps errors.ErrUnsupported.
func (c *Client) LoadState(ctx context.Context, blob []byte) error {
	return c.call(ctx, "LoadState", c.timeouts.State, func(ctx context.Context) error {
		return c.conn.LoadState(ctx, blob)
	})
}

// Finalize calls the plugin's Finalize once its Info declared
// optim.Features.Finalize; for another optimizer it does nothing.
func (c *Client) Finalize(ctx context.Context) error {
	if !c.features().Finalize {
		return nil
	}
	return c.call(ctx, "Finalize", c.timeouts.Finalize, func(ctx context.Context) error {
		return c.conn.Finalize(ctx)
	})
}
