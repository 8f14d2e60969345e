// Package tensor is optlab's only door to libtorch (through gotch). It hides
// gotch's sharp edges from the rest of the host:
//
//   - every torch call runs on one goroutine locked to its OS thread (a
//     Worker), because libtorch's grad mode, CUDA device and gotch's error
//     slot are per OS thread;
//   - tensors have explicit lifetimes: temporaries belong to a Scope that
//     drops them all, and only tensors moved out with Keep outlive it;
//   - ops return errors (a Scope keeps the first one and turns later ops into
//     no-ops), never exit the process;
//   - seeds and thread counts go through libtch's C functions;
//   - no in-place op is ever applied to a temporary.
package tensor

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"runtime/debug"
)

// Worker owns the OS thread that every torch call runs on.
type Worker struct {
	jobs chan func()
	quit chan struct{}
}

// NewWorker starts a worker goroutine locked to its OS thread, with torch's
// intra-op thread count set to threads (≤ 0: the number of CPU cores).
func NewWorker(threads int) *Worker {
	w := &Worker{jobs: make(chan func()), quit: make(chan struct{})}
	ready := make(chan struct{})
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		setThreads(threads)
		close(ready)
		for {
			select {
			case job := <-w.jobs:
				job()
			case <-w.quit:
				return
			}
		}
	}()
	<-ready
	return w
}

// ErrClosed is returned by Do after Close.
var ErrClosed = errors.New("tensor worker closed")

// Do runs fn on the worker's thread and returns its error. A panic inside fn
// is recovered and returned as an error with its stack. Do waits for fn to
// finish even when ctx is cancelled meanwhile (torch calls cannot be
// interrupted); a ctx cancelled before fn starts returns ctx.Err().
func (w *Worker) Do(ctx context.Context, fn func() error) error {
	// select picks at random among ready cases: an idle worker must not win
	// over a ctx already cancelled or a worker already closed.
	if err := ctx.Err(); err != nil {
		return err
	}
	select {
	case <-w.quit:
		return ErrClosed
	default:
	}
	done := make(chan error, 1)
	job := func() {
		defer func() {
			if r := recover(); r != nil {
				done <- fmt.Errorf("panic in torch work: %v\n%s", r, debug.Stack())
			}
		}()
		done <- fn()
	}
	select {
	case w.jobs <- job:
	case <-ctx.Done():
		return ctx.Err()
	case <-w.quit:
		return ErrClosed
	}
	return <-done
}

// Close stops the worker after the job in progress.
func (w *Worker) Close() {
	select {
	case <-w.quit:
	default:
		close(w.quit)
	}
}
