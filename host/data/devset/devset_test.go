package devset

import (
	"context"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/optlab/optlab/internal/testutil"

	"github.com/optlab/optlab/host/data"
	"github.com/optlab/optlab/host/tensor"
)

// Image geometry of the data tests: non-square, so rows and columns cannot
// be confused.
const (
	semC, semH, semW = 2, 7, 6
	semPix           = semC * semH * semW
)

// semImageSet is a raw 8-bit image set with pixels in 1..255 (so the zero
// fill of a crop is recognizable) and per-channel Mean and Std.
func semImageSet(n int) *data.Set {
	s := &data.Set{Name: "sem-images", Shape: []int{semC, semH, semW}, Classes: 4,
		Mean: []float32{0.45, 0.55}, Std: []float32{0.2, 0.3}}
	r := rand.New(rand.NewPCG(5, 6))
	for range n * semPix {
		s.X = append(s.X, uint8(1+r.IntN(255)))
	}
	for i := range n {
		s.Y = append(s.Y, int32((3*i+1)%4))
	}
	return s
}

// semPixels is the device's scaled (and optionally normalized) value of
// sample i's pixel (c, h, w), in float32 arithmetic.
func semPixels(s *data.Set, i int, normalize bool) [][][]float32 {
	img := make([][][]float32, semC)
	for c := range semC {
		img[c] = make([][]float32, semH)
		for h := range semH {
			img[c][h] = make([]float32, semW)
			for w := range semW {
				v := float32(s.X[i*semPix+(c*semH+h)*semW+w]) * float32(1.0/255)
				if normalize {
					v = (v - s.Mean[c]) / s.Std[c]
				}
				img[c][h][w] = v
			}
		}
	}
	return img
}

// semGetBatch cuts a batch on the device and returns x (flattened, float64)
// and y.
func semGetBatch(t *testing.T, w *tensor.Worker, ds *Set, idx []int64, aug Augment, rng *rand.Rand) ([]float64, []int64, []int64) {
	t.Helper()
	var xs []float64
	var ys []int64
	var shape []int64
	err := w.Do(context.Background(), func() error {
		s := tensor.NewScope()
		defer s.Close()
		x, y := ds.Batch(s, idx, aug, rng, tensor.CPU)
		xs = s.Float64s(x)
		for _, v := range s.Float64s(y) {
			ys = append(ys, int64(v))
		}
		shape = x.Shape()
		return s.Err()
	})
	if err != nil {
		t.Fatal(err)
	}
	return xs, ys, shape
}

func semUploadW(t *testing.T, w *tensor.Worker, s *data.Set, normalize bool) *Set {
	t.Helper()
	ds, err := Upload(context.Background(), w, tensor.CPU, s, normalize)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = w.Do(context.Background(), func() error { ds.Drop(); return nil }) })
	return ds
}

// semWorker returns a worker closed when the test ends.
func semWorker(t *testing.T) *tensor.Worker {
	t.Helper()
	w := tensor.NewWorker(1)
	t.Cleanup(w.Close)
	return w
}

func semFlat(imgs ...[][][]float32) []float64 {
	var out []float64
	for _, img := range imgs {
		for _, ch := range img {
			for _, row := range ch {
				for _, v := range row {
					out = append(out, float64(v))
				}
			}
		}
	}
	return out
}

// TestBatchPlain checks batches without augmentation: pixels/255, then
// normalized, in the order of the indices, with their labels.
func TestBatchPlain(t *testing.T) {
	w := semWorker(t)
	set := semImageSet(5)
	idx := []int64{3, 0, 4, 4, 1}
	for _, normalize := range []bool{false, true} {
		ds := semUploadW(t, w, set, normalize)
		if ds.N != 5 || ds.Classes != 4 || !slices.Equal(ds.Shape, []int64{semC, semH, semW}) {
			t.Fatalf("uploaded set: N %d, classes %d, shape %v", ds.N, ds.Classes, ds.Shape)
		}
		x, y, shape := semGetBatch(t, w, ds, idx, Augment{}, rand.New(rand.NewPCG(1, 1)))
		if !slices.Equal(shape, []int64{5, semC, semH, semW}) {
			t.Fatalf("batch shape %v", shape)
		}
		var want []float64
		var wantY []int64
		for _, i := range idx {
			want = append(want, semFlat(semPixels(set, int(i), normalize))...)
			wantY = append(wantY, int64(set.Y[i]))
		}
		testutil.CheckVec(t, "pixels", x, want, 0, 1e-6)
		if !slices.Equal(y, wantY) {
			t.Errorf("labels %v, want %v", y, wantY)
		}
		var labels []int32
		_ = w.Do(context.Background(), func() error {
			s := tensor.NewScope()
			defer s.Close()
			labels = ds.Labels(s)
			return nil
		})
		if !slices.Equal(labels, set.Y) {
			t.Errorf("Labels() = %v, want %v", labels, set.Y)
		}

		// Range gives the evaluation inputs: a batch of consecutive samples
		// without augmentation.
		var rx []float64
		var ry []int64
		err := w.Do(context.Background(), func() error {
			s := tensor.NewScope()
			defer s.Close()
			x, y := ds.Range(s, 1, 3)
			rx = s.Float64s(x)
			for _, v := range s.Float64s(y) {
				ry = append(ry, int64(v))
			}
			return s.Err()
		})
		if err != nil {
			t.Fatal(err)
		}
		bx, by, _ := semGetBatch(t, w, ds, []int64{1, 2, 3}, Augment{}, nil)
		if !slices.Equal(rx, bx) || !slices.Equal(ry, by) {
			t.Errorf("Range(1, 3) differs from the batch of samples 1, 2, 3")
		}
	}

	// Float features: normalized per feature; image augmentations do not
	// apply to them.
	fs := testutil.FeatureSet(6, 4, 3)
	ds := semUploadW(t, w, fs, true)
	x, _, shape := semGetBatch(t, w, ds, []int64{5, 2}, Augment{Crop: 4, Flip: true}, rand.New(rand.NewPCG(1, 1)))
	in := testutil.Inputs(fs)
	if !slices.Equal(shape, []int64{2, 4}) {
		t.Fatalf("feature batch shape %v", shape)
	}
	testutil.CheckVec(t, "features", x, append(slices.Clone(in[5]), in[2]...), 0, 1e-6)
}

