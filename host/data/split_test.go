package data

import (
	"slices"
	"strings"
	"testing"
)

// origins returns the original indices of the samples of an indexSet part.
func origins(s *Set) []int {
	out := make([]int, len(s.F))
	for i, v := range s.F {
		out[i] = int(v)
	}
	return out
}

func TestSplitSet(t *testing.T) {
	// 100 samples, imbalanced classes: 50 of class 0, 30 of class 1, 20 of 2.
	labels := make([]int32, 100)
	for i := range labels {
		switch {
		case i%10 < 5:
			labels[i] = 0
		case i%10 < 8:
			labels[i] = 1
		default:
			labels[i] = 2
		}
	}
	tests := []struct {
		name             string
		opts             SplitOptions
		train, test, val int
		testCounts       []int // per class, when stratified
	}{
		{"plain", SplitOptions{TestFraction: 0.2, Seed: 1}, 80, 20, 0, nil},
		{"stratified", SplitOptions{TestFraction: 0.2, Seed: 1, Stratified: true}, 80, 20, 0, []int{10, 6, 4}},
		{"stratified rounding", SplitOptions{TestFraction: 0.25, Seed: 3, Stratified: true}, 75, 25, 0, []int{13, 7, 5}},
		{"with val", SplitOptions{TestFraction: 0.2, ValFraction: 0.25, Seed: 2, Stratified: true}, 60, 20, 20, []int{10, 6, 4}},
		{"plain with val", SplitOptions{TestFraction: 0.1, ValFraction: 0.1, Seed: 2}, 81, 10, 9, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := indexSet(labels, 3)
			sp, err := SplitSet(s, tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			if sp.Train.Len() != tc.train || sp.Test.Len() != tc.test {
				t.Fatalf("train/test = %d/%d, want %d/%d", sp.Train.Len(), sp.Test.Len(), tc.train, tc.test)
			}
			parts := []*Set{sp.Train, sp.Test}
			if tc.val == 0 {
				if sp.Val != nil {
					t.Fatalf("Val = %d samples, want nil", sp.Val.Len())
				}
			} else {
				if sp.Val == nil || sp.Val.Len() != tc.val {
					t.Fatalf("Val = %v, want %d samples", sp.Val, tc.val)
				}
				parts = append(parts, sp.Val)
			}
			// The parts partition the samples, each in original order, with
			// labels travelling with their samples.
			var all []int
			for _, p := range parts {
				o := origins(p)
				if !slices.IsSorted(o) {
					t.Errorf("part not in original order: %v", o)
				}
				for j, i := range o {
					if p.Y[j] != labels[i] {
						t.Fatalf("sample %d has label %d, want %d", i, p.Y[j], labels[i])
					}
				}
				if err := p.Validate(); err != nil {
					t.Fatal(err)
				}
				all = append(all, o...)
			}
			slices.Sort(all)
			for i, v := range all {
				if v != i {
					t.Fatalf("parts do not partition the samples: %v", all)
				}
			}
			if tc.testCounts != nil && !slices.Equal(sp.Test.ClassCounts(), tc.testCounts) {
				t.Errorf("test class counts %v, want %v", sp.Test.ClassCounts(), tc.testCounts)
			}
			// Same seed, same split; the source is untouched.
			again, err := SplitSet(s, tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(origins(again.Test), origins(sp.Test)) {
				t.Errorf("split not deterministic")
			}
			if !slices.Equal(origins(s), origins(indexSet(labels, 3))) {
				t.Errorf("source modified")
			}
		})
	}
}

func TestSplitSeedsDiffer(t *testing.T) {
	s := indexSet(cyclicLabels(200, 4), 4)
	a, err := SplitSet(s, SplitOptions{TestFraction: 0.3, Seed: 1, Stratified: true})
	if err != nil {
		t.Fatal(err)
	}
	b, err := SplitSet(s, SplitOptions{TestFraction: 0.3, Seed: 2, Stratified: true})
	if err != nil {
		t.Fatal(err)
	}
	if slices.Equal(origins(a.Test), origins(b.Test)) {
		t.Errorf("seeds 1 and 2 give the same split")
	}
}

func TestSplitGolden(t *testing.T) {
	// Guards the promise that a seed names the same split forever.
	s := indexSet(cyclicLabels(20, 2), 2)
	sp, err := SplitSet(s, SplitOptions{TestFraction: 0.25, Seed: 7, Stratified: true})
	if err != nil {
		t.Fatal(err)
	}
	want := []int{1, 6, 7, 12, 16}
	if got := origins(sp.Test); !slices.Equal(got, want) {
		t.Errorf("test part = %v, want %v", got, want)
	}
}

func TestSplitErrors(t *testing.T) {
	s := indexSet(cyclicLabels(10, 2), 2)
	tests := []struct {
		name string
		opts SplitOptions
		want string
	}{
		{"zero test", SplitOptions{}, "test fraction"},
		{"test one", SplitOptions{TestFraction: 1}, "test fraction"},
		{"val negative", SplitOptions{TestFraction: 0.5, ValFraction: -0.1}, "validation fraction"},
		{"tiny test", SplitOptions{TestFraction: 0.01}, "empty"},
		{"tiny val", SplitOptions{TestFraction: 0.5, ValFraction: 0.01}, "empty"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := SplitSet(s, tc.opts)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("SplitSet = %v, want an error containing %q", err, tc.want)
			}
		})
	}
	if _, err := SplitSet(&Set{Shape: []int{1}, Classes: 1, F: []float32{1}, Y: []int32{3}}, SplitOptions{TestFraction: 0.5}); err == nil {
		t.Errorf("SplitSet of an invalid set: no error")
	}
}

func TestHoldOut(t *testing.T) {
	tests := []struct {
		name       string
		n, classes int
		frac       float64
		val        int
		wantErr    bool
	}{
		{"tenth", 100, 5, 0.1, 10, false},
		{"half", 12, 2, 0.5, 6, false},
		{"zero", 10, 2, 0, 0, true},
		{"one", 10, 2, 1, 0, true},
		{"empty val", 10, 2, 0.01, 0, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := indexSet(cyclicLabels(tc.n, tc.classes), tc.classes)
			train, val, err := HoldOut(s, tc.frac, 11)
			if tc.wantErr {
				if err == nil {
					t.Fatalf("HoldOut: no error")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if val.Len() != tc.val || train.Len() != tc.n-tc.val {
				t.Fatalf("train/val = %d/%d, want %d/%d", train.Len(), val.Len(), tc.n-tc.val, tc.val)
			}
			for c, n := range val.ClassCounts() {
				if n != tc.val/tc.classes {
					t.Errorf("class %d: %d validation samples, want %d", c, n, tc.val/tc.classes)
				}
			}
			train2, val2, err := HoldOut(s, tc.frac, 11)
			if err != nil {
				t.Fatal(err)
			}
			if fingerprint(train2) != fingerprint(train) || fingerprint(val2) != fingerprint(val) {
				t.Errorf("HoldOut not deterministic")
			}
		})
	}
}
