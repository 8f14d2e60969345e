package plugin

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/optlab/optlab/internal/testutil"
	"github.com/optlab/optlab/sdk/optim"
	"github.com/optlab/optlab/sdk/protocoltest"
)

// A plugin is often a shell script that starts the real program without
// exec, so that the host's child is the shell and the plugin its
// grandchild, holding the host's pipes. These tests check that such a
// plugin never hangs the host and never outlives it.

// wrapper writes a script into a folder of its own that runs the binary bin
// with its arguments without exec, and returns the script's path.
func wrapper(t *testing.T, bin string, args ...string) string {
	t.Helper()
	dir := t.TempDir()
	script := fmt.Sprintf("#!/bin/sh\n%q %s \"$@\"\necho wrapper done >&2\n", bin, strings.Join(args, " "))
	path := filepath.Join(dir, "wrapped")
	if err := os.WriteFile(path, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

// childrenRunning returns the live processes whose executable is exe.
func childrenRunning(exe string) []int {
	entries, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if p, err := os.Readlink(filepath.Join("/proc", e.Name(), "exe")); err == nil && p == exe && alive(pid) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// copyBinary copies the executable src into a new folder and returns the
// copy's path, so that its processes can be told from any other's.
func copyBinary(t *testing.T, src string) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), filepath.Base(src)+"-copy")
	testutil.CopyExecutable(t, src, dst)
	return dst
}

// waitNone waits up to d for every process running exe to end.
func waitNone(t *testing.T, exe string, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	for len(childrenRunning(exe)) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("processes of %s still running after %v: %v", exe, d, childrenRunning(exe))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// within runs fn and fails the test if it takes longer than d.
func within(t *testing.T, what string, d time.Duration, fn func()) {
	t.Helper()
	done := make(chan struct{})
	go func() { defer close(done); fn() }()
	select {
	case <-done:
	case <-time.After(d):
		t.Fatalf("%s did not return within %v", what, d)
	}
}

func TestWrapperStepTimeoutAndClose(t *testing.T) {
	toy := copyBinary(t, filepath.Join(binDir, "toy"))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, err := Launch(ctx, LaunchSpec{Path: wrapper(t, toy), Timeouts: Timeouts{Step: time.Second}, Logger: quietLogger(t), Output: testWriter{t}})
	if err != nil {
		t.Fatal(err)
	}
	configure(t, c, protocoltest.NewFakeHost(10), map[string]any{"mode": protocoltest.ModeHang})
	if len(childrenRunning(toy)) != 1 {
		t.Fatalf("the wrapped plugin is not running")
	}
	_, err = c.Step(context.Background(), optim.StepInput{})
	if !errors.Is(err, ErrTimeout) {
		t.Fatalf("Step: %v, want ErrTimeout", err)
	}
	within(t, "Close", 15*time.Second, func() { _ = c.Close() })
	waitNone(t, toy, 5*time.Second)
}

func TestWrapperStartTimeout(t *testing.T) {
	sleeper := copyBinary(t, "/bin/sleep")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var err error
	within(t, "Launch", 15*time.Second, func() {
		_, err = Launch(ctx, LaunchSpec{Path: wrapper(t, sleeper, "600"), Timeouts: Timeouts{Start: time.Second}, Logger: quietLogger(t), Output: testWriter{t}})
	})
	if err == nil {
		t.Fatal("a plugin that never answers the handshake was launched")
	}
	t.Logf("error: %v", err)
	waitNone(t, sleeper, 5*time.Second)
}

// TestWrapperExitsWhenHostDies kills a host with SIGKILL: the wrapped plugin
// (the host's grandchild, whose parent shell outlives the host) must exit.
func TestWrapperExitsWhenHostDies(t *testing.T) {
	toy := copyBinary(t, filepath.Join(binDir, "toy"))
	helper, _ := startHelperHost(t, wrapper(t, toy))
	pids := childrenRunning(toy)
	if len(pids) != 1 {
		t.Fatalf("wrapped plugin processes: %v", pids)
	}
	t.Cleanup(func() { _ = syscall.Kill(pids[0], syscall.SIGKILL) })
	if err := helper.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = helper.Wait()
	waitNone(t, toy, 5*time.Second)
}

// A plugin that leaves a daemon (its own session, out of the plugin's
// process group) holding its stdout and stderr: closing it and go-plugin's
// cleanup at the host's exit end within seconds instead of waiting for the
// daemon to close the pipes (issue 26, case 06).
func TestDaemonHoldingOutputDoesNotHang(t *testing.T) {
	setsid, err := exec.LookPath("setsid")
	if err != nil {
		t.Skip("no setsid")
	}
	toy := copyBinary(t, filepath.Join(binDir, "toy"))
	sleeper := copyBinary(t, "/bin/sleep")
	dir := t.TempDir()
	pidFile := filepath.Join(dir, "daemon.pid")
	script := fmt.Sprintf("#!/bin/sh\n%q %q 60 </dev/null &\necho $! > %q\nexec %q \"$@\"\n", setsid, sleeper, pidFile, toy)
	path := filepath.Join(dir, "daemonizing")
	if err := os.WriteFile(path, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	defer func() {
		for _, pid := range childrenRunning(sleeper) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, err := Launch(ctx, LaunchSpec{Path: path, Logger: quietLogger(t), Output: testWriter{t}})
	if err != nil {
		t.Fatal(err)
	}
	configure(t, c, protocoltest.NewFakeHost(10), nil)
	// The script starts the daemon in the background before it execs the
	// plugin: on a loaded machine the daemon may run only after the plugin
	// was configured.
	for deadline := time.Now().Add(10 * time.Second); len(childrenRunning(sleeper)) != 1; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the daemon is not running after 10s: %v", childrenRunning(sleeper))
		}
	}
	within(t, "Close", 6*time.Second, func() { _ = c.Close() })
	within(t, "CleanupAll", 6*time.Second, CleanupAll)
	if !c.Exited() {
		t.Errorf("the plugin has not exited")
	}
}
