package atomicfile

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
)

func TestWriteReplacesAndCleansUp(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "sub", "f.txt")
	if err := Write(path, []byte("one"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := Write(path, []byte("two"), 0o600); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil || string(b) != "two" {
		t.Fatalf("read %q, %v", b, err)
	}
	if st, _ := os.Stat(path); st.Mode().Perm() != 0o600 {
		t.Errorf("mode %v", st.Mode().Perm())
	}
	boom := errors.New("boom")
	if err := WriteFunc(path, 0o644, func(w io.Writer) error { _, _ = w.Write([]byte("partial")); return boom }); !errors.Is(err, boom) {
		t.Fatalf("error %v", err)
	}
	b, _ = os.ReadFile(path)
	if string(b) != "two" {
		t.Errorf("a failed write changed the file to %q", b)
	}
	entries, _ := os.ReadDir(filepath.Dir(path))
	if len(entries) != 1 {
		t.Errorf("left-over files: %v", entries)
	}
}
