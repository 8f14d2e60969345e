package tensor

import (
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"testing"
)

// TestPerSegmentCoefficients: ExpandSegs gives float32 coefficients that the
// tensor-coefficient ops apply as Go's float32 arithmetic does.
func TestPerSegmentCoefficients(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	const n = 1037
	x := randF32(r, n, func() float64 { return r.NormFloat64() * math.Exp(3*r.NormFloat64()) })
	d0 := randF32(r, n, func() float64 { return r.NormFloat64() * math.Exp(3*r.NormFloat64()) })
	onWorker(t, func(s *Scope) error {
		coef := []float64{0.05 / 0.3713, -1.0 / 3, 7, 2.5e-7}
		g := s.Segments([]int64{400, 1, 0, 636}, CPU)
		regs := make([]T, len(coef))
		for i, v := range coef {
			regs[i] = s.ScalarTensor(v, CPU)
		}
		C := s.ExpandSegs(s.Stack(0, regs...), g)
		if C.Valid() && C.t.DType() != Float32 {
			t.Errorf("ExpandSegs type %v, want float32", C.t.DType())
		}
		X2 := vec(s, x)
		seg := func(i int) int {
			switch {
			case i < 400:
				return 0
			case i < 401:
				return 1
			}
			return 3
		}
		for _, op := range []struct {
			name string
			run  func(d T)
			want func(d, x, c float32) float32
		}{
			{"AxpyT", func(d T) { s.AxpyT(d, C, X2) }, func(d, x, c float32) float32 { return d + float32(c*x) }},
			{"ScaleT", func(d T) { s.ScaleT(d, C) }, func(d, _, c float32) float32 { return d * c }},
			{"AddT", func(d T) { s.AddT(d, C) }, func(d, _, c float32) float32 { return d + c }},
			{"FillT", func(d T) { s.FillT(d, C) }, func(_, _, c float32) float32 { return c }},
		} {
			d := vec(s, d0)
			op.run(d)
			got := s.Float32s(d)
			if err := s.Err(); err != nil {
				return err
			}
			want := make([]float32, n)
			for i := range want {
				want[i] = op.want(d0[i], x[i], float32(coef[seg(i)]))
			}
			if i := firstDiff(got, want); i >= 0 {
				t.Errorf("per-segment %s [%d] = %v, want %v", op.name, i, got[i], want[i])
			}
		}
		return nil
	})
}

// segOf returns each element's segment for the given sizes.
func segOf(sizes []int64) []int {
	var out []int
	for j, z := range sizes {
		for range z {
			out = append(out, j)
		}
	}
	return out
}

var testSegmentations = [][]int64{
	{1},
	{1000},
	{1, 1, 1, 1, 1},
	{3, 0, 5, 1, 0},
	{0, 7},
	{250, 250, 1, 499, 2, 0, 4096, 17},
	{5000, 3},
	{20000, 1, 70000, 3, 9000},       // rows of 4096, crossing rows and a tail
	slices.Repeat([]int64{100}, 300), // too short for rows
	slices.Repeat([]int64{1000, 24, 0, 1}, 40), // rows that cross boundaries
}

