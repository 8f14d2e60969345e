package devset

import (
	"context"

	"github.com/optlab/optlab/host/data"
	"github.com/optlab/optlab/host/experiment"
	"github.com/optlab/optlab/host/tensor"
)

// Data is an experiment's data on the device, shared by its runs.
type Data struct {
	Name                string
	Train, Test, Val    *Set
	OOD                 *Set
	Classes             int
	Shape               []int64
	Augment             Augment
	TrainSize, TestSize int
	// LabelNoise is what the label noise of [data.label_noise] did to the
	// training labels (data.Split.Noise); nil without label noise.
	LabelNoise *data.NoiseStats
}

// Load loads the experiment's data (data.Load, data.LoadOOD) and copies
// it to the device.
func Load(ctx context.Context, w *tensor.Worker, dev tensor.Device, d experiment.Data) (*Data, error) {
	sp, err := data.Load(d)
	if err != nil {
		return nil, err
	}
	out := &Data{Name: d.Dataset, Classes: sp.Train.Classes, TrainSize: sp.Train.Len(), TestSize: sp.Test.Len(), LabelNoise: sp.Noise}
	for _, v := range sp.Train.Shape {
		out.Shape = append(out.Shape, int64(v))
	}
	for _, a := range d.Augment {
		switch a {
		case "crop":
			out.Augment.Crop = 4
		case "flip":
			out.Augment.Flip = true
		}
	}
	up := func(s *data.Set) (*Set, error) {
		if s == nil {
			return nil, nil
		}
		return Upload(ctx, w, dev, s, d.Normalize)
	}
	if out.Train, err = up(sp.Train); err != nil {
		return nil, err
	}
	if out.Test, err = up(sp.Test); err != nil {
		out.Drop()
		return nil, err
	}
	if out.Val, err = up(sp.Val); err != nil {
		out.Drop()
		return nil, err
	}
	ood, err := data.LoadOOD(d)
	if err == nil {
		out.OOD, err = up(ood)
	}
	if err != nil {
		out.Drop()
		return nil, err
	}
	return out, nil
}

// Drop frees the device copies.
func (d *Data) Drop() {
	for _, s := range []*Set{d.Train, d.Test, d.Val, d.OOD} {
		if s != nil {
			s.Drop()
		}
	}
}
