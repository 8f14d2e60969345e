// Package metrics computes classification and uncertainty metrics over a
// predictive distribution evaluated once over a whole test set: accuracy,
// NLL, Brier score, ECE, the area above the accuracy–rejection curve (AAC),
// misclassification and OOD AUROC, and the same metrics after temperature
// scaling.
//
// Every formula, default and departure from the published reference code is
// documented in docs/METRICS.md; the doc comments below state the exact
// definitions implemented.
package metrics

import (
	"errors"
	"fmt"
	"math"
)

// ProbFloor is the smallest probability the NLL sees: a sample contributes
// −log(max(p_y, ProbFloor)), at most −log(1e-12) ≈ 27.63, so a single
// confidently wrong prediction cannot make the NLL infinite.
const ProbFloor = 1e-12

// RowSumTolerance is how far a row of Probs may sum from 1, and how far the
// log-sum-exp of a row of LogProbs may be from 0, before the input is
// rejected. Rows are used as given, not renormalised.
const RowSumTolerance = 1e-4

// Report keys, exactly as Report.Map returns them.
const (
	KeyAcc         = "acc"
	KeyNLL         = "nll"
	KeyBrier       = "brier"
	KeyECE         = "ece"
	KeyAAC         = "aac"
	KeyAUROC       = "auroc"
	KeyAUROCOOD    = "auroc_ood"
	KeyTemperature = "temperature"
	KeyCalNLL      = "cal_nll"
	KeyCalBrier    = "cal_brier"
	KeyCalECE      = "cal_ece"
	KeyCalAAC      = "cal_aac"
)

// ErrUndefined marks a metric that has no value for the given data, such as
// an AUROC without negatives. Functions return it wrapped, with NaN.
var ErrUndefined = errors.New("metric undefined")

// Predictions is an N×C predictive distribution in row-major order, given
// either as probabilities or as natural-log probabilities. Exactly one of
// Probs and LogProbs must be set.
type Predictions struct {
	// Probs holds p_ic ≥ 0 with rows summing to 1 (within
	// RowSumTolerance).
	Probs []float64
	// LogProbs holds log p_ic (−Inf allowed) with each row's
	// log-sum-exp equal to 0 (within RowSumTolerance). For an ensemble
	// this is the log of the averaged probabilities.
	LogProbs []float64
	// Classes is C. Zero means: infer it from the number of labels (or,
	// for an OOD set, use the test set's C).
	Classes int
}

// dist is a validated distribution holding both representations.
type dist struct {
	n, c int
	p    []float64
	logp []float64
}

// newDist validates pr. n is the expected number of rows (−1 when
// unknown); c0 is the class count to use when pr.Classes is zero (0 when
// it must be inferred from n).
func newDist(pr Predictions, n, c0 int) (*dist, error) {
	var data []float64
	isLog := false
	switch {
	case pr.Probs != nil && pr.LogProbs != nil:
		return nil, errors.New("both Probs and LogProbs are set; give exactly one")
	case pr.Probs != nil:
		data = pr.Probs
	case pr.LogProbs != nil:
		data, isLog = pr.LogProbs, true
	default:
		return nil, errors.New("neither Probs nor LogProbs is set")
	}
	if len(data) == 0 {
		return nil, errors.New("predictions are empty")
	}
	c := pr.Classes
	switch {
	case c < 0:
		return nil, fmt.Errorf("class count is %d, want > 0", c)
	case c == 0 && c0 > 0:
		c = c0
	case c == 0 && n > 0:
		if len(data)%n != 0 {
			return nil, fmt.Errorf("%d prediction values are not a multiple of %d labels", len(data), n)
		}
		c = len(data) / n
	case c == 0:
		return nil, errors.New("class count is 0 and cannot be inferred")
	}
	if c0 > 0 && c != c0 {
		return nil, fmt.Errorf("predictions have %d classes, want %d", c, c0)
	}
	if len(data)%c != 0 {
		return nil, fmt.Errorf("%d prediction values are not a multiple of %d classes", len(data), c)
	}
	rows := len(data) / c
	if n >= 0 && rows != n {
		return nil, fmt.Errorf("predictions have %d rows (%d values / %d classes) but there are %d labels", rows, len(data), c, n)
	}
	d := &dist{n: rows, c: c, p: make([]float64, len(data)), logp: make([]float64, len(data))}
	for i := range rows {
		row := data[i*c : (i+1)*c]
		if isLog {
			for j, v := range row {
				if math.IsNaN(v) || math.IsInf(v, 1) || v > RowSumTolerance {
					return nil, fmt.Errorf("row %d class %d: log-probability %v is not ≤ 0", i, j, v)
				}
			}
			if s := logSumExp(row); math.Abs(s) > RowSumTolerance {
				return nil, fmt.Errorf("row %d: log-sum-exp is %v, want 0 (are these logits rather than log-probabilities?)", i, s)
			}
			copy(d.logp[i*c:], row)
			for j, v := range row {
				d.p[i*c+j] = math.Exp(v)
			}
			continue
		}
		s := 0.0
		for j, v := range row {
			if !(v >= 0 && v <= 1+RowSumTolerance) {
				return nil, fmt.Errorf("row %d class %d: probability %v is not in [0, 1]", i, j, v)
			}
			s += v
		}
		if math.Abs(s-1) > RowSumTolerance {
			return nil, fmt.Errorf("row %d: probabilities sum to %v, want 1", i, s)
		}
		copy(d.p[i*c:], row)
		for j, v := range row {
			d.logp[i*c+j] = math.Log(v)
		}
	}
	return d, nil
}

