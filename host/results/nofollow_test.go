package results

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// A link or a FIFO planted among the results folder's files is refused,
// and its target is never written (hardening4/14: a symlink at
// runs.jsonl.lock had its target overwritten by the holder's line).
func TestResultsFilesNotFollowed(t *testing.T) {
	tests := []struct {
		name  string
		plant func(t *testing.T, dir, victim string) // plants at dir/runs.jsonl(.lock)
		op    func(path string) error
		want  string
	}{
		{"linked lock file", func(t *testing.T, dir, victim string) {
			must(t, os.Symlink(victim, filepath.Join(dir, "runs.jsonl"+LockSuffix)))
		}, func(p string) error { _, err := LockWait{}.Lock(p); return err }, "symbolic link"},
		{"linked results file", func(t *testing.T, dir, victim string) {
			must(t, os.Symlink(victim, filepath.Join(dir, "runs.jsonl")))
		}, func(p string) error { return LockWait{}.Append(p, rec("k", "m", 1, map[string]any{}, t0)) }, "symbolic link"},
		{"FIFO lock file", func(t *testing.T, dir, _ string) {
			must(t, syscall.Mkfifo(filepath.Join(dir, "runs.jsonl"+LockSuffix), 0o644))
		}, func(p string) error { _, err := LockWait{}.Lock(p); return err }, "named pipe (FIFO), not a regular file"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			victim := filepath.Join(t.TempDir(), "victim.rc")
			must(t, os.WriteFile(victim, []byte("precious\n"), 0o644))
			tc.plant(t, dir, victim)
			err := tc.op(filepath.Join(dir, "runs.jsonl"))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want %q", err, tc.want)
			}
			if b, _ := os.ReadFile(victim); string(b) != "precious\n" {
				t.Errorf("the link's target was written: %q", b)
			}
		})
	}
}

func TestMkdirIn(t *testing.T) {
	root := t.TempDir()
	outside := t.TempDir()
	must(t, os.WriteFile(filepath.Join(outside, "events.out.tfevents.1"), []byte("x"), 0o644))
	must(t, os.MkdirAll(filepath.Join(root, "tb"), 0o755))
	must(t, os.Symlink(outside, filepath.Join(root, "tb", "linked")))
	must(t, os.Symlink(outside, filepath.Join(root, "curves")))
	must(t, os.WriteFile(filepath.Join(root, "file"), nil, 0o644))
	tests := []struct {
		dir  string
		want string // "" for success
	}{
		{filepath.Join(root, "tb", "run-1"), ""},
		{filepath.Join(root, "a", "b", "c"), ""},
		{root, ""},
		{filepath.Join(root, "tb", "linked"), "symbolic link, not a folder"},
		{filepath.Join(root, "curves", "x"), "symbolic link, not a folder"},
		{filepath.Join(root, "file", "x"), "is a file, not a folder"},
		{filepath.Join(root, "..", "elsewhere"), "not inside the results folder"},
	}
	for _, tc := range tests {
		err := MkdirIn(root, tc.dir)
		if tc.want == "" {
			if err != nil {
				t.Errorf("MkdirIn(%s): %v", tc.dir, err)
			} else if st, err := os.Lstat(tc.dir); err != nil || !st.IsDir() {
				t.Errorf("MkdirIn(%s) made no folder", tc.dir)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("MkdirIn(%s) = %v, want %q", tc.dir, err, tc.want)
		}
	}
	fresh := filepath.Join(root, "not-yet")
	if err := MkdirIn(fresh, filepath.Join(fresh, "curves")); err != nil {
		t.Errorf("MkdirIn in a results folder not made yet: %v", err)
	}
	if _, err := os.Stat(filepath.Join(outside, "x")); err == nil {
		t.Error("a folder was made through a link")
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
