package optimtest

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/optlab/optlab/sdk/optim"
)

// KL directions of WithVariational (the experiment's variational_opts.kl).
const (
	// KLqp is KL(q‖p) per weight: log(σp/σ) + (σ² + μ²)/(2σp²) − ½.
	KLqp = "qp"
	// KLpq is the reversed KL(p‖q) per weight, as the OT-MDR/BayesianCNN
	// code computes it: log(σ/σp) + (σp² + μ²)/(2σ²) − ½.
	KLpq = "pq"
)

// DefaultRhoInit is the ρ that WithVariational uses when rho0 is nil (the
// experiment default variational_opts.rho_init; σ = softplus(−5) ≈ 0.0067).
const DefaultRhoInit = -5.0

// Softplus returns σ = log(1 + eˣ), computed without overflow.
func Softplus(x float64) float64 { return max(x, 0) + math.Log1p(math.Exp(-math.Abs(x))) }

// InvSoftplus returns the ρ with Softplus(ρ) = σ, log(expm1(σ)), for σ > 0,
// computed as σ + log(−expm1(−σ)) so that it neither overflows for large σ
// nor loses precision for small σ.
func InvSoftplus(sigma float64) float64 { return sigma + math.Log(-math.Expm1(-sigma)) }

// sigmoid is dσ/dρ for σ = softplus(ρ).
func sigmoid(x float64) float64 { return 1 / (1 + math.Exp(-x)) }

// variational holds the settings of one variational member.
type variational struct {
	rho0       []float64
	priorSigma float64
	beta       float64
	kl         string
}

// WithVariational makes member m variational (protocol minor 1): its live
// parameters become the means μ of a mean-field Gaussian posterior q with
// σ = softplus(ρ), ρ being the vector behind optim.RhoOf(m), initialised
// from rho0 (nil: DefaultRhoInit everywhere; one value: that value
// everywhere; else one value per parameter). The prior p is N(0,
// priorSigma²) per weight, beta (β ≥ 0) weighs the KL and kl selects its
// direction, KLqp ("" too) or KLpq. Elements of tensors of Kind "bn" stay
// deterministic: W = μ there, no KL, zero ρ-gradient.
//
// A Grad pass at a vector At of member m (the means, live or perturbed)
// evaluates the problem at W = At + σ⊙κ, with κ the contents of the Grad's
// Eps vector, or a fresh standard-normal draw from the run's host stream
// when Eps = 0. Its loss is the problem's mean loss plus β·KL(At, σ)/N with
// N = Layout.TrainSize and the KL summed over the weights. Out receives
// the gradient with respect to At (the problem's gradient at W plus the
// KL's), OutRho (≠ 0) the gradient with respect to ρ, through W and the
// KL, by the chain rule dσ/dρ = sigmoid(ρ). BaseStep on RhoOf(m) updates ρ
// with the base optimizer, with its own state and without weight decay,
// at the member's learning rate (SetLR applies to both). β > 0 needs a
// TrainSize (data problems have one; use WithTrainSize for data-free
// losses).
func WithVariational(m int, rho0 []float64, priorSigma, beta float64, kl string) HostOption {
	return func(c *hostConfig) {
		c.vari[m] = variational{rho0: append([]float64(nil), rho0...), priorSigma: priorSigma, beta: beta, kl: kl}
	}
}

// initVariational validates the variational settings and sets up the ρ
// vectors and the mask of deterministic (BatchNorm) elements.
func (h *Host) initVariational(vs map[int]variational) error {
	if len(vs) == 0 {
		return nil
	}
	n := h.prob.Numel()
	h.det = make([]bool, n)
	for _, t := range h.prob.Tensors() {
		if t.Kind != "bn" {
			continue
		}
		size := int64(1)
		for _, d := range t.Shape {
			size *= d
		}
		if t.Offset < 0 || t.Offset+size > int64(n) {
			return fmt.Errorf("optimtest: tensor %s [%d, %d) outside %d parameters", t.Name, t.Offset, t.Offset+size, n)
		}
		for i := t.Offset; i < t.Offset+size; i++ {
			h.det[i] = true
		}
	}
	for m, v := range vs {
		if m < 0 || m >= len(h.members) {
			return fmt.Errorf("optimtest: WithVariational(%d) with %d members", m, len(h.members))
		}
		if v.kl == "" {
			v.kl = KLqp
		}
		switch {
		case v.kl != KLqp && v.kl != KLpq:
			return fmt.Errorf("optimtest: WithVariational(%d): kl %q: want %q or %q", m, v.kl, KLqp, KLpq)
		case !(v.priorSigma > 0) || math.IsInf(v.priorSigma, 1):
			return fmt.Errorf("optimtest: WithVariational(%d): prior sigma %g: want a finite value > 0", m, v.priorSigma)
		case !(v.beta >= 0) || math.IsInf(v.beta, 1):
			return fmt.Errorf("optimtest: WithVariational(%d): beta %g: want a finite value ≥ 0", m, v.beta)
		case v.beta > 0 && h.trainSize <= 0:
			return fmt.Errorf("optimtest: WithVariational(%d): beta > 0 needs a train size N (use WithTrainSize)", m)
		}
		rho := make([]float64, n)
		switch len(v.rho0) {
		case 0:
			v.rho0 = []float64{DefaultRhoInit}
			fallthrough
		case 1:
			for i := range rho {
				rho[i] = v.rho0[0]
			}
		case n:
			copy(rho, v.rho0)
		default:
			return fmt.Errorf("optimtest: WithVariational(%d): %d values of ρ for %d parameters", m, len(v.rho0), n)
		}
		for i, r := range rho {
			if math.IsNaN(r) || math.IsInf(r, 0) {
				return fmt.Errorf("optimtest: WithVariational(%d): ρ[%d] = %g", m, i, r)
			}
		}
		mem := h.members[m]
		mem.vari, mem.rho = &v, rho
	}
	return nil
}

