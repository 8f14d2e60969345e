package data

import (
	"math"
	"strings"
	"testing"
)

func TestCheckSize(t *testing.T) {
	tests := []struct {
		name          string
		n, sampleSize int
		want          []string // substrings of the error; nil means no error
	}{
		{"small", 1000, 16, nil},
		{"empty", 0, 3072, nil},
		{"huge n", 1_000_000_000_000, 3072, []string{"1000000000000 samples of 3072 values need", "of memory", "available"}},
		{"huge features", 1000, 1_000_000_000, []string{"1000 samples of 1000000000 values need", "available"}},
		{"overflow", math.MaxInt, math.MaxInt, []string{"need more than 16 EiB of memory"}},
		{"negative n", -1, 16, []string{"want n ≥ 0"}},
		{"zero sample size", 10, 0, []string{"positive sample size"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := CheckSize(tc.n, tc.sampleSize)
			if tc.want == nil {
				if err != nil {
					t.Fatalf("CheckSize(%d, %d) = %v", tc.n, tc.sampleSize, err)
				}
				return
			}
			if err == nil {
				t.Fatalf("CheckSize(%d, %d): no error", tc.n, tc.sampleSize)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
}

// TestSyntheticTooLarge checks that sizes beyond memory are refused with an
// error instead of panicking in makeslice or allocating for minutes.
func TestSyntheticTooLarge(t *testing.T) {
	tests := []struct {
		name string
		opts SyntheticOptions
	}{
		{"10^12 samples", SyntheticOptions{N: 1_000_000_000_000, Shape: []int{3, 32, 32}}},
		{"10^9 features", SyntheticOptions{N: 1000, Shape: []int{1_000_000_000}}},
		{"max int samples", SyntheticOptions{N: math.MaxInt, Shape: []int{math.MaxInt32}}},
		{"centres", SyntheticOptions{N: 1, Classes: maxClasses, Shape: []int{math.MaxInt32}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, err := Synthetic(tc.opts)
			if err == nil {
				t.Fatalf("Synthetic made %d samples, want an error", s.Len())
			}
			for _, w := range []string{"synthetic synthetic:", "of memory", "available"} {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
}

func TestFits(t *testing.T) {
	tests := []struct {
		need, limit uint64
		want        string // "" means no error
	}{
		{100, 100, ""},
		{101, 100, "x need 101 bytes of memory (why), more than the 100 bytes available"},
		{3 << 29, 1 << 30, "x need 1.5 GiB of memory (why), more than the 1.0 GiB available"},
		{math.MaxUint64, 8 << 30, "x need more than 16 EiB of memory (why), more than the 8.0 GiB available"},
	}
	for _, tc := range tests {
		err := fits("x", tc.need, "why", tc.limit)
		got := ""
		if err != nil {
			got = err.Error()
		}
		if !strings.HasPrefix(got, tc.want) {
			t.Errorf("fits(%d, %d) = %q, want %q", tc.need, tc.limit, got, tc.want)
		}
	}
}

func TestSaturatingArithmetic(t *testing.T) {
	tests := []struct {
		name string
		got  uint64
		want uint64
	}{
		{"mul", mulSat(3, 4), 12},
		{"mul overflow", mulSat(1<<32, 1<<32), math.MaxUint64},
		{"add", addSat(3, 4), 7},
		{"add overflow", addSat(math.MaxUint64, 1), math.MaxUint64},
		{"set bytes", setBytes(10, 3), 10 * (3*4 + 4)},
		{"set bytes overflow", setBytes(math.MaxInt, math.MaxInt), math.MaxUint64},
	}
	for _, tc := range tests {
		if tc.got != tc.want {
			t.Errorf("%s = %d, want %d", tc.name, tc.got, tc.want)
		}
	}
}

func TestAvailableMemory(t *testing.T) {
	if got := availableMemory(); got == 0 {
		t.Errorf("availableMemory() = 0")
	}
}
