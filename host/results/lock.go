package results

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// LockSuffix is appended to a results file's path to name its lock file,
// e.g. runs.jsonl.lock. The lock file is created on first use and never
// removed (removing it would let two processes lock different files).
const LockSuffix = ".lock"

// LockWait says how Lock waits for a lock that another process holds.
type LockWait struct {
	// Ctx, when done, ends the wait (SIGTERM, Ctrl-C): Lock returns its
	// cause. Nil waits regardless.
	Ctx context.Context
	// Timeout is how long Lock waits before it gives up with a message
	// naming the holder; zero means DefaultLockTimeout.
	Timeout time.Duration
	// Log, when not nil, is told (one line) when the wait has lasted
	// LockNotice: the lock file, who holds it and since when, and whether
	// that process is stopped.
	Log io.Writer
}

// DefaultLockTimeout is how long Lock waits by default. The lock is held
// for the milliseconds of one read and rewrite, so a wait this long means a
// holder that is stopped or stuck.
const DefaultLockTimeout = 10 * time.Minute

// LockNotice is how long Lock waits before it says that it is waiting.
const LockNotice = 2 * time.Second

// DefaultLockWait is how this package's functions wait for a lock
// (Lock, Append, Claim, Release, Claims, Supersede, RemoveTemps): for
// DefaultLockTimeout, uninterrupted, telling os.Stderr after LockNotice.
// The methods of the same names on a LockWait wait as it says; a Store
// waits as its StoreOptions say.
func DefaultLockWait() LockWait { return LockWait{Log: os.Stderr} }

// Lock takes the lock on the results file at path as DefaultLockWait
// says; see LockWait.Lock.
func Lock(path string) (unlock func(), err error) { return DefaultLockWait().Lock(path) }

// Lock takes an exclusive lock on the results file at path, waiting while
// another process (or another Lock call in this one) holds it, and returns
// the function that releases it. The lock is a flock on the separate, stable
// file path+LockSuffix, created with its directories when missing: the
// results file itself cannot carry it, because Append replaces it by a
// rename. Every process sharing path therefore serialises on one lock, on a
// shared file system too as long as it supports flock (Linux NFS does).
// The holder writes its process id, host name and the time into the lock
// file, so that a waiting process can say who holds it.
//
// A wait is bounded as w says: after LockNotice it is reported
// (the holder, since when, and whether it is stopped, e.g. by SIGSTOP or
// Ctrl-Z); it ends with an error when the context is done or the timeout
// has passed.
//
// Append, Claim and Release take the lock themselves; do not call them while
// holding it, or they wait for ever. Hold it to read and act on the results
// file, or the claims, as one step. unlock may be called more than once.
func (w LockWait) Lock(path string) (unlock func(), err error) {
	lockPath := path + LockSuffix
	if err := os.MkdirAll(filepath.Dir(lockPath), 0o755); err != nil {
		return nil, fmt.Errorf("lock %s: %w", lockPath, err)
	}
	f, err := OpenFile(lockPath, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("lock %s: %w", lockPath, err)
	}
	if err := w.wait(f, lockPath); err != nil {
		return nil, err
	}
	// Who holds it, for those who wait (best effort: the lock works
	// without).
	if f.Truncate(0) == nil {
		_, _ = fmt.Fprintf(f, "pid %d host %s since %s\n", os.Getpid(), hostname(), time.Now().UTC().Format(time.RFC3339))
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			// Closing the file releases the lock even if funlock fails.
			_ = funlock(f)
			_ = f.Close()
		})
	}, nil
}

