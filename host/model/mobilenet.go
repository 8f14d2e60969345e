package model

import (
	"fmt"

	"github.com/optlab/optlab/host/tensor"
)

// mbv2Stage is one row of MobileNetV2's configuration.
type mbv2Stage struct {
	expansion, out int64
	blocks         int
	stride         int64
}

// mobileNetV2CIFAR is kuangliu's configuration, with the second stage's
// stride changed from 2 to 1 for 32×32 input.
var mobileNetV2CIFAR = []mbv2Stage{
	{1, 16, 1, 1},
	{6, 24, 2, 1},
	{6, 32, 3, 2},
	{6, 64, 4, 2},
	{6, 96, 3, 1},
	{6, 160, 3, 2},
	{6, 320, 1, 1},
}

// invertedResidual is MobileNetV2's block: conv1×1 expansion-BN-ReLU,
// depthwise conv3×3(stride)-BN-ReLU, linear conv1×1 projection-BN; when the
// stride is 1 the input is added back, through a conv1×1-BN shortcut when
// the channel count changes.
type invertedResidual struct {
	conv1, conv2, conv3 Conv
	bn1, bn2, bn3       BN
	stride              int64
	short               *convBNShortcut
}

type mobileNetV2 struct {
	conv1, conv2 Conv
	bn1, bn2     BN
	blocks       []invertedResidual
	linear       Linear
}

// NewMobileNetV2 builds the CIFAR MobileNetV2 of kuangliu/pytorch-cifar
// (models/mobilenetv2.py), followed exactly: a 3×3 stem with 32 channels and
// stride 1, inverted-residual blocks with ReLU (not ReLU6) and strides
// 1/1/2/2/1/2/1 per stage, a 1×1 convolution to 1280 channels, BN-ReLU,
// global average pooling and a linear classifier (2,296,922 parameters on
// CIFAR-10). Unlike torchvision's, a stride-1 block whose channel count
// changes has a conv1×1-BN shortcut.
//
// Parameter names follow that code (conv1, bn1, layers.0.conv1, …,
// layers.1.shortcut.0, layers.1.shortcut.1, conv2, bn2, linear).
// Convolutions are initialized Kaiming normal with fan_out (as torchvision's
// MobileNetV2), BN γ=1 β=0, the classifier with PyTorch's default.
func NewMobileNetV2(arch string, classes int, in []int64) (*Model, error) {
	if len(in) != 3 {
		return nil, fmt.Errorf("%s needs image input (C,H,W), got shape %v", arch, in)
	}
	const ki = KaimingNormalFanOut
	b := NewBuilder()
	n := &mobileNetV2{
		conv1: b.Conv("conv1", in[0], 32, 3, 1, 1, 1, false, ki),
		bn1:   b.BN("bn1", 32),
	}
	c := int64(32)
	for _, st := range mobileNetV2CIFAR {
		for i := 0; i < st.blocks; i++ {
			stride := int64(1)
			if i == 0 {
				stride = st.stride
			}
			p := fmt.Sprintf("layers.%d", len(n.blocks))
			planes := st.expansion * c
			blk := invertedResidual{
				conv1:  b.Conv(p+".conv1", c, planes, 1, 1, 0, 1, false, ki),
				bn1:    b.BN(p+".bn1", planes),
				conv2:  b.Conv(p+".conv2", planes, planes, 3, stride, 1, planes, false, ki),
				bn2:    b.BN(p+".bn2", planes),
				conv3:  b.Conv(p+".conv3", planes, st.out, 1, 1, 0, 1, false, ki),
				bn3:    b.BN(p+".bn3", st.out),
				stride: stride,
			}
			if stride == 1 && c != st.out {
				blk.short = &convBNShortcut{
					c:  b.Conv(p+".shortcut.0", c, st.out, 1, 1, 0, 1, false, ki),
					bn: b.BN(p+".shortcut.1", st.out),
				}
			}
			n.blocks = append(n.blocks, blk)
			c = st.out
		}
	}
	n.conv2 = b.Conv("conv2", c, 1280, 1, 1, 0, 1, false, ki)
	n.bn2 = b.BN("bn2", 1280)
	n.linear = b.Linear("linear", 1280, int64(classes), false)
	return b.Build(arch, classes, in, n)
}

func (n *mobileNetV2) Forward(f *Fwd, x tensor.T) tensor.T {
	x = f.Chain(x, n.conv1, n.bn1, ReLU)
	for _, blk := range n.blocks {
		out := f.Seq(x, blk.conv1, blk.bn1, ReLU, blk.conv2, blk.bn2, ReLU, blk.conv3, blk.bn3)
		if blk.stride == 1 {
			short := x
			if blk.short != nil {
				short = f.Seq(x, blk.short.c, blk.short.bn)
			}
			sum := f.S.Add(out, short)
			f.Done(out, short)
			out = sum
		}
		f.Done(x)
		x = out
	}
	return f.Chain(x, n.conv2, n.bn2, ReLU, GlobalPool, n.linear)
}
