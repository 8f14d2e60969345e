// Package devset holds datasets on the device: Upload copies a host
// data.Set there once, and batches are then cut, augmented and normalized
// on the device, so the data path never waits on the host. host/data stays
// free of libtorch; this package is its device side. Every method that
// takes a *tensor.Scope runs on the tensor.Worker's thread.
package devset

import (
	"context"
	"fmt"
	"math/rand/v2"

	"github.com/optlab/optlab/host/corrupt"
	"github.com/optlab/optlab/host/corrupt/render"
	"github.com/optlab/optlab/host/data"
	"github.com/optlab/optlab/host/tensor"
)

// Set is a dataset held on the device: raw samples (uint8 pixels or float
// features) and int64 labels.
type Set struct {
	N       int64
	Shape   []int64 // per-sample shape
	Classes int
	raw8    bool
	x, y    tensor.T // owned
	mean    tensor.T // (1,C,1,1) or invalid
	std     tensor.T
}

// Upload copies s to the device. normalize applies the set's Mean/Std.
func Upload(ctx context.Context, w *tensor.Worker, d tensor.Device, s *data.Set, normalize bool) (*Set, error) {
	ds := &Set{N: int64(s.Len()), Classes: s.Classes, raw8: s.Raw8()}
	for _, v := range s.Shape {
		ds.Shape = append(ds.Shape, int64(v))
	}
	err := w.Do(ctx, func() error {
		sc := tensor.NewScope()
		defer sc.Close()
		shape := append([]int64{ds.N}, ds.Shape...)
		if ds.raw8 {
			ds.x = sc.Keep(sc.FromUint8(s.X, shape, d))
		} else {
			ds.x = sc.Keep(sc.FromFloat32(s.F, shape, d))
		}
		y := make([]int64, len(s.Y))
		for i, v := range s.Y {
			y[i] = int64(v)
		}
		ds.y = sc.Keep(sc.FromInt64(y, []int64{ds.N}, d))
		if normalize && len(s.Mean) > 0 && len(ds.Shape) > 0 && len(s.Mean) == int(ds.Shape[0]) {
			bshape := make([]int64, len(ds.Shape)+1)
			for i := range bshape {
				bshape[i] = 1
			}
			bshape[1] = int64(len(s.Mean))
			ds.mean = sc.Keep(sc.FromFloat32(s.Mean, bshape, d))
			ds.std = sc.Keep(sc.FromFloat32(s.Std, bshape, d))
		}
		return sc.Err()
	})
	if err != nil {
		ds.Drop()
		return nil, fmt.Errorf("uploading %s to %s: %w", s.Name, d, err)
	}
	return ds, nil
}

// Drop frees the set's tensors. Call on the worker or after it stopped
// (tensors are freed on the caller's thread).
func (ds *Set) Drop() {
	ds.x.Drop()
	ds.y.Drop()
	ds.mean.Drop()
	ds.std.Drop()
}

// Corrupt returns a copy of the set whose images are corrupted by f at
// severity sev (render.Apply with seed); labels and normalization are the
// set's. Only image sets (uint8, C×H×W) can be corrupted.
func (ds *Set) Corrupt(ctx context.Context, w *tensor.Worker, f corrupt.Family, sev int, seed int64) (*Set, error) {
	if !ds.raw8 || len(ds.Shape) != 3 {
		return nil, fmt.Errorf("corruption %s: the test set is not made of images (8-bit C×H×W samples; its samples are %v)", f.Name, ds.Shape)
	}
	out := &Set{N: ds.N, Shape: ds.Shape, Classes: ds.Classes, raw8: true}
	err := w.Do(ctx, func() error {
		s := tensor.NewScope()
		defer s.Close()
		out.x = s.Keep(render.Apply(s, f, ds.x, sev, seed))
		// Detached handles share the storage and are dropped on their own.
		out.y = s.Keep(s.Detach(ds.y))
		if ds.mean.Valid() {
			out.mean = s.Keep(s.Detach(ds.mean))
			out.std = s.Keep(s.Detach(ds.std))
		}
		return s.Err()
	})
	if err != nil {
		out.Drop()
		return nil, fmt.Errorf("corruption %s at severity %d: %w", f.Name, sev, err)
	}
	return out, nil
}

// Augment says which augmentations a batch gets.
type Augment struct {
	Crop int // zero padding of the random crop (4 for CIFAR); 0 = none
	Flip bool
}

