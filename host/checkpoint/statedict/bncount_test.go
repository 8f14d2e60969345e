package statedict

import (
	"context"
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/optlab/optlab/host/checkpoint"
	"github.com/optlab/optlab/host/engine"
	"github.com/optlab/optlab/host/tensor"
	"github.com/optlab/optlab/internal/torchtwin"
	"github.com/optlab/optlab/sdk/optim"
)

// setBatch makes x (n samples of ckptShape) the current batch of every
// member of e, labelled 0, 1, …
func setBatch(t *testing.T, e *engine.Engine, x []float32, shape []int64) {
	t.Helper()
	y := make([]int64, shape[0])
	for i := range y {
		y[i] = int64(i % 10)
	}
	err := e.Worker().Do(context.Background(), func() error {
		s := tensor.NewScope()
		defer s.Close()
		xt := s.Keep(s.FromFloat32(x, shape, e.Device()))
		yt := s.Keep(s.FromInt64(y, []int64{shape[0]}, e.Device()))
		if err := s.Err(); err != nil {
			return err
		}
		for m := range e.Members() {
			e.SetBatch(m, xt, yt)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// savedCounters returns the num_batches_tracked values a checkpoint holds,
// by name, failing when a model with BatchNorm has none.
func savedCounters(t *testing.T, path string) map[string]int64 {
	t.Helper()
	ts, _, err := checkpoint.Read(path)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int64{}
	for name, c := range ts {
		if strings.HasSuffix(name, numBatchesTracked) {
			if c.DType != checkpoint.I64 || len(c.Shape) != 0 {
				t.Fatalf("%s: %s%v, want an I64 scalar", name, c.DType, c.Shape)
			}
			out[name] = c.I64[0]
		}
	}
	if len(out) == 0 {
		t.Fatalf("%s has no num_batches_tracked", path)
	}
	return out
}

// TestBNBatchesTracked: the num_batches_tracked a checkpoint saves is the
// number of passes that updated each member's BatchNorm statistics, as
// PyTorch counts them (issue 39): one per Grad with BNUpdate, none with
// BNFreeze, one per member of a JointGrad with BNUpdate; UpdateBN sets the
// number of batches it passed; a Copy with BN carries the count, Export
// and SavePredictive write it, and Import and Load restore it.
func TestBNBatchesTracked(t *testing.T) {
	w := tensor.NewWorker(2)
	defer w.Close()
	ctx := context.Background()
	e := ckptEngine(t, w, tensor.CPU, 11, "cnn", "cnn")
	x, shape := ckptInput(8, 7)
	setBatch(t, e, x, shape)
	bnTrain(t, e, 20, 5, 8) // UpdateBN: 3 batches
	hs := optim.NewHandles()
	snap, avg := hs.New("snap"), hs.New("avg")
	exec := func(p *optim.Program) {
		t.Helper()
		if _, err := e.Exec(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	want := func(what string, h optim.Vec, n int64) {
		t.Helper()
		if got := e.BNBatches(h); got != n {
			t.Errorf("%s: BNBatches(%d) = %d, want %d", what, h, got, n)
		}
	}
	want("a new engine", optim.ParamsOf(0), 0)
	p := hs.Prog()
	p.Grad(0, optim.ParamsOf(0), optim.Batch{}, optim.BNUpdate)
	p.Grad(0, optim.ParamsOf(0), optim.Batch{Part: 1, Of: 2}, optim.BNUpdate)
	exec(p)
	want("two BNUpdate passes", optim.ParamsOf(0), 2)
	want("the other member", optim.ParamsOf(1), 0)
	p = hs.Prog()
	p.Grad(0, optim.ParamsOf(0), optim.Batch{}, optim.BNFreeze)
	exec(p)
	want("a BNFreeze pass", optim.ParamsOf(0), 2)
	p = hs.Prog()
	p.JointGrad(nil, []optim.Vec{optim.ParamsOf(0), optim.ParamsOf(1)}, optim.Batch{}, optim.BNUpdate)
	exec(p)
	want("a joint pass", optim.ParamsOf(0), 3)
	want("a joint pass", optim.ParamsOf(1), 1)
	// A snapshot carries the count; the live statistics go on counting.
	p = hs.Prog().Alloc(snap, 0).CopyState(snap, optim.ParamsOf(0))
	p.Grad(0, optim.ParamsOf(0), optim.Batch{}, optim.BNUpdate)
	exec(p)
	want("a snapshot", snap, 3)
	want("after the snapshot", optim.ParamsOf(0), 4)
	// UpdateBN of a vector: the batches it passed, its own.
	exec(hs.Prog().Alloc(avg, 1).Copy(avg, optim.ParamsOf(1)).UpdateBN(avg))
	want("UpdateBN of a vector", avg, 3)
	want("UpdateBN of a vector, the live ones", optim.ParamsOf(1), 1)

	dir := t.TempDir()
	live := filepath.Join(dir, "live.safetensors")
	if err := Save(ctx, e, live); err != nil {
		t.Fatal(err)
	}
	for name, n := range savedCounters(t, live) {
		member := map[bool]int64{true: 4, false: 1}[strings.HasPrefix(name, "members.0.")]
		if n != member {
			t.Errorf("Save: %s = %d, want %d", name, n, member)
		}
	}
	pred := filepath.Join(dir, "pred.safetensors")
	if err := SavePredictive(ctx, e, optim.Predictive{Kind: optim.Members, Vecs: []optim.Vec{snap, avg}}, pred, nil); err != nil {
		t.Fatal(err)
	}
	for name, n := range savedCounters(t, pred) {
		vec := map[bool]int64{true: 3, false: 3}[strings.HasPrefix(name, "members.0.")]
		if n != vec {
			t.Errorf("SavePredictive: %s = %d, want %d (the vector's own)", name, n, vec)
		}
	}

	// Restoring the snapshot's statistics restores its count; Copy
	// without BN drops a vector's statistics and count.
	exec(hs.Prog().CopyState(optim.ParamsOf(0), snap).Copy(avg, optim.ParamsOf(1)))
	want("statistics restored", optim.ParamsOf(0), 3)
	want("a Copy without BN", avg, 0)

	// UpdateBN of live parameters replaces their count.
	exec(hs.Prog().UpdateBN(optim.ParamsOf(1)))
	want("UpdateBN of live parameters", optim.ParamsOf(1), 3)

	// Load restores every member's count from the file.
	other := ckptEngine(t, w, tensor.CPU, 12, "cnn", "cnn")
	if err := Load(ctx, other, live); err != nil {
		t.Fatal(err)
	}
	if a, b := other.BNBatches(optim.ParamsOf(0)), other.BNBatches(optim.ParamsOf(1)); a != 4 || b != 1 {
		t.Errorf("Load: counts %d and %d, want 4 and 1", a, b)
	}
	ts, _, err := checkpoint.Read(live)
	if err != nil {
		t.Fatal(err)
	}
	one, err := MemberTensors(ts, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := Import(ctx, other, 1, one); err != nil {
		t.Fatal(err)
	}
	if n := other.BNBatches(optim.ParamsOf(1)); n != 4 {
		t.Errorf("Import: count %d, want 4", n)
	}
}

// TestBNPassesMatchPyTorch: from a checkpoint, the host's train-mode
// passes (gradient passes with BNUpdate, one with BNFreeze among them)
// leave the BatchNorm statistics and num_batches_tracked that the PyTorch
// twin's train-mode forward passes leave from the same file over the same
// batches (issue 39). A negative control: a file saved before the last
// pass does not match.
func TestBNPassesMatchPyTorch(t *testing.T) {
	script := torchtwin.Script(t)
	w := tensor.NewWorker(2)
	defer w.Close()
	ctx := context.Background()
	const arch = "cnn"
	e := ckptEngine(t, w, tensor.CPU, 11, arch)
	ckptTrainStep(t, e) // one pass: the start has a count of 1
	dir := t.TempDir()
	start := filepath.Join(dir, "start.safetensors")
	if err := Save(ctx, e, start); err != nil {
		t.Fatal(err)
	}
	const k, n = 3, 6
	var batches []float32
	var partial string
	for i := range k {
		x, shape := ckptInput(n, uint64(20+i))
		batches = append(batches, x...)
		setBatch(t, e, x, shape)
		p := optim.Prog()
		p.Grad(0, optim.Params, optim.Batch{}, optim.BNUpdate)
		if i == 1 {
			p.Grad(0, optim.Params, optim.Batch{}, optim.BNFreeze)
		}
		if _, err := e.Exec(ctx, p); err != nil {
			t.Fatal(err)
		}
		if i == k-2 {
			partial = filepath.Join(dir, "partial.safetensors")
			if err := Save(ctx, e, partial); err != nil {
				t.Fatal(err)
			}
		}
	}
	end := filepath.Join(dir, "end.safetensors")
	if err := Save(ctx, e, end); err != nil {
		t.Fatal(err)
	}
	for name, c := range savedCounters(t, end) {
		if c != 1+k {
			t.Errorf("%s = %d, want %d passes", name, c, 1+k)
		}
	}
	io := filepath.Join(dir, "io.safetensors")
	if err := checkpoint.Write(io, []checkpoint.Tensor{checkpoint.NewF32("batches", append([]int64{k, n}, ckptShape...), batches)}, nil); err != nil {
		t.Fatal(err)
	}
	compare := func(after string) (diff, scale float64, mism, first int) {
		t.Helper()
		out := torchtwin.Exec(t, script, "--bn-passes", start, "--after", after, "--arch", arch, "--io", io)
		if _, err := fmt.Sscanf(strings.TrimSpace(out), "max_abs_diff %g max_abs_stat %g tracked_mismatches %d tracked %d", &diff, &scale, &mism, &first); err != nil {
			t.Fatalf("unexpected output %q: %v", out, err)
		}
		return diff, scale, mism, first
	}
	d, scale, mism, first := compare(end)
	t.Logf("after %d passes: max |Δstat| %.3g (max |stat| %.3g); PyTorch's num_batches_tracked %d", k, d, scale, first)
	if tol := 1e-5 * max(1, scale); d > tol || math.IsNaN(d) {
		t.Errorf("statistics differ from PyTorch's by %g (> %g)", d, tol)
	}
	if mism != 0 || first != 1+k {
		t.Errorf("num_batches_tracked: %d BatchNorms differ from PyTorch's (PyTorch's first %d, want %d)", mism, first, 1+k)
	}
	if d, _, mism, _ := compare(partial); d < 1e-4 || mism == 0 {
		t.Errorf("a file saved a pass earlier matches too (Δ %g, %d counters differ): the comparison is blind", d, mism)
	}
}
