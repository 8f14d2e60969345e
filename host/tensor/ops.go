package tensor

import (
	"fmt"

	"github.com/sugarme/gotch/ts"
)

// ---- elementwise and reductions (out of place: results belong to the scope) ----

func (s *Scope) unary(name string, t T, f func(*ts.Tensor) (*ts.Tensor, error)) T {
	if !s.check(t) {
		return T{}
	}
	return s.op(name, func() (*ts.Tensor, error) { return f(t.t) })
}

func (s *Scope) binary(name string, a, b T, f func(a, b *ts.Tensor) (*ts.Tensor, error)) T {
	if !s.check(a, b) {
		return T{}
	}
	return s.op(name, func() (*ts.Tensor, error) { return f(a.t, b.t) })
}

// Add returns a + b (broadcasting).
func (s *Scope) Add(a, b T) T {
	return s.binary("add", a, b, func(a, b *ts.Tensor) (*ts.Tensor, error) { return a.Add(b, false) })
}

// Sub returns a − b.
func (s *Scope) Sub(a, b T) T {
	return s.binary("sub", a, b, func(a, b *ts.Tensor) (*ts.Tensor, error) { return a.Sub(b, false) })
}

// Mul returns a ⊙ b.
func (s *Scope) Mul(a, b T) T {
	return s.binary("mul", a, b, func(a, b *ts.Tensor) (*ts.Tensor, error) { return a.Mul(b, false) })
}

// Div returns a ⊘ b.
func (s *Scope) Div(a, b T) T {
	return s.binary("div", a, b, func(a, b *ts.Tensor) (*ts.Tensor, error) { return a.Div(b, false) })
}

// Maximum returns the elementwise maximum.
func (s *Scope) Maximum(a, b T) T {
	return s.binary("maximum", a, b, func(a, b *ts.Tensor) (*ts.Tensor, error) { return a.Maximum(b, false) })
}

// Minimum returns the elementwise minimum.
func (s *Scope) Minimum(a, b T) T {
	return s.binary("minimum", a, b, func(a, b *ts.Tensor) (*ts.Tensor, error) { return a.Minimum(b, false) })
}

// Scale returns α·t.
func (s *Scope) Scale(t T, alpha float64) T {
	return s.unary("mul_scalar", t, func(t *ts.Tensor) (*ts.Tensor, error) {
		sc := ts.FloatScalar(alpha)
		defer sc.MustDrop()
		return t.MulScalar(sc, false)
	})
}

// AddScalar returns t + v.
func (s *Scope) AddScalar(t T, v float64) T {
	return s.unary("add_scalar", t, func(t *ts.Tensor) (*ts.Tensor, error) {
		sc := ts.FloatScalar(v)
		defer sc.MustDrop()
		return t.AddScalar(sc, false)
	})
}

// EqScalar returns the boolean mask t == v.
func (s *Scope) EqScalar(t T, v float64) T {
	return s.unary("eq", t, func(t *ts.Tensor) (*ts.Tensor, error) {
		sc := ts.FloatScalar(v)
		defer sc.MustDrop()
		return t.Eq(sc, false)
	})
}

// Eq returns the mask a == b.
func (s *Scope) Eq(a, b T) T {
	return s.binary("eq", a, b, func(a, b *ts.Tensor) (*ts.Tensor, error) { return a.EqTensor(b, false) })
}

// Abs returns |t|.
func (s *Scope) Abs(t T) T {
	return s.unary("abs", t, func(t *ts.Tensor) (*ts.Tensor, error) { return t.Abs(false) })
}

// Sign returns sign(t).
func (s *Scope) Sign(t T) T {
	return s.unary("sign", t, func(t *ts.Tensor) (*ts.Tensor, error) { return t.Sign(false) })
}

// Sqrt returns √t.
func (s *Scope) Sqrt(t T) T {
	return s.unary("sqrt", t, func(t *ts.Tensor) (*ts.Tensor, error) { return t.Sqrt(false) })
}

// Square returns t².
func (s *Scope) Square(t T) T {
	return s.unary("square", t, func(t *ts.Tensor) (*ts.Tensor, error) { return t.Square(false) })
}

// Exp returns eᵗ.
func (s *Scope) Exp(t T) T {
	return s.unary("exp", t, func(t *ts.Tensor) (*ts.Tensor, error) { return t.Exp(false) })
}

