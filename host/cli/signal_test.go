package cli_test

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/optlab/optlab/host/results"
	"github.com/optlab/optlab/internal/testutil"
)

// hostProc is a `host` process started by a test.
type hostProc struct {
	cmd            *exec.Cmd
	stdout, stderr testutil.SyncBuffer
	exited         chan struct{} // closed when the process has exited
	waitErr        error         // valid once exited is closed
}

// startHost starts the host binary with args; the process is killed at the
// end of the test if it is still running.
func startHost(t *testing.T, args ...string) *hostProc {
	t.Helper()
	h := &hostProc{cmd: exec.Command(hostBin, args...), exited: make(chan struct{})}
	h.cmd.Stdout, h.cmd.Stderr = &h.stdout, &h.stderr
	if err := h.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { h.waitErr = h.cmd.Wait(); close(h.exited) }()
	t.Cleanup(func() {
		select {
		case <-h.exited:
		default:
			h.cmd.Process.Kill()
			<-h.exited
		}
	})
	return h
}

// TestInterrupt sends SIGINT to a `host run` process during its second run:
// the process exits non-zero saying that the finished runs are kept, the
// first run is in runs.jsonl, and no plugin process is left running.
func TestInterrupt(t *testing.T) {
	dir := t.TempDir()
	// A plugin folder of its own, so that /proc tells this host's plugins
	// from any other.
	plugins := filepath.Join(dir, "plugins")
	if err := os.Mkdir(plugins, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"sgd", "faultplugin"} {
		testutil.CopyExecutable(t, filepath.Join(pluginDir, p), filepath.Join(plugins, p))
	}
	// The second run hangs in its first step, so that it is surely in
	// progress, with its plugin running, when the signal comes.
	s := spec{Name: "interrupt", Methods: []method{
		{Name: "SGD", Plugin: "sgd"},
		{Name: "Stuck", Plugin: "faultplugin", Params: []string{"hang_at = 0"}},
	}}
	exp := s.write(t, dir)
	res := filepath.Join(dir, "results")
	path := results.NewLayout(res, s.Name).Runs()

	h := startHost(t, "run", "-q", "--plugins", plugins, "--results", res, exp)
	cmd, exited, stderr := h.cmd, h.exited, &h.stderr

	// Wait for the first run's record and the second run's plugin.
	deadline := time.Now().Add(60 * time.Second)
	for {
		b, _ := os.ReadFile(path)
		if bytes.Count(b, []byte("\n")) >= 1 && len(processesOf(plugins)) > 0 {
			break
		}
		select {
		case <-exited:
			t.Fatalf("host exited early (%v):\n%s", h.waitErr, stderr.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("the first run did not finish, or the second did not start, in time")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	select {
	case <-exited:
	case <-time.After(30 * time.Second):
		t.Fatalf("host did not exit within 30s of SIGINT")
	}
	var exit *exec.ExitError
	if !errors.As(h.waitErr, &exit) || exit.ExitCode() <= 0 {
		t.Errorf("host exited with %v; want a non-zero exit code", h.waitErr)
	}
	out := stderr.String()
	assertNoPanic(t, out)
	want := "host: method=Stuck/arch=mlp/seed=1: interrupted by interrupt; finished runs are kept in " + path
	if !strings.Contains(out, want) {
		t.Errorf("stderr does not say %q:\n%s", want, out)
	}
	recs := readRecords(t, path)
	if len(recs) != 1 {
		t.Errorf("%d records, want the finished run only", len(recs))
	}
	if rec := recs["method=SGD/arch=mlp/seed=1"]; rec.Status != results.StatusOK {
		t.Errorf("finished run: status %q (%s), want ok", rec.Status, rec.Error)
	}
	if left := waitNoProcesses(plugins, 5*time.Second); len(left) > 0 {
		t.Errorf("plugin processes %v still running after the host exited", left)
	}
}

// TestInterruptWrapper: Ctrl-C while a run's plugin is a shell script that
// started the real plugin without exec (so the plugin is the host's
// grandchild): the host still exits promptly and leaves no plugin running.
func TestInterruptWrapper(t *testing.T) {
	dir := t.TempDir()
	plugins := filepath.Join(dir, "plugins")
	if err := os.Mkdir(plugins, 0o755); err != nil {
		t.Fatal(err)
	}
	real := filepath.Join(plugins, "faultplugin.bin")
	testutil.CopyExecutable(t, filepath.Join(pluginDir, "faultplugin"), real)
	script := "#!/bin/sh\n\"" + real + "\" \"$@\"\n"
	if err := os.WriteFile(filepath.Join(plugins, "stuck"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	s := spec{Name: "wrapped", Methods: []method{{Name: "Stuck", Plugin: "stuck", Params: []string{"hang_at = 0"}}}}
	exp := s.write(t, dir)
	h := startHost(t, "run", "-q", "--plugins", plugins, "--results", filepath.Join(dir, "results"), exp)
	cmd, exited, stderr := h.cmd, h.exited, &h.stderr
	// Wait until the run's plugin is running: the start-up line comes after
	// the plugins were asked for their schemas.
	deadline := time.Now().Add(60 * time.Second)
	for !strings.Contains(stderr.String(), "host: libtorch") || len(processesOf(plugins)) == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("the run did not start in time:\n%s", stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	select {
	case <-exited:
	case <-time.After(30 * time.Second):
		t.Fatalf("host did not exit within 30s of SIGINT:\n%s", stderr.String())
	}
	if !strings.Contains(stderr.String(), "interrupted") {
		t.Errorf("stderr does not say the run was interrupted:\n%s", stderr.String())
	}
	if left := waitNoProcesses(plugins, 5*time.Second); len(left) > 0 {
		t.Errorf("plugin processes %v still running after the host exited", left)
	}
}

// TestTableInterrupt (hardening 26, also seen): host table used to ignore
// Ctrl-C while it read its files; reading a FIFO that no one writes, it
// now ends at SIGINT, saying so.
func TestTableInterrupt(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "runs.jsonl")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Skip("no FIFOs here:", err)
	}
	h := startHost(t, "table", fifo)
	// Once the host has opened the FIFO (its signal handler is set up by
	// then), a non-blocking open for writing succeeds; the host then
	// blocks reading, as no data comes.
	var w *os.File
	for deadline := time.Now().Add(time.Minute); w == nil; {
		f, err := os.OpenFile(fifo, os.O_WRONLY|syscall.O_NONBLOCK, 0)
		switch {
		case err == nil:
			w = f
		case time.Now().After(deadline):
			t.Fatalf("host table did not open the FIFO within a minute: %v; stderr:\n%s", err, h.stderr.String())
		default:
			time.Sleep(20 * time.Millisecond)
		}
	}
	defer w.Close()
	if err := h.cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	select {
	case <-h.exited:
	case <-time.After(20 * time.Second):
		t.Fatalf("host table still running 20 s after SIGINT; stderr:\n%s", h.stderr.String())
	}
	if h.waitErr == nil || !strings.Contains(h.stderr.String(), "interrupted by interrupt") {
		t.Errorf("exit %v, stderr %q; want a failure saying it was interrupted", h.waitErr, h.stderr.String())
	}
}
