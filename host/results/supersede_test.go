package results

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

// staleLR reports a record made with another lr than lr.
func staleLR(lr float64) func(Record) bool {
	return func(r Record) bool { return len(ConfigDiff(r.Config, map[string]any{"lr": lr})) > 0 }
}

// TestSupersedeDecidesOnDisk (hardening 01): two hosts on an edited grid
// both read the old record of a run; the first supersedes it and trains the
// run again. The second must neither move the fresh record nor the fresh
// run's files: Supersede decides under the lock on the file as it is then.
func TestSupersedeDecidesOnDisk(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, FileName)
	dst := filepath.Join(dir, "superseded", FileName)
	if err := Append(path, rec("k1", "SAM", 1, map[string]any{"lr": 0.05}, t0)); err != nil {
		t.Fatal(err)
	}
	if err := Append(path, rec("k2", "SAM", 2, map[string]any{"lr": 0.05}, t0)); err != nil {
		t.Fatal(err)
	}
	// Several hosts supersede k1 at once: exactly one moves it (and its
	// files); the others find nothing left to move.
	var movedBy, asides atomic.Int32
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			n, fresh, err := Supersede(path, "k1", dst, staleLR(0.1), func() error { asides.Add(1); return nil })
			if err != nil || fresh {
				t.Errorf("Supersede: %d, fresh %v, %v", n, fresh, err)
			}
			if n > 0 {
				movedBy.Add(1)
			}
		}()
	}
	wg.Wait()
	if movedBy.Load() != 1 || asides.Load() != 1 {
		t.Fatalf("%d hosts moved the record and %d moved its files, want 1 and 1", movedBy.Load(), asides.Load())
	}
	// The winner trains k1 again with lr 0.1; a host that read the old
	// record before must now leave the fresh one where it is.
	if err := Append(path, rec("k1", "SAM", 1, map[string]any{"lr": 0.1}, t0.Add(1))); err != nil {
		t.Fatal(err)
	}
	n, fresh, err := Supersede(path, "k1", dst, staleLR(0.1), func() error { t.Error("files of a fresh run moved"); return nil })
	if err != nil || n != 0 || !fresh {
		t.Errorf("Supersede of a fresh record: moved %d, fresh %v, %v; want 0, true", n, fresh, err)
	}
	now, err := Read(path)
	if err != nil {
		t.Fatal(err)
	}
	old, err := Read(dst)
	if err != nil {
		t.Fatal(err)
	}
	if len(now) != 2 || len(old) != 1 || old[0].Key != "k1" || old[0].Config["lr"] != 0.05 {
		t.Errorf("results %v, superseded %v; want k2 and fresh k1, and old k1", now, old)
	}
}

// TestSupersedeAsideFails: when the run's files cannot be moved, its record
// stays, so the run still counts as finished and a later Supersede retries.
func TestSupersedeAsideFails(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, FileName)
	dst := filepath.Join(dir, "superseded", FileName)
	if err := Append(path, rec("k1", "SAM", 1, map[string]any{"lr": 0.05}, t0)); err != nil {
		t.Fatal(err)
	}
	boom := errors.New("boom")
	if _, _, err := Supersede(path, "k1", dst, staleLR(0.1), func() error { return boom }); !errors.Is(err, boom) {
		t.Fatalf("err = %v, want boom", err)
	}
	if done, _ := Finished(path); !done["k1"] {
		t.Error("record moved although its files were not")
	}
	if _, err := os.Stat(dst); err == nil {
		t.Error("superseded file written although the files were not moved")
	}
	if n, _, err := Supersede(path, "k1", dst, staleLR(0.1), nil); n != 1 || err != nil {
		t.Errorf("retry: moved %d, %v", n, err)
	}
}

// TestSupersedeResumesWithoutDuplicate: a kill between Supersede's two
// writes leaves the record in both files; the next Supersede removes it from
// the results file without copying it a second time.
func TestSupersedeResumesWithoutDuplicate(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, FileName)
	dst := filepath.Join(dir, "superseded", FileName)
	if err := Append(path, rec("k1", "SAM", 1, map[string]any{"lr": 0.05}, t0)); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(path)
	os.MkdirAll(filepath.Dir(dst), 0o755)
	if err := os.WriteFile(dst, b, 0o644); err != nil { // the first write done, then killed
		t.Fatal(err)
	}
	if n, _, err := Supersede(path, "k1", dst, staleLR(0.1), nil); n != 1 || err != nil {
		t.Fatalf("moved %d, %v", n, err)
	}
	got, _ := os.ReadFile(dst)
	if c := strings.Count(string(got), `"key":"k1"`); c != 1 {
		t.Errorf("superseded file holds the record %d times:\n%s", c, got)
	}
	if done, _ := Finished(path); done["k1"] {
		t.Error("record still in the results file")
	}
}

// TestClaimFinishedKeys: Claim parses only the lines that name its run, and
// still finds a finished run whose key JSON writes escaped (as older,
// HTML-escaping writers did), and not a run that only failed.
func TestClaimFinishedKeys(t *testing.T) {
	path := filepath.Join(t.TempDir(), FileName)
	for _, k := range []string{"method=A/seed=1", `method=A<&>"b/seed=1`, "method=A/seed=10"} {
		if err := Append(path, rec(k, "A", 1, nil, t0)); err != nil {
			t.Fatal(err)
		}
	}
	failed := rec("method=A/seed=2", "A", 2, nil, t0)
	failed.Status, failed.Error = StatusFailed, "boom"
	if err := Append(path, failed); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(path)
	esc := strings.NewReplacer("<", `\u003c`, ">", `\u003e`, "&", `\u0026`).Replace(string(b))
	if err := os.WriteFile(path, []byte(esc), 0o644); err != nil {
		t.Fatal(err)
	}
	for key, want := range map[string]bool{"method=A/seed=1": false, `method=A<&>"b/seed=1`: false, "method=A/seed=2": true, "method=A/seed=3": true} {
		if got, err := Claim(path, key, "me", nil); got != want || err != nil {
			t.Errorf("Claim(%q) = %v, %v; want %v", key, got, err, want)
		}
	}
}
