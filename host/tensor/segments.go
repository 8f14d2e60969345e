package tensor

import (
	"fmt"

	"github.com/sugarme/gotch/ts"
)

// ---- segments: per-tensor (or per-row) reductions on a flat vector ----

// Segs is a segmentation of a flat vector of N elements into contiguous
// segments (one per parameter tensor, say, or one per output channel),
// uploaded once to the vectors' device. Its tensors belong to the scope that
// made it until KeepSegs moves them out; the caller then drops them with
// Drop. Every op on a Segs runs a fixed number of kernels, however many
// segments there are.
type Segs struct {
	// Sizes are the segment sizes in order (zero sizes are allowed); N is
	// their sum.
	Sizes []int64
	N     int64
	// Index (int64, N) is each element's segment; Lengths (int64) the sizes;
	// Starts (int64) the offset of each segment's first element.
	Index, Lengths, Starts T

	// SegReduce's plan: the first rows·chunk elements viewed as rows of
	// chunk elements; rowSeg (int64, rows) is the segment of each row that
	// lies in one segment, Count() for a row that crosses a boundary;
	// cross (int64) lists those rows. rows is 0 when no chunk length leaves
	// few enough elements outside whole rows.
	chunk, rows   int64
	rowSeg, cross T

	// Strided segmentations (SegmentsOf: segments that interleave, a
	// tensor's columns) have no row plan and sum in float64; sorted (int64,
	// N) is the segment of each position once the elements are grouped by
	// segment (the Index of the contiguous segmentation of the same sizes).
	strided bool
	sorted  T
}

// Count returns the number of segments.
func (g Segs) Count() int64 { return int64(len(g.Sizes)) }

// Drop frees a kept segmentation's tensors.
func (g *Segs) Drop() {
	for _, t := range []*T{&g.Index, &g.Lengths, &g.Starts, &g.rowSeg, &g.cross, &g.sorted} {
		t.Drop()
	}
}

// Segments builds the segmentation of a flat vector into contiguous segments
// of the given sizes (at least one segment; no negative size) on device d.
func (s *Scope) Segments(sizes []int64, d Device) Segs {
	if s.err != nil {
		return Segs{}
	}
	if len(sizes) == 0 {
		s.Fail(fmt.Errorf("segments: no segments"))
		return Segs{}
	}
	var n int64
	starts := make([]int64, len(sizes))
	for i, z := range sizes {
		if z < 0 {
			s.Fail(fmt.Errorf("segments: segment %d has size %d", i, z))
			return Segs{}
		}
		starts[i] = n
		n += z
	}
	idx := make([]int64, n)
	for i, z := range sizes {
		for j := starts[i]; j < starts[i]+z; j++ {
			idx[j] = int64(i)
		}
	}
	nseg := int64(len(sizes))
	g := Segs{
		Sizes:   append([]int64(nil), sizes...),
		N:       n,
		Index:   s.FromInt64(idx, []int64{n}, d),
		Lengths: s.FromInt64(append([]int64(nil), sizes...), []int64{nseg}, d),
		Starts:  s.FromInt64(starts, []int64{nseg}, d),
	}
	g.chunk, g.rows = segChunk(starts, n)
	if g.rows > 0 {
		rowSeg := make([]int64, g.rows)
		var cross []int64
		for r := range rowSeg {
			first, last := idx[int64(r)*g.chunk], idx[int64(r+1)*g.chunk-1]
			if rowSeg[r] = first; first != last {
				rowSeg[r] = nseg
				cross = append(cross, int64(r))
			}
		}
		g.rowSeg = s.FromInt64(rowSeg, []int64{g.rows}, d)
		if len(cross) > 0 {
			g.cross = s.FromInt64(cross, []int64{int64(len(cross))}, d)
		}
	}
	if s.err != nil {
		return Segs{}
	}
	return g
}

// SegmentsOf builds a segmentation whose segments need not be contiguous:
// of gives the segment of every element (each in [0, len(sizes)), segment
// j having sizes[j] elements), as optim.MemberLayout.SegmentOf does for a
// tensor's columns. Its reductions widen every element to float64.
func (s *Scope) SegmentsOf(sizes []int64, of []int32, d Device) Segs {
	g := s.Segments(sizes, d)
	if s.err != nil {
		return Segs{}
	}
	if int64(len(of)) != g.N {
		s.Fail(fmt.Errorf("segments: %d element segments for %d elements", len(of), g.N))
		return Segs{}
	}
	count := make([]int64, len(sizes))
	idx := make([]int64, len(of))
	for i, j := range of {
		if j < 0 || int(j) >= len(sizes) {
			s.Fail(fmt.Errorf("segments: element %d in segment %d of %d", i, j, len(sizes)))
			return Segs{}
		}
		idx[i] = int64(j)
		count[j]++
	}
	for j, z := range sizes {
		if count[j] != z {
			s.Fail(fmt.Errorf("segments: segment %d has %d elements, not %d", j, count[j], z))
			return Segs{}
		}
	}
	g.sorted = g.Index
	g.Index = s.FromInt64(idx, []int64{g.N}, d)
	g.strided = true
	g.rows, g.chunk, g.rowSeg, g.cross = 0, 0, T{}, T{}
	if s.err != nil {
		return Segs{}
	}
	return g
}

