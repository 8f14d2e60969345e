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
	x = f.Chain(x, Flatten)
	for i, l := range n.layers {
		x = f.Chain(x, l)
		if i < len(n.layers)-1 {
			x = f.Chain(x, ReLU)
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

func (c convBN) Forward(f *Fwd, x tensor.T) tensor.T { return f.Seq(x, c.c, c.bn) }

type cnn struct {
	blocks []convBN
	fc     Linear
}

// NewCNN is a small CNN for any image size ≥ 4×4: three conv3×3-BN-ReLU
// blocks (32, 64, 128 channels) with 2×2 max-pooling after the first two,
// global average pooling and a linear classifier.
func NewCNN(classes int, in []int64) (*Model, error) {
	return NewCNNWidths("cnn", []int64{32, 64, 128}, classes, in)
}

// NewCNNWidths is NewCNN with the three blocks' channel counts given
// ("cnn-small" is 16, 32, 64: a quarter of cnn's convolution work).
func NewCNNWidths(name string, widths []int64, classes int, in []int64) (*Model, error) {
	if len(in) != 3 {
		return nil, fmt.Errorf("%s needs image input (C,H,W), got shape %v", name, in)
	}
	b := NewBuilder()
	n := &cnn{}
	c := in[0]
	for i, w := range widths {
		n.blocks = append(n.blocks, b.convBN(fmt.Sprintf("features.%d", i), c, w, 3, 1, 1, 1, KaimingNormalFanIn))
		c = w
	}
	n.fc = b.Linear("fc", c, int64(classes), false)
	return b.Build(name, classes, in, n)
}

func (n *cnn) Forward(f *Fwd, x tensor.T) tensor.T {
	for i, blk := range n.blocks {
		x = f.Chain(x, blk, ReLU)
		if i < 2 {
			x = f.Chain(x, MaxPool(2))
		}
	}
	return f.Chain(x, GlobalPool, n.fc)
}

type lenet struct {
	conv1, conv2  Conv
	fc1, fc2, fc3 Linear
}

// NewLeNet5 is LeNet-5 (LeCun et al. 1998) with ReLU and max-pooling, as
// usually trained on MNIST-sized input: conv 5×5 to 6 channels (padding 2,
// so 28×28 stays 28×28), 2×2 max-pool, conv 5×5 to 16 channels, 2×2
// max-pool, then 120-84-classes fully connected layers. PyTorch's default
// initialization. On 1×28×28 it has 61,706 parameters; other image sizes
// ≥ 12×12 work (the first linear layer takes what the convolutions leave).
func NewLeNet5(classes int, in []int64) (*Model, error) {
	if len(in) != 3 || in[1] < 12 || in[2] < 12 {
		return nil, fmt.Errorf("lenet5 needs image input (C,H,W) of at least 12×12, got shape %v", in)
	}
	side := func(s int64) int64 { return (s/2 - 4) / 2 }
	b := NewBuilder()
	n := &lenet{
		conv1: b.Conv("conv1", in[0], 6, 5, 1, 2, 1, true, TorchDefault),
		conv2: b.Conv("conv2", 6, 16, 5, 1, 0, 1, true, TorchDefault),
		fc1:   b.Linear("fc1", 16*side(in[1])*side(in[2]), 120, false),
		fc2:   b.Linear("fc2", 120, 84, false),
		fc3:   b.Linear("fc3", 84, int64(classes), false),
	}
	return b.Build("lenet5", classes, in, n)
}

func (n *lenet) Forward(f *Fwd, x tensor.T) tensor.T {
	return f.Chain(x, n.conv1, ReLU, MaxPool(2), n.conv2, ReLU, MaxPool(2), Flatten,
		n.fc1, ReLU, n.fc2, ReLU, n.fc3)
}
