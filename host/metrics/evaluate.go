package metrics

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
)

// Calibration selects how the temperature for the cal_* metrics is fitted.
type Calibration int

const (
	// CalAuto uses CalValidation when Options.Validation is set and
	// CalCrossFit otherwise.
	CalAuto Calibration = iota
	// CalCrossFit is the paper's protocol: split the test set into two
	// halves with a seeded permutation, fit T on each half, evaluate on
	// the other, and average the metric values over the folds.
	CalCrossFit
	// CalValidation fits T on Options.Validation and evaluates on the
	// whole test set.
	CalValidation
	// CalNone skips temperature scaling; the report has no temperature or
	// cal_* values.
	CalNone
)

// String returns the mode's name.
func (c Calibration) String() string {
	switch c {
	case CalAuto:
		return "auto"
	case CalCrossFit:
		return "cross-fit"
	case CalValidation:
		return "validation"
	case CalNone:
		return "none"
	}
	return fmt.Sprintf("Calibration(%d)", int(c))
}

// Options configures Evaluate. The zero value gives the documented
// defaults: 15 ECE bins, 100 AAC steps, no OOD set, cross-fit temperature
// scaling with one repeat and seed 0.
type Options struct {
	// ECEBins is the number of ECE bins; 0 means DefaultECEBins.
	ECEBins int
	// AACSteps is the number of AAC grid intervals; 0 means
	// DefaultAACSteps.
	AACSteps int
	// OOD, when set, is the predictive distribution on an
	// out-of-distribution set; the report then has auroc_ood. Its Classes
	// may be left 0 to mean the test set's.
	OOD *Predictions
	// Calibration selects the temperature-scaling protocol.
	Calibration Calibration
	// Validation and ValidationLabels are the held-out set for
	// CalValidation.
	Validation       *Predictions
	ValidationLabels []int32
	// Seed seeds the cross-fit permutation (math/rand/v2 PCG).
	Seed uint64
	// Repeats is the number of cross-fit permutations (2 folds each)
	// whose metric values are averaged; 0 means 1. The reference code
	// uses 5 unseeded repeats.
	Repeats int
	// Temperature configures the temperature search.
	Temperature TemperatureOptions
}

// Report holds the metrics of one predictive distribution. Accuracy is a
// fraction in [0, 1]. A metric that is undefined for the data is NaN and
// explained in Notes.
type Report struct {
	// N and Classes are the test set's shape.
	N, Classes int
	// Acc is the fraction of samples whose arg-max class is the label.
	Acc float64
	// NLL is mean −log max(p_y, ProbFloor), natural log.
	NLL float64
	// Brier is mean Σ_c (p_c − 1[c=y])².
	Brier float64
	// ECE is ECE over max-probability confidences.
	ECE float64
	// AAC is the area above the accuracy–rejection curve.
	AAC float64
	// AUROC is the misclassification AUROC: max-probability separating
	// correct (positive) from wrong predictions.
	AUROC float64
	// HasOOD reports whether AUROCOOD was computed.
	HasOOD bool
	// AUROCOOD is the OOD AUROC: in-distribution max-probabilities
	// (positive) against OOD ones.
	AUROCOOD float64
	// Calibrated reports whether the temperature and cal_* fields were
	// computed.
	Calibrated bool
	// Temperature is the fitted T; for cross-fit, the geometric mean of
	// the per-fold temperatures.
	Temperature float64
	// Temperatures lists every fitted T (one per fold for cross-fit).
	Temperatures []float64
	// CalNLL, CalBrier, CalECE and CalAAC are the metrics after
	// temperature scaling; for cross-fit, the mean over folds of each
	// fold's value on its held-out half.
	CalNLL, CalBrier, CalECE, CalAAC float64
	// Notes explains undefined metrics and boundary temperatures.
	Notes []string
}

