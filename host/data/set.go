// Package data is the host (CPU) side of optlab's datasets: it reads dataset
// files into plain Go slices, downloads the public ones, and splits them into
// train, validation and test parts deterministically from a seed.
//
// Uploading a Set to the device, normalizing it there and augmenting it is
// the job of other packages; this package never touches the GPU. Load reads
// what a Spec names; the package knows nothing of experiment files
// (package experiment makes the Spec).
//
// Samples are stored sample-major: sample i occupies
// [i*SampleSize(), (i+1)*SampleSize()) of X or F, laid out in the order given
// by Shape (C×H×W for images, so a batch is NCHW).
package data

import (
	"errors"
	"fmt"
	"math"
	"slices"
)

// ErrMissing is wrapped by errors reporting that a dataset's files are not
// where they were looked for. Use errors.Is to detect it.
var ErrMissing = errors.New("dataset files missing")

// maxClasses bounds the number of classes a Set may have, so that a stray
// huge label in a file cannot make per-class bookkeeping allocate gigabytes.
const maxClasses = 1 << 20

// Set is a labelled dataset held in host memory.
//
// Exactly one of X and F holds the samples:
//
//   - X holds raw 8-bit values (CIFAR pixels, 0..255). The device is expected
//     to convert them to float as x/255 and then normalize with Mean and Std.
//   - F holds float features, already in their natural scale (for example
//     UCI digits are divided by 16 into [0,1]). The device normalizes them
//     with Mean and Std when those are set.
//
// Mean and Std, when non-nil, have length Shape[0] (the channels of an image
// shape, the features of a flat one) and apply along that leading per-sample
// axis: value' = (value - Mean[c]) / Std[c]. Nil means no normalization.
type Set struct {
	// Name identifies the dataset, e.g. "cifar10" or "uci-digits".
	Name string
	// Shape is the per-sample shape, e.g. [3,32,32], [1,8,8] or [64].
	Shape []int
	// Classes is the number of classes; labels are 0..Classes-1.
	Classes int
	// X holds raw 8-bit samples, N*prod(Shape) bytes; nil when F is used.
	X []uint8
	// F holds float samples, N*prod(Shape) values; nil when X is used.
	F []float32
	// Y holds the class label of each sample.
	Y []int32
	// Coarse holds a second, coarser label per sample when the dataset has
	// one (the 20 superclasses of CIFAR-100); nil otherwise.
	Coarse []int32
	// CoarseClasses is the number of coarse classes, 0 when Coarse is nil.
	CoarseClasses int
	// ClassNames names the classes when the dataset provides names; it is
	// nil or has length Classes.
	ClassNames []string
	// Mean and Std are the per-channel normalization statistics to apply on
	// the device (see the type documentation); nil means none.
	Mean, Std []float32
}

// Split groups the parts of a dataset. Val is nil when no validation part
// was held out.
type Split struct {
	Train, Test, Val *Set
	// Noise, when label noise was added to the training labels (before
	// Val was held out of them), is what it did; nil otherwise.
	Noise *NoiseStats
	// Content identifies the bytes of the files the split was read from
	// (ContentID; for a folder of .npy files each one's, named and joined
	// by "; "), computed from the files as they were read: "" for data
	// sets that are not read from data.path (csv and npz have it).
	Content string
}

// Len returns the number of samples in s.
func (s *Set) Len() int {
	return len(s.Y)
}

// Raw8 reports whether the samples are raw 8-bit values held in X.
func (s *Set) Raw8() bool {
	return s.X != nil
}

// SampleSize returns the number of values per sample, the product of Shape.
func (s *Set) SampleSize() int {
	n := 1
	for _, d := range s.Shape {
		n *= d
	}
	return n
}

