package testutil

import (
	"math"
	"testing"

	"github.com/optlab/optlab/host/data"
)

// Features returns n samples of f features in [-2, 2] (a xorshift stream
// from seed, rounded to float32) and labels i mod classes: inputs for
// device tests whose references are computed in float64.
func Features(n, f, classes int, seed uint64) ([][]float64, []int64) {
	x := make([][]float64, n)
	y := make([]int64, n)
	s := seed
	next := func() float64 { // xorshift, enough for test inputs
		s ^= s << 13
		s ^= s >> 7
		s ^= s << 17
		return float64(s%20001)/10000 - 1
	}
	for i := range x {
		x[i] = make([]float64, f)
		for k := range x[i] {
			x[i][k] = float64(float32(2 * next()))
		}
		y[i] = int64(i % classes)
	}
	return x, y
}

// FeatureSet is a float-feature set of n samples with f features (Features
// with seed 77), normalized with per-feature Mean and Std.
func FeatureSet(n, f, classes int) *data.Set {
	x, y := Features(n, f, classes, 77)
	s := &data.Set{Name: "sem-features", Shape: []int{f}, Classes: classes}
	for i := range x {
		for _, v := range x[i] {
			s.F = append(s.F, float32(v))
		}
		s.Y = append(s.Y, int32(y[i]))
	}
	for k := range f {
		s.Mean = append(s.Mean, float32(0.1*float64(k)-0.2))
		s.Std = append(s.Std, float32(0.5+0.25*float64(k)))
	}
	return s
}

// Inputs returns the normalized inputs of a feature set as the device
// computes them (float32 arithmetic).
func Inputs(s *data.Set) [][]float64 {
	f := s.Shape[0]
	out := make([][]float64, s.Len())
	for i := range out {
		out[i] = make([]float64, f)
		for k := range f {
			v := s.F[i*f+k]
			if s.Mean != nil {
				v = (v - s.Mean[k]) / s.Std[k]
			}
			out[i][k] = float64(v)
		}
	}
	return out
}

// BNImages is a small 2×4×4 image set for a CNN with BatchNorm.
func BNImages(n, classes int) *data.Set {
	set := &data.Set{Name: "bn-images", Shape: []int{2, 4, 4}, Classes: classes, Mean: []float32{0.5, 0.5}, Std: []float32{0.25, 0.25}}
	for i := range n * 32 {
		set.X = append(set.X, uint8((i*53+7)%256))
	}
	for i := range n {
		set.Y = append(set.Y, int32(i%classes))
	}
	return set
}

// Close compares a float32 result against a float64 reference: within
// abs + rel·|want|, NaN only with NaN, infinities exactly.
func Close(got, want, abs, rel float64) bool {
	switch {
	case math.IsNaN(want):
		return math.IsNaN(got)
	case math.IsInf(want, 0):
		return got == want
	}
	return math.Abs(got-want) <= abs+rel*math.Abs(want)
}

// CheckVec reports the elements of got that are not Close to want (the
// first five, then a count).
func CheckVec(t testing.TB, what string, got, want []float64, abs, rel float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("%s: %d values, want %d", what, len(got), len(want))
		return
	}
	bad := 0
	for i := range got {
		if !Close(got[i], want[i], abs, rel) {
			if bad < 5 {
				t.Errorf("%s[%d] = %.9g, want %.9g", what, i, got[i], want[i])
			}
			bad++
		}
	}
	if bad > 5 {
		t.Errorf("%s: %d of %d values differ", what, bad, len(got))
	}
}
