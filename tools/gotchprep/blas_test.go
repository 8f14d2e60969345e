package main

import (
	"os"
	"path/filepath"
	"testing"
)

// TestIsReferenceBLAS follows libblas.so.3 links laid out as Debian's
// alternatives lay them out.
func TestIsReferenceBLAS(t *testing.T) {
	root := t.TempDir()
	for _, dir := range []string{"blas", "openblas-openmp", "blis-openmp"} {
		if err := os.MkdirAll(filepath.Join(root, dir), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	os.WriteFile(filepath.Join(root, "blas", "libblas.so.3.11.0"), nil, 0o644)
	os.Symlink("libblas.so.3.11.0", filepath.Join(root, "blas", "libblas.so.3"))
	os.WriteFile(filepath.Join(root, "openblas-openmp", "libblas.so.3"), nil, 0o644)
	os.WriteFile(filepath.Join(root, "blis-openmp", "libblas.so.3"), nil, 0o644)
	cases := []struct {
		target string // what the alternatives link points to; "" = no link
		ref    bool
	}{
		{"blas/libblas.so.3", true},
		{"openblas-openmp/libblas.so.3", false},
		{"blis-openmp/libblas.so.3", false},
		{"", true},
	}
	for _, c := range cases {
		link := filepath.Join(t.TempDir(), "libblas.so.3")
		if c.target != "" {
			if err := os.Symlink(filepath.Join(root, c.target), link); err != nil {
				t.Fatal(err)
			}
		}
		if ref, real := isReferenceBLAS(link); ref != c.ref {
			t.Errorf("%q: reference = %v (real %q), want %v", c.target, ref, real, c.ref)
		}
	}
}
