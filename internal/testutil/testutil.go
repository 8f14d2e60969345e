// Package testutil holds helpers shared by optlab's end-to-end tests.
package testutil

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
)

// SyncBuffer is a bytes.Buffer safe for concurrent writes: the host writes
// plugin output and log lines from the goroutines that read the plugins'
// pipes.
type SyncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p.
func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// String returns what was written.
func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// GoBuild runs `go build -o out pkgs…` (out a folder ending in a path
// separator builds each package into it), showing the compiler's output.
func GoBuild(out string, pkgs ...string) error {
	args := append([]string{"build", "-o", out}, pkgs...)
	cmd := exec.Command("go", args...)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("go %s: %w", strings.Join(args, " "), err)
	}
	return nil
}

// CopyExecutable copies the executable src to the new file dst, so that
// the processes running the copy can be told from any other's.
func CopyExecutable(t testing.TB, src, dst string) {
	t.Helper()
	in, err := os.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = in.Close() }()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
}

// NeedPython skips t when /usr/bin/python3 lacks Debian's grpc and
// protobuf packages, which Python plugins (sdk/python) need (`make test`
// installs them).
func NeedPython(t testing.TB) {
	t.Helper()
	if err := exec.Command("/usr/bin/python3", "-c", "import grpc, google.protobuf").Run(); err != nil {
		t.Skipf("/usr/bin/python3 cannot import grpc and protobuf (%v): apt-get install python3-grpcio python3-protobuf", err)
	}
}
