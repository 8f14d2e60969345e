package data

import (
	"crypto/sha256"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

func idOf(b []byte) string { return fmt.Sprintf("%d bytes, sha256 %x", len(b), sha256.Sum256(b)) }

// A split read from data.path names the bytes it was read from, in the
// form of a record's data.path.content (hardening4/01: the record took the
// identity from the file as it was when the run started, after a rename
// had replaced it, so runs trained on old arrays were recorded as new).
func TestSplitContent(t *testing.T) {
	dir := t.TempDir()
	x, y := npyU8(ramp(16), 4, 2, 2), npyI64(1, 0, 1, 0)
	npz := npzOf(t, "x_train", x, "y_train", y, "x_test", x, "y_test", y)
	csv := []byte("f1,f2,y\n0.5,1,1\n2,3,0\n1,1,1\n0,2,0\n")
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, n := range []string{"x_train", "y_train", "x_test", "y_test"} {
		b := x
		if n[0] == 'y' {
			b = y
		}
		write(filepath.Join("arrays", n+".npy"), b)
	}
	tests := []struct {
		name string
		spec Spec
		want string
	}{
		{"npz file", Spec{Dataset: NumPyName, Path: write("d.npz", npz)}, idOf(npz)},
		{"npy folder", Spec{Dataset: NumPyName, Path: filepath.Join(dir, "arrays")},
			fmt.Sprintf("x_train.npy: %s; y_train.npy: %s; x_test.npy: %s; y_test.npy: %s", idOf(x), idOf(y), idOf(x), idOf(y))},
		{"csv", Spec{Dataset: CSVName, Path: write("d.csv", csv), TestFraction: 0.5}, idOf(csv)},
		{"built-in", Spec{Dataset: UCIDigitsName, TestFraction: 0.2}, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			sp, err := Load(tc.spec)
			if err != nil {
				t.Fatal(err)
			}
			if sp.Content != tc.want {
				t.Errorf("Content = %q, want %q", sp.Content, tc.want)
			}
		})
	}
}

// ContentID reads the open file, not the path: a file renamed over the
// path after it was opened does not change it.
func TestContentIDReadsTheOpenFile(t *testing.T) {
	dir := t.TempDir()
	p, q := filepath.Join(dir, "d.npz"), filepath.Join(dir, "new.npz")
	if err := os.WriteFile(p, []byte("old arrays"), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Read(make([]byte, 3)); err != nil { // an offset that is not 0
		t.Fatal(err)
	}
	if err := os.WriteFile(q, []byte("new arrays, longer"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(q, p); err != nil {
		t.Fatal(err)
	}
	if got, err := ContentID(f); err != nil || got != idOf([]byte("old arrays")) {
		t.Errorf("ContentID = %q, %v; want the opened file's %q", got, err, idOf([]byte("old arrays")))
	}
}
