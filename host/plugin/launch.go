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
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"
	goplugin "github.com/hashicorp/go-plugin"
	"github.com/hashicorp/go-plugin/runner"
	"google.golang.org/grpc"

	"github.com/optlab/optlab/sdk/optim"
	"github.com/optlab/optlab/sdk/protocol"
	"github.com/optlab/optlab/sdk/serve"
)

// DefaultDir is where Launch looks up a plugin by name, relative to the
// working directory.
const DefaultDir = "bin/plugins"

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
	// Start bounds the start of a plugin process (spawn and go-plugin
	// handshake; a Python plugin imports its modules first).
	Start      time.Duration
	Info       time.Duration
	Configure  time.Duration
	Step       time.Duration
	Predictive time.Duration
	// State bounds SaveState and LoadState.
	State time.Duration
	// Finalize bounds the call after the last step (optim.Finalizer),
	// whose programs may pass over the whole training set (UpdateBN).
	Finalize time.Duration
}

// DefaultTimeouts returns the default deadlines: Start 1 min, Info 30 s,
// Configure 5 min, Step 10 min, Predictive 1 min, SaveState/LoadState
// 5 min, Finalize 30 min.
func DefaultTimeouts() Timeouts {
	return Timeouts{
		Start:      time.Minute,
		Info:       30 * time.Second,
		Configure:  5 * time.Minute,
		Step:       10 * time.Minute,
		Predictive: time.Minute,
		State:      5 * time.Minute,
		Finalize:   30 * time.Minute,
	}
}