func TestSegReduce(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	onWorker(t, func(s *Scope) error {
		for _, sizes := range testSegmentations {
			seg := segOf(sizes)
			n := len(seg)
			for _, gen := range []struct {
				name  string
				f     func() float64
				exact bool
			}{
				{"ints", func() float64 { return float64(r.IntN(17) - 8) }, true},
				{"normal", r.NormFloat64, false},
			} {
				x, y := randF32(r, n, gen.f), randF32(r, n, gen.f)
				nseg := len(sizes)
				want := make([][4]float64, nseg)
				mag := make([][4]float64, nseg) // Σ|term|, for the tolerance
				for i, j := range seg {
					xi, yi := float64(x[i]), float64(y[i])
					want[j][SegSumSq] += xi * xi
					want[j][SegDot] += xi * yi
					want[j][SegSumAbs] += math.Abs(xi)
					want[j][SegMaxAbs] = math.Max(want[j][SegMaxAbs], math.Abs(xi))
					mag[j] = [4]float64{want[j][SegSumSq], mag[j][SegDot] + math.Abs(xi*yi), want[j][SegSumAbs]}
				}
				g := s.Segments(sizes, CPU)
				X, Y := vec(s, x), vec(s, y)
				for kind := SegSumSq; kind <= SegMaxAbs; kind++ {
					res := s.SegReduce(X, Y, g, kind)
					if res.Valid() && res.t.DType() != Float64 {
						t.Errorf("SegReduce type %v, want float64", res.t.DType())
					}
					got := s.Float64s(res)
					if err := s.Err(); err != nil {
						return err
					}
					if len(got) != nseg {
						t.Errorf("%d segments, kind %d: %d values", nseg, kind, len(got))
						continue
					}
					bad := 0
					for j := range got {
						w, tol := want[j][kind], 0.0
						if !gen.exact {
							tol = 2e-6 * mag[j][kind] // float32 sums of at most 4096 terms
						}
						if math.Abs(got[j]-w) > tol && bad < 3 {
							bad++
							t.Errorf("%s, %d segments (chunk %d), kind %d: segment %d (size %d) = %v, want %v", gen.name, nseg, g.chunk, kind, j, sizes[j], got[j], w)
						}
					}
				}
			}
		}
		// A NaN or an infinity shows in its own segment only; no elements
		// at all give zeros.
		g := s.Segments([]int64{8192, 5000, 4096}, CPU)
		x := make([]float32, g.N)
		for i := range x {
			x[i] = 1
		}
		x[8192+17] = float32(math.NaN())
		x[8192+5000+1] = float32(math.Inf(1))
		X := vec(s, x)
		for kind := SegSumSq; kind <= SegMaxAbs; kind++ {
			v := s.Float64s(s.SegReduce(X, X, g, kind))
			if err := s.Err(); err != nil {
				return err
			}
			first := 8192.0
			if kind == SegMaxAbs {
				first = 1
			}
			if v[0] != first || !math.IsNaN(v[1]) || !math.IsInf(v[2], 1) {
				t.Errorf("kind %d with a NaN in segment 1 and +Inf in 2: %v", kind, v)
			}
		}
		empty := s.Float64s(s.SegReduce(s.Zeros([]int64{0}, Float32, CPU), T{}, s.Segments([]int64{0, 0}, CPU), SegMaxAbs))
		if err := s.Err(); err != nil {
			return err
		}
		if !slices.Equal(empty, []float64{0, 0}) {
			t.Errorf("two empty segments: %v", empty)
		}
		// Mismatched lengths are an error.
		g = s.Segments([]int64{2, 2}, CPU)
		s.SegReduce(s.Ones([]int64{5}, Float32, CPU), T{}, g, SegSumSq)
		if err := s.Err(); err == nil || !strings.Contains(err.Error(), "segment") {
			t.Errorf("SegReduce of 5 elements on 4: %v", err)
		}
		return nil
	})
}

func TestSegmentsErrors(t *testing.T) {
	for _, sizes := range [][]int64{nil, {3, -1}} {
		onWorker(t, func(s *Scope) error {
			g := s.Segments(sizes, CPU)
			if s.Err() == nil || g.Index.Valid() {
				t.Errorf("Segments(%v): no error", sizes)
			}
			return nil
		})
	}
	// Kept segmentations outlive their scope.
	onWorker(t, func(s *Scope) error {
		s1 := NewScope()
		g := s1.KeepSegs(s1.Segments([]int64{2, 3}, CPU))
		s1.Close()
		v := s.Float64s(s.SegReduce(s.Ones([]int64{5}, Float32, CPU), T{}, g, SegSumAbs))
		if err := s.Err(); err != nil {
			return err
		}
		if !slices.Equal(v, []float64{2, 3}) {
			t.Errorf("kept segmentation: %v, want [2 3]", v)
		}
		g.Drop()
		if g.Index.Valid() || g.Lengths.Valid() || g.Starts.Valid() {
			t.Error("Drop left the segmentation's tensors valid")
		}
		return nil
	})
}

