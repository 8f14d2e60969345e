package data

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

// TestAddLabelNoiseCounts pins, for a fixed seed, how many labels each kind
// flips and where they go, on 200 samples of 4 balanced classes, and checks
// that the transition matrix is what the labels say.
func TestAddLabelNoiseCounts(t *testing.T) {
	tests := []struct {
		opts       NoiseOptions
		flipped    int
		transition [][]int
	}{
		{NoiseOptions{Kind: NoiseSymmetric, Rate: 0.3, Seed: 7}, 60,
			[][]int{{38, 5, 3, 4}, {1, 39, 5, 5}, {5, 7, 32, 6}, {6, 6, 7, 31}}},
		{NoiseOptions{Kind: NoisePairflip, Rate: 0.3, Seed: 7}, 57,
			[][]int{{37, 13, 0, 0}, {0, 32, 18, 0}, {0, 0, 33, 17}, {9, 0, 0, 41}}},
		{NoiseOptions{Kind: NoiseAsymmetric, Rate: 0.5, Seed: 7, Map: map[int]int{0: 2, 3: 1}}, 45,
			[][]int{{30, 0, 20, 0}, {0, 50, 0, 0}, {0, 0, 50, 0}, {0, 25, 0, 25}}},
	}
	for _, tc := range tests {
		t.Run(tc.opts.Kind, func(t *testing.T) {
			clean := cyclicLabels(200, 4)
			s := indexSet(clean, 4)
			st, err := AddLabelNoise(s, tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			if st.Samples != 200 || st.Flipped != tc.flipped {
				t.Errorf("%d of %d flipped, want %d of 200", st.Flipped, st.Samples, tc.flipped)
			}
			if got, want := st.Fraction(), float64(tc.flipped)/200; got != want {
				t.Errorf("Fraction() = %v, want %v", got, want)
			}
			if fmt.Sprint(st.Transition) != fmt.Sprint(tc.transition) {
				t.Errorf("transition %v, want %v", st.Transition, tc.transition)
			}
			// The matrix and the count are those of the labels.
			counted := make([][]int, 4)
			for c := range counted {
				counted[c] = make([]int, 4)
			}
			changed := 0
			for i, y := range s.Y {
				counted[clean[i]][y]++
				if y != clean[i] {
					changed++
				}
			}
			if fmt.Sprint(counted) != fmt.Sprint(st.Transition) || changed != st.Flipped {
				t.Errorf("labels give transition %v and %d flips; stats say %v and %d", counted, changed, st.Transition, st.Flipped)
			}
			// The same seed flips the same labels; another seed others.
			again := indexSet(clean, 4)
			if _, err := AddLabelNoise(again, tc.opts); err != nil || !slices.Equal(again.Y, s.Y) {
				t.Errorf("the same seed gave other labels (%v)", err)
			}
			other := indexSet(clean, 4)
			o := tc.opts
			o.Seed++
			if _, err := AddLabelNoise(other, o); err != nil || slices.Equal(other.Y, s.Y) {
				t.Errorf("seed %d gave the labels of seed %d (%v)", o.Seed, tc.opts.Seed, err)
			}
		})
	}
}

// TestAddLabelNoiseRateZero: rate 0 flips nothing and the matrix is the
// class counts on its diagonal.
func TestAddLabelNoiseRateZero(t *testing.T) {
	for _, kind := range []string{NoiseSymmetric, NoisePairflip, NoiseAsymmetric} {
		s := indexSet(cyclicLabels(30, 3), 3)
		before := fingerprint(s)
		st, err := AddLabelNoise(s, NoiseOptions{Kind: kind, Seed: 1, Map: map[int]int{1: 0}})
		if err != nil {
			t.Fatal(err)
		}
		if fingerprint(s) != before || st.Flipped != 0 || st.Fraction() != 0 {
			t.Errorf("%s: rate 0 changed %d labels", kind, st.Flipped)
		}
		if got := fmt.Sprint(st.Transition); got != "[[10 0 0] [0 10 0] [0 0 10]]" {
			t.Errorf("%s: transition %s", kind, got)
		}
	}
}

// TestAddLabelNoiseKeepsSharedLabels: the noisy labels are a new slice, so a
// Set sharing the old one keeps the clean labels.
func TestAddLabelNoiseKeepsSharedLabels(t *testing.T) {
	s := indexSet(cyclicLabels(50, 5), 5)
	shared := *s
	if _, err := AddLabelNoise(s, NoiseOptions{Kind: NoiseSymmetric, Rate: 0.9, Seed: 3}); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(shared.Y, cyclicLabels(50, 5)) {
		t.Error("the labels of a Set sharing them changed")
	}
}

func TestAddLabelNoiseErrors(t *testing.T) {
	tests := []struct {
		opts NoiseOptions
		want string
	}{
		{NoiseOptions{Kind: "uniform", Rate: 0.1}, `unknown kind "uniform"`},
		{NoiseOptions{Kind: NoiseSymmetric, Rate: 1}, "rate 1, want a value in [0,1)"},
		{NoiseOptions{Kind: NoisePairflip, Rate: -0.5}, "rate -0.5"},
		{NoiseOptions{Kind: NoiseAsymmetric, Rate: 0.1}, "needs a class map"},
		{NoiseOptions{Kind: NoiseAsymmetric, Rate: 0.1, Map: map[int]int{1: 3}}, "class map 1 → 3 is out of range: 3 classes (0..2)"},
		{NoiseOptions{Kind: NoiseAsymmetric, Rate: 0.1, Map: map[int]int{2: 2}}, "sends class 2 to itself"},
	}
	for _, tc := range tests {
		s := indexSet(cyclicLabels(9, 3), 3)
		before := fingerprint(s)
		_, err := AddLabelNoise(s, tc.opts)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: error %v, want %q", tc.opts, err, tc.want)
		}
		if fingerprint(s) != before {
			t.Errorf("%+v: a failed call changed the labels", tc.opts)
		}
	}
	one := indexSet([]int32{0, 0}, 1)
	if _, err := AddLabelNoise(one, NoiseOptions{Kind: NoiseSymmetric, Rate: 0.5}); err == nil {
		t.Error("symmetric noise on one class: no error")
	}
}

