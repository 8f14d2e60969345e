package ensembles

import "math"

// SnapshotCycle places a 0-based global step in the cosine-with-restarts
// schedule of snapshot ensembles: total steps cut into cycles cycles of
// T_cycle = ⌊total/cycles⌋ steps, the last cycle taking the remainder. It
// returns the 0-based cycle, the 1-based position T_cur of the step in it
// and the cycle's length. Steps at or beyond total belong to the last cycle
// (T_cur then exceeds its length). total ≥ cycles ≥ 1 is the caller's to
// ensure.
func SnapshotCycle(step, total int64, cycles int) (cycle int, tCur, tCycle int64) {
	t := total / int64(cycles)
	c := min(step/t, int64(cycles-1))
	start := c * t
	tCycle = t
	if c == int64(cycles-1) {
		tCycle = total - start
	}
	return int(c), step - start + 1, tCycle
}

// SnapshotLR is the learning rate of snapshot ensembles (Huang et al.,
// 2017, train.lua learningRateCosine): ½·α0·(1+cos(π·T_cur/T_cycle)). With
// the 1-based T_cur the last step of a cycle has rate 0 and the middle one
// (T_cur = T_cycle/2) α0/2.
func SnapshotLR(alpha0 float64, tCur, tCycle int64) float64 {
	return 0.5 * alpha0 * (1 + math.Cos(math.Pi*float64(tCur)/float64(tCycle)))
}

// FGEPretrainFactor is the factor of the pretraining learning rate in
// dnn-mode-connectivity's train.py (learning_rate_schedule) at the schedule
// position alpha = epoch/total_epochs (epoch 1-based): 1 up to 0.5, then
// linear down to 0.01 at 0.9, then 0.01.
func FGEPretrainFactor(alpha float64) float64 {
	switch {
	case alpha <= 0.5:
		return 1
	case alpha <= 0.9:
		return 1 - (alpha-0.5)/0.4*0.99
	}
	return 0.01
}

// FGECyclicLR is FGE's triangular cyclic learning rate
// (dnn-mode-connectivity utils.cyclic_learning_rate) at the cycle position
// t ∈ [0, 1): α1(1−2t) + α2·2t for t < ½, else α1(2t−1) + α2(2−2t). It
// starts a cycle at α1, reaches α2 at mid-cycle and climbs back to α1. The
// code thus uses lr_1 (α1) as the rate at the cycle boundaries, the maximum
// when α1 > α2, although the README calls LR1 the minimum.
func FGECyclicLR(alpha1, alpha2, t float64) float64 {
	if t < 0.5 {
		return alpha1*(1-2*t) + alpha2*2*t
	}
	return alpha1*(2*t-1) + alpha2*(2-2*t)
}

// FGEPosition returns the cycle position t = ((k mod c) + i/n)/c of
// iteration i (0-based) of the k-th FGE epoch (0-based) with n iterations
// per epoch and a cycle of c epochs, as fge.py computes it.
func FGEPosition(k, i, n int64, c int) float64 {
	return (float64(k%int64(c)) + float64(i)/float64(n)) / float64(c)
}

// FGESnapshotEpoch reports whether fge.py collects a snapshot at the end of
// FGE epoch k (0-based) with cycle c: when k mod c + 1 = c/2, i.e. when the
// learning rate reaches α2.
func FGESnapshotEpoch(k int64, c int) bool { return k%int64(c)+1 == int64(c/2) }

// fgeSnapshots is the number of snapshots fge.py collects in epochs
// complete FGE epochs with cycle c.
func fgeSnapshots(epochs int64, c int) int {
	h := int64(c/2 - 1)
	if epochs <= h {
		return 0
	}
	return int((epochs-1-h)/int64(c) + 1)
}
