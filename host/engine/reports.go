package engine

import (
	"context"
	"fmt"
	"sync/atomic"

	"github.com/optlab/optlab/host/tensor"
)

// counters are the engine's counts of work, safe to read from any
// goroutine.
type counters struct {
	execs, ops, blocking atomic.Int64
	gradSamples          atomic.Int64
	forwardSamples       atomic.Int64
	h2d0                 int64 // tensor.HostToDevice() when the engine was made
}

// Counters are what an engine has done so far, for benchmarks and for the
// tests of "one Exec and no blocking read per step".
type Counters struct {
	// Execs is the number of Exec calls, Ops the number of ops they ran.
	Execs, Ops int64
	// BlockingReads is the number of device→host reads the host waited
	// for: one per Exec that had Read ops, one per check after an op with
	// Config.DebugNonFinite, and on a GPU one per delivery of a step's
	// reports (Reports.Values); on the CPU reports are read from host
	// memory and not counted.
	BlockingReads int64
	// HostToDevice is the number of copies of host memory to the device
	// (tensor.HostToDevice: every tensor made from Go memory, every CPU
	// tensor copied to a GPU) since the engine was made. The count is the
	// process's, not only this engine's: read it where one run is
	// training at a time (tests, benchmarks).
	HostToDevice int64
	// GradSamples counts the gradient evaluations: the samples of every
	// forward-backward pass (Grad: one per sample of its part of the
	// batch; JointGrad: one per sample and member), the cost a
	// comparison at equal compute counts. Forward-only passes (UpdateBN,
	// evaluation, a Grad with OutLosses and no Out) are not in it; a
	// Grad on a ranked sub-batch (Rank, Keep) counts its Keep samples.
	GradSamples int64
	// ForwardSamples counts the samples of forward-only Grad passes (per-
	// sample losses with no gradient, OutLosses with Out = 0; protocol
	// minor 10), which cost about a third of a gradient evaluation each.
	ForwardSamples int64
}

// Counters returns the engine's counters.
func (e *Engine) Counters() Counters {
	return Counters{Execs: e.count.execs.Load(), Ops: e.count.ops.Load(), BlockingReads: e.count.blocking.Load(),
		HostToDevice: tensor.HostToDevice() - e.count.h2d0, GradSamples: e.count.gradSamples.Load(),
		ForwardSamples: e.count.forwardSamples.Load()}
}

// Reports are the metrics that the Report ops of one training step
// reported: their names in op order and their values packed in one tensor
// on the device, with a device-side flag that is set when any of them is
// not finite. Read them with Values, which frees the tensor; a Reports
// that is never read is freed with Drop.
type Reports struct {
	// Names are the reported metrics, in the order of their Report ops.
	Names []string

	e      *Engine
	packed tensor.T // float64: the values, then the non-finite flag (0 or 1)
	vals   map[string]float64
	bad    bool
}

// TakeReports returns the metrics reported since the last BeginStep (or
// TakeReports) and forgets them: it packs them on the device without
// reading them back. Call it after the step's programs, before the next
// BeginStep.
func (e *Engine) TakeReports(ctx context.Context) (*Reports, error) {
	r := &Reports{e: e}
	err := e.w.Do(ctx, func() error {
		rs := e.reports
		e.reports = nil
		defer dropReports(rs)
		if len(rs) == 0 {
			return nil
		}
		s := tensor.NewScope()
		defer s.Close()
		parts := make([]tensor.T, len(rs))
		for i, x := range rs {
			r.Names = append(r.Names, x.name)
			parts[i] = s.View(x.t, 1)
		}
		vals := s.Cat(0, parts...)
		bad := s.Sub(s.ScalarTensor(1, e.cfg.Device), s.Cast(s.AllFinite(vals), tensor.Float64))
		packed := s.Cat(0, vals, s.View(bad, 1))
		if err := s.Err(); err != nil {
			return fmt.Errorf("packing the step's reports: %w", err)
		}
		r.packed = s.Keep(packed)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return r, nil
}

// Values returns the reported metrics by name. On the CPU it reads them
// from host memory; on a GPU it copies them to the host, which waits for
// the device to finish the work queued so far (the training loop calls it
// one step late, after it queued the next step). Values reads once: later
// calls return the same map.
func (r *Reports) Values(ctx context.Context) (map[string]float64, error) {
	if r == nil {
		return map[string]float64{}, nil
	}
	if r.vals != nil {
		return r.vals, nil
	}
	r.vals = map[string]float64{}
	if !r.packed.Valid() {
		return r.vals, nil
	}
	var v []float64
	err := r.e.w.Do(ctx, func() error {
		defer r.packed.Drop()
		if r.e.cfg.Device.IsCUDA() {
			r.e.count.blocking.Add(1)
		}
		s := tensor.NewScope()
		defer s.Close()
		v = s.Float64s(r.packed)
		return s.Err()
	})
	if err != nil {
		r.vals = nil
		return nil, fmt.Errorf("reading the step's reports: %w", err)
	}
	if len(v) != len(r.Names)+1 {
		return nil, fmt.Errorf("reading the step's reports: %d values for %d metrics", len(v), len(r.Names))
	}
	for i, n := range r.Names {
		r.vals[n] = v[i]
	}
	r.bad = v[len(r.Names)] != 0
	return r.vals, nil
}

// NonFinite tells, after Values, whether the device flagged a reported
// value as NaN or ±Inf.
func (r *Reports) NonFinite() bool { return r != nil && r.bad }

// Drop frees the reports' tensor without reading it (a no-op after
// Values).
func (r *Reports) Drop() {
	if r == nil || !r.packed.Valid() {
		return
	}
	_ = r.e.w.Do(context.Background(), func() error {
		r.packed.Drop()
		return nil
	})
}

// dropReports frees reported tensors (on the worker).
func dropReports(rs []report) {
	for i := range rs {
		rs[i].t.Drop()
	}
}
