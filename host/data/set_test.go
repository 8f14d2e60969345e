package data

import (
	"math"
	"slices"
	"strings"
	"testing"
)

func TestValidate(t *testing.T) {
	ok := func() *Set {
		return &Set{Name: "t", Shape: []int{2}, Classes: 3, F: []float32{1, 2, 3, 4}, Y: []int32{0, 2}}
	}
	tests := []struct {
		name   string
		mutate func(*Set)
		want   string // substring of the error; "" for none
	}{
		{"valid", func(*Set) {}, ""},
		{"empty shape", func(s *Set) { s.Shape = nil }, "empty shape"},
		{"zero dim", func(s *Set) { s.Shape = []int{0} }, "non-positive"},
		{"no classes", func(s *Set) { s.Classes = 0 }, "classes"},
		{"both X and F", func(s *Set) { s.X = make([]uint8, 4) }, "both X and F"},
		{"short F", func(s *Set) { s.F = s.F[:3] }, "len(F)"},
		{"neither", func(s *Set) { s.F = nil }, "neither"},
		{"label high", func(s *Set) { s.Y[1] = 3 }, "label 3 out of range"},
		{"label negative", func(s *Set) { s.Y[0] = -1 }, "label -1"},
		{"coarse length", func(s *Set) { s.Coarse = []int32{0}; s.CoarseClasses = 1 }, "coarse labels"},
		{"coarse range", func(s *Set) { s.Coarse = []int32{0, 1}; s.CoarseClasses = 1 }, "coarse label 1"},
		{"names", func(s *Set) { s.ClassNames = []string{"a"} }, "class names"},
		{"mean without std", func(s *Set) { s.Mean = []float32{0, 0} }, "both set"},
		{"mean length", func(s *Set) { s.Mean, s.Std = []float32{0}, []float32{1} }, "Shape[0]"},
		{"zero std", func(s *Set) { s.Mean, s.Std = []float32{0, 0}, []float32{1, 0} }, "Std[1]"},
		{"raw", func(s *Set) { s.F = nil; s.X = []uint8{1, 2, 3, 4} }, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := ok()
			tc.mutate(s)
			err := s.Validate()
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("Validate: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("Validate = %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

func TestSubset(t *testing.T) {
	s := &Set{
		Name: "raw", Shape: []int{2}, Classes: 4, X: []uint8{0, 1, 10, 11, 20, 21},
		Y: []int32{1, 2, 3}, Coarse: []int32{0, 1, 1}, CoarseClasses: 2,
		Mean: []float32{0.5, 0.5}, Std: []float32{1, 1},
	}
	got := s.Subset([]int{2, 0})
	if !slices.Equal(got.X, []uint8{20, 21, 0, 1}) || !slices.Equal(got.Y, []int32{3, 1}) || !slices.Equal(got.Coarse, []int32{1, 0}) {
		t.Fatalf("Subset = X %v Y %v Coarse %v", got.X, got.Y, got.Coarse)
	}
	if err := got.Validate(); err != nil {
		t.Fatal(err)
	}
	got.Mean[0] = 9
	got.X[0] = 99
	if s.Mean[0] != 0.5 || s.X[4] != 20 {
		t.Errorf("Subset shares storage with its source")
	}
	if got.Len() != 2 || !got.Raw8() || got.SampleSize() != 2 {
		t.Errorf("Len/Raw8/SampleSize = %d/%v/%d", got.Len(), got.Raw8(), got.SampleSize())
	}
}

func TestChannelStats(t *testing.T) {
	tests := []struct {
		name      string
		set       *Set
		mean, std []float32
	}{
		{
			name: "float two channels",
			set:  &Set{Shape: []int{2, 2}, Classes: 1, F: []float32{0, 2, 5, 5, 2, 4, 5, 5}, Y: []int32{0, 0}},
			mean: []float32{2, 5}, std: []float32{float32(math.Sqrt(2)), 1}, // constant channel gets 1
		},
		{
			name: "raw",
			set:  &Set{Shape: []int{1, 1, 2}, Classes: 1, X: []uint8{0, 255}, Y: []int32{0}},
			mean: []float32{0.5}, std: []float32{0.5},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			mean, std, err := ChannelStats(tc.set)
			if err != nil {
				t.Fatal(err)
			}
			for c := range tc.mean {
				if math.Abs(float64(mean[c]-tc.mean[c])) > 1e-6 || math.Abs(float64(std[c]-tc.std[c])) > 1e-6 {
					t.Fatalf("ChannelStats = %v, %v; want %v, %v", mean, std, tc.mean, tc.std)
				}
			}
		})
	}
	if _, _, err := ChannelStats(&Set{Shape: []int{1}, Classes: 1}); err == nil {
		t.Errorf("ChannelStats of an empty set: no error")
	}
}

func TestRNGStable(t *testing.T) {
	// The generator must never change: seeds name splits and data sets.
	r := newRNG(42, 7)
	got := []uint64{r.next(), r.next(), r.next()}
	r2 := newRNG(42, 7)
	for i, v := range got {
		if w := r2.next(); w != v {
			t.Fatalf("value %d: %d then %d", i, v, w)
		}
	}
	counts := make([]int, 3)
	for range 3000 {
		counts[r.intN(3)]++
	}
	for c, n := range counts {
		if n < 900 || n > 1100 {
			t.Errorf("intN(3) gave %d in %d of 3000 draws", c, n)
		}
	}
}