// Batch returns the samples at idx as float32 inputs (scaled to [0,1] for
// raw pixels, augmented, normalized) and int64 labels; both belong to s. The
// random crop offsets and flips come from rng, so a seed fixes them on every
// device. It copies the batch's plan (indices, crops, flips) to the device:
// one host→device copy per call. A training loop uses NewEpoch instead,
// which makes one copy per epoch and gives the same batches, bit for bit,
// from the same rng.
func (ds *Set) Batch(s *tensor.Scope, idx []int64, aug Augment, rng *rand.Rand, d tensor.Device) (tensor.T, tensor.T) {
	n := int64(len(idx))
	plan := s.UploadInt64(ds.plan([][]int64{idx}, n, 1, aug, rng), []int64{1, planRows, n}, d)
	return ds.cut(s, plan, 0, 0, n, aug)
}

// Epoch holds an epoch's batches on the device, before they are cut: for
// every step and data order, the samples' indices, crop offsets and flip
// flags, drawn on the host by NewEpoch and copied to the device in one
// transfer. Batch cuts a step's batch out of them on the device.
type Epoch struct {
	ds     *Set
	aug    Augment
	batch  int64
	steps  int
	orders int
	plan   tensor.T // int64 (orders, planRows, steps·batch); owned
}

// The rows of a plan: per sample, its index in the set, the crop's row and
// column offsets, and whether it is flipped (0 or 1).
const (
	rowIndex = iota
	rowDY
	rowDX
	rowFlip
	planRows
)

// NewEpoch draws the batches of steps training steps: step i of data order
// k is the samples orders[k][i·batch : (i+1)·batch], augmented with crop
// offsets and flips drawn from rng in the order Batch draws them (step by
// step, and within a step order by order), so that an epoch gives the
// batches that steps·len(orders) calls of Batch would, bit for bit, and
// leaves rng where they would. Everything is copied to the device at once,
// through pinned memory without waiting on a GPU (tensor.UploadInt64). The
// caller owns the Epoch and frees it with Drop, on the worker.
func (ds *Set) NewEpoch(s *tensor.Scope, orders [][]int64, batch int64, steps int, aug Augment, rng *rand.Rand, d tensor.Device) (*Epoch, error) {
	if batch <= 0 || steps <= 0 || len(orders) == 0 {
		return nil, fmt.Errorf("epoch of %d steps of %d samples in %d data orders", steps, batch, len(orders))
	}
	for k, o := range orders {
		if int64(len(o)) < int64(steps)*batch {
			return nil, fmt.Errorf("data order %d has %d samples, %d steps of %d need %d", k, len(o), steps, batch, int64(steps)*batch)
		}
	}
	l := int64(steps) * batch
	plan := s.UploadInt64(ds.plan(orders, batch, steps, aug, rng), []int64{int64(len(orders)), planRows, l}, d)
	if err := s.Err(); err != nil {
		return nil, err
	}
	return &Epoch{ds: ds, aug: aug, batch: batch, steps: steps, orders: len(orders), plan: s.Keep(plan)}, nil
}

// Batch returns step i's batch of data order k, as Set.Batch does: its
// inputs and labels, both belonging to s. It copies nothing from the host.
func (e *Epoch) Batch(s *tensor.Scope, k, i int) (tensor.T, tensor.T) {
	if k < 0 || k >= e.orders || i < 0 || i >= e.steps {
		s.Fail(fmt.Errorf("batch %d of data order %d: the epoch has %d steps of %d data orders", i, k, e.steps, e.orders))
		return tensor.T{}, tensor.T{}
	}
	return e.ds.cut(s, e.plan, k, int64(i)*e.batch, e.batch, e.aug)
}

// Steps returns the number of steps the epoch holds.
func (e *Epoch) Steps() int { return e.steps }

// Drop frees the epoch's tensor (nil-safe). Call on the worker.
func (e *Epoch) Drop() {
	if e != nil {
		e.plan.Drop()
	}
}

// crops and flips tell whether aug crops and flips samples of ds (images
// only).
func (ds *Set) crops(aug Augment) bool { return len(ds.Shape) == 3 && aug.Crop > 0 }
func (ds *Set) flips(aug Augment) bool { return len(ds.Shape) == 3 && aug.Flip }