// wait takes the flock on f, the open lock file lockPath, waiting as w
// says. On error f is closed (at once, or by the abandoned wait
// when it ends: a flock call cannot be interrupted, and takes the lock only
// to release it).
func (w LockWait) wait(f *os.File, lockPath string) error {
	ok, err := tryFlock(f)
	if err == nil && ok {
		return nil
	}
	if err != nil {
		_ = f.Close()
		return fmt.Errorf("lock %s: %w", lockPath, err)
	}
	var done <-chan struct{}
	if w.Ctx != nil {
		done = w.Ctx.Done()
	}
	timeout := w.Timeout
	if timeout <= 0 {
		timeout = DefaultLockTimeout
	}
	got := make(chan error, 1)
	go func() { got <- flock(f) }()
	abandon := func() {
		go func() {
			if <-got == nil {
				_ = funlock(f)
			}
			_ = f.Close()
		}()
	}
	giveUp := time.NewTimer(timeout)
	defer giveUp.Stop()
	notice := time.NewTimer(LockNotice)
	defer notice.Stop()
	told := ""
	for {
		select {
		case err := <-got:
			if err != nil {
				_ = f.Close()
				return fmt.Errorf("lock %s: %w", lockPath, err)
			}
			return nil
		case <-done:
			h := holder(f, lockPath)
			abandon()
			return fmt.Errorf("%w while waiting for the lock %s (it is %s)", context.Cause(w.Ctx), lockPath, h)
		case <-giveUp.C:
			h := holder(f, lockPath)
			abandon()
			return fmt.Errorf("lock %s: gave up after waiting %v; it is %s: if no host works on this experiment, end that process (or wait longer: --lock-timeout)", lockPath, timeout, h)
		case <-notice.C:
			if h := holder(f, lockPath); h != told && w.Log != nil {
				told = h
				fmt.Fprintf(w.Log, "host: waiting for the lock %s: it is %s (giving up after %v)\n", lockPath, h, timeout)
			}
			notice.Reset(5 * time.Second)
		}
	}
}

// holder describes the process holding the lock file lockPath, open as f:
// "held by PID 123 (host h) since 2026-11-25T01:02:03Z", with "; that
// process is stopped (SIGSTOP or Ctrl-Z): continue it with kill -CONT 123"
// when it is. The PID comes from the system's lock table where there is one
// (/proc/locks), else from what the holder wrote into the lock file.
func holder(f *os.File, lockPath string) string {
	b, _ := os.ReadFile(lockPath)
	var wpid int
	var whost, wsince string
	_, _ = fmt.Sscanf(string(b), "pid %d host %s since %s", &wpid, &whost, &wsince)
	pid := lockHolderPID(f)
	if pid <= 0 {
		pid = wpid
		if whost != "" && whost != hostname() {
			return fmt.Sprintf("held by PID %d on host %s since %s", pid, whost, wsince)
		}
	}
	if pid <= 0 {
		return "held by an unknown process"
	}
	s := fmt.Sprintf("held by PID %d", pid)
	if pid == wpid && wsince != "" {
		s += " since " + wsince
	}
	if processStopped(pid) {
		s += fmt.Sprintf("; that process is stopped (SIGSTOP or Ctrl-Z): continue it with kill -CONT %d, or end it", pid)
	}
	return s
}

// Owner returns the claim owner that names this process: "host:pid", the
// machine's host name and the process id.
func Owner() string {
	return hostname() + ":" + strconv.Itoa(os.Getpid())
}

// OwnerGone reports whether owner, as made by Owner, names a process of this
// machine that no longer runs, so that its claims can be taken over: pass it
// to Claim as stale. Owners on other machines, and strings not of the form
// "host:pid", are never gone, since their liveness cannot be checked here. A
// process id reused by a new process makes a gone owner look alive.
func OwnerGone(owner string) bool {
	i := strings.LastIndexByte(owner, ':')
	if i < 0 || owner[:i] != hostname() {
		return false
	}
	pid, err := strconv.Atoi(owner[i+1:])
	if err != nil || pid <= 0 {
		return false
	}
	return processGone(pid)
}

// hostname returns the machine's host name, or "localhost" when it cannot
// be read.
func hostname() string {
	h, err := os.Hostname()
	if err != nil || h == "" {
		return "localhost"
	}
	return h
}
