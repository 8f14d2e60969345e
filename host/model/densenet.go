package model

import (
	"fmt"
	"math"

	"github.com/optlab/optlab/host/tensor"
)

// denseLayer is DenseNet's bottleneck layer: BN-ReLU-conv1×1(4g)-BN-ReLU-
// conv3×3(g), whose g new channels are concatenated in front of its input.
type denseLayer struct {
	bn1, bn2     BN
	conv1, conv2 Conv
}

// denseTransition is BN-ReLU-conv1×1 followed by 2×2 average pooling.
type denseTransition struct {
	bn   BN
	conv Conv
}

type denseNet struct {
	conv1  Conv
	dense  [][]denseLayer
	trans  []denseTransition
	bn     BN
	linear Linear
}

// NewDenseNet builds the CIFAR DenseNet-BC of kuangliu/pytorch-cifar
// (models/densenet.py): a 3×3 stem convolution with 2g channels (no BN, no
// pooling), four dense blocks of bottleneck layers with growth rate g,
// transitions that compress the channels to ⌊reduction·c⌋ and halve the
// resolution, then BN-ReLU, global average pooling and a linear classifier.
// blocks [6,12,24,16] with g = 32 is DenseNet-121 (6,956,298 parameters on
// CIFAR-10).
//
// Parameter names follow that code (conv1, dense1.0.bn1, dense1.0.conv1, …,
// trans1.bn, trans1.conv, …, bn, linear). Convolutions are initialized
// Kaiming normal with fan_in (as torchvision's DenseNet), BN γ=1 β=0, the
// classifier with PyTorch's default. Height and width must be at least 8.
func NewDenseNet(arch string, blocks []int, growth int64, reduction float64, classes int, in []int64) (*Model, error) {
	if len(in) != 3 {
		return nil, fmt.Errorf("%s needs image input (C,H,W), got shape %v", arch, in)
	}
	if in[1] < 8 || in[2] < 8 {
		return nil, fmt.Errorf("%s needs height and width of at least 8, got %v", arch, in)
	}
	b := NewBuilder()
	c := 2 * growth
	n := &denseNet{conv1: b.Conv("conv1", in[0], c, 3, 1, 1, 1, false, KaimingNormalFanIn)}
	for stage, nb := range blocks {
		var layers []denseLayer
		for i := 0; i < nb; i++ {
			p := fmt.Sprintf("dense%d.%d", stage+1, i)
			layers = append(layers, denseLayer{
				bn1:   b.BN(p+".bn1", c),
				conv1: b.Conv(p+".conv1", c, 4*growth, 1, 1, 0, 1, false, KaimingNormalFanIn),
				bn2:   b.BN(p+".bn2", 4*growth),
				conv2: b.Conv(p+".conv2", 4*growth, growth, 3, 1, 1, 1, false, KaimingNormalFanIn),
			})
			c += growth
		}
		n.dense = append(n.dense, layers)
		if stage < len(blocks)-1 {
			out := int64(math.Floor(float64(c) * reduction))
			p := fmt.Sprintf("trans%d", stage+1)
			n.trans = append(n.trans, denseTransition{
				bn:   b.BN(p+".bn", c),
				conv: b.Conv(p+".conv", c, out, 1, 1, 0, 1, false, KaimingNormalFanIn),
			})
			c = out
		}
	}
	n.bn = b.BN("bn", c)
	n.linear = b.Linear("linear", c, int64(classes), false)
	return b.Build(arch, classes, in, n)
}

func (n *denseNet) Forward(f *Fwd, x tensor.T) tensor.T {
	x = f.Chain(x, n.conv1)
	for stage, layers := range n.dense {
		for _, l := range layers {
			out := f.Seq(x, l.bn1, ReLU, l.conv1, l.bn2, ReLU, l.conv2)
			cat := f.S.Cat(1, out, x)
			f.Done(out, x)
			x = cat
		}
		if stage < len(n.trans) {
			t := n.trans[stage]
			x = f.Chain(x, t.bn, ReLU, t.conv, AvgPool(2))
		}
	}
	return f.Chain(x, n.bn, ReLU, GlobalPool, n.linear)
}
