package plugin

import (
	"os"
	"path/filepath"
	"testing"
)

// TestBarePathIsNotLookedUpInPATH: an experiment's path = "./myopt" becomes
// the bare "myopt" once joined and cleaned; os/exec would look that up in
// $PATH and run a same-named program there. The launcher runs ./myopt.
func TestBarePathIsNotLookedUpInPATH(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "myopt"), []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Chdir(dir)
	for p, want := range map[string]string{
		"myopt":                     "./myopt",
		"./myopt":                   "./myopt",
		filepath.Join(dir, "myopt"): filepath.Join(dir, "myopt"),
	} {
		path, _, err := LaunchSpec{Path: filepath.Clean(p)}.resolve()
		if err != nil {
			t.Fatal(err)
		}
		if path != want {
			t.Errorf("path %q resolved to %q, want %q (never a bare name, which $PATH would resolve)", p, path, want)
		}
	}
}
