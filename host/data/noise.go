package data

import (
	"fmt"
	"maps"
	"slices"
)

// Label-noise kinds (NoiseOptions.Kind).
const (
	// NoiseSymmetric moves a label to one of the other classes, chosen
	// uniformly.
	NoiseSymmetric = "symmetric"
	// NoisePairflip moves a label of class c to class (c+1) mod Classes.
	NoisePairflip = "pairflip"
	// NoiseAsymmetric moves a label of a class NoiseOptions.Map lists to
	// the class it maps to.
	NoiseAsymmetric = "asymmetric"
)

// NoiseOptions configures AddLabelNoise.
type NoiseOptions struct {
	// Kind says where a flipped label goes (Noise*): symmetric
	// to one of the other classes chosen uniformly, pairflip from class c
	// to (c+1) mod Classes, asymmetric from a class Map lists to the class
	// it maps to (samples of other classes keep their labels).
	Kind string
	// Rate is the probability, in [0,1), that a sample's label flips:
	// every sample for symmetric and pairflip, every sample of a mapped
	// class for asymmetric.
	Rate float64
	// Seed selects the flips; the same seed, options and labels give the
	// same noisy labels on every platform and Go version.
	Seed int64
	// Map (asymmetric only) maps a class to the class its flipped labels
	// get; no class may map to itself.
	Map map[int]int
}

// Active reports whether o asks for noise: a kind and a rate above 0
// (Load adds the noise of Spec.LabelNoise only then; rate 0 is no noise).
func (o NoiseOptions) Active() bool { return o.Kind != "" && o.Rate > 0 }

// NoiseStats is what AddLabelNoise did.
type NoiseStats struct {
	// Samples is the number of labels the noise was applied to.
	Samples int
	// Flipped is the number of labels it changed.
	Flipped int
	// Transition counts the samples by clean label (row) and noisy label
	// (column): Classes×Classes, the diagonal the labels kept.
	Transition [][]int
}

// Fraction is the realised flip fraction, Flipped / Samples (0 for no
// samples).
func (st *NoiseStats) Fraction() float64 {
	if st.Samples == 0 {
		return 0
	}
	return float64(st.Flipped) / float64(st.Samples)
}

// AddLabelNoise flips labels of s in place as opts asks and returns what it
// did. The samples are visited in order; each draws a uniform number u from
// the seed's stream and flips when u < Rate (and, for asymmetric, its class
// is mapped); a symmetric flip then draws the new class uniformly among the
// Classes-1 others. Coarse labels, when s has them, are left as they are.
// s.Y is replaced by a new slice, so Sets sharing the old one are not
// affected. On error s is unchanged.
func AddLabelNoise(s *Set, opts NoiseOptions) (*NoiseStats, error) {
	if err := s.Validate(); err != nil {
		return nil, fmt.Errorf("label noise: %w", err)
	}
	if !(opts.Rate >= 0 && opts.Rate < 1) {
		return nil, fmt.Errorf("label noise on %q: rate %v, want a value in [0,1)", s.Name, opts.Rate)
	}
	k := s.Classes
	to := make([]int, k) // the class a flipped label of class c gets; -1 for none
	switch opts.Kind {
	case NoiseSymmetric, NoisePairflip:
		if k < 2 {
			return nil, fmt.Errorf("label noise on %q: %s noise needs at least 2 classes (it has %d)", s.Name, opts.Kind, k)
		}
		for c := range to {
			to[c] = (c + 1) % k
		}
	case NoiseAsymmetric:
		if len(opts.Map) == 0 {
			return nil, fmt.Errorf("label noise on %q: asymmetric noise needs a class map", s.Name)
		}
		for c := range to {
			to[c] = -1
		}
		for _, from := range slices.Sorted(maps.Keys(opts.Map)) {
			dst := opts.Map[from]
			switch {
			case from < 0 || from >= k || dst < 0 || dst >= k:
				return nil, fmt.Errorf("label noise on %q: class map %d → %d is out of range: %d classes (0..%d)", s.Name, from, dst, k, k-1)
			case from == dst:
				return nil, fmt.Errorf("label noise on %q: class map sends class %d to itself", s.Name, from)
			}
			to[from] = dst
		}
	default:
		return nil, fmt.Errorf("label noise on %q: unknown kind %q (want %s, %s or %s)", s.Name, opts.Kind, NoiseSymmetric, NoisePairflip, NoiseAsymmetric)
	}
	st := &NoiseStats{Samples: s.Len(), Transition: make([][]int, k)}
	for c := range st.Transition {
		st.Transition[c] = make([]int, k)
	}
	r := newRNG(opts.Seed, streamNoise)
	y := slices.Clone(s.Y)
	for i, c := range y {
		u := r.float64()
		noisy := int(c)
		if u < opts.Rate && to[c] >= 0 {
			noisy = to[c]
			if opts.Kind == NoiseSymmetric {
				// One of the k-1 classes other than c, uniformly.
				if noisy = r.intN(k - 1); noisy >= int(c) {
					noisy++
				}
			}
			y[i] = int32(noisy)
			st.Flipped++
		}
		st.Transition[c][noisy]++
	}
	s.Y = y
	return st, nil
}