// segChunk picks SegReduce's row length: the longest power of two from 4096
// down to 64 that leaves at most a quarter of the n elements outside rows
// lying in one segment (in rows that cross a boundary, or after the last
// whole row), and the number of whole rows; 0, 0 when none does.
func segChunk(starts []int64, n int64) (chunk, rows int64) {
	for c := int64(4096); c >= 64; c /= 2 {
		k := n / c
		if k == 0 {
			continue
		}
		crossing := map[int64]bool{}
		for _, b := range starts {
			if b%c != 0 && b/c < k {
				crossing[b/c] = true
			}
		}
		if int64(len(crossing))*c+n-k*c <= n/4 {
			return c, k
		}
	}
	return 0, 0
}

// KeepSegs moves g's tensors out of the scope: the caller now owns them and
// must Drop g.
func (s *Scope) KeepSegs(g Segs) Segs {
	for _, t := range []T{g.Index, g.Lengths, g.Starts, g.rowSeg, g.cross, g.sorted} {
		s.Keep(t)
	}
	return g
}

// checkSegs checks that every tensor has g.N elements and returns them flat.
func (s *Scope) checkSegs(name string, g Segs, xs ...T) []T {
	if !s.check(append([]T{g.Index, g.Lengths, g.Starts}, xs...)...) {
		return nil
	}
	out := make([]T, len(xs))
	for i, x := range xs {
		if n := x.Numel(); n != g.N {
			s.Fail(fmt.Errorf("%s: a tensor of %d elements on a segmentation of %d", name, n, g.N))
			return nil
		}
		out[i] = s.Flatten(x, 0, -1)
	}
	return out
}

// SegKind is a per-segment reduction.
type SegKind int

// Per-segment reductions.
const (
	SegSumSq  SegKind = iota // Σ x²
	SegDot                   // Σ x·y
	SegSumAbs                // Σ |x|
	SegMaxAbs                // max |x|
)

