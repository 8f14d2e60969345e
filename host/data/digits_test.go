package data

import (
	"math"
	"slices"
	"testing"
)

func TestLoadUCIDigits(t *testing.T) {
	s, err := LoadUCIDigits()
	if err != nil {
		t.Fatal(err)
	}
	if s.Len() != 1797 || s.Classes != 10 || !slices.Equal(s.Shape, []int{1, 8, 8}) || s.Raw8() || s.Name != UCIDigitsName {
		t.Fatalf("got %d samples, %d classes, shape %v", s.Len(), s.Classes, s.Shape)
	}
	want := []int{178, 182, 177, 183, 181, 182, 181, 179, 174, 180}
	if got := s.ClassCounts(); !slices.Equal(got, want) {
		t.Errorf("class counts %v, want %v", got, want)
	}
	var hi float32
	for _, v := range s.F {
		if v < 0 || v > 1 || v*16 != float32(math.Round(float64(v*16))) {
			t.Fatalf("feature %v is not k/16 in [0,1]", v)
		}
		hi = max(hi, v)
	}
	if hi != 1 {
		t.Errorf("largest feature %v, want 1", hi)
	}
	// The documented constants match the data.
	mean, std, err := ChannelStats(s)
	if err != nil {
		t.Fatal(err)
	}
	if math.Abs(float64(mean[0]-s.Mean[0])) > 1e-5 || math.Abs(float64(std[0]-s.Std[0])) > 1e-5 {
		t.Errorf("constants %v/%v, data %v/%v", s.Mean, s.Std, mean, std)
	}
}

func TestUCIDigits(t *testing.T) {
	tests := []struct {
		frac        float64
		seed        int64
		train, test int
	}{
		{0.2, 0, 1438, 359},
		{0.5, 1, 898, 899},
	}
	for _, tc := range tests {
		sp, err := UCIDigits(tc.frac, tc.seed)
		if err != nil {
			t.Fatal(err)
		}
		if sp.Train.Len() != tc.train || sp.Test.Len() != tc.test || sp.Val != nil {
			t.Fatalf("frac %v: train/test = %d/%d, want %d/%d", tc.frac, sp.Train.Len(), sp.Test.Len(), tc.train, tc.test)
		}
		tr, te := sp.Train.ClassCounts(), sp.Test.ClassCounts()
		sum := 0
		for c := range 10 {
			sum += tr[c] + te[c]
			if share := float64(te[c]) / float64(tr[c]+te[c]); math.Abs(share-tc.frac) > 0.01 {
				t.Errorf("class %d: test share %.3f, want about %v", c, share, tc.frac)
			}
		}
		if sum != 1797 {
			t.Errorf("per-class counts sum to %d", sum)
		}
		again, err := UCIDigits(tc.frac, tc.seed)
		if err != nil {
			t.Fatal(err)
		}
		if fingerprint(again.Test) != fingerprint(sp.Test) {
			t.Errorf("split not deterministic")
		}
		if sp.Train.Mean[0] != sp.Test.Mean[0] || sp.Train.Mean == nil {
			t.Errorf("normalization constants not carried into the parts")
		}
	}
	if _, err := UCIDigits(0, 1); err == nil {
		t.Errorf("test fraction 0: no error")
	}
}