// checkLabels validates labels against c classes.
func checkLabels(labels []int32, c int) error {
	for i, y := range labels {
		if y < 0 || int(y) >= c {
			return fmt.Errorf("label %d is %d, want in [0, %d)", i, y, c)
		}
	}
	return nil
}

// logSumExp returns log Σ exp(x) stably; −Inf when every entry is −Inf.
func logSumExp(x []float64) float64 {
	m := math.Inf(-1)
	for _, v := range x {
		if v > m {
			m = v
		}
	}
	if math.IsInf(m, -1) {
		return m
	}
	s := 0.0
	for _, v := range x {
		s += math.Exp(v - m)
	}
	return m + math.Log(s)
}

// argmax returns the index of the first largest entry.
func argmax(row []float64) int {
	best := 0
	for j, v := range row {
		if v > row[best] {
			best = j
		}
	}
	return best
}

// scores holds the per-sample quantities every metric is built from.
type scores struct {
	conf    []float64 // max_c p_ic
	correct []bool    // argmax_c p_ic == y_i (first maximum on ties)
	nll     float64   // mean −max(log p_y, log ProbFloor)
	brier   float64   // mean Σ_c (p_ic − 1[c=y_i])²
	acc     float64
}

// score computes the per-sample quantities of an n×c distribution given
// as probabilities p and log-probabilities logp.
func score(p, logp []float64, labels []int32, c int) scores {
	n := len(labels)
	s := scores{conf: make([]float64, n), correct: make([]bool, n)}
	logFloor := math.Log(ProbFloor)
	var nll, brier float64
	hits := 0
	for i, y := range labels {
		row := p[i*c : (i+1)*c]
		k := argmax(row)
		s.conf[i] = row[k]
		s.correct[i] = k == int(y)
		if s.correct[i] {
			hits++
		}
		nll -= math.Max(logp[i*c+int(y)], logFloor)
		b := 0.0
		for j, v := range row {
			if j == int(y) {
				v -= 1
			}
			b += v * v
		}
		brier += b
	}
	s.nll = nll / float64(n)
	s.brier = brier / float64(n)
	s.acc = float64(hits) / float64(n)
	return s
}

// Confidences returns, for every sample, the max-probability confidence and
// whether the arg-max class (the first one on ties) equals the label.
func Confidences(pred Predictions, labels []int32) (conf []float64, correct []bool, err error) {
	if len(labels) == 0 {
		return nil, nil, errors.New("confidences: no labels")
	}
	d, err := newDist(pred, len(labels), 0)
	if err != nil {
		return nil, nil, fmt.Errorf("confidences: %w", err)
	}
	if err := checkLabels(labels, d.c); err != nil {
		return nil, nil, fmt.Errorf("confidences: %w", err)
	}
	s := score(d.p, d.logp, labels, d.c)
	return s.conf, s.correct, nil
}