// semAugRef is the augmented image computed in Go from the same draws the
// device path makes: all crop offsets first (dy, dx per sample), then the
// flips.
func semAugRef(set *data.Set, idx []int64, aug Augment, rng *rand.Rand, normalize bool) []float64 {
	n := len(idx)
	dy, dx, flip := make([]int, n), make([]int, n), make([]bool, n)
	if aug.Crop > 0 {
		for i := range n {
			dy[i], dx[i] = rng.IntN(2*aug.Crop+1)-aug.Crop, rng.IntN(2*aug.Crop+1)-aug.Crop
		}
	}
	if aug.Flip {
		for i := range n {
			flip[i] = rng.IntN(2) == 1
		}
	}
	var out []float64
	for i, k := range idx {
		src := semPixels(set, int(k), false)
		img := make([][][]float32, semC)
		for c := range semC {
			img[c] = make([][]float32, semH)
			for h := range semH {
				img[c][h] = make([]float32, semW)
				for w := range semW {
					ww := w
					if flip[i] {
						ww = semW - 1 - w
					}
					sh, sw := h+dy[i], ww+dx[i]
					var v float32
					if sh >= 0 && sh < semH && sw >= 0 && sw < semW {
						v = src[c][sh][sw]
					}
					if normalize {
						v = (v - set.Mean[c]) / set.Std[c]
					}
					img[c][h][w] = v
				}
			}
		}
		out = append(out, semFlat(img)...)
	}
	return out
}

func TestBatchAugment(t *testing.T) {
	w := semWorker(t)
	const n = 12
	set := semImageSet(n)
	idx := make([]int64, n)
	for i := range idx {
		idx[i] = int64((5 * i) % n)
	}
	tests := []struct {
		name      string
		aug       Augment
		normalize bool
	}{
		{"flip", Augment{Flip: true}, false},
		{"crop", Augment{Crop: 4}, false},
		{"crop 2", Augment{Crop: 2}, false},
		{"crop and flip", Augment{Crop: 4, Flip: true}, false},
		{"crop and flip normalized", Augment{Crop: 4, Flip: true}, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ds := semUploadW(t, w, set, tc.normalize)
			x, y, shape := semGetBatch(t, w, ds, idx, tc.aug, rand.New(rand.NewPCG(7, 8)))
			if !slices.Equal(shape, []int64{n, semC, semH, semW}) {
				t.Fatalf("augmented batch shape %v", shape)
			}
			for i, k := range idx {
				if y[i] != int64(set.Y[k]) {
					t.Fatalf("labels %v do not follow the indices", y)
				}
			}
			testutil.CheckVec(t, "augmented pixels", x, semAugRef(set, idx, tc.aug, rand.New(rand.NewPCG(7, 8)), tc.normalize), 0, 1e-6)

			// A fixed seed gives the same batch; another seed another.
			x2, _, _ := semGetBatch(t, w, ds, idx, tc.aug, rand.New(rand.NewPCG(7, 8)))
			if !slices.Equal(x, x2) {
				t.Error("the same seed gave another batch")
			}
			x3, _, _ := semGetBatch(t, w, ds, idx, tc.aug, rand.New(rand.NewPCG(9, 8)))
			if slices.Equal(x, x3) {
				t.Error("seeds 7 and 9 gave the same batch")
			}
			if tc.normalize {
				return
			}
			// Whatever the draws: each sample is the plain image shifted by
			// at most Crop with zero fill, mirrored or not.
			plain, _, _ := semGetBatch(t, w, ds, idx, Augment{}, nil)
			var flips, shifts int
			for i := range idx {
				got := x[i*semPix : (i+1)*semPix]
				src := plain[i*semPix : (i+1)*semPix]
				dy, dx, fl, ok := semFindShift(got, src, tc.aug)
				if !ok {
					t.Errorf("sample %d is no shift within ±%d (flip %v) of its image", i, tc.aug.Crop, tc.aug.Flip)
					continue
				}
				if fl {
					flips++
				}
				if dy != 0 || dx != 0 {
					shifts++
				}
			}
			if tc.aug.Flip && (flips == 0 || flips == n) {
				t.Errorf("%d of %d samples flipped", flips, n)
			}
			if tc.aug.Crop > 0 && shifts == 0 {
				t.Errorf("no sample shifted")
			}
		})
	}
}