// Log returns ln t.
func (s *Scope) Log(t T) T {
	return s.unary("log", t, func(t *ts.Tensor) (*ts.Tensor, error) { return t.Log(false) })
}

// Reciprocal returns 1/t.
func (s *Scope) Reciprocal(t T) T {
	return s.unary("reciprocal", t, func(t *ts.Tensor) (*ts.Tensor, error) { return t.Reciprocal(false) })
}

// Softplus returns log(1+eᵗ).
func (s *Scope) Softplus(t T) T {
	return s.unary("softplus", t, func(t *ts.Tensor) (*ts.Tensor, error) { return t.Softplus(false) })
}

// Relu returns max(t, 0).
func (s *Scope) Relu(t T) T {
	return s.unary("relu", t, func(t *ts.Tensor) (*ts.Tensor, error) { return t.Relu(false) })
}

// Relu6 returns min(max(t, 0), 6).
func (s *Scope) Relu6(t T) T {
	return s.unary("relu6", t, func(t *ts.Tensor) (*ts.Tensor, error) { return t.Relu6(false) })
}

// Silu returns t·σ(t) (swish).
func (s *Scope) Silu(t T) T {
	return s.unary("silu", t, func(t *ts.Tensor) (*ts.Tensor, error) { return t.Silu(false) })
}

// Sigmoid returns σ(t).
func (s *Scope) Sigmoid(t T) T {
	return s.unary("sigmoid", t, func(t *ts.Tensor) (*ts.Tensor, error) { return t.Sigmoid(false) })
}

// Where returns cond ? a : b.
func (s *Scope) Where(cond, a, b T) T {
	if !s.check(cond, a, b) {
		return T{}
	}
	return s.op("where", func() (*ts.Tensor, error) { return a.t.WhereSelf(cond.t, b.t, false) })
}

// Sum returns the sum of all elements as a 0-d tensor (accumulated in dt).
func (s *Scope) Sum(t T, dt DType) T {
	return s.unary("sum", t, func(t *ts.Tensor) (*ts.Tensor, error) { return t.Sum(dt, false) })
}

// Mean returns the mean of all elements as a 0-d tensor.
func (s *Scope) Mean(t T) T {
	return s.unary("mean", t, func(t *ts.Tensor) (*ts.Tensor, error) { return t.Mean(t.DType(), false) })
}

// dotChunk is the most elements Dot casts to float64 at once (32 MiB of
// float64): a vector up to this length is dotted in one float64 pass, a
// longer one chunk by chunk.
const dotChunk = 1 << 22

func dot(a, b *ts.Tensor) (*ts.Tensor, error) { return a.Dot(b, false) }

// Dot returns Σ aᵢbᵢ over all elements of a and b (any shapes with the same
// number of elements) as a 0-d float64 tensor on their device, accumulated
// in float64; the dot of empty tensors is 0. The float32 operands are cast
// to float64 chunk by chunk (at most 2²² elements, freed before the next),
// the chunks' float64 dots summed in float64: never a float64 copy of a
// whole vector, and for vectors up to a chunk the very float64 dot of the
// whole (bitwise what a full cast would give).
func (s *Scope) Dot(a, b T) T { return s.dotChunks(a, b, dotChunk) }

// Norm returns the global L2 norm of t (any shape) as a 0-d float64 tensor:
// √Dot(t, t), casting each chunk once.
func (s *Scope) Norm(t T) T { return s.Sqrt(s.dotChunks(t, t, dotChunk)) }

// dotChunks is Dot with chunks of c elements.
func (s *Scope) dotChunks(a, b T, c int64) T {
	if !s.check(a, b) {
		return T{}
	}
	n := a.Numel()
	if m := b.Numel(); m != n {
		return s.Fail(fmt.Errorf("dot: %d and %d elements", n, m))
	}
	fa, fb := s.Flatten(a, 0, -1), s.Flatten(b, 0, -1) // dot takes 1-D tensors only
	var sum T
	for off := int64(0); off == 0 || off < n; off += c {
		cs := NewScope() // the chunk's float64 copies go when it is done
		ca := cs.to64(cs.Narrow(fa, 0, off, min(c, n-off)))
		cb := ca
		if !a.Same(b) {
			cb = cs.to64(cs.Narrow(fb, 0, off, min(c, n-off)))
		}
		d := cs.binary("dot", ca, cb, dot)
		if err := cs.Err(); err != nil {
			cs.Close()
			return s.Fail(err)
		}
		d = s.Adopt(cs.Keep(d))
		cs.Close()
		if sum.Valid() {
			sum = s.Add(sum, d)
		} else {
			sum = d
		}
	}
	return sum
}

