package results

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Environment of the helper processes of TestStoreHosts.
const (
	storeHelperDir = "OPTLAB_STORE_HELPER_DIR"
	storeHelperLR  = "OPTLAB_STORE_HELPER_LR"
	storeHelperID  = "OPTLAB_STORE_HELPER_ID"
)

const (
	storeHosts = 6  // concurrent host processes
	storeRuns  = 12 // runs of the grid they share
)

// storeKey is the key of run k of TestStoreHosts's grid.
func storeKey(k int) string { return fmt.Sprintf("method=SAM/arch=cnn/seed=%d", k) }

// TestStoreHelperProcess is not a test: TestStoreHosts runs the test binary
// with it selected and the environment set. Each such process is a host
// working through the grid as host run does: it opens the results folder,
// and for each run Begins it, "trains" it (writes its curve) and Finishes
// it with the configuration lr. It prints what it did with each run.
func TestStoreHelperProcess(t *testing.T) {
	dir := os.Getenv(storeHelperDir)
	if dir == "" {
		t.Skip("helper process only")
	}
	lr, _ := strconv.ParseFloat(os.Getenv(storeHelperLR), 64)
	id, _ := strconv.Atoi(os.Getenv(storeHelperID))
	fail := func(err error) {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	l := Layout{Dir: dir}
	s, _, err := Open(l, StoreOptions{Owner: fmt.Sprintf("host%d", id)})
	if err != nil {
		fail(err)
	}
	cfg := map[string]any{"train.optimizer.lr": lr}
	for k := range storeRuns {
		key := storeKey((k + id) % storeRuns) // each host starts elsewhere
		st, err := s.Begin(context.Background(), key, cfg)
		if err != nil {
			fail(err)
		}
		if st.Superseded != "" {
			fmt.Println("superseded", key)
		}
		if !st.Train() {
			fmt.Println("skipped", key, st.Skip)
			continue
		}
		if err := os.MkdirAll(l.Curves(), 0o755); err != nil {
			fail(err)
		}
		if err := os.WriteFile(l.Curve(key), []byte(fmt.Sprint(lr)), 0o644); err != nil {
			fail(err)
		}
		if err := s.Finish(rec(key, "SAM", int64(k), cfg, t0)); err != nil {
			fail(err)
		}
		fmt.Println("trained", key)
	}
	os.Exit(0)
}

// hosts runs n host processes on the results folder dir with learning rate
// lr and returns, by run key, the hosts' lines about it.
func hosts(t *testing.T, dir string, lr float64) map[string][]string {
	t.Helper()
	outs := runHelpers(t, storeHosts, "TestStoreHelperProcess", func(p int) []string {
		return []string{storeHelperDir + "=" + dir, storeHelperLR + "=" + fmt.Sprint(lr), storeHelperID + "=" + strconv.Itoa(p)}
	})
	did := map[string][]string{}
	for p := range storeHosts {
		sc := bufio.NewScanner(&outs[p])
		for sc.Scan() {
			f := strings.Fields(sc.Text())
			if len(f) >= 2 {
				did[f[1]] = append(did[f[1]], f[0])
			}
		}
	}
	return did
}

// count is how many of lines are what.
func count(lines []string, what string) int {
	n := 0
	for _, l := range lines {
		if l == what {
			n++
		}
	}
	return n
}

// TestStoreHosts races several host processes through one experiment's
// grid, twice: every run is trained by exactly one host; then, with the
// configuration changed, every run is superseded once (its old record and
// curve kept in superseded/, none lost) and trained again once; no claim
// is left behind.
func TestStoreHosts(t *testing.T) {
	l := Layout{Dir: filepath.Join(t.TempDir(), "exp")}
	for round, lr := range []float64{0.1, 0.05} {
		did := hosts(t, l.Dir, lr)
		files, err := l.RecordFiles()
		if err != nil {
			t.Fatal(err)
		}
		recs, err := Read(files...)
		if err != nil {
			t.Fatal(err)
		}
		trained := map[string]int{}
		for _, r := range recs {
			if r.Config["train.optimizer.lr"] == lr {
				trained[r.Key]++
			}
		}
		for k := range storeRuns {
			key := storeKey(k)
			if n := count(did[key], "trained"); n != 1 || trained[key] != 1 {
				t.Errorf("round %d: %s trained by %d hosts, recorded %d times; want once: %v", round, key, n, trained[key], did[key])
			}
			if n := count(did[key], "superseded"); n != round {
				t.Errorf("round %d: %s superseded %d times, want %d: %v", round, key, n, round, did[key])
			}
			if b, err := os.ReadFile(l.Curve(key)); err != nil || string(b) != fmt.Sprint(lr) {
				t.Errorf("round %d: %s's curve %q, %v; want the new run's", round, key, b, err)
			}
		}
		if len(recs) != storeRuns {
			t.Errorf("round %d: %d records in %v, want %d (old ones superseded)", round, len(recs), files, storeRuns)
		}
		for _, f := range files {
			if claims, err := Claims(f); err != nil || len(claims) != 0 {
				t.Errorf("round %d: claims left in %s: %v, %v", round, f, claims, err)
			}
		}
	}
	old, err := Read(l.SupersededRecords())
	if err != nil {
		t.Fatal(err)
	}
	kept, _ := filepath.Glob(filepath.Join(l.Superseded(), CurvesDir, "*"))
	if len(old) != storeRuns || len(kept) != storeRuns {
		t.Errorf("superseded: %d records and %d curves, want %d each", len(old), len(kept), storeRuns)
	}
}

// Begin on a store whose context is done claims nothing and says why.
func TestStoreBeginCancelled(t *testing.T) {
	s, _, err := Open(Layout{Dir: t.TempDir()}, StoreOptions{Owner: "me"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancelCause(context.Background())
	cancel(fmt.Errorf("interrupt"))
	if _, err := s.Begin(ctx, "k", nil); err == nil || err.Error() != "interrupt" {
		t.Errorf("Begin: %v, want the context's cause", err)
	}
	if claims, err := Claims(s.File()); err != nil || len(claims) != 0 {
		t.Errorf("claims %v, %v; want none", claims, err)
	}
}

// Finish and Abandon on a store whose context is done (the host was
// interrupted) still wait for a lock that another host holds briefly, so
// that neither the finished record nor the claim's release is dropped; a
// lock held past StopGrace still ends the wait.
func TestStoreFinishAfterStop(t *testing.T) {
	ctx, cancel := context.WithCancelCause(context.Background())
	s, _, err := Open(Layout{Dir: t.TempDir()}, StoreOptions{Owner: "me", Wait: LockWait{Ctx: ctx}})
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"done", "dropped"} {
		if st, err := s.Begin(ctx, k, nil); err != nil || st.Skip != NotSkipped {
			t.Fatalf("Begin(%s): %+v, %v", k, st, err)
		}
	}
	cancel(fmt.Errorf("interrupt"))
	// Another holder for a moment: the waits outlast it.
	holdFor := func(d time.Duration) {
		unlock, err := Lock(s.File())
		if err != nil {
			t.Fatal(err)
		}
		time.AfterFunc(d, unlock)
	}
	holdFor(300 * time.Millisecond)
	if err := s.Finish(Record{Experiment: "e", Key: "done", Method: "m", Status: StatusOK}); err != nil {
		t.Fatalf("Finish after the interrupt: %v", err)
	}
	holdFor(300 * time.Millisecond)
	if err := s.Abandon("dropped"); err != nil {
		t.Fatalf("Abandon after the interrupt: %v", err)
	}
	recs, err := Read(s.File())
	if err != nil || len(recs) != 1 || recs[0].Key != "done" {
		t.Errorf("records %v, %v; want the finished one", recs, err)
	}
	if claims, err := Claims(s.File()); err != nil || len(claims) != 0 {
		t.Errorf("claims %v, %v; want none left", claims, err)
	}
	// A holder that does not let go: the wait ends after StopGrace.
	holdFor(StopGrace + 5*time.Second)
	start := time.Now()
	if err := s.Abandon("dropped"); err == nil {
		t.Error("Abandon waited past a stuck holder without an error")
	}
	if d := time.Since(start); d > StopGrace+2*time.Second {
		t.Errorf("Abandon waited %v for a stuck holder, want about %v", d, StopGrace)
	}
}

// A run that another host failed after this store was opened is not
// trained again here (it would fail the same way, or resume the failed
// attempt's state); a store opened later retries it, and a failure
// recorded before this store was opened does not stop it either.
func TestStoreSkipsRunsFailedSinceOpen(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	open := func(owner string) *Store {
		s, _, err := Open(Layout{Dir: dir}, StoreOptions{Owner: owner})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	a, b := open("a"), open("b")
	if st, err := b.Begin(ctx, "k", nil); err != nil || !st.Train() {
		t.Fatalf("b.Begin: %+v, %v", st, err)
	}
	if err := b.Finish(Record{Experiment: "e", Key: "k", Method: "m", Status: StatusFailed, Error: "diverged"}); err != nil {
		t.Fatal(err)
	}
	st, err := a.Begin(ctx, "k", nil)
	if err != nil || st.Skip != SkipFailed {
		t.Fatalf("a.Begin after b's failure: %+v, %v; want SkipFailed", st, err)
	}
	if claims, err := Claims(a.File()); err != nil || len(claims) != 0 {
		t.Errorf("claims %v, %v: the skipped run is still claimed", claims, err)
	}
	if st, err := a.Begin(ctx, "other", nil); err != nil || !st.Train() {
		t.Errorf("a.Begin of another run: %+v, %v", st, err)
	}
	c := open("c")
	if st, err := c.Begin(ctx, "k", nil); err != nil || !st.Train() {
		t.Errorf("a store opened after the failure: %+v, %v; want to retry it", st, err)
	}
}
