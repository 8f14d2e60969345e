// Package sam is Sharpness-Aware Minimization (Foret et al.) as in the
// de-facto PyTorch reference davda54/sam, with ASAM (Kwon et al.) and
// m-sharpness as options.
//
// Per step and member: g = ∇L(θ) (BatchNorm update), n = ‖g‖ (global),
// e = ρ·g/(n+1e-12), g' = ∇L(θ+e) (BatchNorm frozen unless
// freeze_bn_second = false), θ restored by copying a saved copy (bitwise
// exact, as davda54; not by subtracting e), then the host's BaseStep with g'.
// The step costs two Exec calls: the coefficient ρ/‖g‖ needs one round trip.
//
// With adaptive = true (ASAM) T = |θ|+η, n = ‖T⊙g‖ and e = ρ·T²⊙g/(n+1e-12).
// With adaptive_scope = "all" (the default) T applies to every parameter,
// biases and BatchNorm included, as in davda54. With "weights" it applies,
// as in official ASAM (SamsungLabs/ASAM), only to tensors whose name
// contains "weight" (conv and linear weights and BatchNorm γ), and the
// others get T = 1, plain SAM (davda54 issue #81): T = M⊙(|θ|+η) + (1−M)
// with a 0/1 mask M built once in Configure from Layout with FillRange ops
// (protocol minor 4), and its complement: two more vectors per member. eta defaults to official ASAM's 0.01; set eta = 0 for
// davda54's T = |θ|.
//
// With m > 1 the batch is cut into m parts in loader order and part j is
// perturbed with its own gradient (m-sharpness); the m perturbed gradients
// are averaged for the base step.
package sam

import (
	"context"
	"fmt"
	"strings"

	"github.com/optlab/optlab/sdk/hparams"
	"github.com/optlab/optlab/sdk/optim"
)

// Config holds SAM's hyperparameters.
type Config struct {
	Rho            float64 `hp:"rho" doc:"neighbourhood radius ρ (davda54 example: 0.05 for SAM, 2.0 for ASAM)"`
	Adaptive       bool    `hp:"adaptive" doc:"ASAM: scale the ascent elementwise by T = |θ|+η on all parameters"`
	Eta            float64 `hp:"eta" doc:"ASAM offset η (official ASAM 0.01, davda54 0)"`
	AdaptiveScope  string  `hp:"adaptive_scope" doc:"ASAM: \"all\" parameters (davda54) or \"weights\": tensors whose name contains \"weight\", as official ASAM"`
	FreezeBNSecond bool    `hp:"freeze_bn_second" doc:"freeze BatchNorm running statistics in the perturbed pass"`
	M              int     `hp:"m" doc:"m-sharpness: sub-batches perturbed separately (1 = plain SAM)"`
}

func defaults() Config {
	return Config{Rho: 0.05, Eta: 0.01, AdaptiveScope: "all", FreezeBNSecond: true, M: 1}
}

// SAM is the optimizer. Create it with New.
type SAM struct {
	cfg     Config
	members int
}

// New returns a SAM optimizer with the default hyperparameters.
func New() optim.Optimizer { return &SAM{cfg: defaults()} }

// Info implements optim.Optimizer.
func (o *SAM) Info() optim.Info {
	return optim.Info{Name: "sam", Version: "0.1.0", ProtocolMinor: optim.ProtocolMinor,
		Capabilities: []string{"members", "state"}, Params: hparams.MustSpecs(defaults())}
}

// Handles of member m: gradients g_j (j < M), the saved θ, T, a scratch,
// and ASAM's weight mask and its complement.
func (o *SAM) g(m, j int) optim.Vec { return optim.Vec(1 + m*(o.cfg.M+5) + j) }
func (o *SAM) old(m int) optim.Vec  { return o.g(m, o.cfg.M) }
func (o *SAM) t(m int) optim.Vec    { return o.g(m, o.cfg.M+1) }
func (o *SAM) w(m int) optim.Vec    { return o.g(m, o.cfg.M+2) }
func (o *SAM) mask(m int) optim.Vec { return o.g(m, o.cfg.M+3) }
func (o *SAM) rest(m int) optim.Vec { return o.g(m, o.cfg.M+4) } // 1 − mask

// weightsOnly tells whether ASAM's T applies to weight tensors only.
func (o *SAM) weightsOnly() bool { return o.cfg.Adaptive && o.cfg.AdaptiveScope == "weights" }

func (o *SAM) batch(j int) optim.Batch {
	if o.cfg.M == 1 {
		return optim.Batch{}
	}
	return optim.Batch{Part: int32(j), Of: int32(o.cfg.M)}
}

// Configure implements optim.Optimizer.
func (o *SAM) Configure(ctx context.Context, h optim.Host, cfg optim.Config) error {
	o.cfg = defaults()
	if err := hparams.Apply(&o.cfg, cfg.Params); err != nil {
		return fmt.Errorf("sam: %w", err)
	}
	if o.cfg.M < 1 || o.cfg.Rho < 0 || o.cfg.Eta < 0 {
		return fmt.Errorf("sam: need m ≥ 1, rho ≥ 0, eta ≥ 0, got %+v", o.cfg)
	}
	switch {
	case o.cfg.AdaptiveScope != "all" && o.cfg.AdaptiveScope != "weights":
		return fmt.Errorf("sam: adaptive_scope %q: want \"all\" or \"weights\"", o.cfg.AdaptiveScope)
	case o.cfg.AdaptiveScope != "all" && !o.cfg.Adaptive:
		return fmt.Errorf("sam: adaptive_scope %q applies to ASAM only: set adaptive = true", o.cfg.AdaptiveScope)
	}
	o.members = max(cfg.Members, 1)
	p := optim.Prog()
	for m := range o.members {
		for v := o.g(m, 0); v <= o.w(m); v++ {
			p.AllocFor(v, m)
		}
	}
	if o.weightsOnly() {
		if err := o.buildMasks(ctx, h, p); err != nil {
			return err
		}
	}
	if _, err := h.Exec(ctx, p); err != nil {
		return fmt.Errorf("sam: configure: %w", err)
	}
	return nil
}

