package sparse

import "math"

// Decay schedules of the death rate (the decay hyperparameter).
const (
	Cosine   = "cosine"
	Constant = "constant"
)

// deathRateMin is η_min of FreeTickets' CosineDecay (sparselearning/core.py),
// the rate the cosine decay reaches at the last step.
const deathRateMin = 0.005

// DeathRate is the fraction of each layer's active weights that the
// topology update after step s (1-based: the s-th optimizer step of the run)
// prunes and regrows. Constant: p. Cosine: FreeTickets' CosineDecay, a
// torch CosineAnnealingLR from p down to η_min = 0.005 over the run's total
// steps, stepped once per optimizer step, in closed form:
// η_min + (p − η_min)·(1 + cos(π·s/total))/2.
func DeathRate(decay string, p float64, s, total int64) float64 {
	if decay != Cosine {
		return p
	}
	return deathRateMin + (p-deathRateMin)*(1+math.Cos(math.Pi*float64(s)/float64(total)))/2
}

// Phase is the learning-rate phase of an epoch of an EDST run.
type Phase int

// Phases of an EDST run: exploration, then in each refinement phase the
// refinement rate for its first half and the final rate for its second.
const (
	Explore Phase = iota
	Refine
	RefineFinal
)

// EDSTPlan is the schedule of an EDST run in epochs (1-based), after
// FreeTickets' main_EDST.py: Explore epochs of exploration, then M
// refinement phases of I = (epochs − Explore)/M epochs each (a float, as
// the script computes it). Phase k runs from the end of epoch b_k to the
// end of epoch b_{k+1}, with b_k = ⌈Explore + k·I⌉ (the script's
// milestones 1; b_M = epochs); its rate is the refinement rate up to the
// end of epoch ⌈Explore + k·I + I/2⌉ (milestones 2) and the final rate
// after. At the end of phase k < M−1 the model is ticket k, and the large
// exploration step starts phase k+1. Each phase of at least 2 epochs gives
// exactly the script's rates and milestones; shorter phases (smoke runs)
// keep the rule above where the script's elif chain would drop a large
// exploration that falls on a milestone 2, and an empty phase (I < 1)
// takes no ticket. A run no longer than its exploration is all
// exploration and has one ticket, the final model.
type EDSTPlan struct {
	// Phases[e−1] is the phase of epoch e.
	Phases []Phase
	// Ends lists the epochs at whose end a ticket is taken and the large
	// exploration follows, in order (at most M−1; never the last epoch,
	// whose model is the last ticket).
	Ends []int
}

// NewEDSTPlan returns the plan of a run of epochs epochs with explore
// epochs of exploration and tickets refinement phases (≥ 1).
func NewEDSTPlan(epochs, explore, tickets int) EDSTPlan {
	p := EDSTPlan{Phases: make([]Phase, epochs)}
	if explore >= epochs {
		return p
	}
	width := float64(epochs-explore) / float64(tickets)
	prev := explore
	for k := range tickets {
		start := float64(explore) + float64(k)*width
		end := epochs
		if k < tickets-1 {
			end = int(math.Ceil(start + width))
		}
		mid := int(math.Ceil(start + width/2))
		if end <= prev {
			continue
		}
		for e := prev + 1; e <= end; e++ {
			p.Phases[e-1] = Refine
			if e > mid {
				p.Phases[e-1] = RefineFinal
			}
		}
		if end < epochs {
			p.Ends = append(p.Ends, end)
		}
		prev = end
	}
	return p
}

// Tickets returns the number of tickets the plan takes: one at every end
// and the final model.
func (p EDSTPlan) Tickets() int { return len(p.Ends) + 1 }
