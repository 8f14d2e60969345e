package model

import (
	"fmt"

	"github.com/optlab/optlab/host/tensor"
)

type basicBlock struct {
	conv1, conv2 Conv
	bn1, bn2     BN
	short        *convBNShortcut
}

type convBNShortcut struct {
	c  Conv
	bn BN
}

type resnet struct {
	conv1  Conv
	bn1    BN
	blocks []basicBlock
	linear Linear
}

// NewResNet is the CIFAR ResNet of the reference code (kuangliu style): a
// 3×3 stem with 64 channels, no max-pool, four stages of basic blocks with
// widths 64/128/256/512 and strides 1/2/2/2, global average pooling.
// blocks [1,1,1,1] is ResNet-10, [2,2,2,2] ResNet-18. Parameter names match
// that code (conv1, bn1, layer1.0.conv1, …, layer2.0.shortcut.0, linear).
func NewResNet(arch string, blocks []int, classes int, in []int64) (*Model, error) {
	if len(in) != 3 {
		return nil, fmt.Errorf("%s needs image input (C,H,W), got shape %v", arch, in)
	}
	b := NewBuilder()
	n := &resnet{
		conv1: b.Conv("conv1", in[0], 64, 3, 1, 1, 1, false, KaimingNormalFanIn),
		bn1:   b.BN("bn1", 64),
	}
	inPlanes := int64(64)
	for stage, nb := range blocks {
		planes := int64(64) << stage
		for i := 0; i < nb; i++ {
			stride := int64(1)
			if i == 0 && stage > 0 {
				stride = 2
			}
			p := fmt.Sprintf("layer%d.%d", stage+1, i)
			blk := basicBlock{
				conv1: b.Conv(p+".conv1", inPlanes, planes, 3, stride, 1, 1, false, KaimingNormalFanIn),
				bn1:   b.BN(p+".bn1", planes),
				conv2: b.Conv(p+".conv2", planes, planes, 3, 1, 1, 1, false, KaimingNormalFanIn),
				bn2:   b.BN(p+".bn2", planes),
			}
			if stride != 1 || inPlanes != planes {
				blk.short = &convBNShortcut{
					c:  b.Conv(p+".shortcut.0", inPlanes, planes, 1, stride, 0, 1, false, KaimingNormalFanIn),
					bn: b.BN(p+".shortcut.1", planes),
				}
			}
			n.blocks = append(n.blocks, blk)
			inPlanes = planes
		}
	}
	n.linear = b.Linear("linear", inPlanes, int64(classes), false)
	return b.Build(arch, classes, in, n)
}

func (n *resnet) Forward(f *Fwd, x tensor.T) tensor.T {
	x = f.Chain(x, n.conv1, n.bn1, ReLU)
	for _, blk := range n.blocks {
		out := f.Seq(x, blk.conv1, blk.bn1, ReLU, blk.conv2, blk.bn2)
		short := x
		if blk.short != nil {
			short = f.Seq(x, blk.short.c, blk.short.bn)
		}
		sum := f.S.Add(out, short)
		f.Done(out, short, x)
		x = f.Chain(sum, ReLU)
	}
	return f.Chain(x, GlobalPool, n.linear)
}
