package model

import (
	"fmt"

	"github.com/optlab/optlab/host/tensor"
)

// effStage is one row of EfficientNet's configuration.
type effStage struct {
	expansion, out int64
	blocks         int
	kernel, stride int64
}

// efficientNetB0CIFAR is kuangliu's EfficientNet-B0 configuration (the
// 32×32 stem has stride 1; stage strides are those of B0).
var efficientNetB0CIFAR = []effStage{
	{1, 16, 1, 3, 1},
	{6, 24, 2, 3, 2},
	{6, 40, 2, 5, 2},
	{6, 80, 3, 3, 2},
	{6, 112, 3, 5, 1},
	{6, 192, 4, 5, 2},
	{6, 320, 1, 3, 1},
}

// mbConv is EfficientNet's block: conv1×1 expansion-BN-swish (absent when the
// expansion is 1), depthwise conv k×k(stride)-BN-swish, squeeze-excitation
// (global pool, conv1×1-swish-conv1×1-sigmoid gate), conv1×1 projection-BN,
// plus the input when the stride is 1 and the channel count is unchanged.
type mbConv struct {
	expand   bool
	conv1    Conv
	bn1      BN
	conv2    Conv
	bn2      BN
	se1, se2 Conv
	conv3    Conv
	bn3      BN
	residual bool
}

type efficientNet struct {
	conv1  Conv
	bn1    BN
	blocks []mbConv
	linear Linear
}

// NewEfficientNetB0 builds the CIFAR EfficientNet-B0 of kuangliu/pytorch-cifar
// (models/efficientnet.py): a 3×3 stem with 32 channels and stride 1,
// BN-swish, the B0 stages of MBConv blocks with squeeze-excitation (SE width
// ⌊0.25·block input channels⌋), global average pooling straight after the
// last block (no 1×1 head convolution, as there) and a linear classifier.
//
// Differences from that code: the first block (expansion 1) has no expansion
// convolution; kuangliu registers one (layers.0.conv1, layers.0.bn1: 1,088
// parameters) but never uses it, so its count is 3,599,686 on CIFAR-10 and
// this one 3,598,598. Drop-connect and the 0.2 dropout before the
// classifier are not applied (the reference's drop-connect rate is in
// effect always 0, since its block counter is never incremented; its
// dropout is omitted so that every forward pass is deterministic).
//
// Parameter names follow that code (conv1, bn1, layers.0.conv2, …,
// layers.1.conv1, layers.1.se.se1, layers.1.se.se2, …, linear).
// Convolutions are initialized Kaiming normal with fan_out and their biases
// (the SE convolutions') zero, as torchvision's EfficientNet; BN γ=1 β=0;
// the classifier with PyTorch's default.
func NewEfficientNetB0(arch string, classes int, in []int64) (*Model, error) {
	if len(in) != 3 {
		return nil, fmt.Errorf("%s needs image input (C,H,W), got shape %v", arch, in)
	}
	const ki = KaimingNormalFanOut
	b := NewBuilder()
	n := &efficientNet{
		conv1: b.Conv("conv1", in[0], 32, 3, 1, 1, 1, false, ki),
		bn1:   b.BN("bn1", 32),
	}
	c := int64(32)
	for _, st := range efficientNetB0CIFAR {
		for i := 0; i < st.blocks; i++ {
			stride := int64(1)
			if i == 0 {
				stride = st.stride
			}
			p := fmt.Sprintf("layers.%d", len(n.blocks))
			planes := st.expansion * c
			se := c / 4 // int(in_channels · 0.25)
			blk := mbConv{expand: st.expansion != 1, residual: stride == 1 && c == st.out}
			if blk.expand {
				blk.conv1 = b.Conv(p+".conv1", c, planes, 1, 1, 0, 1, false, ki)
				blk.bn1 = b.BN(p+".bn1", planes)
			}
			blk.conv2 = b.Conv(p+".conv2", planes, planes, st.kernel, stride, (st.kernel-1)/2, planes, false, ki)
			blk.bn2 = b.BN(p+".bn2", planes)
			blk.se1 = b.convZeroBias(p+".se.se1", planes, se, ki)
			blk.se2 = b.convZeroBias(p+".se.se2", se, planes, ki)
			blk.conv3 = b.Conv(p+".conv3", planes, st.out, 1, 1, 0, 1, false, ki)
			blk.bn3 = b.BN(p+".bn3", st.out)
			n.blocks = append(n.blocks, blk)
			c = st.out
		}
	}
	n.linear = b.Linear("linear", c, int64(classes), false)
	return b.Build(arch, classes, in, n)
}

// convZeroBias registers a 1×1 convolution with a bias initialized to zero.
func (b *Builder) convZeroBias(name string, in, out int64, init InitKind) Conv {
	c := b.Conv(name, in, out, 1, 1, 0, 1, false, init)
	c.Bias = b.Param(name+".bias", []int64{out}, "bias", Init{Kind: Zeros})
	return c
}

func (n *efficientNet) Forward(f *Fwd, x tensor.T) tensor.T {
	s := f.S
	x = f.Chain(x, n.conv1, n.bn1, SiLU)
	for _, blk := range n.blocks {
		out := x
		if blk.expand {
			out = f.Seq(x, blk.conv1, blk.bn1, SiLU)
		}
		h := f.Seq(out, blk.conv2, blk.bn2, SiLU)
		if !out.Same(x) {
			f.Done(out)
		}
		w := f.Seq(h, squeeze, blk.se1, SiLU, blk.se2, Sigmoid)
		excited := s.Mul(h, w)
		f.Done(h, w)
		out = f.Chain(excited, blk.conv3, blk.bn3)
		if blk.residual {
			sum := s.Add(out, x)
			f.Done(out)
			out = sum
		}
		f.Done(x)
		x = out
	}
	return f.Chain(x, GlobalPool, n.linear)
}

// squeeze is the squeeze-and-excitation's global average pool (N×C×1×1).
var squeeze Layer = Fn(func(f *Fwd, x tensor.T) tensor.T { return f.S.AdaptiveAvgPool2d(x, 1) })
