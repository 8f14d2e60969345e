package model

import (
	"fmt"

	"github.com/optlab/optlab/host/tensor"
)

type mlp struct{ layers []Linear }

// NewMLP is a two-hidden-layer perceptron (256 units, ReLU) on flattened input.
func NewMLP(classes int, in []int64) (*Model, error) {
	b := NewBuilder()
	f := numel(in)
	n := &mlp{layers: []Linear{
		b.Linear("fc1", f, 256, false),
		b.Linear("fc2", 256, 256, false),
		b.Linear("fc3", 256, int64(classes), false),
	}}
	return b.Build("mlp", classes, in, n)
}

func (n *mlp) Forward(f *Fwd, x tensor.T) tensor.T {
	x = f.S.Flatten(x, 1, -1)
	for i, l := range n.layers {
		x = l.Forward(f, x)
		if i < len(n.layers)-1 {
			x = f.S.Relu(x)
		}
	}
	return x
}

type convBN struct {
	c  Conv
	bn BN
}

func (b *Builder) convBN(name string, in, out, k, stride, pad, groups int64, init InitKind) convBN {
	return convBN{c: b.Conv(name+".conv", in, out, k, stride, pad, groups, false, init), bn: b.BN(name+".bn", out)}
}

func (c convBN) Forward(f *Fwd, x tensor.T) tensor.T { return c.bn.Forward(f, c.c.Forward(f, x)) }

type cnn struct {
	blocks []convBN
	fc     Linear
}

// NewCNN is a small CNN for any image size ≥ 4×4: three conv3×3-BN-ReLU
// blocks (32, 64, 128 channels) with 2×2 max-pooling after the first two,
// global average pooling and a linear classifier.
func NewCNN(classes int, in []int64) (*Model, error) {
	if len(in) != 3 {
		return nil, fmt.Errorf("cnn needs image input (C,H,W), got shape %v", in)
	}
	b := NewBuilder()
	n := &cnn{}
	c := in[0]
	for i, w := range []int64{32, 64, 128} {
		n.blocks = append(n.blocks, b.convBN(fmt.Sprintf("features.%d", i), c, w, 3, 1, 1, 1, KaimingNormalFanIn))
		c = w
	}
	n.fc = b.Linear("fc", c, int64(classes), false)
	return b.Build("cnn", classes, in, n)
}

func (n *cnn) Forward(f *Fwd, x tensor.T) tensor.T {
	for i, blk := range n.blocks {
		x = f.S.Relu(blk.Forward(f, x))
		if i < 2 {
			x = f.S.MaxPool2d(x, 2, 2, 0)
		}
	}
	x = f.S.Flatten(f.S.AdaptiveAvgPool2d(x, 1), 1, -1)
	return n.fc.Forward(f, x)
}
