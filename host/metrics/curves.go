package metrics

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"slices"
)

// DefaultECEBins is the number of equal-width confidence bins of ECE.
const DefaultECEBins = 15

// DefaultAACSteps is the number of intervals of the rejection grid of AAC.
const DefaultAACSteps = 100

// checkScores validates a confidence vector and its correctness flags.
func checkScores(conf []float64, correct []bool) error {
	if len(conf) == 0 {
		return errors.New("no samples")
	}
	if len(conf) != len(correct) {
		return fmt.Errorf("%d confidences but %d correctness flags", len(conf), len(correct))
	}
	for i, v := range conf {
		if math.IsNaN(v) {
			return fmt.Errorf("confidence %d is NaN", i)
		}
	}
	return nil
}

// eceBin returns the bin of conf among bins equal-width bins
// (k/bins, (k+1)/bins]; conf ≤ 0 goes to bin 0 and conf > 1 to the last.
// The edges are the float64 values k/bins, and the comparison is made
// against them exactly, not against conf·bins.
func eceBin(conf float64, bins int) int {
	nb := float64(bins)
	b := min(max(int(math.Ceil(conf*nb))-1, 0), bins-1)
	for b > 0 && conf <= float64(b)/nb {
		b--
	}
	for b < bins-1 && conf > float64(b+1)/nb {
		b++
	}
	return b
}

// ECE returns the expected calibration error with bins equal-width bins on
// the confidence:
//
//	ECE = Σ_b (|B_b|/N)·|mean_{i∈B_b} conf_i − mean_{i∈B_b} correct_i|
//	    = (1/N) Σ_b |Σ_{i∈B_b} (conf_i − correct_i)|
//
// Bin b is the half-open interval (b/bins, (b+1)/bins]; a confidence of
// exactly 0 (impossible for a max-probability) is put in the first bin
// rather than dropped. Empty bins contribute 0.
func ECE(conf []float64, correct []bool, bins int) (float64, error) {
	if err := checkScores(conf, correct); err != nil {
		return math.NaN(), fmt.Errorf("ece: %w", err)
	}
	if bins < 1 {
		return math.NaN(), fmt.Errorf("ece: %d bins, want ≥ 1", bins)
	}
	return ece(conf, correct, bins), nil
}

// ece is ECE on validated input.
func ece(conf []float64, correct []bool, bins int) float64 {
	gap := make([]float64, bins)
	for i, v := range conf {
		d := v
		if correct[i] {
			d -= 1
		}
		gap[eceBin(v, bins)] += d
	}
	s := 0.0
	for _, g := range gap {
		s += math.Abs(g)
	}
	return s / float64(len(conf))
}

// AAC returns the area above the accuracy–rejection curve: lower is better,
// 0 when every prediction is correct and 1 when none is, for every N.
//
// Samples are ordered by ascending confidence and treated as unit masses.
// Rejecting mass k ∈ [0, N−1] removes the k least confident; within a group
// of tied confidences mass is removed proportionally (the expectation over
// random tie-breaking), and a fractional k removes that fraction of the
// next sample. With R(k) the number of correct samples left,
// A(k) = R(k)/(N−k) is the accuracy on the retained mass. On the grid
// k_j = j·(N−1)/steps, j = 0..steps,
//
//	AAC = 1 − (1/steps) Σ_{j=0}^{steps−1} (A(k_j) + A(k_{j+1}))/2.
//
// The reference code instead rejects whole samples at steps of ⌊N/steps⌋
// starting from 1, which makes its all-correct value depend on N.
func AAC(conf []float64, correct []bool, steps int) (float64, error) {
	if err := checkScores(conf, correct); err != nil {
		return math.NaN(), fmt.Errorf("aac: %w", err)
	}
	if steps < 1 {
		return math.NaN(), fmt.Errorf("aac: %d steps, want ≥ 1", steps)
	}
	return aac(conf, correct, steps), nil
}

// tieGroup is a run of equal confidences in ascending order.
type tieGroup struct {
	start   float64 // mass before the group
	size    float64
	correct float64
	before  float64 // correct samples before the group
}

// groups sorts the samples by confidence and returns their tie groups.
func groups(conf []float64, correct []bool) []tieGroup {
	idx := make([]int, len(conf))
	for i := range idx {
		idx[i] = i
	}
	slices.SortFunc(idx, func(a, b int) int { return cmp.Compare(conf[a], conf[b]) })
	var gs []tieGroup
	var mass, hits float64
	for i := 0; i < len(idx); {
		j := i
		g := tieGroup{start: mass, before: hits}
		for ; j < len(idx) && conf[idx[j]] == conf[idx[i]]; j++ {
			g.size++
			if correct[idx[j]] {
				g.correct++
			}
		}
		mass += g.size
		hits += g.correct
		gs = append(gs, g)
		i = j
	}
	return gs
}

// aac is AAC on validated input.
func aac(conf []float64, correct []bool, steps int) float64 {
	gs := groups(conf, correct)
	n := float64(len(conf))
	last := gs[len(gs)-1]
	total := last.before + last.correct
	g := 0
	acc := func(k float64) float64 {
		for g < len(gs)-1 && k >= gs[g].start+gs[g].size {
			g++
		}
		rejected := gs[g].before + (k-gs[g].start)*(gs[g].correct/gs[g].size)
		return (total - rejected) / (n - k)
	}
	area := 0.0
	prev := acc(0)
	for j := 1; j <= steps; j++ {
		cur := acc(float64(j) * (n - 1) / float64(steps))
		area += (prev + cur) / 2
		prev = cur
	}
	return 1 - area/float64(steps)
}

// AUROC returns the area under the ROC curve for scores where pos should
// rank above neg, computed exactly as the Mann–Whitney statistic:
//
//	AUROC = (#{(p, n): s_p > s_n} + ½·#{(p, n): s_p = s_n}) / (|pos|·|neg|).
//
// With no positives or no negatives the AUROC is undefined: it returns NaN
// and an error wrapping ErrUndefined.
func AUROC(pos, neg []float64) (float64, error) {
	if len(pos) == 0 || len(neg) == 0 {
		return math.NaN(), fmt.Errorf("auroc: %d positives and %d negatives: %w", len(pos), len(neg), ErrUndefined)
	}
	type item struct {
		s   float64
		pos bool
	}
	all := make([]item, 0, len(pos)+len(neg))
	for _, s := range pos {
		all = append(all, item{s, true})
	}
	for _, s := range neg {
		all = append(all, item{s, false})
	}
	for _, it := range all {
		if math.IsNaN(it.s) {
			return math.NaN(), errors.New("auroc: NaN score")
		}
	}
	slices.SortFunc(all, func(a, b item) int { return cmp.Compare(a.s, b.s) })
	var u, negBelow float64
	for i := 0; i < len(all); {
		var p, q float64
		j := i
		for ; j < len(all) && all[j].s == all[i].s; j++ {
			if all[j].pos {
				p++
			} else {
				q++
			}
		}
		u += p * (negBelow + q/2)
		negBelow += q
		i = j
	}
	return u / (float64(len(pos)) * float64(len(neg))), nil
}

// misclassificationAUROC is the AUROC of confidence separating correct
// (positive) from wrong (negative) predictions.
func misclassificationAUROC(conf []float64, correct []bool) (float64, error) {
	var pos, neg []float64
	for i, v := range conf {
		if correct[i] {
			pos = append(pos, v)
		} else {
			neg = append(neg, v)
		}
	}
	v, err := AUROC(pos, neg)
	if err != nil {
		return v, fmt.Errorf("misclassification %w", err)
	}
	return v, nil
}
