package results

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// zeros is an endless stream of zero bytes that counts what was read.
type zeros struct{ n int64 }

func (z *zeros) Read(p []byte) (int, error) {
	clear(p)
	z.n += int64(len(p))
	return len(p), nil
}

// A results file whose line never ends (/dev/zero, a binary file) is
// refused once the line passes MaxLine, not read whole (hardening4/17).
func TestReadLinesBounded(t *testing.T) {
	z := &zeros{}
	err := readLines("runs.jsonl", z, func([]byte, bool) error { return nil })
	if err == nil || !strings.Contains(err.Error(), "runs.jsonl: line 1 is longer than 32 MiB") {
		t.Fatalf("err = %v", err)
	}
	if z.n > MaxLine+1<<20 {
		t.Errorf("read %d bytes before refusing", z.n)
	}
	// Lines within the bound, also longer than the reader's buffer, read whole.
	long := strings.Repeat("x", 200<<10)
	var got []string
	err = readLines("f", io.MultiReader(strings.NewReader(long+"\n"+"b\n"), strings.NewReader("c")), func(l []byte, un bool) error {
		got = append(got, string(l))
		return nil
	})
	if err != nil || len(got) != 3 || got[0] != long || got[1] != "b" || got[2] != "c" {
		t.Errorf("lines %d, err %v", len(got), err)
	}
	// Read on a file.
	p := filepath.Join(t.TempDir(), "runs.jsonl")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(MaxLine + 10); err != nil {
		t.Fatal(err)
	}
	_ = f.Close()
	if _, err := Read(p); err == nil || !strings.Contains(err.Error(), "not a results file") {
		t.Errorf("Read of a file without newlines: %v", err)
	}
}
