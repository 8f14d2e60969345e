package model

import (
	"strings"

	"github.com/optlab/optlab/host/tensor"
)

// Conv is a 2-D convolution layer (bias index −1 when it has none).
type Conv struct {
	W, Bias             int
	Stride, Pad, Groups int64
}

// Conv registers name.weight (and name.bias) for a k×k convolution.
func (b *Builder) Conv(name string, in, out, k, stride, pad, groups int64, bias bool, init InitKind) Conv {
	c := Conv{Bias: -1, Stride: stride, Pad: pad, Groups: groups}
	c.W = b.Param(name+".weight", []int64{out, in / groups, k, k}, "weight", Init{Kind: init})
	if bias {
		c.Bias = b.Param(name+".bias", []int64{out}, "bias", Init{Kind: TorchDefault, FanIn: in / groups * k * k})
	}
	return c
}

// Forward applies the convolution.
func (c Conv) Forward(f *Fwd, x tensor.T) tensor.T {
	var bias, vb tensor.T
	if c.Bias >= 0 {
		bias = f.P[c.Bias]
	}
	w := f.P[c.W]
	if f.ChannelsLast {
		w = f.S.ChannelsLast(w)
	}
	out := f.S.Conv2d(x, w, bias, c.Stride, c.Pad, c.Groups)
	if f.V == nil {
		return out
	}
	if c.Bias >= 0 {
		vb = f.V[c.Bias]
	}
	x2 := f.S.Square(x)
	vw := f.V[c.W]
	if f.ChannelsLast {
		vw = f.S.ChannelsLast(vw)
	}
	v := f.S.Conv2d(x2, vw, vb, c.Stride, c.Pad, c.Groups)
	f.Done(x2)
	return f.local(out, v)
}

// local samples outputs of mean mean and variance variance elementwise
// (the local reparameterization trick). The 1e-16 keeps the square root's
// gradient finite where the variance is 0, as the reference layers do.
// Both are released.
func (f *Fwd) local(mean, variance tensor.T) tensor.T {
	s := f.S
	noise := s.Randn(mean.Shape(), tensor.Float32, mean.Device())
	v := s.AddScalar(variance, 1e-16)
	f.Done(variance)
	sd := s.Sqrt(v)
	f.Done(v)
	e := s.Mul(sd, noise)
	f.Done(sd, noise)
	out := s.Add(mean, e)
	f.Done(mean, e)
	return out
}

// BN is a BatchNorm layer: affine γ (1), β (0), running mean (0) and var (1).
type BN struct{ W, B, Mean, Var int }

// BN registers name.{weight,bias,running_mean,running_var}.
func (b *Builder) BN(name string, c int64) BN {
	return BN{
		W:    b.Param(name+".weight", []int64{c}, "bn", Init{Kind: Ones}),
		B:    b.Param(name+".bias", []int64{c}, "bn", Init{Kind: Zeros}),
		Mean: b.Buffer(name+".running_mean", []int64{c}, 0),
		Var:  b.Buffer(name+".running_var", []int64{c}, 1),
	}
}

// Forward normalizes x.
func (n BN) Forward(f *Fwd, x tensor.T) tensor.T {
	return f.S.BatchNorm(x, f.P[n.W], f.P[n.B], f.B[n.Mean], f.B[n.Var], f.Train, f.BNMomentum, 1e-5)
}

// Linear is a fully connected layer.
type Linear struct{ W, B int }

// Linear registers name.weight and name.bias with PyTorch's default
// initialization, or zeros when zero is set (the WRN reference code).
func (b *Builder) Linear(name string, in, out int64, zero bool) Linear {
	wi, bi := Init{Kind: TorchDefault}, Init{Kind: TorchDefault, FanIn: in}
	if zero {
		wi, bi = Init{Kind: Zeros}, Init{Kind: Zeros}
	}
	return Linear{
		W: b.Param(name+".weight", []int64{out, in}, "weight", wi),
		B: b.Param(name+".bias", []int64{out}, "bias", bi),
	}
}

