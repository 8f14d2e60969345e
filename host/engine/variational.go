package engine

import (
	"fmt"
	"math"

	"github.com/optlab/optlab/host/tensor"
	"github.com/optlab/optlab/sdk/optim"
)

// Variational makes every member a mean-field Gaussian posterior over its
// weights (SGVB, Blundell et al. 2015): the live parameters are the means μ,
// a second vector ρ gives σ = softplus(ρ), and a pass uses the weights
// W = μ + σ ⊙ κ with κ ~ N(0, I). BatchNorm parameters stay deterministic.
type Variational struct {
	// PriorSigma is the std of the zero-mean Gaussian prior (0.1 in the
	// OT-MDR code; bayesian-torch uses 1).
	PriorSigma float64
	// RhoInit and RhoInitStd initialize ρ ~ N(RhoInit, RhoInitStd²): −5
	// and 0.1 in the OT-MDR code (σ ≈ 0.0067).
	RhoInit, RhoInitStd float64
	// KL is "qp" for KL(q‖p) (the ELBO) or "pq" for KL(p‖q), the reversed
	// direction the OT-MDR code computes.
	KL string
	// KLReduction is "sum", or "layers": the sum divided by the number of
	// variational layers + 1, as the OT-MDR code does.
	KLReduction string
	// Beta scales the KL term; the loss is mean NLL + Beta·KL/N.
	Beta float64
	// LocalReparam makes training passes sample the outputs of convolution
	// and linear layers instead of the weights (the local reparameterization
	// trick, Kingma et al. 2015): noise independent per sample, so
	// gradients of lower variance, at the cost of a second convolution per
	// layer. A Grad's Eps vector then has no effect, since there is no
	// weight sample to share: every pass draws fresh noise. The predictive
	// still samples weights; for each test sample the two give the same
	// distribution.
	LocalReparam bool
}

// variational is one member's posterior state.
type variational struct {
	rho    tensor.T // owned
	mask   tensor.T // 1 for variational entries (weights, biases), 0 for BatchNorm
	base   baseState
	layers int
}

func (v *variational) drop() {
	v.rho.Drop()
	v.mask.Drop()
	v.base.drop()
}

// initVariational creates ρ and the mask of member m (torch generator
// already seeded).
func (e *Engine) initVariational(s *tensor.Scope, mem *Member) {
	vc := e.cfg.Variational
	m := mem.Model
	rho := s.Zeros([]int64{m.Numel}, tensor.Float32, e.cfg.Device)
	mask := s.Zeros([]int64{m.Numel}, tensor.Float32, e.cfg.Device)
	v := &variational{}
	for i, p := range m.Params {
		if p.Kind != "weight" && p.Kind != "bias" {
			continue
		}
		if p.Kind == "weight" {
			v.layers++
		}
		s.Fill(s.Narrow(mask, 0, m.Offsets[i], p.Numel()), 1)
	}
	s.NormalInPlace(rho, vc.RhoInit, vc.RhoInitStd)
	if s.Err() == nil {
		v.rho, v.mask = s.Keep(rho), s.Keep(mask)
		mem.vi = v
	}
}

// sigma returns mask ⊙ softplus(rho).
func sigma(s *tensor.Scope, rho, mask tensor.T) tensor.T {
	return s.Mul(s.Softplus(rho), mask)
}

// klTerm returns β·KL/N as a 0-d tensor for means mu and ρ rho.
func (e *Engine) klTerm(s *tensor.Scope, mem *Member, mu, rho tensor.T) tensor.T {
	vc := e.cfg.Variational
	sp := s.Softplus(rho)
	sp2 := s.Square(sp)
	mu2 := s.Square(mu)
	p := vc.PriorSigma
	var kl tensor.T
	if vc.KL == "pq" {
		// KL(p‖q) = log(σ/σp) + (σp² + μ²)/(2σ²) − ½
		kl = s.Add(s.AddScalar(s.Log(sp), -math.Log(p)-0.5), s.Div(s.AddScalar(mu2, p*p), s.Scale(sp2, 2)))
	} else {
		// KL(q‖p) = log(σp/σ) + (σ² + μ²)/(2σp²) − ½
		kl = s.Add(s.AddScalar(s.Scale(s.Log(sp), -1), math.Log(p)-0.5), s.Scale(s.Add(sp2, mu2), 1/(2*p*p)))
	}
	total := s.Sum(s.Mul(kl, mem.vi.mask), tensor.Float32)
	scale := vc.Beta / float64(max(e.cfg.TrainSize, 1))
	if vc.KLReduction == "layers" {
		scale /= float64(mem.vi.layers + 1)
	}
	return s.Scale(total, scale)
}

// noise returns the κ of a pass: the plugin's Eps vector or a fresh draw.
func (e *Engine) noise(s *tensor.Scope, h optim.Vec, numel int64) (tensor.T, error) {
	if h != 0 {
		k, _, err := e.get(h)
		if err != nil {
			return tensor.T{}, fmt.Errorf("eps: %w", err)
		}
		return e.toDevice(s, k), nil // a spilled Eps joins μ and σ on the device
	}
	tensor.ManualSeed(e.rng.Int64())
	return s.Randn([]int64{numel}, tensor.Float32, e.cfg.Device), nil
}

// varGrad is the Grad op of a variational member.
func (e *Engine) varGrad(s *tensor.Scope, o optim.Grad, mem *Member, at tensor.T, x, y tensor.T, mom float64) ([]tensor.T, error) {
	mu := s.RequiresGrad(at)
	rho := s.RequiresGrad(mem.vi.rho)
	var logits tensor.T
	if e.cfg.Variational.LocalReparam {
		// No weight sample to share: Eps is checked but the activation
		// noise of every pass is fresh, from the host stream.
		if o.Eps != 0 {
			if _, _, err := e.get(o.Eps); err != nil {
				return nil, fmt.Errorf("eps: %w", err)
			}
		}
		tensor.ManualSeed(e.rng.Int64())
		logits = mem.Model.ForwardLocal(s, mu, s.Square(sigma(s, rho, mem.vi.mask)), mem.Buf, x, true, mom)
	} else {
		kappa, err := e.noise(s, o.Eps, mem.Model.Numel)
		if err != nil {
			return nil, err
		}
		logits = mem.Model.Forward(s, s.Add(mu, s.Mul(sigma(s, rho, mem.vi.mask), kappa)), mem.Buf, x, true, mom)
	}
	nll := s.CrossEntropy(logits, y, e.cfg.LabelSmoothing)
	loss := s.Add(nll, e.klTerm(s, mem, mu, rho))
	if o.Out != 0 || o.OutRho != 0 {
		g := s.Gradients(loss, mu, rho)
		for i, h := range []optim.Vec{o.Out, o.OutRho} {
			if h == 0 {
				continue
			}
			d, _, err := e.get(h)
			if err != nil {
				return nil, err
			}
			s.CopyFrom(d, g[i])
		}
	}
	acc := s.Mean(s.Cast(s.Eq(s.Argmax(logits, 1), y), tensor.Float32))
	return []tensor.T{s.Detach(loss), acc}, nil
}

// sampleWeights draws W = μ + σ ⊙ κ of a variational member (no autograd).
func (e *Engine) sampleWeights(s *tensor.Scope, mem *Member, seed int64) tensor.T {
	tensor.ManualSeed(seed)
	kappa := s.Randn([]int64{mem.Model.Numel}, tensor.Float32, e.cfg.Device)
	return s.Add(mem.Params, s.Mul(sigma(s, mem.vi.rho, mem.vi.mask), kappa))
}
