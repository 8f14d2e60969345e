package results

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Environment of the helper processes of TestConcurrentProcesses.
const (
	helperPath = "OPTLAB_RESULTS_HELPER_PATH"
	helperID   = "OPTLAB_RESULTS_HELPER_ID"
)

const (
	racers       = 8  // concurrent processes
	appendsEach  = 15 // records each process appends
	contestedRun = 20 // runs every process tries to claim
)

// TestHelperProcess is not a test: TestConcurrentProcesses runs the test
// binary with it selected and the environment set. Each such process
// appends appendsEach records of its own, then tries to claim every one of
// contestedRun runs, "runs" each run it gets (appends its record) and
// prints its key.
func TestHelperProcess(t *testing.T) {
	path := os.Getenv(helperPath)
	if path == "" {
		t.Skip("helper process only")
	}
	id := os.Getenv(helperID)
	for i := range appendsEach {
		if err := Append(path, rec(fmt.Sprintf("p%s-%d", id, i), "SAM", int64(i), nil, t0)); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		if i == appendsEach/2 {
			// Interleave the appends with the other processes' claims.
			time.Sleep(time.Millisecond)
		}
	}
	for k := range contestedRun {
		key := fmt.Sprintf("run-%d", k)
		ok, err := Claim(path, key, Owner(), OwnerGone)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		if !ok {
			continue
		}
		if err := Append(path, rec(key, "SAM", int64(k), nil, t0)); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		fmt.Println("claimed", key)
	}
	os.Exit(0)
}

