package optimtest_test

import (
	"math"
	"slices"
	"testing"

	"gonum.org/v1/gonum/mat"

	"github.com/optlab/optlab/sdk/optim"
	"github.com/optlab/optlab/sdk/optimtest"
)

// SortOrder sorts a diagonal descending, equal values in their order, NaN
// first (as torch.sort(descending=True, stable=True)).
func TestSortOrder(t *testing.T) {
	nan := math.NaN()
	for _, c := range []struct {
		diag []float64
		want []int
	}{
		{[]float64{1, 3, 2}, []int{1, 2, 0}},
		{[]float64{0, 5, 0, 5}, []int{1, 3, 0, 2}},
		{[]float64{1, nan, 3, nan, -1}, []int{1, 3, 2, 0, 4}},
		{[]float64{7}, []int{0}},
	} {
		n := len(c.diag)
		k := mat.NewDense(n, n, nil)
		for i, d := range c.diag {
			k.Set(i, i, d)
			if i+1 < n {
				k.Set(i, i+1, 100) // off the diagonal: ignored
			}
		}
		if got := optimtest.SortOrder(k); !slices.Equal(got, c.want) {
			t.Errorf("SortOrder of diag %v = %v, want %v", c.diag, got, c.want)
		}
	}
}

// SortColumnsRef on one 3×2 matrix tensor, worked by hand: the left factor
// (3×3) sorts the tile's rows, the right factor (2×2) its columns; the
// bias after the matrix is left alone.
func TestSortColumnsRef(t *testing.T) {
	l := optim.MemberLayout{Numel: 8, Tensors: []optim.Tensor{
		{Name: "w", Shape: []int64{3, 2}, Offset: 0}, {Name: "b", Shape: []int64{2}, Offset: 6}}}
	tiles := l.Tiles(0)
	carry := []float64{1, 2, 3, 4, 5, 6, 70, 80} // w = [[1 2] [3 4] [5 6]], b
	// Left: diag(K) = (1, 9, 4): order (1, 2, 0).
	lf := l.Factors(optim.LeftFactor, 0)
	q := []float64{11, 12, 13, 21, 22, 23, 31, 32, 33}
	key := []float64{1, 0, 0, 0, 9, 0, 0, 0, 4}
	x := slices.Clone(carry)
	optimtest.SortColumnsRef(q, key, lf, true, x, tiles)
	if want := []float64{12, 13, 11, 22, 23, 21, 32, 33, 31}; !slices.Equal(q, want) {
		t.Errorf("left: Q = %v, want %v", q, want)
	}
	if want := []float64{3, 4, 5, 6, 1, 2, 70, 80}; !slices.Equal(x, want) {
		t.Errorf("left: carry = %v, want %v", x, want)
	}
	// Right: diag(K) = (2, 2): a tie keeps the order; then (−1, 2): swapped.
	rf := l.Factors(optim.RightFactor, 0)
	for _, c := range []struct {
		key, q, x []float64
	}{
		{[]float64{2, 5, 5, 2}, []float64{1, 2, 3, 4}, carry},
		{[]float64{-1, 0, 0, 2}, []float64{2, 1, 4, 3}, []float64{2, 1, 4, 3, 6, 5, 70, 80}},
	} {
		q := []float64{1, 2, 3, 4}
		x := slices.Clone(carry)
		optimtest.SortColumnsRef(q, c.key, rf, false, x, tiles)
		if !slices.Equal(q, c.q) || !slices.Equal(x, c.x) {
			t.Errorf("right, key %v: Q = %v, carry = %v; want %v and %v", c.key, q, x, c.q, c.x)
		}
	}
}