func (t Timeouts) withDefaults() Timeouts {
	d := DefaultTimeouts()
	for _, n := range timeoutNames {
		if f := t.field(n); *f <= 0 {
			*f = *d.field(n)
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
	// InProcess, when set, serves the optimizer it makes inside this
	// process (sdk/serve.ServeInProcess) for the life of the Client, over
	// the same protocol as a plugin process: a debugger sees the optimizer
	// and the host at once. Close stops serving it.
	InProcess func() optim.Optimizer

	// Timeouts are the per-call deadlines (zero fields: DefaultTimeouts).
	Timeouts Timeouts
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

// Launch starts the plugin that spec names, connects to it, and calls its
// Info: a plugin whose protocol minor version is newer than
// optim.ProtocolMinor is rejected (ErrIncompatible). An unknown plugin name
// gives an error (ErrUnknownPlugin) that lists the installed plugins. ctx
// bounds the start; cancelling it later does not stop the plugin (Close
// does).
func Launch(ctx context.Context, spec LaunchSpec) (*Client, error) {
	var stopServing func()
	if spec.InProcess != nil {
		rc, stop, err := serveInProcess(spec.Name, spec.InProcess)
		if err != nil {
			return nil, err
		}
		spec.Reattach, spec.Path, stopServing = rc, "", stop
	}
	path, name, err := spec.resolve()
	if err != nil {
		if stopServing != nil {
			stopServing()
		}
		return nil, err
	}
	c := newClient(spec, name, stopServing)
	c.pc = goplugin.NewClient(c.clientConfig(spec, path))
	if err := c.start(ctx, path); err != nil {
		return nil, err
	}
	if err := c.checkProtocol(ctx); err != nil {
		return nil, err
	}
	return c, nil
}

// serveInProcess serves the optimizer that mk makes inside this process
// (LaunchSpec.InProcess). It returns the configuration to reattach to it
// and a function that stops serving it, waiting up to closeTimeout for the
// server to end.
func serveInProcess(name string, mk func() optim.Optimizer) (*goplugin.ReattachConfig, func(), error) {
	sctx, cancel := context.WithCancel(context.Background())
	rc, stopped, err := serve.ServeInProcess(sctx, mk)
	if err != nil {
		cancel()
		return nil, nil, fmt.Errorf("plugin %s in process: %w", name, err)
	}
	stop := func() {
		cancel()
		select {
		case <-stopped:
		case <-time.After(closeTimeout):
		}
	}
	return rc, stop, nil
}

// newClient returns the Client of the plugin named name, not yet started,
// with spec's timeouts and logger (default: "optlab" at Warn level on
// os.Stderr).
func newClient(spec LaunchSpec, name string, stopServing func()) *Client {
	c := &Client{
		name:        name,
		stderr:      newRing(stderrLines),
		timeouts:    spec.Timeouts.withDefaults(),
		logger:      spec.Logger,
		reattach:    spec.Reattach != nil,
		stopServing: stopServing,
	}
	if c.logger == nil {
		c.logger = hclog.New(&hclog.LoggerOptions{Name: "optlab", Level: hclog.Warn, Output: os.Stderr})
	}
	return c
}

// clientConfig returns the go-plugin configuration that starts the binary
// at path, or reattaches to spec.Reattach (then c.pid is its Pid). The
// plugin's output goes to c's stderr ring and to spec.Output (default
// os.Stderr); a started process is kept in c.proc.
func (c *Client) clientConfig(spec LaunchSpec, path string) *goplugin.ClientConfig {
	output := spec.Output
	if output == nil {
		output = os.Stderr
	}
	startTimeout := spec.Timeouts.withDefaults().Start
	plugins := goplugin.PluginSet{protocol.PluginName: protocol.HostPlugin{}}
	cfg := &goplugin.ClientConfig{
		HandshakeConfig:  protocol.Handshake(),
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
	return cfg
}

// start starts (or reattaches to) the plugin through c.pc, does the
// go-plugin handshake and dispenses the optimizer connection, within ctx.
// On failure everything started is stopped: in the background when ctx
// ends first, else before start returns an error (ErrCrashed, or
// ErrIncompatible for a failed handshake) with the plugin's last stderr
// lines.
func (c *Client) start(ctx context.Context, path string) error {
	type started struct {
		proto goplugin.ClientProtocol
		raw   any
		err   error
	}
	ch := make(chan started, 1)
	go func() {
		var s started
		if s.proto, s.err = c.pc.Client(); s.err == nil {
			s.raw, s.err = s.proto.Dispense(protocol.PluginName)
		}
		ch <- s
	}()
	var s started
	select {
	case <-ctx.Done():
		go func() {
			<-ch
			c.pc.Kill()
			if c.stopServing != nil {
				c.stopServing()
			}
		}()
		return fmt.Errorf("launch plugin %s: %w", c.name, ctx.Err())
	case s = <-ch:
	}
	if s.err != nil {
		c.pc.Kill()
		if c.stopServing != nil {
			c.stopServing()
		}
		kind := ErrCrashed
		if strings.Contains(s.err.Error(), "incompatible") {
			kind = ErrIncompatible
		}
		return &pluginError{
			// go-plugin quotes a line the plugin printed before its
			// handshake as it came: terminal escapes included.
			msg:  fmt.Sprintf("launch plugin %s (%s): %s; last stderr lines:\n%s", c.name, path, printable(s.err.Error(), maxEchoed), c.stderr.tail()),
			errs: []error{kind, s.err},
		}
	}
	c.proto, c.conn = s.proto, s.raw.(*protocol.Conn)
	if c.proc != nil {
		c.pid = c.proc.pid
	}
	return nil
}

// checkProtocol calls the plugin's Info and refuses (ErrIncompatible) a
// plugin whose protocol minor version is newer than optim.ProtocolMinor.
// On failure it closes c.
func (c *Client) checkProtocol(ctx context.Context) error {
	info, err := c.Info(ctx)
	if err != nil {
		_ = c.Close()
		return err
	}
	if info.ProtocolMinor > optim.ProtocolMinor {
		_ = c.Close()
		return &pluginError{
			msg: fmt.Sprintf("plugin %s (%s %s) speaks protocol %d.%d, newer than this host's %d.%d: %s",
				c.name, info.Name, info.Version, optim.ProtocolMajor, info.ProtocolMinor, optim.ProtocolMajor, optim.ProtocolMinor, RebuildAdvice),
			errs: []error{ErrIncompatible},
		}
	}
	return nil
}

// RebuildAdvice says what to rebuild when a plugin speaks a newer protocol
// minor version than the host (a plugin of an older minor runs as it is).
const RebuildAdvice = "rebuild the host (make build) from an optlab at least as new as the plugin's SDK, or rebuild the plugin against this host's SDK"

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
		return explicitPath(s.Path), name, nil
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

// explicitPath returns p in a form that os/exec runs as a path: a bare
// name ("myopt", which an experiment's path = "./myopt" becomes once joined
// and cleaned) would be looked up in $PATH, and another program than the
// one named could run.
func explicitPath(p string) string {
	if filepath.IsAbs(p) || strings.ContainsRune(p, filepath.Separator) {
		return p
	}
	return "." + string(filepath.Separator) + p
}

// timeoutNames are the names of Timeouts' fields in ParseTimeouts.
var timeoutNames = []string{"start", "info", "configure", "step", "predictive", "state", "finalize"}

// field is the field of t named name (timeoutNames), or nil.
func (t *Timeouts) field(name string) *time.Duration {
	switch name {
	case "start":
		return &t.Start
	case "info":
		return &t.Info
	case "configure":
		return &t.Configure
	case "step":
		return &t.Step
	case "predictive":
		return &t.Predictive
	case "state":
		return &t.State
	case "finalize":
		return &t.Finalize
	}
	return nil
}

// ParseTimeouts reads deadlines written as a comma-separated list of
// name=duration, e.g. "start=2m,configure=20m" (names: start, info,
// configure, step, predictive, state, finalize; durations as time.ParseDuration
// reads them, positive). The fields it does not name are zero (the
// defaults).
func ParseTimeouts(s string) (Timeouts, error) {
	var t Timeouts
	for _, item := range strings.Split(s, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		name, val, ok := strings.Cut(item, "=")
		f := t.field(strings.TrimSpace(name))
		if !ok || f == nil {
			return Timeouts{}, fmt.Errorf("timeouts %q: want name=duration, e.g. configure=20m, with name one of %s", item, strings.Join(timeoutNames, ", "))
		}
		d, err := time.ParseDuration(strings.TrimSpace(val))
		if err != nil || d <= 0 {
			return Timeouts{}, fmt.Errorf("timeouts %q: want a positive duration, e.g. 20m", item)
		}
		*f = d
	}
	return t, nil
}

// String writes t, defaults filled in, as ParseTimeouts reads it.
func (t Timeouts) String() string {
	t = t.withDefaults()
	parts := make([]string, len(timeoutNames))
	for i, n := range timeoutNames {
		parts[i] = n + "=" + t.field(n).String()
	}
	return strings.Join(parts, ",")
}
