package results

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// helperHold names the results file TestHelperLockHolder locks.
const helperHold = "OPTLAB_RESULTS_HELPER_HOLD"

// TestHelperLockHolder is not a test: TestLockWaitStoppedHolder runs the
// test binary with it selected; it takes the lock, says so and sleeps.
func TestHelperLockHolder(t *testing.T) {
	path := os.Getenv(helperHold)
	if path == "" {
		t.Skip("helper process only")
	}
	if _, err := Lock(path); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	fmt.Println("locked")
	time.Sleep(time.Minute)
	os.Exit(0)
}

// syncBuffer is a strings.Builder safe for the waiting Lock's notices.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestLockWaitCancel (hardening 04): a Lock waiting for a held lock ends as
// soon as its context is cancelled (SIGTERM, Ctrl-C), saying so, and the
// abandoned wait does not keep the lock once it is released.
func TestLockWaitCancel(t *testing.T) {
	path := filepath.Join(t.TempDir(), FileName)
	unlock, err := Lock(path)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancelCause(context.Background())
	w := LockWait{Ctx: ctx}
	sig := errors.New("interrupted by terminated")
	time.AfterFunc(100*time.Millisecond, func() { cancel(sig) })
	start := time.Now()
	_, err = w.Lock(path)
	if !errors.Is(err, sig) || !strings.Contains(err.Error(), "while waiting for the lock "+path+LockSuffix) {
		t.Errorf("err = %v, want the cancellation while waiting for the lock", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("cancelled wait took %v", d)
	}
	unlock()
	again, err := LockWait{Timeout: 10 * time.Second}.Lock(path)
	if err != nil {
		t.Fatalf("lock after an abandoned wait: %v", err)
	}
	again()
}

// TestLockWaitTimeout: a wait for a lock that is not released gives up
// after the timeout with a message naming the lock file and its holder.
func TestLockWaitTimeout(t *testing.T) {
	path := filepath.Join(t.TempDir(), FileName)
	unlock, err := Lock(path)
	if err != nil {
		t.Fatal(err)
	}
	defer unlock()
	w := LockWait{Timeout: 200 * time.Millisecond}
	_, err = w.Lock(path)
	if err == nil || !strings.Contains(err.Error(), "lock "+path+LockSuffix+": gave up after waiting 200ms; it is held by PID ") {
		t.Errorf("err = %v, want a timeout naming the holder", err)
	}
}

// TestLockWaitStoppedHolder (hardening 03): waiting for a lock held by a
// stopped process, Lock says who holds it, since when, that it is stopped
// and how to continue it.
func TestLockWaitStoppedHolder(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("no /proc: a stopped holder is not recognised here")
	}
	path := filepath.Join(t.TempDir(), FileName)
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperLockHolder$", "-test.count=1")
	cmd.Env = append(os.Environ(), helperHold+"="+path)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	if line, _ := bufio.NewReader(out).ReadString('\n'); line != "locked\n" {
		t.Fatalf("helper: %q", line)
	}
	if err := cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Signal(syscall.SIGCONT) }()
	var log syncBuffer
	w := LockWait{Timeout: LockNotice + 500*time.Millisecond, Log: &log}
	_, err = w.Lock(path)
	pid := cmd.Process.Pid
	held := fmt.Sprintf("it is held by PID %d since ", pid)
	stopped := fmt.Sprintf("that process is stopped (SIGSTOP or Ctrl-Z): continue it with kill -CONT %d, or end it", pid)
	if err == nil || !strings.Contains(err.Error(), held) || !strings.Contains(err.Error(), stopped) {
		t.Errorf("err = %v, want it to say %q and %q", err, held, stopped)
	}
	if want := "host: waiting for the lock " + path + LockSuffix + ": " + held; !strings.Contains(log.String(), want) || !strings.Contains(log.String(), stopped) {
		t.Errorf("notice %q, want it to say %q and %q", log.String(), want, stopped)
	}
}
