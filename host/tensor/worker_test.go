package tensor

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
)

// TestWorkerLockedThread checks that every closure runs on the same OS
// thread, so per-thread torch state (grad mode) carries from one Do to the
// next, whichever goroutine calls Do.
func TestWorkerLockedThread(t *testing.T) {
	w := NewWorker(1)
	defer w.Close()
	ctx := context.Background()
	var first int
	if err := w.Do(ctx, func() error { first = syscall.Gettid(); return nil }); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var other atomic.Int64
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 10 {
				_ = w.Do(ctx, func() error {
					if tid := syscall.Gettid(); tid != first {
						other.Store(int64(tid))
					}
					return nil
				})
			}
		}()
	}
	wg.Wait()
	if tid := other.Load(); tid != 0 {
		t.Fatalf("a closure ran on thread %d, want %d", tid, first)
	}

	// Grad mode is per thread: switched off in one Do, still off in the next.
	if err := w.Do(ctx, func() error {
		_, err := SetGradEnabled(false)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	var prev bool
	if err := w.Do(ctx, func() error {
		var err error
		prev, err = SetGradEnabled(true)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if prev {
		t.Error("grad mode switched off in one Do was on in the next")
	}
}

func TestWorkerErrorsAndPanics(t *testing.T) {
	w := NewWorker(1)
	defer w.Close()
	ctx := context.Background()
	var tid int
	if err := w.Do(ctx, func() error { tid = syscall.Gettid(); return nil }); err != nil {
		t.Fatal(err)
	}
	sentinel := errors.New("sentinel")
	tests := []struct {
		name    string
		fn      func() error
		is      error
		contain string
	}{
		{"nil", func() error { return nil }, nil, ""},
		{"error", func() error { return sentinel }, sentinel, "sentinel"},
		{"panic string", func() error { panic("boom") }, nil, "panic in torch work: boom"},
		{"panic error", func() error { panic(sentinel) }, nil, "panic in torch work: sentinel"},
		{"nil map write", func() error {
			var m map[int]int
			//lint:ignore SA5000 the test is that the worker turns this panic into an error
			m[1] = 2
			return nil
		}, nil, "panic in torch work"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := w.Do(ctx, tc.fn)
			switch {
			case tc.contain == "" && err != nil:
				t.Fatalf("Do: %v, want nil", err)
			case tc.contain != "" && (err == nil || !strings.Contains(err.Error(), tc.contain)):
				t.Fatalf("Do: %v, want an error containing %q", err, tc.contain)
			case tc.is != nil && !errors.Is(err, tc.is):
				t.Fatalf("Do: %v, want errors.Is %v", err, tc.is)
			}
			// The worker keeps working, on the same thread, with torch usable.
			var again int
			var sum float64
			if err := w.Do(ctx, func() error {
				again = syscall.Gettid()
				s := NewScope()
				defer s.Close()
				v := s.Scalars(s.Sum(s.Ones([]int64{3}, Float32, CPU), Float64))
				if len(v) == 1 {
					sum = v[0]
				}
				return s.Err()
			}); err != nil {
				t.Fatalf("Do after %s: %v", tc.name, err)
			}
			if again != tid || sum != 3 {
				t.Fatalf("after %s: thread %d (want %d), sum %v (want 3)", tc.name, again, tid, sum)
			}
		})
	}
}

func TestWorkerClosed(t *testing.T) {
	w := NewWorker(1)
	if err := w.Do(context.Background(), func() error { return nil }); err != nil {
		t.Fatal(err)
	}
	w.Close()
	w.Close() // idempotent
	// Right after Close the worker goroutine may still be selecting; Do must
	// not run the closure anyway.
	for i := range 200 {
		ran := false
		err := w.Do(context.Background(), func() error { ran = true; return nil })
		if !errors.Is(err, ErrClosed) || ran {
			t.Fatalf("Do #%d after Close: %v (ran %v), want ErrClosed without running", i, err, ran)
		}
	}
	// Close while a job is in progress: the job finishes, later Do calls fail.
	w2 := NewWorker(1)
	started, release := make(chan struct{}), make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- w2.Do(context.Background(), func() error { close(started); <-release; return nil })
	}()
	<-started
	w2.Close()
	close(release)
	if err := <-done; err != nil {
		t.Fatalf("job in progress at Close: %v, want nil", err)
	}
	if err := w2.Do(context.Background(), func() error { return nil }); !errors.Is(err, ErrClosed) {
		t.Fatalf("Do after Close: %v, want ErrClosed", err)
	}
}

func TestWorkerContext(t *testing.T) {
	w := NewWorker(1)
	defer w.Close()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	// An idle worker is ready to take the job too; a cancelled ctx must win
	// every time, not half of them.
	for i := range 200 {
		ran := false
		err := w.Do(ctx, func() error { ran = true; return nil })
		if !errors.Is(err, context.Canceled) || ran {
			t.Fatalf("Do #%d with a cancelled ctx: %v (ran %v), want context.Canceled without running", i, err, ran)
		}
	}
	// Cancelled while fn runs: Do waits for fn and returns its result.
	ctx2, cancel2 := context.WithCancel(context.Background())
	defer cancel2()
	finished := false
	err := w.Do(ctx2, func() error { cancel2(); finished = true; return nil })
	if err != nil || !finished {
		t.Fatalf("ctx cancelled during fn: %v (finished %v), want nil after fn finished", err, finished)
	}
	// Blocked behind a busy worker: the waiting Do gives up with ctx.Err().
	started, release := make(chan struct{}), make(chan struct{})
	busy := make(chan error, 1)
	go func() {
		busy <- w.Do(context.Background(), func() error { close(started); <-release; return nil })
	}()
	<-started
	ctx3, cancel3 := context.WithCancel(context.Background())
	go cancel3()
	ran := false
	if err := w.Do(ctx3, func() error { ran = true; return nil }); !errors.Is(err, context.Canceled) || ran {
		t.Errorf("Do waiting on a busy worker: %v (ran %v), want context.Canceled", err, ran)
	}
	close(release)
	if err := <-busy; err != nil {
		t.Fatal(err)
	}
}

func TestThreads(t *testing.T) {
	w := NewWorker(1)
	defer w.Close()
	var n int
	_ = w.Do(context.Background(), func() error { n = Threads(); return nil })
	if n != 1 {
		t.Errorf("Threads() = %d after NewWorker(1)", n)
	}
}
