package data

import (
	"fmt"
	"math"
	"slices"
)

// SyntheticOptions configures Synthetic. Zero fields take the defaults
// given in their comments.
type SyntheticOptions struct {
	// Name is the Set's name; default "synthetic".
	Name string
	// N is the number of samples; default 1000.
	N int
	// Classes is the number of classes; default 10.
	Classes int
	// Shape is the per-sample shape, e.g. [32] or [3,8,8]; default [16].
	Shape []int
	// Separation scales the distance between class centres: two centres
	// are about Separation×√2 apart. Default 3.
	Separation float64
	// Noise is the standard deviation of every feature around its class
	// centre. Default 1.
	Noise float64
	// Seed selects the problem and its samples.
	Seed int64
}

// Synthetic makes a learnable classification problem of Gaussian class
// clusters: every class has a random centre in prod(Shape) dimensions and its
// samples scatter around it with independent Gaussian noise. Classes are
// balanced (sample i before shuffling has class i mod Classes) and the
// samples come in random order. The result depends only on opts: the labels
// and their order are the same on every platform and Go version, the
// features too up to rounding in their last bits on architectures that fuse
// multiply-adds. It has F set, X nil and no normalization.
//
// Synthetic refuses, with an error and before allocating anything, a
// problem that does not fit in the memory available (see CheckSize).
//
// With the defaults a linear classifier reaches high but imperfect accuracy,
// so optimizers can be told apart; raise Noise or lower Separation to make
// the problem harder.
func Synthetic(opts SyntheticOptions) (*Set, error) {
	if opts.Name == "" {
		opts.Name = "synthetic"
	}
	if opts.N == 0 {
		opts.N = 1000
	}
	if opts.Classes == 0 {
		opts.Classes = 10
	}
	if opts.Shape == nil {
		opts.Shape = []int{16}
	}
	if opts.Separation == 0 {
		opts.Separation = 3
	}
	if opts.Noise == 0 {
		opts.Noise = 1
	}
	switch {
	case opts.N < 0:
		return nil, fmt.Errorf("synthetic %s: %d samples", opts.Name, opts.N)
	case opts.Classes < 1 || opts.Classes > maxClasses:
		return nil, fmt.Errorf("synthetic %s: %d classes, want 1..%d", opts.Name, opts.Classes, maxClasses)
	case opts.Separation < 0 || opts.Noise < 0 || math.IsInf(opts.Separation, 0) || math.IsInf(opts.Noise, 0) ||
		math.IsNaN(opts.Separation) || math.IsNaN(opts.Noise):
		return nil, fmt.Errorf("synthetic %s: separation %v and noise %v must be finite and non-negative", opts.Name, opts.Separation, opts.Noise)
	}
	s := &Set{Name: opts.Name, Shape: slices.Clone(opts.Shape), Classes: opts.Classes, F: []float32{}, Y: []int32{}}
	if err := s.Validate(); err != nil { // checks the shape
		return nil, fmt.Errorf("synthetic: %w", err)
	}
	dim := s.SampleSize()
	// The set, the shuffled order (one int per sample) and the class
	// centres (one float64 per class and feature) are held at once.
	need := addSat(addSat(setBytes(opts.N, dim), mulSat(uint64(opts.N), 8)), mulSat(mulSat(uint64(opts.Classes), uint64(dim)), 8))
	what := fmt.Sprintf("synthetic %s: %d samples of %d features in %d classes", opts.Name, opts.N, dim, opts.Classes)
	if err := fits(what, need, "the samples, their order and the class centres", availableMemory()); err != nil {
		return nil, err
	}
	r := newRNG(opts.Seed, streamSynthetic)
	centres := make([]float64, opts.Classes*dim)
	scale := opts.Separation / math.Sqrt(float64(dim))
	for i := range centres {
		centres[i] = scale * r.norm()
	}
	order := make([]int, opts.N)
	for i := range order {
		order[i] = i
	}
	r.shuffle(order)
	s.F = make([]float32, opts.N*dim)
	s.Y = make([]int32, opts.N)
	for j, i := range order {
		c := i % opts.Classes
		s.Y[j] = int32(c)
		centre := centres[c*dim : (c+1)*dim]
		row := s.F[j*dim : (j+1)*dim]
		for k := range row {
			row[k] = float32(centre[k] + opts.Noise*r.norm())
		}
	}
	return s, nil
}