func TestExpandSegsAndCounts(t *testing.T) {
	sizes := []int64{3, 0, 1, 10, 7, 2}
	fracs := []float64{0.5, 0.5, 0.5, 0.25, 1.0 / 3, 1.2}
	onWorker(t, func(s *Scope) error {
		g := s.Segments(sizes, CPU)
		regs := make([]T, len(fracs))
		for i, v := range fracs {
			regs[i] = s.ScalarTensor(v, CPU)
		}
		f64 := s.Stack(0, regs...)
		e := s.Float32s(s.ExpandSegs(f64, g))
		k := s.Float64s(s.SegCounts(f64, g))
		k0 := s.Float64s(s.SegCounts(s.ScalarTensor(0.3, CPU), g))
		if err := s.Err(); err != nil {
			return err
		}
		var wantE []float32
		for _, j := range segOf(sizes) {
			wantE = append(wantE, float32(fracs[j]))
		}
		if !slices.Equal(e, wantE) {
			t.Errorf("ExpandSegs = %v, want %v", e, wantE)
		}
		for j, z := range sizes {
			count := func(f float64) float64 {
				return math.Min(math.Max(math.Floor(float64(f*float64(z))+0.5), 0), float64(z))
			}
			if k[j] != count(fracs[j]) || k0[j] != count(0.3) {
				t.Errorf("segment %d (size %d): counts %v, %v; want %v, %v", j, z, k[j], k0[j], count(fracs[j]), count(0.3))
			}
		}
		return nil
	})
}

func TestTopKMask(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	onWorker(t, func(s *Scope) error {
		for _, sizes := range testSegmentations {
			seg := segOf(sizes)
			n := len(seg)
			for _, gen := range []struct {
				name string
				f    func() float64
			}{
				{"ties", func() float64 { return float64(r.IntN(7) - 3) }},
				{"normal", r.NormFloat64},
			} {
				x := randF32(r, n, gen.f)
				counts := make([]int64, len(sizes))
				for j, z := range sizes {
					counts[j] = r.Int64N(z + 1)
				}
				counts[0] = sizes[0] // a full segment
				if len(sizes) > 2 {
					counts[len(sizes)-1] = 0
				}
				// Go reference: per segment, indices by descending |x|,
				// ties by index.
				want := make([]float32, n)
				var start int64
				for j, z := range sizes {
					ids := make([]int, z)
					for i := range ids {
						ids[i] = int(start) + i
					}
					sort.SliceStable(ids, func(p, q int) bool { return math.Abs(float64(x[ids[p]])) > math.Abs(float64(x[ids[q]])) })
					for _, i := range ids[:counts[j]] {
						want[i] = 1
					}
					start += z
				}
				g := s.Segments(sizes, CPU)
				dst := s.Zeros([]int64{int64(n)}, Float32, CPU)
				s.Fill(dst, 7) // every element is overwritten
				s.TopKMask(dst, vec(s, x), g, s.FromInt64(counts, []int64{int64(len(counts))}, CPU))
				got := s.Float32s(dst)
				if err := s.Err(); err != nil {
					return err
				}
				if i := firstDiff(got, want); i >= 0 {
					t.Errorf("%s sizes %v counts %v: mask[%d] = %v, want %v (x = %v)", gen.name, sizes, counts, i, got[i], want[i], x[i])
				}
			}
		}
		// With SegCounts, on a 2-D destination.
		g := s.Segments([]int64{4, 4}, CPU)
		dst := s.Zeros([]int64{2, 4}, Float32, CPU)
		x := s.FromFloat32([]float32{1, -4, 2, 3, 0, 0, -1, 0}, []int64{2, 4}, CPU)
		s.TopKMask(dst, x, g, s.SegCounts(s.ScalarTensor(0.5, CPU), g))
		got := s.Float32s(dst)
		if err := s.Err(); err != nil {
			return err
		}
		if want := []float32{0, 1, 0, 1, 1, 0, 1, 0}; !slices.Equal(got, want) {
			t.Errorf("top half of rows = %v, want %v", got, want)
		}
		return nil
	})
}
