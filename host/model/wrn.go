package model

import (
	"fmt"

	"github.com/optlab/optlab/host/tensor"
)

// wrnUnit is a pre-activation residual unit: BN-ReLU-conv3×3-BN-ReLU-conv3×3,
// with a 1×1 convolution of the pre-activated input as shortcut when the
// shape changes.
type wrnUnit struct {
	bn1, bn2     BN
	conv1, conv2 Conv
	short        *Conv
}

type wrn struct {
	conv  Conv
	units []wrnUnit
	bn    BN
	fc    Linear
}

// NewWRN builds a Wide ResNet of the given depth and widen factor.
//
// The standard network (Zagoruyko & Komodakis) has (depth−4)/6 units per
// stage: 36,479,194 parameters for WRN-28-10 on CIFAR-10. With ref set, each
// stage has one downsampling unit plus (depth−4)/6 basic units, as in the
// code that OT-MDR and davda54/sam actually train (46,160,474 parameters,
// a WRN-34-10 by unit count), with the classifier initialized to zero as
// there.
func NewWRN(arch string, depth, k int, ref bool, classes int, in []int64) (*Model, error) {
	if len(in) != 3 {
		return nil, fmt.Errorf("%s needs image input (C,H,W), got shape %v", arch, in)
	}
	if (depth-4)%6 != 0 {
		return nil, fmt.Errorf("%s: depth %d is not 6n+4", arch, depth)
	}
	per := (depth - 4) / 6
	if ref {
		per++
	}
	widths := []int64{16, int64(16 * k), int64(32 * k), int64(64 * k)}
	b := NewBuilder()
	n := &wrn{conv: b.Conv("conv1", in[0], widths[0], 3, 1, 1, 1, false, KaimingNormalFanIn)}
	c := widths[0]
	for stage := 0; stage < 3; stage++ {
		out := widths[stage+1]
		for i := 0; i < per; i++ {
			stride := int64(1)
			if i == 0 && stage > 0 {
				stride = 2
			}
			p := fmt.Sprintf("block%d.layer.%d", stage+1, i)
			u := wrnUnit{
				bn1:   b.BN(p+".bn1", c),
				conv1: b.Conv(p+".conv1", c, out, 3, stride, 1, 1, false, KaimingNormalFanIn),
				bn2:   b.BN(p+".bn2", out),
				conv2: b.Conv(p+".conv2", out, out, 3, 1, 1, 1, false, KaimingNormalFanIn),
			}
			if c != out || stride != 1 {
				sc := b.Conv(p+".shortcut", c, out, 1, stride, 0, 1, false, KaimingNormalFanIn)
				u.short = &sc
			}
			n.units = append(n.units, u)
			c = out
		}
	}
	n.bn = b.BN("bn", c)
	n.fc = b.Linear("fc", c, int64(classes), ref)
	return b.Build(arch, classes, in, n)
}

func (n *wrn) Forward(f *Fwd, x tensor.T) tensor.T {
	x = f.Chain(x, n.conv)
	for _, u := range n.units {
		a := f.Seq(x, u.bn1, ReLU)
		out := f.Seq(a, u.conv1, u.bn2, ReLU, u.conv2)
		short := x
		if u.short != nil {
			short = f.Seq(a, u.short)
		}
		f.Done(a)
		sum := f.S.Add(out, short)
		f.Done(out, short, x)
		x = sum
	}
	return f.Chain(x, n.bn, ReLU, GlobalPool, n.fc)
}
