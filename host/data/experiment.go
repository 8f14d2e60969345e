package data

import (
	"fmt"

	"github.com/optlab/optlab/host/experiment"
)

// splitSeed fixes the train/test/validation splits of the datasets that
// need one, so every method and seed of an experiment sees the same split.
const splitSeed = 20231

// Load reads the experiment's dataset into host memory: train, test and
// (when validation > 0) a validation set held out from train. Label noise
// ([data.label_noise]) is added to the training labels before the
// validation set is held out, so validation labels are noisy too; Split.Noise
// says what it did.
func Load(d experiment.Data) (Split, error) {
	var sp Split
	var err error
	switch d.Dataset {
	case experiment.DatasetCIFAR10, experiment.DatasetCIFAR100:
		sp, err = LoadCIFAR(d.Dataset, d.Dir)
	case experiment.DatasetFashionMNIST, experiment.DatasetMNIST:
		sp, err = LoadMNIST(d.Dataset, d.Dir)
	case experiment.DatasetUCIDigits:
		sp, err = UCIDigits(d.TestFraction, splitSeed)
	case experiment.DatasetCSV:
		var s *Set
		s, err = LoadCSV(d.Path, CSVOptions{Classes: d.Classes})
		if err == nil {
			sp, err = SplitSet(s, SplitOptions{TestFraction: d.TestFraction, Stratified: true, Seed: splitSeed})
		}
	case experiment.DatasetSynthetic:
		sy := d.Synthetic
		shape := []int{3, 32, 32}
		if sy.Features > 0 {
			shape = []int{sy.Features}
		}
		var s *Set
		s, err = Synthetic(SyntheticOptions{N: sy.Train + sy.Test, Classes: sy.Classes, Shape: shape, Seed: splitSeed})
		if err == nil {
			sp, err = SplitSet(s, SplitOptions{TestFraction: float64(sy.Test) / float64(sy.Train+sy.Test), Seed: splitSeed})
		}
	default:
		err = fmt.Errorf("unknown dataset %q", d.Dataset)
	}
	if err != nil {
		return sp, err
	}
	// Label noise goes on the whole training set, before the validation
	// split is drawn from it; the test set stays clean.
	if n := d.LabelNoise; n.Active() {
		st, err := AddLabelNoise(sp.Train, NoiseOptions{Kind: n.Kind, Rate: n.Rate, Seed: n.Seed, Map: n.ClassMap()})
		if err != nil {
			return sp, err
		}
		sp.Noise = st
	}
	if d.Validation > 0 {
		tr, val, err := HoldOut(sp.Train, d.Validation, splitSeed)
		if err != nil {
			return sp, fmt.Errorf("holding out validation data: %w", err)
		}
		sp.Train, sp.Val = tr, val
	}
	return sp, nil
}

// LoadOOD reads the test part of an out-of-distribution dataset.
func LoadOOD(d experiment.Data) (*Set, error) {
	if d.OOD == "" {
		return nil, nil
	}
	switch d.OOD {
	case experiment.DatasetCIFAR10, experiment.DatasetCIFAR100:
		sp, err := LoadCIFAR(d.OOD, d.OODDir)
		if err != nil {
			return nil, fmt.Errorf("OOD set: %w", err)
		}
		return sp.Test, nil
	case experiment.DatasetFashionMNIST, experiment.DatasetMNIST:
		sp, err := LoadMNIST(d.OOD, d.OODDir)
		if err != nil {
			return nil, fmt.Errorf("OOD set: %w", err)
		}
		return sp.Test, nil
	case experiment.DatasetSynthetic:
		return Synthetic(SyntheticOptions{Name: "synthetic-ood", N: 500, Classes: 10, Shape: []int{3, 32, 32}, Seed: splitSeed + 1})
	}
	return nil, fmt.Errorf("unknown OOD dataset %q", d.OOD)
}
