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

// Augment says which augmentations a batch gets.
type Augment struct {
	Crop int // zero padding of the random crop (4 for CIFAR); 0 = none
	Flip bool
}

// Batch returns the samples at idx as float32 inputs (scaled to [0,1] for
// raw pixels, augmented, normalized) and int64 labels; both belong to s. The
// random crop offsets and flips come from rng, so a seed fixes them on every
// device.
func (ds *Set) Batch(s *tensor.Scope, idx []int64, aug Augment, rng *rand.Rand, d tensor.Device) (tensor.T, tensor.T) {
	n := int64(len(idx))
	it := s.FromInt64(idx, []int64{n}, d)
	x := s.IndexSelect(ds.x, 0, it)
	y := s.IndexSelect(ds.y, 0, it)
	x = s.Cast(x, tensor.Float32)
	if ds.raw8 {
		x = s.Scale(x, 1.0/255)
	}
	if len(ds.Shape) == 3 && aug.Crop > 0 {
		x = randomCrop(s, x, aug.Crop, rng, d)
	}
	if len(ds.Shape) == 3 && aug.Flip {
		flip := make([]uint8, n)
		for i := range flip {
			if rng.IntN(2) == 1 {
				flip[i] = 1
			}
		}
		mask := s.Cast(s.FromUint8(flip, []int64{n, 1, 1, 1}, d), tensor.Bool)
		x = s.Where(mask, s.Flip(x, 3), x)
	}
	if ds.mean.Valid() {
		x = s.Div(s.Sub(x, ds.mean), ds.std)
	}
	return x, y
}

// randomCrop pads each image by p zeros on every side and cuts a random
// H×W window out of it, with two gathers on the device.
func randomCrop(s *tensor.Scope, x tensor.T, p int, rng *rand.Rand, d tensor.Device) tensor.T {
	sh := x.Shape()
	n, c, h, w := sh[0], sh[1], sh[2], sh[3]
	pp := int64(p)
	padded := s.Pad(x, pp, pp, pp, pp)
	rows := make([]int64, n*h)
	cols := make([]int64, n*w)
	for i := int64(0); i < n; i++ {
		dy, dx := int64(rng.IntN(2*p+1)), int64(rng.IntN(2*p+1))
		for j := int64(0); j < h; j++ {
			rows[i*h+j] = dy + j
		}
		for j := int64(0); j < w; j++ {
			cols[i*w+j] = dx + j
		}
	}
	ri := s.Expand(s.FromInt64(rows, []int64{n, 1, h, 1}, d), n, c, h, w+2*pp)
	x = s.Gather(padded, 2, ri)
	ci := s.Expand(s.FromInt64(cols, []int64{n, 1, 1, w}, d), n, c, h, w)
	return s.Gather(x, 3, ci)
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
