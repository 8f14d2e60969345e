package results

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"testing"
)

// TestKeepAsideUniqueNames (hardening 02, 10): the same run's curve and
// TensorBoard folder kept aside many times within one second, by one host
// after another and by several at once, each get their own name: none is
// overwritten and none fails because the name is taken.
func TestKeepAsideUniqueNames(t *testing.T) {
	dir := t.TempDir()
	curve := filepath.Join("curves", "k.csv")
	tb := filepath.Join("tb", "k")
	make1 := func(i int) {
		t.Helper()
		os.MkdirAll(filepath.Join(dir, "curves"), 0o755)
		if err := os.WriteFile(filepath.Join(dir, curve), []byte(fmt.Sprint(i)), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Join(dir, tb), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, tb, "events"), []byte(fmt.Sprint(i)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	const n = 5
	for i := range n {
		make1(i)
		for _, rel := range []string{curve, tb} {
			if _, err := (Layout{Dir: dir}).KeepAside(filepath.Join(dir, rel)); err != nil {
				t.Fatalf("edit %d: %v", i, err)
			}
		}
	}
	// Several hosts keeping aside different runs' folders of one name.
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		src := filepath.Join("tb", fmt.Sprint("p", i))
		os.MkdirAll(filepath.Join(dir, src), 0o755)
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := Layout{Dir: dir}.KeepAside(filepath.Join(dir, src))
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	read := func(glob string) []string {
		files, _ := filepath.Glob(filepath.Join(dir, SupersededDir, glob))
		var got []string
		for _, f := range files {
			b, _ := os.ReadFile(f)
			got = append(got, string(b))
		}
		sort.Strings(got)
		return got
	}
	if got := read(curve + ".*"); fmt.Sprint(got) != "[0 1 2 3 4]" {
		t.Errorf("kept curves hold %v, want one for each of the 5 edits", got)
	}
	if got := read(filepath.Join(tb+".*", "events")); fmt.Sprint(got) != "[0 1 2 3 4]" {
		t.Errorf("kept TensorBoard folders hold %v, want one for each of the 5 edits", got)
	}
}