// Map returns the report as metric key → value with the keys acc, nll,
// brier, ece, aac, auroc, auroc_ood (only with an OOD set), temperature,
// cal_nll, cal_brier, cal_ece and cal_aac (only when calibrated). NaN and
// infinite values are left out, so the map can be encoded as JSON.
func (r Report) Map() map[string]float64 {
	m := make(map[string]float64, 12)
	put := func(k string, v float64) {
		if !math.IsNaN(v) && !math.IsInf(v, 0) {
			m[k] = v
		}
	}
	put(KeyAcc, r.Acc)
	put(KeyNLL, r.NLL)
	put(KeyBrier, r.Brier)
	put(KeyECE, r.ECE)
	put(KeyAAC, r.AAC)
	put(KeyAUROC, r.AUROC)
	if r.HasOOD {
		put(KeyAUROCOOD, r.AUROCOOD)
	}
	if r.Calibrated {
		put(KeyTemperature, r.Temperature)
		put(KeyCalNLL, r.CalNLL)
		put(KeyCalBrier, r.CalBrier)
		put(KeyCalECE, r.CalECE)
		put(KeyCalAAC, r.CalAAC)
	}
	return m
}

// Evaluate computes every metric of pred against labels over the whole set
// at once. Shapes, label ranges and probability rows are validated; invalid
// input returns an error, never a panic.
func Evaluate(pred Predictions, labels []int32, opts Options) (Report, error) {
	if len(labels) == 0 {
		return Report{}, errors.New("evaluate: no labels")
	}
	d, err := newDist(pred, len(labels), 0)
	if err != nil {
		return Report{}, fmt.Errorf("evaluate: %w", err)
	}
	if err := checkLabels(labels, d.c); err != nil {
		return Report{}, fmt.Errorf("evaluate: %w", err)
	}
	bins, steps := opts.ECEBins, opts.AACSteps
	if bins == 0 {
		bins = DefaultECEBins
	}
	if steps == 0 {
		steps = DefaultAACSteps
	}
	if bins < 1 || steps < 1 {
		return Report{}, fmt.Errorf("evaluate: ECE bins %d and AAC steps %d must be positive", bins, steps)
	}
	tOpts, err := opts.Temperature.withDefaults()
	if err != nil {
		return Report{}, fmt.Errorf("evaluate: %w", err)
	}

	r := Report{N: d.n, Classes: d.c, AUROCOOD: math.NaN()}
	s := score(d.p, d.logp, labels, d.c)
	r.Acc, r.NLL, r.Brier = s.acc, s.nll, s.brier
	r.ECE = ece(s.conf, s.correct, bins)
	r.AAC = aac(s.conf, s.correct, steps)
	if r.AUROC, err = misclassificationAUROC(s.conf, s.correct); err != nil {
		r.Notes = append(r.Notes, err.Error())
	}

	if opts.OOD != nil {
		o, err := newDist(*opts.OOD, -1, d.c)
		if err != nil {
			return Report{}, fmt.Errorf("evaluate: OOD set: %w", err)
		}
		oodConf := make([]float64, o.n)
		for i := range oodConf {
			row := o.p[i*o.c : (i+1)*o.c]
			oodConf[i] = row[argmax(row)]
		}
		r.HasOOD = true
		if r.AUROCOOD, err = AUROC(s.conf, oodConf); err != nil {
			r.Notes = append(r.Notes, "OOD "+err.Error())
		}
	}

	mode := opts.Calibration
	if mode == CalAuto {
		mode = CalCrossFit
		if opts.Validation != nil {
			mode = CalValidation
		}
	}
	switch mode {
	case CalNone:
		return r, nil
	case CalValidation:
		err = calibrateValidation(&r, d, labels, opts, tOpts, bins, steps)
	case CalCrossFit:
		err = calibrateCrossFit(&r, d, labels, opts, tOpts, bins, steps)
	default:
		err = fmt.Errorf("unknown calibration mode %v", mode)
	}
	if err != nil {
		return Report{}, fmt.Errorf("evaluate: %w", err)
	}
	r.Calibrated = true
	for _, t := range r.Temperatures {
		if t <= tOpts.Lo*math.Exp(2*tOpts.Tol) || t >= tOpts.Hi*math.Exp(-2*tOpts.Tol) {
			r.Notes = append(r.Notes, fmt.Sprintf("fitted temperature %.6g is at the edge of the bracket [%g, %g]", t, tOpts.Lo, tOpts.Hi))
			break
		}
	}
	return r, nil
}

