package data

import (
	"fmt"
	"math"
	"slices"
)

// Stream numbers keep the random choices of different operations on the same
// seed independent of each other.
const (
	streamTest uint64 = 1 + iota
	streamVal
	streamSynthetic
	streamNoise
)

// SplitOptions configures SplitSet.
type SplitOptions struct {
	// TestFraction is the fraction of samples put into Test, in (0,1).
	TestFraction float64
	// ValFraction is the fraction of the remaining training samples held out
	// into Val, in [0,1); 0 leaves Val nil.
	ValFraction float64
	// Stratified keeps the class proportions of every part as close to those
	// of the whole as whole samples allow; otherwise the parts are drawn
	// from a plain shuffle.
	Stratified bool
	// Seed selects the split; the same seed and data give the same split on
	// every platform and Go version.
	Seed int64
}

// SplitSet splits s into train and test parts and, if opts.ValFraction > 0,
// holds a validation part out of train. The number of test samples is
// round(TestFraction × Len), that of validation samples
// round(ValFraction × remaining train). Every part keeps the samples in their
// original relative order. s itself is not modified.
func SplitSet(s *Set, opts SplitOptions) (Split, error) {
	if err := s.Validate(); err != nil {
		return Split{}, fmt.Errorf("split: %w", err)
	}
	if !(opts.TestFraction > 0 && opts.TestFraction < 1) {
		return Split{}, fmt.Errorf("split %q: test fraction %v, want a value in (0,1)", s.Name, opts.TestFraction)
	}
	if !(opts.ValFraction >= 0 && opts.ValFraction < 1) {
		return Split{}, fmt.Errorf("split %q: validation fraction %v, want a value in [0,1)", s.Name, opts.ValFraction)
	}
	train, test, err := partition(s, opts.TestFraction, newRNG(opts.Seed, streamTest), opts.Stratified)
	if err != nil {
		return Split{}, fmt.Errorf("split %q into train/test: %w", s.Name, err)
	}
	out := Split{Train: train, Test: test}
	if opts.ValFraction > 0 {
		tr, val, err := partition(train, opts.ValFraction, newRNG(opts.Seed, streamVal), opts.Stratified)
		if err != nil {
			return Split{}, fmt.Errorf("split %q into train/validation: %w", s.Name, err)
		}
		out.Train, out.Val = tr, val
	}
	return out, nil
}

// HoldOut splits a validation part off a training set: val gets
// round(frac × Len) samples chosen with class stratification, train the
// rest, both in their original relative order. The choice depends only on
// seed and the data, and is independent of the test split SplitSet makes with
// the same seed. frac must be in (0,1) and leave both parts non-empty. s
// itself is not modified.
func HoldOut(s *Set, frac float64, seed int64) (train, val *Set, err error) {
	if err := s.Validate(); err != nil {
		return nil, nil, fmt.Errorf("hold out: %w", err)
	}
	if !(frac > 0 && frac < 1) {
		return nil, nil, fmt.Errorf("hold out from %q: fraction %v, want a value in (0,1)", s.Name, frac)
	}
	train, val, err = partition(s, frac, newRNG(seed, streamVal), true)
	if err != nil {
		return nil, nil, fmt.Errorf("hold out from %q: %w", s.Name, err)
	}
	return train, val, nil
}

// partition moves round(frac × Len) samples of s into the second result.
func partition(s *Set, frac float64, r *rng, stratified bool) (rest, picked *Set, err error) {
	n := s.Len()
	k := int(math.Round(frac * float64(n)))
	if k == 0 || k == n {
		return nil, nil, fmt.Errorf("fraction %v of %d samples leaves a part empty", frac, n)
	}
	var pick []int
	if stratified {
		pick = stratifiedPick(s, k, r)
	} else {
		idx := make([]int, n)
		for i := range idx {
			idx[i] = i
		}
		r.shuffle(idx)
		pick = idx[:k]
	}
	slices.Sort(pick)
	chosen := make([]bool, n)
	for _, i := range pick {
		chosen[i] = true
	}
	others := make([]int, 0, n-k)
	for i := range n {
		if !chosen[i] {
			others = append(others, i)
		}
	}
	return s.Subset(others), s.Subset(pick), nil
}

// stratifiedPick chooses k sample indices so that every class contributes
// its proportional share, rounded by the largest-remainder method (ties go to
// the lower label), the samples within a class chosen at random.
func stratifiedPick(s *Set, k int, r *rng) []int {
	byClass := make([][]int, s.Classes)
	for i, y := range s.Y {
		byClass[y] = append(byClass[y], i)
	}
	n := s.Len()
	quota := make([]int, s.Classes)
	type rem struct {
		class int
		frac  float64
	}
	rems := make([]rem, 0, s.Classes)
	total := 0
	for c, members := range byClass {
		exact := float64(k) * float64(len(members)) / float64(n)
		quota[c] = int(math.Floor(exact))
		total += quota[c]
		rems = append(rems, rem{c, exact - float64(quota[c])})
	}
	slices.SortStableFunc(rems, func(a, b rem) int {
		switch {
		case a.frac > b.frac:
			return -1
		case a.frac < b.frac:
			return 1
		}
		return 0
	})
	for i := 0; total < k; i++ {
		c := rems[i%len(rems)].class
		if quota[c] < len(byClass[c]) {
			quota[c]++
			total++
		}
	}
	pick := make([]int, 0, k)
	for c, members := range byClass {
		r.shuffle(members)
		pick = append(pick, members[:quota[c]]...)
	}
	return pick
}