// Validate checks that s is internally consistent: a positive shape, exactly
// one of X and F of the right length, labels within 0..Classes-1 and
// normalization statistics of the right length with positive Std.
func (s *Set) Validate() error {
	if len(s.Shape) == 0 {
		return fmt.Errorf("set %q: empty shape", s.Name)
	}
	size := 1
	for _, d := range s.Shape {
		if d <= 0 {
			return fmt.Errorf("set %q: shape %v has a non-positive dimension", s.Name, s.Shape)
		}
		if size > math.MaxInt32/d {
			return fmt.Errorf("set %q: shape %v is too large", s.Name, s.Shape)
		}
		size *= d
	}
	if s.Classes <= 0 || s.Classes > maxClasses {
		return fmt.Errorf("set %q: %d classes, want 1..%d", s.Name, s.Classes, maxClasses)
	}
	n := len(s.Y)
	switch {
	case s.X != nil && s.F != nil:
		return fmt.Errorf("set %q: both X and F are set", s.Name)
	case s.X != nil:
		if len(s.X) != n*size {
			return fmt.Errorf("set %q: len(X) = %d, want %d samples × %d", s.Name, len(s.X), n, size)
		}
	case s.F != nil:
		if len(s.F) != n*size {
			return fmt.Errorf("set %q: len(F) = %d, want %d samples × %d", s.Name, len(s.F), n, size)
		}
	case n > 0:
		return fmt.Errorf("set %q: %d labels but neither X nor F", s.Name, n)
	}
	for i, y := range s.Y {
		if y < 0 || int(y) >= s.Classes {
			return fmt.Errorf("set %q: sample %d: label %d out of range 0..%d", s.Name, i, y, s.Classes-1)
		}
	}
	if s.Coarse != nil {
		if len(s.Coarse) != n {
			return fmt.Errorf("set %q: %d coarse labels for %d samples", s.Name, len(s.Coarse), n)
		}
		for i, y := range s.Coarse {
			if y < 0 || int(y) >= s.CoarseClasses {
				return fmt.Errorf("set %q: sample %d: coarse label %d out of range 0..%d", s.Name, i, y, s.CoarseClasses-1)
			}
		}
	}
	if s.ClassNames != nil && len(s.ClassNames) != s.Classes {
		return fmt.Errorf("set %q: %d class names for %d classes", s.Name, len(s.ClassNames), s.Classes)
	}
	if (s.Mean == nil) != (s.Std == nil) {
		return fmt.Errorf("set %q: Mean and Std must be both set or both nil", s.Name)
	}
	if s.Mean != nil {
		if len(s.Mean) != s.Shape[0] || len(s.Std) != s.Shape[0] {
			return fmt.Errorf("set %q: Mean/Std lengths %d/%d, want Shape[0] = %d", s.Name, len(s.Mean), len(s.Std), s.Shape[0])
		}
		for c, v := range s.Std {
			if !(v > 0) || math.IsInf(float64(v), 0) {
				return fmt.Errorf("set %q: Std[%d] = %v, want a positive finite value", s.Name, c, v)
			}
		}
	}
	return nil
}

// ClassCounts returns the number of samples of each class, indexed by label.
// Labels outside 0..Classes-1 are not counted.
func (s *Set) ClassCounts() []int {
	counts := make([]int, max(s.Classes, 0))
	for _, y := range s.Y {
		if y >= 0 && int(y) < len(counts) {
			counts[y]++
		}
	}
	return counts
}

// Subset returns a new Set holding copies of the samples of s at the given
// indices, in that order, with the same metadata. It panics if an index is
// out of range, like a slice expression would.
func (s *Set) Subset(idx []int) *Set {
	size := s.SampleSize()
	out := &Set{
		Name:          s.Name,
		Shape:         slices.Clone(s.Shape),
		Classes:       s.Classes,
		Y:             make([]int32, len(idx)),
		CoarseClasses: s.CoarseClasses,
		ClassNames:    slices.Clone(s.ClassNames),
		Mean:          slices.Clone(s.Mean),
		Std:           slices.Clone(s.Std),
	}
	if s.X != nil {
		out.X = make([]uint8, len(idx)*size)
	}
	if s.F != nil {
		out.F = make([]float32, len(idx)*size)
	}
	if s.Coarse != nil {
		out.Coarse = make([]int32, len(idx))
	}
	for j, i := range idx {
		out.Y[j] = s.Y[i]
		if s.X != nil {
			copy(out.X[j*size:(j+1)*size], s.X[i*size:(i+1)*size])
		}
		if s.F != nil {
			copy(out.F[j*size:(j+1)*size], s.F[i*size:(i+1)*size])
		}
		if s.Coarse != nil {
			out.Coarse[j] = s.Coarse[i]
		}
	}
	return out
}

// ChannelStats returns the mean and (population) standard deviation of the
// values of s along the leading per-sample axis Shape[0], in the scale the
// device sees before normalization (X/255 for raw sets, F otherwise). It is
// meant for datasets without published constants: compute it on the training
// part and assign it to Mean and Std of every part. A constant channel gets
// Std 1 so that normalizing never divides by zero.
func ChannelStats(s *Set) (mean, std []float32, err error) {
	if err := s.Validate(); err != nil {
		return nil, nil, err
	}
	n := s.Len()
	if n == 0 {
		return nil, nil, fmt.Errorf("set %q: no samples to compute statistics from", s.Name)
	}
	channels := s.Shape[0]
	per := s.SampleSize() / channels
	sum := make([]float64, channels)
	sq := make([]float64, channels)
	for i := range n {
		for c := range channels {
			base := (i*channels + c) * per
			for k := range per {
				var v float64
				if s.X != nil {
					v = float64(s.X[base+k]) / 255
				} else {
					v = float64(s.F[base+k])
				}
				sum[c] += v
				sq[c] += v * v
			}
		}
	}
	mean = make([]float32, channels)
	std = make([]float32, channels)
	cnt := float64(n * per)
	for c := range channels {
		m := sum[c] / cnt
		v := max(sq[c]/cnt-m*m, 0)
		mean[c] = float32(m)
		std[c] = float32(math.Sqrt(v))
		if !(std[c] > 1e-12) {
			std[c] = 1
		}
	}
	return mean, std, nil
}