// Forward applies x·Wᵀ + b.
func (l Linear) Forward(f *Fwd, x tensor.T) tensor.T {
	out := f.S.Linear(x, f.P[l.W], f.P[l.B])
	if f.V == nil {
		return out
	}
	x2 := f.S.Square(x)
	v := f.S.Linear(x2, f.V[l.W], f.V[l.B])
	f.Done(x2)
	return f.local(out, v)
}

// Layer is one step of a forward pass: Conv, BN, Linear, or an Fn.
type Layer interface {
	Forward(f *Fwd, x tensor.T) tensor.T
}

// Fn is a Layer made of a function (activations, pooling).
type Fn func(f *Fwd, x tensor.T) tensor.T

// Forward applies the function.
func (g Fn) Forward(f *Fwd, x tensor.T) tensor.T { return g(f, x) }

// Activations and pooling as layers.
var (
	ReLU    Layer = Fn(func(f *Fwd, x tensor.T) tensor.T { return f.S.Relu(x) })
	ReLU6   Layer = Fn(func(f *Fwd, x tensor.T) tensor.T { return f.S.Relu6(x) })
	SiLU    Layer = Fn(func(f *Fwd, x tensor.T) tensor.T { return f.S.Silu(x) })
	Sigmoid Layer = Fn(func(f *Fwd, x tensor.T) tensor.T { return f.S.Sigmoid(x) })
	// GlobalPool is global average pooling, flattened to N×C.
	GlobalPool Layer = Fn(func(f *Fwd, x tensor.T) tensor.T {
		p := f.S.AdaptiveAvgPool2d(x, 1)
		out := f.S.Flatten(p, 1, -1)
		f.Done(p)
		return out
	})
	// Flatten flattens all dims but the first.
	Flatten Layer = Fn(func(f *Fwd, x tensor.T) tensor.T { return f.S.Flatten(x, 1, -1) })
)

// MaxPool is k×k max pooling with stride k.
func MaxPool(k int64) Layer {
	return Fn(func(f *Fwd, x tensor.T) tensor.T { return f.S.MaxPool2d(x, k, k, 0) })
}

// AvgPool is k×k average pooling with stride k.
func AvgPool(k int64) Layer {
	return Fn(func(f *Fwd, x tensor.T) tensor.T { return f.S.AvgPool2d(x, k, k, 0) })
}

// Seq applies layers to x in turn and returns the last output, releasing
// each intermediate output as soon as the next layer has read it; x itself
// is left to the caller (it may be read again: a shortcut).
func (f *Fwd) Seq(x tensor.T, layers ...Layer) tensor.T {
	h := x
	for _, l := range layers {
		ok := f.S.Err() == nil
		y := l.Forward(f, h)
		if ok && f.S.Err() != nil {
			f.S.Annotate(f.layerName(l))
		}
		if !h.Same(x) && !h.Same(y) {
			f.Done(h)
		}
		h = y
	}
	return h
}

// named is a layer with parameters: the index of its first (its weight).
type named interface{ weight() int }

func (c Conv) weight() int   { return c.W }
func (b BN) weight() int     { return b.W }
func (l Linear) weight() int { return l.W }

// layerName returns the name of layer l ("layer1.0.conv1", its weight's
// name less ".weight"), or "" for a layer without parameters.
func (f *Fwd) layerName(l Layer) string {
	n, ok := l.(named)
	if !ok || n.weight() < 0 || n.weight() >= len(f.Params) {
		return ""
	}
	return strings.TrimSuffix(f.Params[n.weight()].Name, ".weight")
}

// Chain is Seq that also releases x: nothing reads it afterwards.
func (f *Fwd) Chain(x tensor.T, layers ...Layer) tensor.T {
	y := f.Seq(x, layers...)
	if !y.Same(x) {
		f.Done(x)
	}
	return y
}

// Done releases intermediates of the pass that no later layer reads: their
// memory is freed at once unless autograd saved them for the backward pass
// or a view still refers to them. Pass only activations: the parameter
// views are read by later layers, and the pass's input, made outside the
// pass's scope, is never released.
func (f *Fwd) Done(ts ...tensor.T) { f.S.Release(ts...) }
