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
	cmd        *exec.Cmd
	stdout     io.ReadCloser
	stderr     io.ReadCloser
	outR, errR *os.File // the read ends of stdout and stderr
	pid        int

	exited  chan struct{} // closed when Wait has returned
	mu      sync.Mutex
	waitErr error
}

// newProcRunner prepares path to run with the environment go-plugin built
// in env (handshake cookie, socket directory, protocol versions). The
// plugin gets no stdin: it must never read it.
//
// Its stdout and stderr are pipes of our own (not exec's StdoutPipe): a
// process the plugin leaves behind in another session (a daemon, setsid)
// inherits their write ends and would keep them open for ever, and
// go-plugin reads them to the end before it calls Wait, so the host would
// hang at exit, deaf to SIGTERM (issue 26, case 06). Start waits for the
// process itself; once it has exited, the output still buffered has
// pipeWaitDelay to be read, then the pipes read as ended.
func newProcRunner(path string, args, env []string) (*procRunner, error) {
	cmd := exec.Command(path, args...)
	// The plugin and whatever it starts (a wrapper script's program) form
	// their own process group, which Kill ends as a whole; and they know the
	// host's PID, to exit when the host dies (serve.Serve watches it).
	cmd.Env = append(env, protocol.HostPIDEnv+"="+strconv.Itoa(os.Getpid()))
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	r := &procRunner{cmd: cmd, exited: make(chan struct{})}
	var err error
	if r.outR, cmd.Stdout, err = os.Pipe(); err != nil {
		return nil, fmt.Errorf("stdout pipe: %w", err)
	}
	if r.errR, cmd.Stderr, err = os.Pipe(); err != nil {
		r.closeAll()
		return nil, fmt.Errorf("stderr pipe: %w", err)
	}
	r.stdout, r.stderr = newEndOnDeadline(r.outR), newEndOnDeadline(r.errR)
	return r, nil
}

// closeAll closes both ends of the output pipes (a failed start).
func (r *procRunner) closeAll() {
	for _, f := range []any{r.outR, r.errR, r.cmd.Stdout, r.cmd.Stderr} {
		if f, ok := f.(*os.File); ok && f != nil {
			_ = f.Close()
		}
	}
}

// Start implements runner.Runner.
func (r *procRunner) Start(context.Context) error {
	if err := r.cmd.Start(); err != nil {
		r.closeAll()
		return fmt.Errorf("start %s: %w", r.cmd.Path, err)
	}
	r.pid = r.cmd.Process.Pid
	// The child has its copies of the write ends; ours would keep the
	// pipes open.
	_ = r.cmd.Stdout.(*os.File).Close()
	_ = r.cmd.Stderr.(*os.File).Close()
	go func() {
		err := r.cmd.Wait()
		r.mu.Lock()
		r.waitErr = err
		r.mu.Unlock()
		// Whatever the plugin wrote is in the pipes; a process it left
		// behind may hold them open: reads end pipeWaitDelay from now.
		// The exit counts once both are read (its last words, a panic's
		// stack, are then in the messages), or at that deadline.
		end := time.Now().Add(pipeWaitDelay)
		_ = r.outR.SetReadDeadline(end)
		_ = r.errR.SetReadDeadline(end)
		timeout := time.NewTimer(pipeWaitDelay + time.Second)
		defer timeout.Stop()
		for _, e := range []endOnDeadline{r.stdout.(endOnDeadline), r.stderr.(endOnDeadline)} {
			select {
			case <-e.ended:
			case <-timeout.C:
			}
		}
		close(r.exited)
	}()
	return nil
}

// Wait implements runner.Runner; go-plugin calls it once, after it has read
// stdout and stderr to the end (or to pipeWaitDelay after the exit).
func (r *procRunner) Wait(context.Context) error {
	<-r.exited
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.waitErr
}

// endOnDeadline reads a pipe whose read deadline marks its end: a read
// past it returns io.EOF. ended is closed at the first error (the end).
type endOnDeadline struct {
	f     *os.File
	ended chan struct{}
	once  *sync.Once
}

func newEndOnDeadline(f *os.File) endOnDeadline {
	return endOnDeadline{f: f, ended: make(chan struct{}), once: new(sync.Once)}
}

func (e endOnDeadline) Read(b []byte) (int, error) {
	n, err := e.f.Read(b)
	if errors.Is(err, os.ErrDeadlineExceeded) {
		err = io.EOF
	}
	if err != nil {
		e.once.Do(func() { close(e.ended) })
	}
	return n, err
}

func (e endOnDeadline) Close() error { return e.f.Close() }

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

// pipeWaitDelay bounds how long the output pipes are read after the
// plugin exited (a process it left behind may hold them open for ever).
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