// SegReduce reduces x (and y, for SegDot; else y may be the zero T) over
// each segment of g: a float64 tensor of g.Count() values on x's device, 0
// for an empty segment; a NaN (or, for sums, an infinity) in a segment
// shows in that segment's value only.
//
// The elements lying in whole rows of up to 4096 elements inside one
// segment are reduced per row in x's type (float32 sums over at most 4096
// elements, by a batched matrix product for Σx² and Σxy, without a
// temporary of x's size), and the row results are summed per segment in
// float64. The other elements (rows that cross a segment boundary, the
// tail: at most a quarter of them) are widened to float64 and summed per
// segment there; when the segments are too short for rows (under 64
// elements, typically) every element is summed per segment in x's type.
// The per-segment sums use index_add: deterministic on the CPU; on a GPU
// they use atomic adds, whose order (and so the last bits of a sum) may
// vary from run to run.
func (s *Scope) SegReduce(x, y T, g Segs, kind SegKind) T {
	xs := []T{x}
	if kind == SegDot {
		xs = append(xs, y)
	}
	f := s.checkSegs("segment reduce", g, xs...)
	if f == nil {
		return T{}
	}
	if kind < SegSumSq || kind > SegMaxAbs {
		return s.Fail(fmt.Errorf("segment reduce: unknown kind %d", kind))
	}
	if kind != SegDot {
		f = append(f, f[0]) // the batched product's second operand
	}
	nseg, dev := g.Count(), x.Device()
	var parts []T // float64 [nseg] each, combined at the end
	// accumulate reduces src per segment (idx) into a fresh zero tensor.
	accumulate := func(idx, src T, slots int64) T {
		acc := s.Zeros([]int64{slots}, src.t.DType(), dev)
		if !s.check(acc, idx, src) {
			return T{}
		}
		if kind == SegMaxAbs {
			return s.segMax(acc, idx, src)
		}
		return s.op("index_add", func() (*ts.Tensor, error) { return acc.t.IndexAdd(0, idx.t, src.t, false) })
	}
	// elementwise computes the reduced quantity of each element of the
	// selection sel (a view or gather of a flat vector), in dt.
	elementwise := func(sel func(T) T, dt DType) T {
		a := sel(f[0])
		if a.Valid() && a.t.DType() != dt {
			a = s.Cast(a, dt)
		}
		switch kind {
		case SegSumSq:
			return s.Square(a)
		case SegDot:
			b := sel(f[1])
			if b.Valid() && b.t.DType() != dt {
				b = s.Cast(b, dt)
			}
			return s.Mul(a, b)
		}
		return s.Abs(a)
	}
	body := g.rows * g.chunk
	if g.rows > 0 {
		k, c := g.rows, g.chunk
		var r T
		switch kind {
		case SegSumSq, SegDot:
			a := s.Reshape(s.Narrow(f[0], 0, 0, body), k, 1, c)
			b := s.Reshape(s.Narrow(f[1], 0, 0, body), k, c, 1)
			r = s.binary("bmm", a, b, func(a, b *ts.Tensor) (*ts.Tensor, error) { return a.Bmm(b, false) })
		case SegSumAbs:
			r = s.unary("norm", s.Reshape(s.Narrow(f[0], 0, 0, body), k, c), func(t *ts.Tensor) (*ts.Tensor, error) {
				one := ts.FloatScalar(1)
				defer one.MustDrop()
				return t.NormScalaroptDim(one, []int64{1}, false, false)
			})
		case SegMaxAbs:
			a := s.Reshape(s.Narrow(f[0], 0, 0, body), k, c)
			hi := s.unary("amax", a, func(t *ts.Tensor) (*ts.Tensor, error) { return t.Amax([]int64{1}, false, false) })
			lo := s.unary("amin", a, func(t *ts.Tensor) (*ts.Tensor, error) { return t.Amin([]int64{1}, false, false) })
			r = s.Maximum(hi, s.Neg(lo))
		}
		acc := accumulate(g.rowSeg, s.Cast(s.Reshape(r, k), Float64), nseg+1)
		parts = append(parts, s.Narrow(acc, 0, 0, nseg))
	}
	// The elements outside whole single-segment rows: widened to float64
	// when there are rows (they are at most a quarter of all), else in x's
	// type.
	dt := Float64
	if g.rows == 0 && !g.strided {
		dt = f[0].t.DType()
	}
	if g.cross.Valid() {
		rows := func(t T) T {
			return s.Flatten(s.IndexSelect(s.Reshape(s.Narrow(t, 0, 0, body), g.rows, g.chunk), 0, g.cross), 0, -1)
		}
		parts = append(parts, s.to64(accumulate(rows(g.Index), elementwise(rows, dt), nseg)))
	}
	if tail := g.N - body; tail > 0 {
		end := func(t T) T { return s.Narrow(t, 0, body, tail) }
		parts = append(parts, s.to64(accumulate(end(g.Index), elementwise(end, dt), nseg)))
	}
	if len(parts) == 0 { // N = 0: every segment is empty
		return s.Zeros([]int64{nseg}, Float64, dev)
	}
	out := parts[0]
	for _, p := range parts[1:] {
		if kind == SegMaxAbs {
			out = s.Maximum(out, p)
		} else {
			out = s.Add(out, p)
		}
	}
	return out
}

// ExpandSegs returns the float32 vector of g.N elements whose element i is
// c[segment of i], for c with one value per segment (any type: it is
// rounded to float32 before the gather). With AxpyT, ScaleT, AddT and FillT
// it applies a per-segment coefficient.
func (s *Scope) ExpandSegs(c T, g Segs) T {
	if !s.check(c, g.Index) {
		return T{}
	}
	if n := c.Numel(); n != g.Count() {
		return s.Fail(fmt.Errorf("expand segments: %d values for %d segments", n, g.Count()))
	}
	c32 := s.Flatten(c, 0, -1)
	if c.t.DType() != Float32 {
		c32 = s.Cast(c32, Float32)
	}
	return s.IndexSelect(c32, 0, g.Index)
}

// SegCounts turns a fraction per segment into an element count per
// segment: k = ⌊frac·size + 0.5⌋ (round half up), clamped to [0, size], as
// an int64 tensor of g.Count() values. frac is a register (0-d) or holds
// one value per segment; it is computed in float64. A NaN fraction gives an
// undefined count.
func (s *Scope) SegCounts(frac T, g Segs) T {
	if !s.check(frac, g.Lengths) {
		return T{}
	}
	if n := frac.Numel(); len(frac.Shape()) != 0 && n != g.Count() {
		return s.Fail(fmt.Errorf("segment counts: %d fractions for %d segments", n, g.Count()))
	}
	f := s.to64(frac)
	if len(frac.Shape()) != 0 {
		f = s.Flatten(f, 0, -1)
	}
	size := s.Cast(g.Lengths, Float64)
	k := s.Floor(s.AddScalar(s.Mul(f, size), 0.5))
	k = s.Minimum(s.ClampMin(k, 0), size)
	return s.Cast(k, Int64)
}

