package model

import (
	"fmt"
	"math"

	"github.com/optlab/optlab/host/tensor"
)

// pyrBottleneck is PyramidNet's bottleneck unit: BN-conv1×1-BN-ReLU-
// conv3×3(stride)-BN-ReLU-conv1×1(4×)-BN, added to a parameter-free shortcut
// (2×2 average pooling when strided, zero channels appended when wider).
type pyrBottleneck struct {
	bn1, bn2, bn3, bn4  BN
	conv1, conv2, conv3 Conv
	stride              int64
	extra               int64 // output channels minus input channels
}

type pyramidNet struct {
	conv1   Conv
	bn1     BN
	blocks  []pyrBottleneck
	bnFinal BN
	fc      Linear
}

// NewPyramidNet builds the CIFAR PyramidNet with bottleneck units (Han et
// al., "Deep Pyramidal Residual Networks", as in dyhan's PyramidNet code that
// OT-MDR trains as "pyramid101"): a 3×3 stem with 16 channels followed by BN
// (no ReLU), three stages of n = (depth−2)/9 bottleneck units with strides
// 1/2/2, whose bottleneck width grows additively by α/(3n) per unit (rounded
// half-to-even, as Python's round) and whose output is 4× that width, zero-
// padded identity shortcuts (2×2 average pooling on strided units), then
// BN-ReLU, global average pooling and a linear classifier. No ShakeDrop.
//
// Parameter names follow that code (conv1, bn1, layer1.0.bn1 … layer1.0.bn4,
// bn_final, fc). Convolutions are initialized N(0, 2/fan_out) (Kaiming normal
// with fan_out = k²·out, as the reference code does), BN γ=1 β=0, the
// classifier with PyTorch's default. Height and width must be multiples of 4.
func NewPyramidNet(arch string, depth int, alpha float64, classes int, in []int64) (*Model, error) {
	if len(in) != 3 {
		return nil, fmt.Errorf("%s needs image input (C,H,W), got shape %v", arch, in)
	}
	if in[1]%4 != 0 || in[2]%4 != 0 {
		return nil, fmt.Errorf("%s needs height and width divisible by 4, got %v", arch, in)
	}
	if depth < 11 || (depth-2)%9 != 0 {
		return nil, fmt.Errorf("%s: depth %d is not 9n+2", arch, depth)
	}
	n := (depth - 2) / 9
	addRate := alpha / float64(3*n)
	round := func(v float64) int64 { return int64(math.RoundToEven(v)) }

	b := NewBuilder()
	net := &pyramidNet{
		conv1: b.Conv("conv1", in[0], 16, 3, 1, 1, 1, false, KaimingNormalFanOut),
		bn1:   b.BN("bn1", 16),
	}
	// width accumulates the fractional bottleneck width exactly as the
	// reference code does (repeated float additions), so rounding agrees.
	width := 16.0
	inPlanes := int64(16)
	for stage := 0; stage < 3; stage++ {
		for i := 0; i < n; i++ {
			stride := int64(1)
			if i == 0 && stage > 0 {
				stride = 2
			}
			width += addRate
			planes := round(width)
			p := fmt.Sprintf("layer%d.%d", stage+1, i)
			net.blocks = append(net.blocks, pyrBottleneck{
				bn1:    b.BN(p+".bn1", inPlanes),
				conv1:  b.Conv(p+".conv1", inPlanes, planes, 1, 1, 0, 1, false, KaimingNormalFanOut),
				bn2:    b.BN(p+".bn2", planes),
				conv2:  b.Conv(p+".conv2", planes, planes, 3, stride, 1, 1, false, KaimingNormalFanOut),
				bn3:    b.BN(p+".bn3", planes),
				conv3:  b.Conv(p+".conv3", planes, 4*planes, 1, 1, 0, 1, false, KaimingNormalFanOut),
				bn4:    b.BN(p+".bn4", 4*planes),
				stride: stride,
				extra:  4*planes - inPlanes,
			})
			inPlanes = 4 * planes
		}
	}
	net.bnFinal = b.BN("bn_final", inPlanes)
	net.fc = b.Linear("fc", inPlanes, int64(classes), false)
	return b.Build(arch, classes, in, net)
}

func (n *pyramidNet) Forward(f *Fwd, x tensor.T) tensor.T {
	s := f.S
	x = f.Chain(x, n.conv1, n.bn1)
	for _, u := range n.blocks {
		out := f.Seq(x, u.bn1, u.conv1, u.bn2, ReLU, u.conv2, u.bn3, ReLU, u.conv3, u.bn4)
		short := x
		if u.stride != 1 {
			short = f.Seq(x, AvgPool(2))
		}
		if u.extra > 0 {
			// Append zero channels: F.pad order is (W, H, C) for NCHW.
			p := s.Pad(short, 0, 0, 0, 0, 0, u.extra)
			if !short.Same(x) {
				f.Done(short)
			}
			short = p
		}
		sum := s.Add(out, short)
		f.Done(out, short, x)
		x = sum
	}
	return f.Chain(x, n.bnFinal, ReLU, GlobalPool, n.fc)
}
