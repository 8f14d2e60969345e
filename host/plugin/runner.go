package plugin

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/optlab/optlab/sdk/protocol"
)

// procRunner runs a plugin binary for go-plugin (runner.Runner). Using our
// own runner rather than ClientConfig.Cmd makes go-plugin honour
// UnixSocketConfig.TempDir on both sides (plugin socket and host broker
// listeners), and lets the Client report the process's exit status.
type procRunner struct {
	cmd    *exec.Cmd
	stdout io.ReadCloser
	stderr io.ReadCloser
	pid    int

	exited  chan struct{} // closed when Wait has returned
	mu      sync.Mutex
	waitErr error
}

// newProcRunner prepares path to run with the environment go-plugin built
// in env (handshake cookie, socket directory, protocol versions). The
// plugin gets no stdin: it must never read it.
func newProcRunner(path string, args, env []string) (*procRunner, error) {
	cmd := exec.Command(path, args...)
	// The plugin and whatever it starts (a wrapper script's program) form
	// their own process group, which Kill ends as a whole; and they know the
	// host's PID, to exit when the host dies (serve.Serve watches it).
	cmd.Env = append(env, protocol.HostPIDEnv+"="+strconv.Itoa(os.Getpid()))
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	// Once the plugin has exited, do not wait longer than this for a
	// process it left behind to close the output pipes.
	cmd.WaitDelay = pipeWaitDelay
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("stdout pipe: %w", err)
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, fmt.Errorf("stderr pipe: %w", err)
	}
	return &procRunner{cmd: cmd, stdout: stdout, stderr: stderr, exited: make(chan struct{})}, nil
}

// Start implements runner.Runner.
func (r *procRunner) Start(context.Context) error {
	if err := r.cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", r.cmd.Path, err)
	}
	r.pid = r.cmd.Process.Pid
	return nil
}

// Wait implements runner.Runner; go-plugin calls it once, after it has read
// stdout and stderr to the end.
func (r *procRunner) Wait(context.Context) error {
	err := r.cmd.Wait()
	r.mu.Lock()
	r.waitErr = err
	r.mu.Unlock()
	close(r.exited)
	return err
}

// exitStatus describes how the process ended, e.g. "exit status 2" or
// "signal: killed"; valid once exited is closed.
func (r *procRunner) exitStatus() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.waitErr == nil {
		return "exit status 0"
	}
	return r.waitErr.Error()
}

// Kill implements runner.Runner: it kills the plugin's whole process group
// (the plugin and anything it started, e.g. the program a wrapper script
// runs without exec), so that no process outlives it holding its pipes.
func (r *procRunner) Kill(context.Context) error {
	if r.cmd.Process == nil {
		return nil
	}
	killGroup(r.pid)
	if err := r.cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("kill plugin pid %d: %w", r.pid, err)
	}
	return nil
}

// killGroup sends SIGKILL to the process group led by pid (a no-op when it
// is gone).
func killGroup(pid int) {
	if pid > 0 {
		_ = syscall.Kill(-pid, syscall.SIGKILL)
	}
}

// pipeWaitDelay bounds how long Wait waits, after the plugin exited, for
// the output pipes to close.
const pipeWaitDelay = 2 * time.Second

// Stdout implements runner.Runner.
func (r *procRunner) Stdout() io.ReadCloser { return r.stdout }

// Stderr implements runner.Runner.
func (r *procRunner) Stderr() io.ReadCloser { return r.stderr }

// Name implements runner.Runner.
func (r *procRunner) Name() string { return r.cmd.Path }

// ID implements runner.Runner.
func (r *procRunner) ID() string { return fmt.Sprint(r.pid) }

// Diagnose implements runner.Runner.
func (r *procRunner) Diagnose(context.Context) string {
	return "check that " + r.cmd.Path + " is an optlab optimizer plugin built for this machine " +
		"(its main must call sdk/serve.Serve and print nothing to stdout before it)"
}

// PluginToHost implements runner.AddrTranslator (the identity).
func (r *procRunner) PluginToHost(network, addr string) (string, string, error) {
	return network, addr, nil
}

// HostToPlugin implements runner.AddrTranslator (the identity).
func (r *procRunner) HostToPlugin(network, addr string) (string, string, error) {
	return network, addr, nil
}
