//go:build !unix

package results

import (
	"fmt"
	"os"
	"runtime"
)

// tryFlock fails: this platform has no flock.
func tryFlock(f *os.File) (bool, error) {
	return false, fmt.Errorf("file locks are not supported on %s", runtime.GOOS)
}

// flock fails: this platform has no flock.
func flock(f *os.File) error {
	return fmt.Errorf("file locks are not supported on %s", runtime.GOOS)
}

// funlock does nothing.
func funlock(f *os.File) error { return nil }

// processGone reports false: liveness is not checked on this platform.
func processGone(pid int) bool { return false }

// lockHolderPID returns 0: the holder is not known on this platform.
func lockHolderPID(f *os.File) int { return 0 }

// processStopped reports false: not known on this platform.
func processStopped(pid int) bool { return false }

// Flags of OpenFile (none on this system).
const (
	oNoFollow = 0
	oNonBlock = 0
)