// plan lays out, for steps steps of batch samples of every data order, the
// rows of a plan (index, dy, dx, flip) as an int64 array of shape
// (len(orders), planRows, steps·batch), drawing the augmentations from rng
// step by step and, within a step, order by order: per batch every
// sample's crop offsets (row, then column), then every sample's flip.
func (ds *Set) plan(orders [][]int64, batch int64, steps int, aug Augment, rng *rand.Rand) []int64 {
	l := int64(steps) * batch
	out := make([]int64, int64(len(orders))*planRows*l)
	row := func(k, r int) []int64 {
		o := (int64(k)*planRows + int64(r)) * l
		return out[o : o+l]
	}
	for k, o := range orders {
		copy(row(k, rowIndex), o[:l])
	}
	crop, flip := ds.crops(aug), ds.flips(aug)
	for i := int64(0); i < int64(steps); i++ {
		lo, hi := i*batch, (i+1)*batch
		for k := range orders {
			if crop {
				dy, dx := row(k, rowDY)[lo:hi], row(k, rowDX)[lo:hi]
				for j := range dy {
					dy[j], dx[j] = int64(rng.IntN(2*aug.Crop+1)), int64(rng.IntN(2*aug.Crop+1))
				}
			}
			if flip {
				f := row(k, rowFlip)[lo:hi]
				for j := range f {
					if rng.IntN(2) == 1 {
						f[j] = 1
					}
				}
			}
		}
	}
	return out
}

// cut makes the batch of samples [from, from+n) of data order k of plan (a
// device tensor laid out by plan): index select, scaling, pad-and-crop as
// two gathers, flips, normalization, all on the device.
func (ds *Set) cut(s *tensor.Scope, plan tensor.T, k int, from, n int64, aug Augment) (tensor.T, tensor.T) {
	p := s.Narrow(s.Narrow(plan, 0, int64(k), 1), 2, from, n) // (1, planRows, n)
	field := func(r int64, shape ...int64) tensor.T { return s.View(s.Narrow(p, 1, r, 1), shape...) }
	it := field(rowIndex, n)
	x := s.IndexSelect(ds.x, 0, it)
	y := s.IndexSelect(ds.y, 0, it)
	x = s.Cast(x, tensor.Float32)
	if ds.raw8 {
		x = s.Scale(x, 1.0/255)
	}
	if ds.crops(aug) {
		x = randomCrop(s, x, aug.Crop, field(rowDY, n, 1, 1, 1), field(rowDX, n, 1, 1, 1))
	}
	if ds.flips(aug) {
		mask := s.Cast(field(rowFlip, n, 1, 1, 1), tensor.Bool)
		x = s.Where(mask, s.Flip(x, 3), x)
	}
	if ds.mean.Valid() {
		x = s.Div(s.Sub(x, ds.mean), ds.std)
	}
	return x, y
}

// randomCrop pads each image by p zeros on every side and cuts an H×W
// window out of it at offsets (dy, dx) (int64, shape (N,1,1,1)), with two
// gathers on the device: rows dy+0..dy+H−1, then columns dx+0..dx+W−1.
func randomCrop(s *tensor.Scope, x tensor.T, p int, dy, dx tensor.T) tensor.T {
	sh := x.Shape()
	n, c, h, w := sh[0], sh[1], sh[2], sh[3]
	pp := int64(p)
	padded := s.Pad(x, pp, pp, pp, pp)
	d := x.Device()
	rows := s.Add(dy, s.View(s.Arange(h, tensor.Int64, d), 1, 1, h, 1)) // (n,1,h,1)
	x = s.Gather(padded, 2, s.Expand(rows, n, c, h, w+2*pp))
	cols := s.Add(dx, s.View(s.Arange(w, tensor.Int64, d), 1, 1, 1, w)) // (n,1,1,w)
	return s.Gather(x, 3, s.Expand(cols, n, c, h, w))
}

// Range returns samples [start, start+n) prepared for evaluation: float32
// inputs (scaled to [0,1] for raw pixels, normalized, not augmented) and
// their int64 labels, both views or results in s.
func (ds *Set) Range(s *tensor.Scope, start, n int64) (tensor.T, tensor.T) {
	x := s.Cast(s.Narrow(ds.x, 0, start, n), tensor.Float32)
	if ds.raw8 {
		x = s.Scale(x, 1.0/255)
	}
	if ds.mean.Valid() {
		x = s.Div(s.Sub(x, ds.mean), ds.std)
	}
	return x, s.Narrow(ds.y, 0, start, n)
}

// Labels returns the set's labels on the host.
func (ds *Set) Labels(s *tensor.Scope) []int32 {
	v := s.Float64s(ds.y)
	out := make([]int32, len(v))
	for i, f := range v {
		out[i] = int32(f)
	}
	return out
}