// sampleLabels maps the first feature of every sample of s (distinct in
// synthetic data) to its label.
func sampleLabels(s *Set) map[float32]int32 {
	out := make(map[float32]int32, s.Len())
	size := s.SampleSize()
	for i, y := range s.Y {
		out[s.F[i*size]] = y
	}
	return out
}

// TestLoadLabelNoise: Load adds the noise to the training labels, draws the
// validation split from the noisy labels and leaves the test set clean.
func TestLoadLabelNoise(t *testing.T) {
	d := Spec{Dataset: SyntheticName, Normalize: true, Synthetic: SyntheticSpec{Train: 300, Test: 100, Classes: 5, Features: 4}}
	clean, err := Load(d)
	if err != nil {
		t.Fatal(err)
	}
	if clean.Noise != nil {
		t.Errorf("no label noise asked, stats %+v", clean.Noise)
	}
	d.LabelNoise = NoiseOptions{Kind: NoisePairflip, Rate: 0.4, Seed: 11}
	noisy, err := Load(d)
	if err != nil {
		t.Fatal(err)
	}
	if fingerprint(noisy.Test) != fingerprint(clean.Test) {
		t.Error("label noise changed the test set")
	}
	st := noisy.Noise
	if st == nil || st.Samples != 300 || st.Flipped == 0 {
		t.Fatalf("stats %+v, want flips among 300 samples", st)
	}
	want := sampleLabels(clean.Train)
	flipped := 0
	for x, y := range sampleLabels(noisy.Train) {
		c, ok := want[x]
		switch {
		case !ok:
			t.Fatalf("a noisy training sample is not in the clean training set")
		case y != c && y != (c+1)%5:
			t.Fatalf("pairflip moved class %d to %d", c, y)
		case y != c:
			flipped++
		}
	}
	if flipped != st.Flipped {
		t.Errorf("%d labels differ, stats say %d", flipped, st.Flipped)
	}

	// With a validation split: train and validation together are the
	// noisy training set of before, sample for sample.
	d.Validation = 0.2
	withVal, err := Load(d)
	if err != nil {
		t.Fatal(err)
	}
	if withVal.Val == nil || withVal.Val.Len() != 60 || withVal.Train.Len() != 240 {
		t.Fatalf("validation split of %v samples", withVal.Val)
	}
	if fingerprint(withVal.Test) != fingerprint(clean.Test) {
		t.Error("label noise with a validation split changed the test set")
	}
	if fmt.Sprint(withVal.Noise) != fmt.Sprint(st) {
		t.Errorf("stats with a validation split %+v, without %+v", withVal.Noise, st)
	}
	union := sampleLabels(withVal.Train)
	valNoisy := 0
	for x, y := range sampleLabels(withVal.Val) {
		union[x] = y
		if y != want[x] {
			valNoisy++
		}
	}
	if fmt.Sprint(union) != fmt.Sprint(sampleLabels(noisy.Train)) {
		t.Error("train ∪ validation differs from the noisy training set")
	}
	if valNoisy == 0 {
		t.Error("no validation label is noisy")
	}

	// A class map the dataset's classes do not allow fails the load.
	d.LabelNoise = NoiseOptions{Kind: NoiseAsymmetric, Rate: 0.4, Map: map[int]int{7: 1}}
	if _, err := Load(d); err == nil || !strings.Contains(err.Error(), "out of range") {
		t.Errorf("class map out of range: error %v", err)
	}
}