// klTerm returns one weight's KL term of the given direction and its
// derivatives with respect to μ and σ, for the prior N(0, sp²).
func klTerm(kl string, mu, sigma, sp float64) (v, dmu, dsigma float64) {
	if kl == KLpq { // log(σ/σp) + (σp² + μ²)/(2σ²) − ½
		s2 := sigma * sigma
		v = math.Log(sigma/sp) + (sp*sp+mu*mu)/(2*s2) - 0.5
		return v, mu / s2, 1/sigma - (sp*sp+mu*mu)/(s2*sigma)
	}
	// log(σp/σ) + (σ² + μ²)/(2σp²) − ½
	p2 := sp * sp
	v = math.Log(sp/sigma) + (sigma*sigma+mu*mu)/(2*p2) - 0.5
	return v, mu / p2, -1/sigma + sigma/p2
}

// varLoss evaluates a variational member's pass at means mu with noise
// kappa on samples s. It overwrites gmu and grho with the gradients and
// returns the loss (with β·KL/N), the accuracy, the summed KL and the
// weight sample W.
func (h *Host) varLoss(mem *member, mu, kappa []float64, s []int, gmu, grho []float64) (loss, acc, kl float64, w []float64) {
	v := mem.vari
	n := len(mu)
	w, sigma := make([]float64, n), make([]float64, n)
	for i := range w {
		if h.det[i] {
			w[i] = mu[i]
			continue
		}
		sigma[i] = Softplus(mem.rho[i])
		w[i] = mu[i] + sigma[i]*kappa[i]
	}
	gw := make([]float64, n)
	loss, acc = h.prob.Loss(w, s, gw)
	var scale float64 // β/N
	if v.beta != 0 {
		scale = v.beta / float64(h.trainSize)
	}
	for i := range w {
		if h.det[i] {
			gmu[i], grho[i] = gw[i], 0
			continue
		}
		k, dmu, dsigma := klTerm(v.kl, mu[i], sigma[i], v.priorSigma)
		kl += k
		gmu[i], grho[i] = gw[i], gw[i]*kappa[i]
		if scale != 0 { // β = 0 adds nothing, even where σ underflows
			gmu[i] += scale * dmu
			grho[i] += scale * dsigma
		}
		grho[i] *= sigmoid(mem.rho[i])
	}
	if scale != 0 {
		loss += scale * kl
	}
	return loss, acc, kl, w
}

// variationalSamples draws n weight samples W = μ + σ⊙ξ of the variational
// member that owns the handle mean, from the evaluation's own stream.
func (h *Host) variationalSamples(mean optim.Vec, n int) ([][]float64, error) {
	if _, ok := mean.Rho(); ok {
		return nil, fmt.Errorf("variational samples: mean %d is a ρ handle", mean)
	}
	mu, owner, err := h.lookup(mean)
	if err != nil {
		return nil, fmt.Errorf("variational samples: %w", err)
	}
	mem := h.members[owner]
	if mem.vari == nil {
		return nil, fmt.Errorf("variational samples (Std = 0): member %d is not variational", owner)
	}
	if n < 1 {
		return nil, errors.New("variational samples: N < 1")
	}
	r := rand.New(rand.NewPCG(uint64(h.seed), 0xe7a1))
	out := make([][]float64, n)
	for k := range out {
		t := make([]float64, len(mu))
		for i := range t {
			xi := r.NormFloat64()
			if t[i] = mu[i]; !h.det[i] {
				t[i] += Softplus(mem.rho[i]) * xi
			}
		}
		out[k] = t
	}
	return out, nil
}

// Rho returns a copy of variational member m's ρ (nil if there is no
// variational member m).
func (h *Host) Rho(m int) []float64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	if m < 0 || m >= len(h.members) || h.members[m].vari == nil {
		return nil
	}
	return append([]float64(nil), h.members[m].rho...)
}
