package sparse

import (
	"math"

	"github.com/optlab/optlab/sdk/optim"
)

// tiny is added to every score before it is masked, so that each candidate
// of a top-k (the active weights when pruning, the inactive ones when
// regrowing) scores strictly above every non-candidate, which scores 0:
// a weight or gradient of exactly 0 is still a candidate, and a top-k of at
// most the candidates' count picks candidates only. The per-layer counts
// are then exact whatever the values. It is a normal float32 (no flush to
// zero), and too small to reorder magnitudes above ~1e-23 in float32.
const tiny = 1e-30

// net is the sparse network of one member: its live parameters, mask,
// gradient buffer and sparse layers.
type net struct {
	member int
	mask   optim.Vec // 1 on active weights and on every dense tensor
	g      optim.Vec // the step's gradient, kept for the regrowth
	layers []Layer
}

// params returns the handle of the net's live parameters.
func (n net) params() optim.Vec { return optim.ParamsOf(n.member) }

// counts appends ops that fill v with value(l) on every sparse layer l and
// with other on every other tensor, and returns the per-tensor segment
// register of those values (SegMaxAbs of a constant segment is its value,
// exactly: the values are integers ≤ 2²⁴, exact in float32).
func (n net) counts(p *optim.Program, v optim.Vec, other float64, value func(Layer) int64) optim.Reg {
	p.Fill(v, optim.K(other))
	for _, l := range n.layers {
		p.FillRange(v, l.Offset, l.Size, float64(value(l)))
	}
	return p.SegReduce(optim.SegMaxAbs, optim.PerTensor, v, 0)
}

// fractions appends ops that return, per tensor, the segment registers of
// the fractions c_l/size_l of each count function (1 on the dense
// tensors), divided in float64 on the device: TopKMask's
// ⌊frac·size + ½⌋ is then c_l exactly. v is a scratch vector of the net's
// layout.
func (n net) fractions(p *optim.Program, v optim.Vec, others []float64, counts ...func(Layer) int64) []optim.Reg {
	size := n.counts(p, v, 1, func(l Layer) int64 { return l.Size })
	out := make([]optim.Reg, len(counts))
	for i, c := range counts {
		out[i] = p.Div(n.counts(p, v, others[i], c), size)
	}
	return out
}

// initMask appends the ops of the net's sparse initialization: its mask
// and gradient buffer are allocated, the mask gets exactly Active ones on
// every sparse layer, at uniformly random places (the top-Active |z| of a
// standard normal draw with the net's seed), and ones on every other
// tensor, and the live parameters are masked. scratch is a free handle,
// allocated and freed here.
func (n net) initMask(p *optim.Program, scratch optim.Vec, seed int64) {
	p.Alloc(n.mask, n.member).Alloc(n.g, n.member).Alloc(scratch, n.member)
	frac := n.fractions(p, scratch, []float64{1}, func(l Layer) int64 { return l.Active })[0]
	p.RandN(scratch, 1, seed)
	p.TopKMask(n.mask, scratch, optim.PerTensor, frac)
	p.Binary(n.params(), n.params(), n.mask, optim.Mul)
	p.Free(scratch)
}

// step appends the net's sparse SGD step: the gradient at the (masked)
// live parameters, the base optimizer's step with it, and the mask applied
// to the result, as FreeTickets' Masking.step does (optimizer.step, then
// apply_mask on the weights; the momentum buffer is not masked). It returns
// the registers of the gradient pass.
func (n net) step(p *optim.Program) optim.Eval {
	ev := p.Grad(n.g, n.params(), optim.Batch{}, optim.BNUpdate)
	p.BaseStep(n.params(), n.g)
	p.Binary(n.params(), n.params(), n.mask, optim.Mul)
	return ev
}

// removed returns the number of weights a topology update at death rate
// rate prunes (and regrows) in layer l: ⌈rate·active⌉, as FreeTickets'
// magnitude_death computes it.
func removed(l Layer, rate float64) int64 {
	return min(int64(math.Ceil(rate*float64(l.Active))), l.Active)
}

// explore appends a topology update at death rate rate (FreeTickets'
// truncate_weights with magnitude death and gradient growth): in every
// sparse layer, the k = ⌈rate·active⌉ active weights of smallest magnitude
// are pruned (the top active−k of |w| among the active ones are kept, ties
// to the lower index) and set to 0, then the k inactive weights (the
// pruned ones included) of largest gradient magnitude |g| are regrown, at
// value 0. g is the gradient of the step just taken, at the masked
// parameters; it is left unchanged, so a second update may follow in the
// same program. The layer keeps exactly its active count. scratch and grow
// are free handles, allocated and freed here.
func (n net) explore(p *optim.Program, scratch, grow optim.Vec, rate float64) {
	w := n.params()
	p.Alloc(scratch, n.member).Alloc(grow, n.member)
	f := n.fractions(p, scratch, []float64{1, 0},
		func(l Layer) int64 { return l.Active - removed(l, rate) },
		func(l Layer) int64 { return removed(l, rate) })
	keep, regrow := f[0], f[1]
	// Prune: score (|w| + tiny)·mask; the inactive weights score 0.
	p.Unary(scratch, w, optim.Abs).AddConst(scratch, optim.K(tiny)).Binary(scratch, scratch, n.mask, optim.Mul)
	p.TopKMask(n.mask, scratch, optim.PerTensor, keep)
	p.Binary(w, w, n.mask, optim.Mul)
	// Regrow: score (|g| + tiny)·(1 − mask); the kept weights score 0.
	p.Fill(grow, optim.K(1)).Binary(grow, grow, n.mask, optim.Sub)
	p.Binary(scratch, grow, n.g, optim.Mul).Unary(scratch, scratch, optim.Abs).AddConst(scratch, optim.K(tiny))
	p.Binary(scratch, scratch, grow, optim.Mul)
	p.TopKMask(grow, scratch, optim.PerTensor, regrow)
	p.Binary(n.mask, n.mask, grow, optim.Add)
	p.Free(scratch).Free(grow)
}