// to64 casts t to float64 unless it is float64 already.
func (s *Scope) to64(t T) T {
	if t.Valid() && t.t.DType() == Float64 {
		return t
	}
	return s.Cast(t, Float64)
}

// Stack stacks same-shaped tensors along a new dim.
func (s *Scope) Stack(dim int64, xs ...T) T {
	if !s.check(xs...) {
		return T{}
	}
	raw := make([]*ts.Tensor, len(xs))
	for i, x := range xs {
		raw[i] = x.t
	}
	return s.op("stack", func() (*ts.Tensor, error) { return ts.Stack(raw, dim) })
}

// ---- in place, on caller-owned tensors (kept tensors or views of them) ----

// ScaleInPlace sets dst = α·dst.
func (s *Scope) ScaleInPlace(dst T, alpha float64) {
	if !s.check(dst) {
		return
	}
	sc := ts.FloatScalar(alpha)
	defer sc.MustDrop()
	s.inplace("mul_", func() error { return dst.t.MulScalar_(sc) })
}

// AddScalarInPlace sets dst = dst + v.
func (s *Scope) AddScalarInPlace(dst T, v float64) {
	if !s.check(dst) {
		return
	}
	sc := ts.FloatScalar(v)
	defer sc.MustDrop()
	s.inplace("add_", func() error { return dst.t.AddScalar_(sc) })
}

// AddInPlace sets dst = dst + x.
func (s *Scope) AddInPlace(dst, x T) {
	if !s.check(dst, x) {
		return
	}
	s.inplace("add_", func() error { return dst.t.Add_(x.t) })
}

// Axpy sets dst = dst + α·x.
func (s *Scope) Axpy(dst T, alpha float64, x T) {
	switch alpha {
	case 0:
		return
	case 1:
		s.AddInPlace(dst, x)
	default:
		s.AddInPlace(dst, s.Scale(x, alpha))
	}
}

// MulInPlace sets dst = dst ⊙ x.
func (s *Scope) MulInPlace(dst, x T) {
	if !s.check(dst, x) {
		return
	}
	s.inplace("mul_", func() error { return dst.t.Mul_(x.t) })
}

// NormalInPlace fills a caller-owned tensor with N(mean, std²) draws from
// torch's global generator.
func (s *Scope) NormalInPlace(dst T, mean, std float64) {
	if !s.check(dst) {
		return
	}
	s.inplace("normal_", func() error { return dst.t.Normal_(mean, std) })
}

// UniformInPlace fills a caller-owned tensor with U(lo, hi) draws.
func (s *Scope) UniformInPlace(dst T, lo, hi float64) {
	if !s.check(dst) {
		return
	}
	s.inplace("uniform_", func() error { return dst.t.Uniform_(lo, hi) })
}

// ---- neural-network ops ----

// Conv2d is a 2-D convolution (bias may be the zero T).
func (s *Scope) Conv2d(x, w, b T, stride, pad, groups int64) T {
	if !s.check(x, w) {
		return T{}
	}
	return s.op("conv2d", func() (*ts.Tensor, error) {
		return ts.Conv2d(x.t, w.t, opt(b), []int64{stride, stride}, []int64{pad, pad}, []int64{1, 1}, groups)
	})
}

// BatchNorm normalizes x (N,C,…) per channel. In training mode it uses batch
// statistics and updates the running statistics in place with momentum
// (momentum 0 leaves them unchanged); in eval mode it uses them.
func (s *Scope) BatchNorm(x, w, b, runMean, runVar T, train bool, momentum, eps float64) T {
	if !s.check(x) {
		return T{}
	}
	return s.op("batch_norm", func() (*ts.Tensor, error) {
		return ts.BatchNorm(x.t, opt(w), opt(b), opt(runMean), opt(runVar), train, momentum, eps, true)
	})
}