// buildMasks appends to p the ops that make every member's weight mask (1
// on the tensors whose name contains "weight", 0 elsewhere) and its
// complement, so that a step forms T with two elementwise ops.
func (o *SAM) buildMasks(ctx context.Context, h optim.Host, p *optim.Program) error {
	l, err := h.Layout(ctx)
	if err != nil {
		return fmt.Errorf("sam: layout: %w", err)
	}
	if len(l.Members) < o.members {
		return fmt.Errorf("sam: layout has %d members, want %d", len(l.Members), o.members)
	}
	for m := range o.members {
		p.AllocFor(o.mask(m), m)
		weights := 0
		for _, t := range l.Members[m].Tensors {
			if strings.Contains(t.Name, "weight") {
				n := int64(1)
				for _, d := range t.Shape {
					n *= d
				}
				p.FillRange(o.mask(m), t.Offset, n, 1)
				weights++
			}
		}
		if weights == 0 {
			return fmt.Errorf("sam: adaptive_scope \"weights\": member %d (%s) has no tensor named *weight*", m, l.Members[m].Arch)
		}
		p.AllocFor(o.rest(m), m).Fill(o.rest(m), 1).Axpy(o.rest(m), -1, o.mask(m))
	}
	return nil
}

// Step implements optim.Optimizer with two Exec calls.
func (o *SAM) Step(ctx context.Context, h optim.Host, _ optim.StepInput) (optim.StepOutput, error) {
	first := optim.Prog()
	for m := range o.members {
		th := optim.ParamsOf(m)
		switch {
		case o.weightsOnly(): // T = M⊙(|θ|+η) + (1−M), exact
			first.Unary(o.t(m), th, optim.Abs).AddConst(o.t(m), o.cfg.Eta).
				Binary(o.t(m), o.t(m), o.mask(m), optim.Mul).Binary(o.t(m), o.t(m), o.rest(m), optim.Add)
		case o.cfg.Adaptive:
			first.Unary(o.t(m), th, optim.Abs).AddConst(o.t(m), o.cfg.Eta)
		}
		for j := range o.cfg.M {
			first.Grad(o.g(m, j), th, o.batch(j), optim.BNUpdate)
			if o.cfg.Adaptive {
				first.Binary(o.w(m), o.t(m), o.g(m, j), optim.Mul).Norm(o.w(m))
			} else {
				first.Norm(o.g(m, j))
			}
		}
	}
	r, err := h.Exec(ctx, first)
	if err != nil {
		return optim.StepOutput{}, fmt.Errorf("sam: ascent: %w", err)
	}
	bn := optim.BNUpdate
	if o.cfg.FreezeBNSecond {
		bn = optim.BNFreeze
	}
	second := optim.Prog()
	var loss, acc float64
	n := float64(o.members * o.cfg.M)
	for m := range o.members {
		th, avg := optim.ParamsOf(m), make([]optim.Term, o.cfg.M)
		second.Copy(o.old(m), th)
		for j := range o.cfg.M {
			k := 3 * (m*o.cfg.M + j) // loss, acc, norm of (m, j)
			loss, acc = loss+r.Scalar(k)/n, acc+r.Scalar(k+1)/n
			s, e := o.cfg.Rho/(r.Scalar(k+2)+1e-12), o.g(m, j)
			if o.cfg.Adaptive {
				second.Binary(o.w(m), o.t(m), e, optim.Mul).Binary(o.w(m), o.t(m), o.w(m), optim.Mul)
				e = o.w(m)
			}
			second.Axpy(th, s, e).Grad(o.g(m, j), th, o.batch(j), bn).Copy(th, o.old(m))
			avg[j] = optim.Term{Coef: 1 / float64(o.cfg.M), X: o.g(m, j)}
		}
		g := o.g(m, 0)
		if o.cfg.M > 1 {
			g = o.w(m)
			second.LinComb(g, avg...)
		}
		second.BaseStep(th, g)
	}
	if _, err := h.Exec(ctx, second); err != nil {
		return optim.StepOutput{}, fmt.Errorf("sam: descent: %w", err)
	}
	return optim.StepOutput{Metrics: map[string]float64{"loss": loss, "acc": acc}}, nil
}

// SaveState implements optim.Stateful. SAM's vectors are per-step scratch
// and the base optimizer's state belongs to the host, so the state is empty.
func (o *SAM) SaveState(context.Context) ([]byte, []optim.Vec, error) { return nil, nil, nil }

// LoadState implements optim.Stateful.
func (o *SAM) LoadState(_ context.Context, blob []byte) error {
	if len(blob) != 0 {
		return fmt.Errorf("sam: unexpected %d-byte state", len(blob))
	}
	return nil
}
