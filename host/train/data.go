package train

import (
	"context"
	"fmt"

	"github.com/optlab/optlab/host/data"
	"github.com/optlab/optlab/host/data/devset"
	"github.com/optlab/optlab/host/experiment"
	"github.com/optlab/optlab/host/tensor"
)

// splitSeed fixes the train/test/validation splits of the datasets that
// need one, so every method and seed of an experiment sees the same split.
const splitSeed = 20231

// LoadSplit reads the experiment's dataset into host memory: train, test and
// (when data.validation > 0) a validation set held out from train.
func LoadSplit(d experiment.Data) (data.Split, error) {
	var sp data.Split
	var err error
	switch d.Dataset {
	case experiment.DatasetCIFAR10, experiment.DatasetCIFAR100:
		sp, err = data.LoadCIFAR(d.Dataset, d.Dir)
	case experiment.DatasetFashionMNIST, experiment.DatasetMNIST:
		sp, err = data.LoadMNIST(d.Dataset, d.Dir)
	case experiment.DatasetUCIDigits:
		sp, err = data.UCIDigits(d.TestFraction, splitSeed)
	case experiment.DatasetCSV:
		var s *data.Set
		s, err = data.LoadCSV(d.Path, data.CSVOptions{Classes: d.Classes})
		if err == nil {
			sp, err = data.SplitSet(s, data.SplitOptions{TestFraction: d.TestFraction, Stratified: true, Seed: splitSeed})
		}
	case experiment.DatasetSynthetic:
		sy := d.Synthetic
		shape := []int{3, 32, 32}
		if sy.Features > 0 {
			shape = []int{sy.Features}
		}
		var s *data.Set
		s, err = data.Synthetic(data.SyntheticOptions{N: sy.Train + sy.Test, Classes: sy.Classes, Shape: shape, Seed: splitSeed})
		if err == nil {
			sp, err = data.SplitSet(s, data.SplitOptions{TestFraction: float64(sy.Test) / float64(sy.Train+sy.Test), Seed: splitSeed})
		}
	default:
		err = fmt.Errorf("unknown dataset %q", d.Dataset)
	}
	if err != nil {
		return sp, err
	}
	if d.Validation > 0 {
		tr, val, err := data.HoldOut(sp.Train, d.Validation, splitSeed)
		if err != nil {
			return sp, fmt.Errorf("holding out validation data: %w", err)
		}
		sp.Train, sp.Val = tr, val
	}
	return sp, nil
}

// LoadOOD reads the test part of an out-of-distribution dataset.
func LoadOOD(d experiment.Data) (*data.Set, error) {
	if d.OOD == "" {
		return nil, nil
	}
	switch d.OOD {
	case experiment.DatasetCIFAR10, experiment.DatasetCIFAR100:
		sp, err := data.LoadCIFAR(d.OOD, d.OODDir)
		if err != nil {
			return nil, fmt.Errorf("OOD set: %w", err)
		}
		return sp.Test, nil
	case experiment.DatasetFashionMNIST, experiment.DatasetMNIST:
		sp, err := data.LoadMNIST(d.OOD, d.OODDir)
		if err != nil {
			return nil, fmt.Errorf("OOD set: %w", err)
		}
		return sp.Test, nil
	case experiment.DatasetSynthetic:
		return data.Synthetic(data.SyntheticOptions{Name: "synthetic-ood", N: 500, Classes: 10, Shape: []int{3, 32, 32}, Seed: splitSeed + 1})
	}
	return nil, fmt.Errorf("unknown OOD dataset %q", d.OOD)
}

// Data is an experiment's data on the device, shared by its runs.
type Data struct {
	Name              string
	Train, Test, Val  *devset.Set
	OOD               *devset.Set
	Classes           int
	Shape             []int64
	Mean, Std         []float32
	Augment           devset.Augment
	TrainSize, TestSz int
}

// Upload loads the experiment's data and copies it to the device.
func Upload(ctx context.Context, w *tensor.Worker, dev tensor.Device, d experiment.Data) (*Data, error) {
	sp, err := LoadSplit(d)
	if err != nil {
		return nil, err
	}
	out := &Data{Name: d.Dataset, Classes: sp.Train.Classes, TrainSize: sp.Train.Len(), TestSz: sp.Test.Len()}
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
	up := func(s *data.Set) (*devset.Set, error) {
		if s == nil {
			return nil, nil
		}
		return devset.Upload(ctx, w, dev, s, d.Normalize)
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
	ood, err := LoadOOD(d)
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
	for _, s := range []*devset.Set{d.Train, d.Test, d.Val, d.OOD} {
		if s != nil {
			s.Drop()
		}
	}
}