// segMax returns acc (zeros of one slot per segment) with, in each slot
// that idx names, the largest of src's elements there (src ≥ 0; NaN counts
// as the largest): index_reduce's "amax" with include_self, without that
// op, which libtorch marks beta and warns about on its first use in every
// process. Like TopKMask it sorts twice, by value and then stably by slot,
// so that the last element of each slot's group is the slot's largest.
func (s *Scope) segMax(acc, idx, src T) T {
	if !s.check(acc, idx, src) {
		return T{}
	}
	if src.Numel() == 0 {
		return acc
	}
	argsort := func(t T) T {
		return s.unary("argsort", t, func(t *ts.Tensor) (*ts.Tensor, error) { return t.ArgsortStable(true, 0, false, false) })
	}
	order := argsort(src)
	order = s.IndexSelect(order, 0, argsort(s.IndexSelect(idx, 0, order)))
	sorted := s.IndexSelect(src, 0, order)
	slots, dev := acc.Numel(), acc.Device()
	zero, one := s.Zeros([]int64{slots}, Int64, dev), s.Ones([]int64{slots}, Int64, dev)
	counts := s.Zeros([]int64{slots}, Int64, dev)
	if !s.check(counts, zero, one) {
		return T{}
	}
	ones := s.Ones([]int64{src.Numel()}, Int64, dev)
	if !s.check(ones) {
		return T{}
	}
	counts = s.op("index_add", func() (*ts.Tensor, error) { return counts.t.IndexAdd(0, idx.t, ones.t, false) })
	ends := s.unary("cumsum", counts, func(t *ts.Tensor) (*ts.Tensor, error) { return t.Cumsum(0, Int64, false) })
	last := s.IndexSelect(sorted, 0, s.Maximum(s.Sub(ends, one), zero))
	some := s.binary("gt", counts, zero, func(a, b *ts.Tensor) (*ts.Tensor, error) { return a.GtTensor(b, false) })
	return s.Where(some, last, acc)
}

// TopKMask sets the float32 (or other type) caller-owned dst of g.N
// elements to 1 where |xᵢ| is among the k[j] largest |x| of its segment j,
// else 0; among equal |x| the lower index wins (NaN counts as largest).
// k is an int64 tensor of one count per segment (SegCounts makes one). It
// sorts twice (by |x|, then stably by segment) and uses int64 temporaries of
// g.N elements.
func (s *Scope) TopKMask(dst, x T, g Segs, k T) {
	f := s.checkSegs("top-k mask", g, dst, x)
	if f == nil || !s.check(k) {
		return
	}
	f[0] = s.View(dst, g.N) // a view, never a copy: written in place
	if n := k.Numel(); n != g.Count() {
		s.Fail(fmt.Errorf("top-k mask: %d counts for %d segments", n, g.Count()))
		return
	}
	argsort := func(name string, t T, descending bool) T {
		return s.unary(name, t, func(t *ts.Tensor) (*ts.Tensor, error) { return t.ArgsortStable(true, 0, descending, false) })
	}
	// Elements by descending |x| (stable: lower index first among ties),
	// then grouped by segment keeping that order: position p of the result
	// holds the element of rank p − start within segment grouped[p] (Index
	// itself when the segments are contiguous).
	order := argsort("argsort", s.Abs(f[1]), true)
	seg := s.IndexSelect(g.Index, 0, order)
	pos := s.IndexSelect(order, 0, argsort("argsort", seg, false))
	grouped := g.Index // the segment of each position of the grouped order
	if g.strided {
		grouped = g.sorted
	}
	limit := s.IndexSelect(s.Add(g.Starts, s.Flatten(k, 0, -1)), 0, grouped)
	ramp := s.op("arange", func() (*ts.Tensor, error) {
		end := ts.IntScalar(g.N)
		defer end.MustDrop()
		return ts.Arange(end, Int64, g.Index.Device().d)
	})
	keep := s.Cast(s.binary("lt", ramp, limit, func(a, b *ts.Tensor) (*ts.Tensor, error) { return a.LtTensor(b, false) }), dst.t.DType())
	if !s.check(keep, pos) {
		return
	}
	s.inplace("scatter_", func() error { return f[0].t.Scatter_(0, pos.t, keep.t) })
}