// runHelpers runs n copies of the test binary at once, each running only
// the helper test named test with the environment env(p) added (p is its
// index), waits for all, fails on any failure and returns their outputs.
func runHelpers(t *testing.T, n int, test string, env func(p int) []string) []bytes.Buffer {
	t.Helper()
	var wg sync.WaitGroup
	outs := make([]bytes.Buffer, n)
	errs := make([]error, n)
	for p := range n {
		cmd := exec.Command(os.Args[0], "-test.run=^"+test+"$", "-test.count=1")
		cmd.Env = append(os.Environ(), env(p)...)
		cmd.Stdout = &outs[p]
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		wg.Go(func() {
			if err := cmd.Wait(); err != nil {
				errs[p] = fmt.Errorf("helper %d: %w: %s", p, err, stderr.String())
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	return outs
}

// TestConcurrentProcesses races several processes appending to one results
// file and claiming the same runs: no line may be lost and every run must be
// claimed exactly once.
func TestConcurrentProcesses(t *testing.T) {
	path := filepath.Join(t.TempDir(), "exp", FileName)
	outs := runHelpers(t, racers, "TestHelperProcess", func(p int) []string {
		return []string{helperPath + "=" + path, helperID + "=" + strconv.Itoa(p)}
	})
	claimedBy := make(map[string][]int)
	for p := range racers {
		sc := bufio.NewScanner(&outs[p])
		for sc.Scan() {
			if key, ok := strings.CutPrefix(sc.Text(), "claimed "); ok {
				claimedBy[key] = append(claimedBy[key], p)
			}
		}
	}
	for k := range contestedRun {
		key := fmt.Sprintf("run-%d", k)
		if got := claimedBy[key]; len(got) != 1 {
			t.Errorf("run %s claimed by processes %v, want exactly one", key, got)
		}
	}
	recs, err := Read(path)
	if err != nil {
		t.Fatal(err)
	}
	if want := racers*appendsEach + contestedRun; len(recs) != want {
		t.Errorf("%d records, want %d: appends were lost or duplicated", len(recs), want)
	}
	seen := make(map[string]bool)
	for _, r := range recs {
		if seen[r.Key] {
			t.Errorf("record %s twice", r.Key)
		}
		seen[r.Key] = true
	}
	for p := range racers {
		for i := range appendsEach {
			if key := fmt.Sprintf("p%d-%d", p, i); !seen[key] {
				t.Errorf("record %s lost", key)
			}
		}
	}
	claims, err := Claims(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(claims) != contestedRun {
		t.Errorf("%d claims recorded, want %d", len(claims), contestedRun)
	}
}

// TestAppendConcurrentGoroutines checks that Append serialises within one
// process too (every Lock call opens its own lock file description).
func TestAppendConcurrentGoroutines(t *testing.T) {
	path := filepath.Join(t.TempDir(), FileName)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 10 {
				if err := Append(path, rec(fmt.Sprintf("g%d-%d", g, i), "SAM", 1, nil, t0)); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	if recs, err := Read(path); err != nil || len(recs) != 80 {
		t.Fatalf("%d records (%v), want 80", len(recs), err)
	}
}

func TestLock(t *testing.T) {
	path := filepath.Join(t.TempDir(), "new", FileName)
	unlock, err := Lock(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path + ".lock"); err != nil {
		t.Fatalf("lock file: %v", err)
	}
	got := make(chan struct{})
	go func() {
		second, err := Lock(path)
		if err != nil {
			t.Error(err)
		} else {
			second()
		}
		close(got)
	}()
	select {
	case <-got:
		t.Fatal("a second Lock did not wait for the first")
	case <-time.After(100 * time.Millisecond):
	}
	unlock()
	unlock() // idempotent
	select {
	case <-got:
	case <-time.After(10 * time.Second):
		t.Fatal("a second Lock still waits after unlock")
	}
	if _, err := Lock(filepath.Join(path+".lock", "x", FileName)); err == nil {
		t.Errorf("Lock below a file: no error")
	}
}

func TestClaim(t *testing.T) {
	never := func(string) bool { return false }
	always := func(string) bool { return true }
	type step struct {
		op    string // "claim", "release" or "finish"
		key   string
		owner string
		stale func(string) bool
		want  bool // claim result
	}
	tests := []struct {
		name   string
		steps  []step
		claims map[string]string
	}{
		{"unclaimed", []step{{"claim", "a", "h:1", nil, true}}, map[string]string{"a": "h:1"}},
		{"again by owner", []step{{"claim", "a", "h:1", nil, true}, {"claim", "a", "h:1", nil, true}}, map[string]string{"a": "h:1"}},
		{"held", []step{{"claim", "a", "h:1", nil, true}, {"claim", "a", "h:2", never, false}, {"claim", "a", "h:2", nil, false}}, map[string]string{"a": "h:1"}},
		{"taken over", []step{{"claim", "a", "h:1", nil, true}, {"claim", "a", "h:2", always, true}}, map[string]string{"a": "h:2"}},
		{"stale asked about the holder", []step{{"claim", "a", "h:1", nil, true}, {"claim", "a", "h:2", func(o string) bool { return o == "h:1" }, true}}, map[string]string{"a": "h:2"}},
		{"released", []step{{"claim", "a", "h:1", nil, true}, {"release", "a", "h:1", nil, false}, {"claim", "a", "h:2", nil, true}}, map[string]string{"a": "h:2"}},
		{"release by another", []step{{"claim", "a", "h:1", nil, true}, {"release", "a", "h:2", nil, false}, {"claim", "a", "h:2", nil, false}}, map[string]string{"a": "h:1"}},
		{"finished", []step{{"finish", "a", "", nil, false}, {"claim", "a", "h:1", always, false}}, map[string]string{}},
		{"several", []step{{"claim", "a", "h:1", nil, true}, {"claim", "b", "h:2", nil, true}, {"release", "a", "h:1", nil, false}}, map[string]string{"b": "h:2"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), FileName)
			for i, s := range tc.steps {
				switch s.op {
				case "claim":
					got, err := Claim(path, s.key, s.owner, s.stale)
					if err != nil || got != s.want {
						t.Fatalf("step %d: Claim(%s, %s) = %v, %v; want %v", i, s.key, s.owner, got, err, s.want)
					}
				case "release":
					if err := Release(path, s.key, s.owner); err != nil {
						t.Fatalf("step %d: %v", i, err)
					}
				case "finish":
					if err := Append(path, rec(s.key, "SAM", 1, nil, t0)); err != nil {
						t.Fatal(err)
					}
				}
			}
			claims, err := Claims(path)
			if err != nil {
				t.Fatal(err)
			}
			if len(claims) != len(tc.claims) {
				t.Errorf("claims %v, want %v", claims, tc.claims)
			}
			for k, o := range tc.claims {
				if claims[k] != o {
					t.Errorf("claims %v, want %v", claims, tc.claims)
				}
			}
		})
	}
}

func TestClaimErrors(t *testing.T) {
	tests := []struct {
		name   string
		claims string // contents of the claims file
		key    string
		owner  string
		want   string
	}{
		{"empty key", "", "", "h:1", "empty run key"},
		{"empty owner", "", "a", "", "empty run key"},
		{"bad claims", `{"key":"a","owner":"h:1"}` + "\n{x\n", "b", "h:1", FileName + ".claims:2: "},
		{"claim without owner", `{"key":"a"}` + "\n", "b", "h:1", FileName + ".claims:1: claim without key or owner"},
		{"claimed twice", `{"key":"a","owner":"h:1"}` + "\n" + `{"key":"a","owner":"h:2"}` + "\n", "b", "h:1", `.claims:2: run "a" claimed twice`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), FileName)
			if tc.claims != "" {
				if err := os.WriteFile(path+".claims", []byte(tc.claims), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			ok, err := Claim(path, tc.key, tc.owner, nil)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Claim = %v, %v; want an error containing %q", ok, err, tc.want)
			}
		})
	}
}

func TestOwnerGone(t *testing.T) {
	host, err := os.Hostname()
	if err != nil {
		t.Skip(err)
	}
	// A process that has exited.
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	dead := cmd.Process.Pid
	tests := []struct {
		owner string
		want  bool
	}{
		{Owner(), false},
		{host + ":" + strconv.Itoa(dead), true},
		{"other-host-" + host + ":" + strconv.Itoa(dead), false},
		{host + ":x", false},
		{host + ":0", false},
		{host + ":-1", false},
		{"no-pid", false},
		{"", false},
	}
	for _, tc := range tests {
		if got := OwnerGone(tc.owner); got != tc.want {
			t.Errorf("OwnerGone(%q) = %v, want %v", tc.owner, got, tc.want)
		}
	}
	if o := Owner(); !strings.HasSuffix(o, ":"+strconv.Itoa(os.Getpid())) || !slices.Contains([]string{host}, o[:strings.LastIndexByte(o, ':')]) {
		t.Errorf("Owner() = %q, want %s:%d", o, host, os.Getpid())
	}
}
