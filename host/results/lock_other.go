//go:build !unix

package results

import (
	"fmt"
	"os"
	"runtime"
)

// flock fails: this platform has no flock.
func flock(f *os.File) error {
	return fmt.Errorf("file locks are not supported on %s", runtime.GOOS)
}

// funlock does nothing.
func funlock(f *os.File) error { return nil }

// processGone reports false: liveness is not checked on this platform.
func processGone(pid int) bool { return false }
