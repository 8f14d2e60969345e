package data

import (
	"errors"
	"fmt"
	"strings"

	"github.com/optlab/optlab/host/experiment"
)

// splitSeed fixes the train/test/validation splits of the datasets that
// need one, so every method and seed of an experiment sees the same split.
const splitSeed = 20231

// Load reads the experiment's dataset into host memory: train, test and
// (when validation > 0) a validation set held out from train. Label noise
// ([data.label_noise]) is added to the training labels before the
// validation set is held out, so validation labels are noisy too; Split.Noise
// says what it did. An npz dataset may bring its own validation set (x_val,
// y_val; validation must then be 0), which label noise leaves clean.
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
	case experiment.DatasetNumPy:
		sp, err = loadNumPy(d)
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

// loadNumPy reads dataset npz: the file's own validation split, if it has
// one, stands for data.validation, and augmentations need images.
func loadNumPy(d experiment.Data) (Split, error) {
	sp, err := LoadNumPy(d.Path, NumPyOptions{Layout: d.Layout, Classes: d.Classes})
	if err != nil {
		return sp, err
	}
	name := sp.Train.Name
	if sp.Val != nil && d.Validation > 0 {
		return Split{}, fmt.Errorf("npz %s: data.validation = %g, but the file holds its own validation split (x_val, y_val): set data.validation = 0 to use it, or remove x_val and y_val to hold a fraction of x_train out", name, d.Validation)
	}
	if len(d.Augment) > 0 && len(sp.Train.Shape) != 3 {
		return Split{}, fmt.Errorf("npz %s: data.augment = %q needs images (C×H×W samples), but the samples are vectors of %d features; set data.augment = []", name, d.Augment, sp.Train.Shape[0])
	}
	return sp, nil
}

// CheckSplit checks the keys of e that need the loaded data sp to be
// checked, which Validate cannot do for dataset npz (for the other
// datasets it already has): eval.temperature = "validation" and
// eval.best_epoch need a validation split; [eval.corruptions] needs a test
// set of 8-bit images (uint8 C×H×W); model.memory_format = "channels_last"
// needs images. The host calls it once the data is loaded, before
// training.
func CheckSplit(e *experiment.Experiment, sp Split) error {
	var problems []string
	if sp.Val == nil {
		if e.Eval.Temperature == experiment.TemperatureValidation {
			problems = append(problems, "eval.temperature = \"validation\" needs a validation split: set data.validation > 0 (or give x_val and y_val in an npz file)")
		}
		if e.Eval.BestEpoch != "" {
			problems = append(problems, "eval.best_epoch needs a validation split to choose on: set data.validation > 0 (or give x_val and y_val in an npz file)")
		}
	}
	if t := sp.Test; e.Eval.Corruptions.Active() && t != nil && (!t.Raw8() || len(t.Shape) != 3) {
		problems = append(problems, fmt.Sprintf("eval.corruptions needs 8-bit images (uint8 C×H×W samples); the test samples of %q are %s of shape %v", e.Data.Dataset, dtypeKind(t), t.Shape))
	}
	if tr := sp.Train; e.Model.MemoryFormat == experiment.MemoryChannelsLast && tr != nil && len(tr.Shape) != 3 {
		problems = append(problems, fmt.Sprintf("model.memory_format = \"channels_last\" needs image inputs (C×H×W), but the samples of %q have shape %v; use %q", e.Data.Dataset, tr.Shape, experiment.MemoryContiguous))
	}
	if len(problems) > 0 {
		return errors.New(strings.Join(problems, "; "))
	}
	return nil
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
