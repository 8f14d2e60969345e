package data

import "fmt"

// Dataset names that Load reads besides CIFAR10, CIFAR100, FashionMNIST,
// MNIST and UCIDigitsName (Spec.Dataset; LoadOOD's Spec.OOD takes CIFAR10,
// CIFAR100, FashionMNIST, MNIST and SyntheticName).
const (
	// CSVName is a CSV file (Spec.Path; see ReadCSV).
	CSVName = "csv"
	// NumPyName is NumPy arrays (Spec.Path): an .npz archive or a folder
	// of .npy files (see LoadNumPy).
	NumPyName = "npz"
	// SyntheticName is generated Gaussian class clusters (Spec.Synthetic;
	// see Synthetic).
	SyntheticName = "synthetic"
)

// Spec says which dataset Load (and LoadOOD, and devset.Load) reads and
// how. It is what the data package needs of an experiment's [data] table
// (package experiment converts its Data into one: experiment.Data.Spec), in
// the data package's own terms, so that the data package depends on no
// experiment file format. Load fills in no defaults (experiment.Default
// has them): a field a dataset uses must be set.
type Spec struct {
	// Dataset names the dataset: CIFAR10, CIFAR100, FashionMNIST, MNIST,
	// UCIDigitsName, CSVName, NumPyName or SyntheticName.
	Dataset string
	// Dir is the folder of a CIFAR or MNIST-format dataset.
	Dir string
	// Path is the file of a CSV or NumPy dataset.
	Path string
	// Classes fixes the number of classes of a CSV or NumPy dataset (0:
	// inferred from the labels).
	Classes int
	// Layout is the axis order of a NumPy dataset's 4-D x arrays
	// (LayoutNCHW when empty, or LayoutNHWC).
	Layout string
	// TestFraction is the fraction of samples held out as the test set of
	// the UCI digits and of a CSV dataset, in (0, 1).
	TestFraction float64
	// Validation is the fraction of the training set held out as the
	// validation set, in [0, 1); 0 for none.
	Validation float64
	// Augment lists the training augmentations ("crop", "flip"), which
	// need images; devset.Load applies them.
	Augment []string
	// Normalize standardises the inputs with training-set statistics
	// (devset.Load).
	Normalize bool
	// OOD names an out-of-distribution test set (LoadOOD): CIFAR10,
	// CIFAR100, FashionMNIST, MNIST or SyntheticName; "" for none. OODDir
	// is its folder (CIFAR and MNIST-format).
	OOD, OODDir string
	// Synthetic sizes a SyntheticName dataset.
	Synthetic SyntheticSpec
	// LabelNoise is the noise added to the training labels, when Active.
	LabelNoise NoiseOptions
}

// SyntheticSpec sizes a synthetic dataset (Spec.Synthetic).
type SyntheticSpec struct {
	// Train and Test are the numbers of training and test samples.
	Train, Test int
	// Classes is the number of classes.
	Classes int
	// Features is the input size: 0 means 3×32×32 images (CIFAR-shaped),
	// n > 0 flat vectors of n features.
	Features int
}

// splitSeed fixes the train/test/validation splits of the datasets that
// need one, so every method and seed of an experiment sees the same split.
const splitSeed = 20231

// Load reads the dataset d names into host memory: train, test and (when
// d.Validation > 0) a validation set held out from train. Label noise
// (d.LabelNoise, when Active) is added to the training labels before the
// validation set is held out, so validation labels are noisy too;
// Split.Noise says what it did. An npz dataset may bring its own validation
// set (x_val, y_val; d.Validation must then be 0), which label noise leaves
// clean.
func Load(d Spec) (Split, error) {
	var sp Split
	var err error
	switch d.Dataset {
	case CIFAR10, CIFAR100:
		sp, err = LoadCIFAR(d.Dataset, d.Dir)
	case FashionMNIST, MNIST:
		sp, err = LoadMNIST(d.Dataset, d.Dir)
	case UCIDigitsName:
		sp, err = UCIDigits(d.TestFraction, splitSeed)
	case CSVName:
		var s *Set
		var id string
		s, id, err = loadCSV(d.Path, CSVOptions{Classes: d.Classes})
		if err == nil {
			sp, err = SplitSet(s, SplitOptions{TestFraction: d.TestFraction, Stratified: true, Seed: splitSeed})
			sp.Content = id
		}
	case NumPyName:
		sp, err = loadNumPy(d)
	case SyntheticName:
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
		st, err := AddLabelNoise(sp.Train, n)
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
func loadNumPy(d Spec) (Split, error) {
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

// LoadOOD reads the test part of the out-of-distribution dataset d names
// (d.OOD, d.OODDir); nil when it names none.
func LoadOOD(d Spec) (*Set, error) {
	if d.OOD == "" {
		return nil, nil
	}
	switch d.OOD {
	case CIFAR10, CIFAR100:
		sp, err := LoadCIFAR(d.OOD, d.OODDir)
		if err != nil {
			return nil, fmt.Errorf("OOD set: %w", err)
		}
		return sp.Test, nil
	case FashionMNIST, MNIST:
		sp, err := LoadMNIST(d.OOD, d.OODDir)
		if err != nil {
			return nil, fmt.Errorf("OOD set: %w", err)
		}
		return sp.Test, nil
	case SyntheticName:
		return Synthetic(SyntheticOptions{Name: "synthetic-ood", N: 500, Classes: 10, Shape: []int{3, 32, 32}, Seed: splitSeed + 1})
	}
	return nil, fmt.Errorf("unknown OOD dataset %q", d.OOD)
}
