package swa

import "math"

// Rate schedules of the SWA phase (the lr_schedule hyperparameter) and
// annealing strategies of the constant one (anneal_strategy).
const (
	Constant = "constant"
	Cyclic   = "cyclic"
	Cos      = "cos"
	Linear   = "linear"
)

// AnnealFactor is torch.optim.swa_utils.SWALR's annealing function at
// t ∈ [0, 1]: (1 − cos(πt))/2 for strategy Cos, t for Linear.
func AnnealFactor(strategy string, t float64) float64 {
	if strategy == Linear {
		return t
	}
	return (1 - math.Cos(math.Pi*t)) / 2
}

// AnnealLR is the rate of the constant schedule (SWALR) in SWA epoch k
// (0-based, k = epoch − start): from lr0 to swaLR over annealEpochs
// epochs, swaLR·α + lr0·(1 − α) with α = AnnealFactor(strategy,
// min(1, (k+1)/annealEpochs)), and swaLR from the first SWA epoch when
// annealEpochs = 0. This is SWALR's rate after k+1 of its steps, written
// as SWALR computes it, so that it is exactly swaLR once annealed.
func AnnealLR(lr0, swaLR float64, k int64, annealEpochs int, strategy string) float64 {
	if annealEpochs == 0 {
		return swaLR
	}
	alpha := AnnealFactor(strategy, min(1, float64(k+1)/float64(annealEpochs)))
	return swaLR*alpha + lr0*(1-alpha)
}

// CyclicLR is the rate of Izmailov et al.'s Algorithm 1 at step i of the
// SWA phase (0-based) with cycles of c steps: (1 − t)·lr1 + t·swaLR with
// t = (i mod c + 1)/c, so that the last step of every cycle, after which
// the weights are averaged, has rate swaLR (α2) and the first one rate
// close to lr1 (α1).
func CyclicLR(lr1, swaLR float64, i, c int64) float64 {
	t := float64(i%c+1) / float64(c)
	return (1-t)*lr1 + t*swaLR
}
