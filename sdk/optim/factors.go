package optim

import (
	"fmt"
	"strings"
)

// VecShape says what an allocated vector holds (Alloc.Shape): its member's
// parameter layout (ParamShape, the zero value), or one square matrix per
// block of the member's matrix tensors (Matrices, cut by Tiles): the left
// factors (rows×rows, LeftFactor) or the right factors (cols×cols,
// RightFactor) of a Kronecker-factored preconditioner (Shampoo's L and R,
// SOAP's eigenbases). A factor vector is a flat float32 vector like any
// other: the elementwise, register and segment ops apply to it as to a
// parameter vector (its layout's tensors are its matrices, Factors), it is
// saved with the training state, counted in the memory reports and spilled
// like one. Protocol minor 8.
type VecShape int32

// Vector shapes.
const (
	ParamShape VecShape = iota
	LeftFactor
	RightFactor
	// SampleShape is a sample vector: Layout.BatchSize elements, one per
	// sample of a batch (Grad's OutLosses and Rank), one tensor "samples"
	// of Kind "samples". The elementwise, register and segment ops apply
	// to it as to any vector; it meets only sample vectors. Block is 0.
	// Protocol minor 10.
	SampleShape
)

func (s VecShape) String() string {
	switch s {
	case ParamShape:
		return "params"
	case LeftFactor:
		return "left"
	case RightFactor:
		return "right"
	case SampleShape:
		return "samples"
	}
	return fmt.Sprintf("VecShape(%d)", int32(s))
}

// MaxBlock is the largest side of a factor matrix: a matrix tensor whose
// rows (a left factor) or columns (a right factor) exceed it needs blocks
// (Alloc.Block ≤ MaxBlock). A factor of side 8192 is 256 MiB in float32,
// and the eigendecomposition of one costs minutes on a CPU.
const MaxBlock = 8192

// VecLayout names the layout of a vector: member Member's parameter layout
// (Shape ParamShape; Block 0), or its factor layout of Shape cut in blocks of
// side Block (0: whole rows and columns).
type VecLayout struct {
	Member int
	Shape  VecShape
	Block  int64
}

// Tile is one block of a matrix tensor's 2-D view [d0, d1·d2·…] (Matrix):
// rows Row…Row+Rows−1 and columns Col…Col+Cols−1 of Matrix, whose row-major
// elements start at Matrix.Offset of the flat vector.
type Tile struct {
	Matrix     Matrix
	Row, Col   int64
	Rows, Cols int64
}

// Tiles returns the blocks of m's matrices (Matrices) for a block side
// block (0 or negative: one tile per matrix): each matrix is cut into
// ⌈rows/block⌉ × ⌈cols/block⌉ tiles of side at most block, the last row and
// column of tiles taking the remainder, listed row-major within each matrix
// and matrix after matrix, in layout order. Distributed Shampoo blocks a
// large parameter the same way (each block its own factors).
func (m MemberLayout) Tiles(block int64) []Tile {
	var out []Tile
	for _, mx := range m.Matrices() {
		rb, cb := mx.Rows, mx.Cols
		if block > 0 {
			rb, cb = min(rb, block), min(cb, block)
		}
		for r := int64(0); r < mx.Rows; r += rb {
			for c := int64(0); c < mx.Cols; c += cb {
				out = append(out, Tile{Matrix: mx, Row: r, Col: c, Rows: min(rb, mx.Rows-r), Cols: min(cb, mx.Cols-c)})
			}
		}
	}
	return out
}

