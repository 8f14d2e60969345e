package table

import (
	"math"
	"slices"
	"strconv"
	"strings"
)

// direction says whether larger or smaller values of a metric are better.
type direction int

const (
	// neutral metrics (e.g. temperature) get no arrow and no bold.
	neutral direction = iota
	// up means larger is better (↑).
	up
	// down means smaller is better (↓).
	down
)

// spec describes how a metric is labelled and formatted.
type spec struct {
	label string
	dir   direction
	scale float64 // display value = stored value × scale
	// decimals is the number of decimals shown; a negative one, −d, shows
	// d significant digits (at least one decimal), for the time metrics,
	// whose values span orders of magnitude from a small model's 0.03 s
	// per epoch to a large one's minutes.
	decimals int
}

// sigTime is the decimals of the time metrics: 3 significant digits.
const sigTime = -3

// Time metrics read from Record fields rather than Record.Metrics.
const (
	secondsPerEpoch = "seconds_per_epoch"
	wallSeconds     = "wall_seconds"
)

// gradEvals is the key of a record's gradient evaluations (samples of
// forward-backward passes).
const gradEvals = "grad_evals"

// Keys of the best-epoch metrics (early stopping on the validation split):
// best_epoch is the epoch chosen, best_X metric X at that epoch.
const (
	bestEpoch  = "best_epoch"
	bestPrefix = "best_"
)

// canonicalOrder returns the order of metrics when all present ones are
// shown.
func canonicalOrder() []string {
	return []string{
		"acc", "nll", "brier", "ece", "aac", "auroc", "auroc_ood", "temperature",
		"cal_nll", "cal_brier", "cal_ece", "cal_aac", "test_loss", "train_loss",
	}
}

// metricSpec returns the label, direction and format of a metric key:
//
//   - acc and *_acc: "ACC", ↑, shown as a percentage with 2 decimals;
//   - nll, brier, ece, aac: ↓, 4 decimals; auroc, auroc_ood: ↑, 4 decimals;
//   - cal_X: "cal " + X's label, ↓, 4 decimals;
//   - val_X (the validation split's metrics): "val " + X's label, X's
//     direction and format;
//   - corr_X (X averaged over every corrupted test set): "corrupted " +
//     X's label, X's direction and format; corr.F.X (family F, mean over
//     its severities) and corr.F.S.X (severity S): "F S " + X's label,
//     underscores in F shown as spaces;
//   - grad_evals (the gradient evaluations of the training, in samples
//     of forward-backward passes): "grad evals (M)", no direction, in
//     millions with 3 decimals;
//   - ttt_seconds, ttt_grad_evals, ttt_epochs (time to a target
//     accuracy, Options.Target): "s to target" (3 significant digits),
//     "grad evals to target (M)" (millions, 3 decimals), "epochs to
//     target" (1 decimal), ↓;
//   - best_epoch: "best epoch", no direction, 1 decimal; best_X (X at
//     the epoch early stopping chose): "best-epoch " + X's label, X's
//     direction and format;
//   - mce and rel_mce (host table --corruptions): "mCE" and "rel. mCE",
//     ↓, a percentage; retained: "retained", ↑, a percentage;
//   - temperature: "T", no direction, 3 decimals;
//   - *_loss: ↓, 4 decimals;
//   - seconds_per_epoch ("s/epoch"), wall_seconds ("wall s") and other
//     *_seconds or *time* keys: ↓, 3 significant digits, at least 1
//     decimal (0.0312, 1.23, 123.4), so that a small model's methods do
//     not all read 0.0 or 0.1;
//   - anything else: its key, no direction, 4 decimals.
func metricSpec(key string) spec {
	switch key {
	case "acc":
		return spec{"ACC", up, 100, 2}
	case "nll":
		return spec{"NLL", down, 1, 4}
	case "brier":
		return spec{"Brier", down, 1, 4}
	case "ece":
		return spec{"ECE", down, 1, 4}
	case "aac":
		return spec{"AAC", down, 1, 4}
	case "auroc":
		return spec{"AUROC", up, 1, 4}
	case "auroc_ood":
		return spec{"AUROC-OOD", up, 1, 4}
	case "temperature":
		return spec{"T", neutral, 1, 3}
	case secondsPerEpoch:
		return spec{"s/epoch", down, 1, sigTime}
	case wallSeconds:
		return spec{"wall s", down, 1, sigTime}
	case bestEpoch:
		return spec{"best epoch", neutral, 1, 1}
	case gradEvals:
		return spec{"grad evals (M)", neutral, 1e-6, 3}
	case tttSeconds:
		return spec{"s to target", down, 1, sigTime}
	case tttGradEvals:
		return spec{"grad evals to target (M)", down, 1e-6, 3}
	case tttEpochs:
		return spec{"epochs to target", down, 1, 1}
	case mCE:
		return spec{"mCE", down, 100, 2}
	case relMCE:
		return spec{"rel. mCE", down, 100, 2}
	case retained:
		return spec{"retained", up, 100, 2}
	}
	if family, sev, metric, ok := parseCorrKey(key); ok {
		s := metricSpec(metric)
		s.label = strings.TrimSpace(strings.ReplaceAll(family, "_", " ")+" "+sev) + " " + s.label
		return s
	}
	switch {
	case strings.HasPrefix(key, corrPrefix):
		s := metricSpec(strings.TrimPrefix(key, corrPrefix))
		s.label = "corrupted " + s.label
		return s
	case strings.HasPrefix(key, bestPrefix):
		s := metricSpec(strings.TrimPrefix(key, bestPrefix))
		s.label = "best-epoch " + s.label
		return s
	case strings.HasPrefix(key, "cal_"):
		s := metricSpec(strings.TrimPrefix(key, "cal_"))
		s.label = "cal " + s.label
		if s.dir == neutral {
			s.dir = down
		}
		return s
	case strings.HasPrefix(key, valPrefix):
		s := metricSpec(strings.TrimPrefix(key, valPrefix))
		s.label = "val " + s.label
		return s
	case strings.HasSuffix(key, "_acc"):
		return spec{strings.ReplaceAll(strings.TrimSuffix(key, "_acc"), "_", " ") + " ACC", up, 100, 2}
	case strings.HasSuffix(key, "_loss"):
		return spec{strings.ReplaceAll(key, "_", " "), down, 1, 4}
	case strings.HasSuffix(key, "_seconds"), strings.Contains(key, "time"):
		return spec{strings.ReplaceAll(key, "_", " "), down, 1, sigTime}
	}
	return spec{key, neutral, 1, 4}
}

