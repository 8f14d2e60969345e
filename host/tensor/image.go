package tensor

import (
	"fmt"

	"github.com/sugarme/gotch/ts"
)

// Image operations: what host/data/devset needs to compute corrupted test
// sets on the device (noise, blur, resampling, block transforms).

// SplitMixUniform returns n float32 values uniform in [0, 1) on d, a pure
// function of (n, seed): the top 24 bits of SplitMix64 hashes of the
// counters 1..n (SplitMixKeys), so the draw is the same on every device
// and libtorch and independent of torch's random generator.
func (s *Scope) SplitMixUniform(n, seed int64, d Device) T {
	z := s.SplitMixKeys(n, seed, d)
	// Logical shift right by 40 (the arithmetic shift's sign bits masked).
	z = s.intScalarOp("bitwise_right_shift", z, 40, (*ts.Tensor).BitwiseRightShiftTensorScalar)
	z = s.intScalarOp("bitwise_and", z, 1<<24-1, (*ts.Tensor).BitwiseAnd)
	return s.Scale(s.Cast(z, Float32), 1.0/(1<<24))
}

// LessScalar is the boolean t < v, elementwise.
func (s *Scope) LessScalar(t T, v float64) T {
	return s.unary("lt", t, func(t *ts.Tensor) (*ts.Tensor, error) {
		sc := ts.FloatScalar(v)
		defer sc.MustDrop()
		return t.Lt(sc, false)
	})
}

// Less is the boolean a < b, elementwise (broadcasting).
func (s *Scope) Less(a, b T) T {
	return s.binary("lt", a, b, func(a, b *ts.Tensor) (*ts.Tensor, error) { return a.LtTensor(b, false) })
}

// Round rounds half to even, elementwise.
func (s *Scope) Round(t T) T {
	return s.unary("round", t, func(t *ts.Tensor) (*ts.Tensor, error) { return t.Round(false) })
}

// ClampRange limits t to [lo, hi], elementwise.
func (s *Scope) ClampRange(t T, lo, hi float64) T {
	return s.unary("clamp", t, func(t *ts.Tensor) (*ts.Tensor, error) {
		l, h := ts.FloatScalar(lo), ts.FloatScalar(hi)
		defer l.MustDrop()
		defer h.MustDrop()
		return t.Clamp(l, h, false)
	})
}

// Matmul is torch.matmul (batched and broadcasting over leading dims).
func (s *Scope) Matmul(a, b T) T {
	return s.binary("matmul", a, b, func(a, b *ts.Tensor) (*ts.Tensor, error) { return a.Matmul(b, false) })
}

// Permute reorders t's dimensions.
func (s *Scope) Permute(t T, dims ...int64) T {
	return s.unary("permute", t, func(t *ts.Tensor) (*ts.Tensor, error) { return t.Permute(dims, false) })
}

// AmaxKeep is the maximum over dim, keeping the dimension.
func (s *Scope) AmaxKeep(t T, dim int64) T {
	return s.unary("amax", t, func(t *ts.Tensor) (*ts.Tensor, error) { return t.Amax([]int64{dim}, true, false) })
}

// MeanKeep is the mean over dims, keeping them (float32 or float64 t).
func (s *Scope) MeanKeep(t T, dims ...int64) T {
	return s.unary("mean", t, func(x *ts.Tensor) (*ts.Tensor, error) { return x.MeanDim(dims, true, x.DType(), false) })
}

// PadEdge pads the last two dims of a 4-D t by (left, right, top, bottom):
// "replicate" repeats the edge pixel (a b | b b), "reflect" mirrors about
// it (b c | b a, OpenCV's BORDER_REFLECT_101); reflect needs each pad
// smaller than the dimension.
func (s *Scope) PadEdge(t T, mode string, left, right, top, bottom int64) T {
	pad := []int64{left, right, top, bottom}
	switch mode {
	case "replicate":
		return s.unary("replication_pad2d", t, func(t *ts.Tensor) (*ts.Tensor, error) { return t.ReplicationPad2d(pad, false) })
	case "reflect":
		return s.unary("reflection_pad2d", t, func(t *ts.Tensor) (*ts.Tensor, error) { return t.ReflectionPad2d(pad, false) })
	}
	return s.Fail(fmt.Errorf("PadEdge: unknown mode %q (replicate or reflect)", mode))
}

// AffineSample warps the images x (N,C,H,W) by the affine maps theta
// (N,2,3, normalised coordinates as torch.nn.functional.affine_grid with
// align_corners false): output pixel p takes x at theta·(p, 1), bilinear,
// zero outside the image.
func (s *Scope) AffineSample(x, theta T) T {
	if !s.check(x, theta) {
		return T{}
	}
	grid := s.op("affine_grid_generator", func() (*ts.Tensor, error) {
		return ts.AffineGridGenerator(theta.t, x.Shape(), false)
	})
	if !s.check(grid) {
		return T{}
	}
	// interpolation 0 = bilinear, padding 0 = zeros
	return s.op("grid_sampler_2d", func() (*ts.Tensor, error) { return ts.GridSampler2d(x.t, grid.t, 0, 0, false) })
}

// Cos is the elementwise cosine.
func (s *Scope) Cos(t T) T {
	return s.unary("cos", t, func(t *ts.Tensor) (*ts.Tensor, error) { return t.Cos(false) })
}