// Linear returns x·wᵀ + b.
func (s *Scope) Linear(x, w, b T) T {
	if !s.check(x, w) {
		return T{}
	}
	return s.op("linear", func() (*ts.Tensor, error) { return ts.Linear(x.t, w.t, opt(b)) })
}

// AdaptiveAvgPool2d pools to an out×out map.
func (s *Scope) AdaptiveAvgPool2d(x T, out int64) T {
	return s.unary("adaptive_avg_pool2d", x, func(x *ts.Tensor) (*ts.Tensor, error) {
		return x.AdaptiveAvgPool2d([]int64{out, out}, false)
	})
}

// AvgPool2d is average pooling with a square kernel.
func (s *Scope) AvgPool2d(x T, k, stride, pad int64) T {
	return s.unary("avg_pool2d", x, func(x *ts.Tensor) (*ts.Tensor, error) {
		return x.AvgPool2d([]int64{k, k}, []int64{stride, stride}, []int64{pad, pad}, false, true, nil, false)
	})
}

// MaxPool2d is max pooling with a square kernel.
func (s *Scope) MaxPool2d(x T, k, stride, pad int64) T {
	return s.unary("max_pool2d", x, func(x *ts.Tensor) (*ts.Tensor, error) {
		return x.MaxPool2d([]int64{k, k}, []int64{stride, stride}, []int64{pad, pad}, []int64{1, 1}, false, false)
	})
}

// LogSoftmax along dim.
func (s *Scope) LogSoftmax(x T, dim int64) T {
	return s.unary("log_softmax", x, func(x *ts.Tensor) (*ts.Tensor, error) { return x.LogSoftmax(dim, x.DType(), false) })
}

// Softmax along dim.
func (s *Scope) Softmax(x T, dim int64) T {
	return s.unary("softmax", x, func(x *ts.Tensor) (*ts.Tensor, error) { return x.Softmax(dim, x.DType(), false) })
}

// CrossEntropy returns the mean cross-entropy of logits (N,C) against int64
// targets (N), with PyTorch's label smoothing (s/C spread on every class).
func (s *Scope) CrossEntropy(logits, target T, smoothing float64) T {
	if !s.check(logits, target) {
		return T{}
	}
	return s.op("cross_entropy", func() (*ts.Tensor, error) {
		return logits.t.CrossEntropyLoss(target.t, ts.None, 1, -100, smoothing, false)
	})
}

// Argmax along dim.
func (s *Scope) Argmax(x T, dim int64) T {
	return s.unary("argmax", x, func(x *ts.Tensor) (*ts.Tensor, error) { return x.Argmax([]int64{dim}, false, false) })
}

// Scalars reads 0-d tensors into Go with one device synchronization.
func (s *Scope) Scalars(xs ...T) []float64 {
	if len(xs) == 0 || s.err != nil {
		return nil
	}
	cast := make([]T, len(xs))
	for i, x := range xs {
		cast[i] = s.View(s.Cast(x, Float64), 1)
	}
	v := s.Float64s(s.Cat(0, cast...))
	if s.err == nil && len(v) != len(xs) {
		s.Fail(fmt.Errorf("scalars: read %d values for %d tensors", len(v), len(xs)))
	}
	return v
}

// Expand broadcasts t to shape without copying (−1 keeps a size).
func (s *Scope) Expand(t T, shape ...int64) T {
	return s.unary("expand", t, func(t *ts.Tensor) (*ts.Tensor, error) { return t.Expand(shape, false, false) })
}

// ClampMin returns max(t, lo) elementwise.
func (s *Scope) ClampMin(t T, lo float64) T {
	return s.unary("clamp_min", t, func(t *ts.Tensor) (*ts.Tensor, error) {
		sc := ts.FloatScalar(lo)
		defer sc.MustDrop()
		return t.ClampMin(sc, false)
	})
}