// arrow returns the direction arrow for plain text.
func (s spec) arrow() string {
	switch s.dir {
	case up:
		return "↑"
	case down:
		return "↓"
	}
	return ""
}

// format returns v scaled and rounded for display, without a negative
// zero.
func (s spec) format(v float64) string { return s.formatLike(v, v) }

// formatLike formats v with the decimals that ref gets (a mean's, for its
// standard deviation or interval), without a negative zero.
func (s spec) formatLike(v, ref float64) string {
	d := s.decimals
	if d < 0 {
		d = 1
		if x := math.Abs(ref * s.scale); x > 0 && !math.IsInf(x, 0) {
			d = max(1, min(9, -s.decimals-1-int(math.Floor(math.Log10(x)))))
		}
	}
	out := strconv.FormatFloat(v*s.scale, 'f', d, 64)
	if strings.HasPrefix(out, "-") && strings.Trim(out, "-0.") == "" {
		out = out[1:]
	}
	return out
}

// rounded returns the displayed value of v as a number, so that cells that
// look equal compare equal.
func (s spec) rounded(v float64) float64 {
	f, err := strconv.ParseFloat(s.format(v), 64)
	if err != nil {
		return math.NaN()
	}
	return f
}

// sortMetrics orders keys canonically: known metrics first, then others
// alphabetically, then the time metrics.
func sortMetrics(keys []string) []string {
	order := canonicalOrder()
	rank := func(k string) int {
		if i := slices.Index(order, k); i >= 0 {
			return i
		}
		switch k {
		case secondsPerEpoch:
			return len(order) + 1
		case wallSeconds:
			return len(order) + 2
		}
		return len(order)
	}
	out := slices.Clone(keys)
	slices.SortStableFunc(out, func(a, b string) int {
		if ra, rb := rank(a), rank(b); ra != rb {
			return ra - rb
		}
		return strings.Compare(a, b)
	})
	return out
}

// displayValue returns the display form of a field value: known datasets
// get their usual spelling (cifar10 → CIFAR-10); everything else is shown
// as stored.
func displayValue(field, v string) string {
	if field == FieldDataset {
		switch strings.NewReplacer("-", "", "_", "", " ", "").Replace(strings.ToLower(v)) {
		case "cifar10":
			return "CIFAR-10"
		case "cifar100":
			return "CIFAR-100"
		case "tinyimagenet":
			return "TinyImageNet"
		case "svhn":
			return "SVHN"
		case "mnist":
			return "MNIST"
		case "fashion", "fashionmnist":
			return "FashionMNIST"
		case "imagenet":
			return "ImageNet"
		}
	}
	return v
}