// calMetrics holds the metrics of a temperature-scaled subset.
type calMetrics struct{ nll, brier, ece, aac float64 }

// scaledMetrics evaluates log_softmax(logp/t) on the given rows.
func scaledMetrics(logp []float64, labels []int32, c int, t float64, bins, steps int) calMetrics {
	lq := make([]float64, len(logp))
	q := make([]float64, len(logp))
	for i := 0; i < len(logp); i += c {
		row := lq[i : i+c]
		for j, v := range logp[i : i+c] {
			row[j] = v / t
		}
		lse := logSumExp(row)
		for j := range row {
			row[j] -= lse
			q[i+j] = math.Exp(row[j])
		}
	}
	s := score(q, lq, labels, c)
	return calMetrics{nll: s.nll, brier: s.brier, ece: ece(s.conf, s.correct, bins), aac: aac(s.conf, s.correct, steps)}
}

// calibrateValidation fits T on the validation set and scores the test set.
func calibrateValidation(r *Report, d *dist, labels []int32, opts Options, tOpts TemperatureOptions, bins, steps int) error {
	if opts.Validation == nil || len(opts.ValidationLabels) == 0 {
		return errors.New("validation calibration needs Validation and ValidationLabels")
	}
	v, err := newDist(*opts.Validation, len(opts.ValidationLabels), d.c)
	if err != nil {
		return fmt.Errorf("validation set: %w", err)
	}
	if err := checkLabels(opts.ValidationLabels, d.c); err != nil {
		return fmt.Errorf("validation set: %w", err)
	}
	t := fitTemperature(v.logp, opts.ValidationLabels, v.c, tOpts)
	m := scaledMetrics(d.logp, labels, d.c, t, bins, steps)
	r.Temperature, r.Temperatures = t, []float64{t}
	r.CalNLL, r.CalBrier, r.CalECE, r.CalAAC = m.nll, m.brier, m.ece, m.aac
	return nil
}

// gather copies the given rows of an n×c matrix and their labels.
func gather(logp []float64, labels []int32, c int, rows []int) ([]float64, []int32) {
	lp := make([]float64, 0, len(rows)*c)
	ys := make([]int32, 0, len(rows))
	for _, i := range rows {
		lp = append(lp, logp[i*c:(i+1)*c]...)
		ys = append(ys, labels[i])
	}
	return lp, ys
}

// calibrateCrossFit runs the two-fold protocol Repeats times.
func calibrateCrossFit(r *Report, d *dist, labels []int32, opts Options, tOpts TemperatureOptions, bins, steps int) error {
	if d.n < 2 {
		return fmt.Errorf("cross-fit calibration needs at least 2 samples, have %d", d.n)
	}
	repeats := opts.Repeats
	if repeats == 0 {
		repeats = 1
	}
	if repeats < 0 {
		return fmt.Errorf("calibration repeats is %d, want ≥ 0", repeats)
	}
	rng := rand.New(rand.NewPCG(opts.Seed, 0x6f70746c6162)) // stream "optlab"
	var sum calMetrics
	logT := 0.0
	for range repeats {
		perm := rng.Perm(d.n)
		halves := [2][]int{perm[:d.n/2], perm[d.n/2:]}
		for k := range 2 {
			fitLP, fitY := gather(d.logp, labels, d.c, halves[k])
			evalLP, evalY := gather(d.logp, labels, d.c, halves[1-k])
			t := fitTemperature(fitLP, fitY, d.c, tOpts)
			m := scaledMetrics(evalLP, evalY, d.c, t, bins, steps)
			sum.nll += m.nll
			sum.brier += m.brier
			sum.ece += m.ece
			sum.aac += m.aac
			logT += math.Log(t)
			r.Temperatures = append(r.Temperatures, t)
		}
	}
	folds := float64(2 * repeats)
	r.Temperature = math.Exp(logT / folds)
	r.CalNLL, r.CalBrier, r.CalECE, r.CalAAC = sum.nll/folds, sum.brier/folds, sum.ece/folds, sum.aac/folds
	return nil
}