// ChannelsLast returns a 4-D tensor (N,C,H,W) with the same shape and
// values laid out NHWC in memory (PyTorch's torch.channels_last: strides
// C·H·W, 1, W·C, C), which oneDNN and cuDNN convolutions take without a
// conversion and propagate to their outputs. gotch has no memory-format
// argument; the layout is made by a contiguous copy of the NHWC
// permutation, viewed back as NCHW (differentiable: its backward is the
// inverse permutation). A tensor already in that layout is returned as is.
func (s *Scope) ChannelsLast(t T) T {
	if !s.check(t) {
		return T{}
	}
	sh := t.Shape()
	if len(sh) != 4 {
		return s.Fail(fmt.Errorf("channels_last: want a 4-D tensor, got shape %v", sh))
	}
	if isChannelsLast(t) {
		return t
	}
	p := s.op("permute", func() (*ts.Tensor, error) { return t.t.Permute([]int64{0, 2, 3, 1}, false) })
	p = s.Contiguous(p)
	if !s.check(p) {
		return T{}
	}
	return s.op("permute", func() (*ts.Tensor, error) { return p.t.Permute([]int64{0, 3, 1, 2}, false) })
}

// Strides returns t's strides in elements.
func (t T) Strides() []int64 {
	if t.t == nil {
		return nil
	}
	st, _ := t.t.Stride()
	return st
}

// isChannelsLast tells whether a 4-D tensor has NHWC strides.
func isChannelsLast(t T) bool {
	sh, st := t.Shape(), t.Strides()
	if len(sh) != 4 || len(st) != 4 {
		return false
	}
	c, h, w := sh[1], sh[2], sh[3]
	return st[1] == 1 && st[3] == c && st[2] == w*c && st[0] == h*w*c
}

// ChannelsLastSound checks, on device d, that this libtorch computes in
// channels_last what it computes in the contiguous layout: a 1×1
// convolution of stride 2 from 256 to 512 channels of 4×4 maps (a
// ResNet's last downsampling shortcut), within 1e-4 relative. Debian 13's
// libtorch 2.6 gets it 12 % wrong through oneDNN on some CPUs (an AMD EPYC
// "Turin"-class KVM guest; PyTorch itself does the same), which the
// resnets' last stage then carries to the logits. The error says so.
func ChannelsLastSound(d Device) error {
	s := NewScope()
	defer s.Close()
	x := s.Randn([]int64{2, 256, 4, 4}, Float32, d)
	w := s.Randn([]int64{512, 256, 1, 1}, Float32, d)
	want := s.Conv2d(x, w, T{}, 2, 0, 1)
	got := s.Conv2d(s.ChannelsLast(x), s.ChannelsLast(w), T{}, 2, 0, 1)
	v := s.Scalars(s.Norm(s.Sub(s.Contiguous(got), want)), s.Norm(want))
	if err := s.Err(); err != nil {
		return fmt.Errorf("checking channels_last convolutions: %w", err)
	}
	if rel := v[0] / v[1]; !(rel <= 1e-4) {
		return fmt.Errorf("this libtorch (%s) computes a 1×1 stride-2 convolution in channels_last %.2g (relative) away from the contiguous result on this machine's %s: its channels_last results cannot be trusted here; use model.memory_format = \"contiguous\"", LibtorchVersion(), rel, d)
	}
	return nil
}

// CrossEntropyEach is CrossEntropy without the mean: the loss of every
// sample, a 1-D tensor of the batch's length (reduction "none").
func (s *Scope) CrossEntropyEach(logits, target T, smoothing float64) T {
	if !s.check(logits, target) {
		return T{}
	}
	return s.op("cross_entropy", func() (*ts.Tensor, error) {
		return logits.t.CrossEntropyLoss(target.t, ts.None, 0, -100, smoothing, false)
	})
}

// TopIndices returns the int64 positions of the k largest values of the
// 1-D x (among equal values the lower position first; NaN counts as
// largest), in ascending order of position: a fixed-size selection that
// stays on the device (no read-back).
func (s *Scope) TopIndices(x T, k int64) T {
	argsort := func(t T, descending bool) T {
		return s.unary("argsort", t, func(t *ts.Tensor) (*ts.Tensor, error) { return t.ArgsortStable(true, 0, descending, false) })
	}
	top := s.Narrow(argsort(x, true), 0, 0, k)
	return s.IndexSelect(top, 0, argsort(top, false))
}

// IndexCopyInto sets dst[idx[i]] = src[i] along dim 0 of the caller-owned
// dst, in place.
func (s *Scope) IndexCopyInto(dst, idx, src T) {
	if !s.check(dst, idx, src) {
		return
	}
	s.inplace("index_copy_", func() error { return dst.t.IndexCopy_(0, idx.t, src.t) })
}
