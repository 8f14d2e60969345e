package results

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
)

// LockSuffix is appended to a results file's path to name its lock file,
// e.g. runs.jsonl.lock. The lock file is created on first use and never
// removed (removing it would let two processes lock different files).
const LockSuffix = ".lock"

// Lock takes an exclusive lock on the results file at path, waiting while
// another process (or another Lock call in this one) holds it, and returns
// the function that releases it. The lock is a flock on the separate, stable
// file path+LockSuffix, created with its directories when missing: the
// results file itself cannot carry it, because Append replaces it by a
// rename. Every process sharing path therefore serialises on one lock, on a
// shared file system too as long as it supports flock (Linux NFS does).
//
// Append, Claim and Release take the lock themselves; do not call them while
// holding it, or they wait for ever. Hold it to read and act on the results
// file, or the claims, as one step. unlock may be called more than once.
func Lock(path string) (unlock func(), err error) {
	lockPath := path + LockSuffix
	if err := os.MkdirAll(filepath.Dir(lockPath), 0o755); err != nil {
		return nil, fmt.Errorf("lock %s: %w", lockPath, err)
	}
	f, err := os.OpenFile(lockPath, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("lock %s: %w", lockPath, err)
	}
	if err := flock(f); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("lock %s: %w", lockPath, err)
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
