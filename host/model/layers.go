package model

import "github.com/optlab/optlab/host/tensor"

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
	vw := f.V[c.W]
	if f.ChannelsLast {
		vw = f.S.ChannelsLast(vw)
	}
	return f.local(out, f.S.Conv2d(f.S.Square(x), vw, vb, c.Stride, c.Pad, c.Groups))
}

// local samples outputs of mean mean and variance variance elementwise
// (the local reparameterization trick). The 1e-16 keeps the square root's
// gradient finite where the variance is 0, as the reference layers do.
func (f *Fwd) local(mean, variance tensor.T) tensor.T {
	noise := f.S.Randn(mean.Shape(), tensor.Float32, mean.Device())
	return f.S.Add(mean, f.S.Mul(f.S.Sqrt(f.S.AddScalar(variance, 1e-16)), noise))
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
	return f.local(out, f.S.Linear(f.S.Square(x), f.V[l.W], f.V[l.B]))
}
