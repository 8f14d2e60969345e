package regfile

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A FIFO (or a folder) is refused at once instead of blocking open(2) for
// ever (issue 26, case 07); a regular file reads as with os.ReadFile.
func TestOpenRefusesNonRegular(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "train.csv")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Skip("mkfifo:", err)
	}
	reg := filepath.Join(dir, "ok.csv")
	os.WriteFile(reg, []byte("a,b\n"), 0o644)
	done := make(chan error, 1)
	go func() { _, err := ReadFile(fifo); done <- err }()
	select {
	case err := <-done:
		if want := fifo + " is a named pipe (FIFO), not a regular file; point it at a file"; err == nil || err.Error() != want {
			t.Errorf("FIFO: %v, want %q", err, want)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("ReadFile of a FIFO blocked")
	}
	if _, err := Open(dir); err == nil || !strings.Contains(err.Error(), "is a folder, not a regular file") {
		t.Errorf("folder: %v", err)
	}
	if b, err := ReadFile(reg); err != nil || string(b) != "a,b\n" {
		t.Errorf("regular file: %q, %v", b, err)
	}
}