// semFindShift looks for the crop offset and flip that turn src into got
// exactly.
func semFindShift(got, src []float64, aug Augment) (int, int, bool, bool) {
	at := func(img []float64, c, h, w int) float64 {
		if h < 0 || h >= semH || w < 0 || w >= semW {
			return 0
		}
		return img[(c*semH+h)*semW+w]
	}
	for _, fl := range []bool{false, true} {
		if fl && !aug.Flip {
			continue
		}
		for dy := -aug.Crop; dy <= aug.Crop; dy++ {
			for dx := -aug.Crop; dx <= aug.Crop; dx++ {
				ok := true
				for c := 0; c < semC && ok; c++ {
					for h := 0; h < semH && ok; h++ {
						for w := 0; w < semW && ok; w++ {
							ww := w
							if fl {
								ww = semW - 1 - w
							}
							ok = got[(c*semH+h)*semW+w] == at(src, c, h+dy, ww+dx)
						}
					}
				}
				if ok {
					return dy, dx, fl, true
				}
			}
		}
	}
	return 0, 0, false, false
}

// An Epoch gives the batches that Batch gives, bit for bit, from the same
// draws (step by step, and within a step data order by data order), leaves
// the rng where Batch calls would, and copies nothing from the host after
// NewEpoch's one copy.
func TestEpochBatches(t *testing.T) {
	w := semWorker(t)
	const n, batch, steps = 13, 4, 3
	set := semImageSet(n)
	orders := [][]int64{make([]int64, n), make([]int64, n)}
	for k := range orders {
		for i := range orders[k] {
			orders[k][i] = int64((5*i + 3*k) % n)
		}
	}
	for _, aug := range []Augment{{}, {Flip: true}, {Crop: 4}, {Crop: 2, Flip: true}} {
		ds := semUploadW(t, w, set, true)
		byBatch, byEpoch := rand.New(rand.NewPCG(7, 8)), rand.New(rand.NewPCG(7, 8))
		err := w.Do(context.Background(), func() error {
			s := tensor.NewScope()
			defer s.Close()
			c0 := tensor.HostToDevice()
			ep, err := ds.NewEpoch(s, orders, batch, steps, aug, byEpoch, tensor.CPU)
			if err != nil {
				return err
			}
			defer ep.Drop()
			if c := tensor.HostToDevice() - c0; c != 1 {
				t.Errorf("%+v: NewEpoch made %d host→device copies, want 1", aug, c)
			}
			var fromEpoch [][]float64
			c0 = tensor.HostToDevice()
			for i := range steps {
				for k := range orders {
					x, y := ep.Batch(s, k, i)
					fromEpoch = append(fromEpoch, s.Float64s(x), s.Float64s(y))
				}
			}
			if c := tensor.HostToDevice() - c0; c != 0 {
				t.Errorf("%+v: Epoch.Batch made %d host→device copies, want 0", aug, c)
			}
			for i := range steps {
				for k := range orders {
					x, y := ds.Batch(s, orders[k][i*batch:(i+1)*batch], aug, byBatch, tensor.CPU)
					if xs, ys := s.Float64s(x), s.Float64s(y); !slices.Equal(xs, fromEpoch[0]) || !slices.Equal(ys, fromEpoch[1]) {
						t.Errorf("%+v: step %d, data order %d: the epoch's batch differs from Batch's", aug, i, k)
					}
					fromEpoch = fromEpoch[2:]
				}
			}
			if a, b := byBatch.Uint64(), byEpoch.Uint64(); a != b {
				t.Errorf("%+v: the rng is not left where Batch calls leave it", aug)
			}
			ep.Batch(s, 0, steps)
			if s.Err() == nil {
				t.Errorf("%+v: Batch past the epoch's steps did not fail", aug)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	ds := semUploadW(t, w, set, false)
	err := w.Do(context.Background(), func() error {
		s := tensor.NewScope()
		defer s.Close()
		if _, err := ds.NewEpoch(s, orders, batch, 4, Augment{}, nil, tensor.CPU); err == nil {
			t.Error("an epoch of 4 steps of 4 out of 13 samples did not fail")
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