// Factors returns the layout of a factor vector of m (VecShape s ≠
// ParamShape, blocks of side block): one tensor per tile of m's matrices
// (Tiles(block)), of shape [rows, rows] (LeftFactor) or [cols, cols]
// (RightFactor), named after the tensor (and, with more than one tile per
// matrix, the tile's block row and column), of Kind "factor", tiling the
// vector in order. ParamShape gives m itself.
func (m MemberLayout) Factors(s VecShape, block int64) MemberLayout {
	if s == ParamShape {
		return m
	}
	out := MemberLayout{Arch: m.Arch}
	for _, t := range m.Tiles(block) {
		n := t.Rows
		if s == RightFactor {
			n = t.Cols
		}
		name := fmt.Sprintf("%s.%s", m.tensorName(t.Matrix.Tensor), strings.ToUpper(s.String()[:1]))
		if t.Rows < t.Matrix.Rows || t.Cols < t.Matrix.Cols { // block > 0
			name += fmt.Sprintf("[%d,%d]", t.Row/block, t.Col/block)
		}
		out.Tensors = append(out.Tensors, Tensor{Name: name, Shape: []int64{n, n}, Offset: out.Numel, Kind: "factor"})
		out.Numel += n * n
	}
	return out
}

// tensorName returns tensor i's name, or "tensor i" when it has none.
func (m MemberLayout) tensorName(i int) string {
	if i < len(m.Tensors) && m.Tensors[i].Name != "" {
		return m.Tensors[i].Name
	}
	return fmt.Sprintf("tensor %d", i)
}

// Of returns the layout of a vector of layout v (Factors of its member's
// layout; for SampleShape one tensor "samples" of BatchSize elements); a
// member out of range gives the zero MemberLayout.
func (l Layout) Of(v VecLayout) MemberLayout {
	if v.Member < 0 || v.Member >= len(l.Members) {
		return MemberLayout{}
	}
	if v.Shape == SampleShape {
		return MemberLayout{Arch: l.Members[v.Member].Arch, Numel: l.BatchSize,
			Tensors: []Tensor{{Name: "samples", Shape: []int64{l.BatchSize}, Kind: "samples"}}}
	}
	return l.Members[v.Member].Factors(v.Shape, v.Block)
}

// CheckFactors checks that member layout m can have factor vectors of
// shape s in blocks of side block: a shape it knows, a block in [0,
// MaxBlock] (0 for ParamShape), at least one matrix tensor, and no factor
// side above MaxBlock. Its error names the tensor and the block to use.
func (m MemberLayout) CheckFactors(s VecShape, block int64) error {
	if s < ParamShape || s > SampleShape {
		return fmt.Errorf("unknown vector shape %d", s)
	}
	if s == SampleShape {
		if block != 0 {
			return fmt.Errorf("block %d set for a sample vector: blocks apply to factor shapes (left, right)", block)
		}
		return nil
	}
	if block < 0 || block > MaxBlock {
		return fmt.Errorf("block %d is outside [0, %d] (0: whole rows and columns)", block, MaxBlock)
	}
	if s == ParamShape {
		if block != 0 {
			return fmt.Errorf("block %d set for a parameter-shaped vector: blocks apply to factor shapes (left, right)", block)
		}
		return nil
	}
	ms := m.Matrices()
	if len(ms) == 0 {
		return fmt.Errorf("a %s factor vector needs matrix tensors (2+ dims); this layout has none", s)
	}
	for _, mx := range ms {
		side := mx.Rows
		if s == RightFactor {
			side = mx.Cols
		}
		if block > 0 {
			side = min(side, block)
		}
		if side > MaxBlock {
			return fmt.Errorf("tensor %s, as the matrix %d×%d, would have a %s factor of %d×%d (%.1f GiB in float32), over the largest side %d: set a block size ≤ %d (Distributed Shampoo's default is 1024)",
				m.tensorName(mx.Tensor), mx.Rows, mx.Cols, s, side, side, float64(4*side*side)/(1<<30), MaxBlock, MaxBlock)
		}
	}
	return nil
}

// TilesOf returns the tiles the matrix ops (Gram, MatMul) cut a vector of
// layout v into: a parameter vector's matrices in blocks of side block
// (Tiles), a factor vector's own matrices, whole.
func (l Layout) TilesOf(v VecLayout, block int64) []Tile {
	if v.Shape != ParamShape {
		block = 0
	}
	return l.Of(v).Tiles(block)
}
