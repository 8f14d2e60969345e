// Package variants holds the built-in efficient and reweighted variants of
// SAM, each on plugins/sam's perturbed pass (sam.PerturbedGrad: θ saved,
// θ + ρ·e/(‖e‖+1e-12), the gradient there with BatchNorm frozen, θ
// restored bitwise):
//
//   - looksam: LookSAM (Liu et al., CVPR 2022), full SAM every k steps and
//     the stored orthogonal component of the SAM gradient between;
//   - aesam: AE-SAM (Jiang et al., ICLR 2023), SAM only on the steps whose
//     ‖g‖² exceeds its running mean plus c_t running deviations, decided on
//     the device (the If op, protocol minor 9);
//   - fsam: Friendly-SAM (Li et al., CVPR 2024), the perturbation along g
//     minus σ times an EMA of past gradients;
//   - wsam: WSAM (Yue et al., KDD 2023), sharpness weighted γ/(1−γ) as a
//     regulariser, decoupled from the base step by default;
//   - gsam: GSAM (Zhuang et al., ICLR 2022), the surrogate gap's descent
//     direction orthogonal to the perturbed gradient, with ρ following the
//     learning rate as its ProportionScheduler when lr_max is set.
//
// Every variant sends one program per step with no blocking read (its
// data-dependent coefficients are registers), trains every member, reports
// the loss and accuracy of the first pass at θ, and steps with the host's
// base optimizer, or, made with WithRules, with the update rule its
// "update" hyperparameter names (LookSAM-AdamW: update = "adamw"), as sam
// does. docs/METHODS.md says which official file and commit each
// follows and every departure; testdata/*_reference.py are their float64
// PyTorch references and testdata/*.golden their op traces.
package variants

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/optlab/optlab/plugins/compose"
	"github.com/optlab/optlab/plugins/sam"
	"github.com/optlab/optlab/sdk/hparams"
	"github.com/optlab/optlab/sdk/optim"
)

// eps guards the variants' denominators, SAM's 1e-12.
const eps = sam.Eps

// core is what every variant shares: the host, its namespace, per member
// the gradient at θ (g) and θ saved across the perturbed pass, the
// variant's own vectors by name, and the number of steps taken.
type core struct {
	optim.Defaults
	name    string
	h       optim.Host
	hs      *optim.Handles
	members int
	g       []optim.Vec
	saved   []optim.Vec
	vecs    map[string][]optim.Vec
	// state names the vectors of vecs that persist across steps (saved
	// with a checkpoint), in order.
	state []string
	// taken counts the steps taken in the run (checkpointed with the state).
	taken int64
	// rules are the update rules "update" may name (none: the host's base
	// step only, and no "update" hyperparameter); update is the chosen
	// one, configured.
	rules  compose.Rules
	update *compose.Update
}

// setRules gives a variant the update rules (WithRules).
func (c *core) setRules(rs compose.Rules) { c.rules = rs }

// WithRules returns a constructor of the variant that newVariant makes
// (NewLookSAM, …) taking its update from the rule its "update"
// hyperparameter names among rules (plugins/builtin gives every built-in
// rule): "base", the default, is the host's base step; "adamw" makes
// LookSAM-AdamW. The rule's state is then saved with the variant's.
func WithRules(rules compose.Rules, newVariant func() optim.Optimizer) func() optim.Optimizer {
	return func() optim.Optimizer {
		o := newVariant()
		if v, ok := o.(interface{ setRules(compose.Rules) }); ok {
			v.setRules(rules)
		}
		return o
	}
}

// info returns the variant's Info: its own hyperparameters hp (a Config
// value) and, with rules, "update" and the rules' prefixed ones; state
// and baseStep are the variant's own Features (with rules it keeps the
// rule's state too).
func (c *core) info(hp any, state, baseStep bool) optim.Info {
	ruled := len(c.rules) > 0
	return optim.Info{Name: c.name, Version: "0.1.0",
		Features: optim.Features{Members: true, BaseStep: baseStep, State: state || ruled, UpdateRule: ruled},
		Params:   append(hparams.MustSpecs(hp), c.rules.Params()...)}
}

// configure reads the hyperparameters into hp (a pointer to the variant's
// Config, which check validates as a whole), allocates every member's g,
// saved and own vectors (those named in state persist), appends init's ops
// for each member (constants) and sends it all in one Exec.
func (c *core) configure(ctx context.Context, h optim.Host, cfg optim.Config, hp any, check func() error,
	own, state []string, init func(p *optim.Program, m int)) error {
	c.h, c.taken, c.state = h, 0, state
	rule, ruleParams, ownParams, err := c.rules.Split(c.name, cfg.Params)
	if err != nil {
		return err
	}
	if err := hparams.Apply(hp, ownParams); err != nil {
		return fmt.Errorf("%s: %w", c.name, err)
	}
	if check != nil {
		if err := check(); err != nil {
			return fmt.Errorf("%s: %w", c.name, err)
		}
	}
	c.members = cfg.MemberCount()
	c.hs = cfg.Namespace(c.name)
	c.g, c.saved = c.hs.PerMember("g", c.members), c.hs.PerMember("saved", c.members)
	c.vecs = map[string][]optim.Vec{}
	for _, name := range own {
		c.vecs[name] = c.hs.PerMember(name, c.members)
	}
	p := c.hs.Prog()
	for m := range c.members {
		p.Alloc(c.g[m], m).Alloc(c.saved[m], m)
		for _, name := range own {
			p.Alloc(c.vecs[name][m], m)
		}
		if init != nil {
			init(p, m)
		}
	}
	if _, err := h.Exec(ctx, p); err != nil {
		return fmt.Errorf("%s: configure: %w", c.name, err)
	}
	// The rule allocates after the variant's own vectors, so that these
	// keep their handles whatever the rule.
	c.update, err = c.rules.NewUpdate(ctx, h, c.name, rule, ruleParams, cfg, c.hs)
	return err
}

// begin starts a step: the update's Begin, a program, and every member's
// gradient at θ (BatchNorm updated) into g, members in order as SAM sends
// them (the first passes, whose loss and accuracy the step reports).
func (c *core) begin(in optim.StepInput) (*optim.Program, []optim.Eval, error) {
	if err := c.update.Begin(in); err != nil {
		return nil, nil, fmt.Errorf("%s: %w", c.name, err)
	}
	p := c.hs.Prog()
	evs := make([]optim.Eval, c.members)
	for m := range c.members {
		evs[m] = p.Grad(c.g[m], optim.ParamsOf(m), optim.Batch{}, optim.BNUpdate)
	}
	return p, evs, nil
}

// step appends member m's update of θ with gradient g: the host's base
// step or the rule's ops.
func (c *core) step(p *optim.Program, m int, g optim.Vec, in optim.StepInput) {
	c.update.Apply(p, m, optim.ParamsOf(m), g, in)
}

// vec returns member m's own vector name.
func (c *core) vec(name string, m int) optim.Vec { return c.vecs[name][m] }

// perturbed appends member m's SAM pass along e of norm n with radius rho
// into out (BatchNorm frozen): out = ∇L(θ + rho·e/(n+1e-12)), θ restored.
func (c *core) perturbed(p *optim.Program, m int, e, out optim.Vec, rho optim.Num, n optim.Reg) optim.Eval {
	return sam.PerturbedGrad(p, optim.ParamsOf(m), c.saved[m], e, out, rho, n, optim.Batch{}, optim.BNFreeze)
}

// exec reports the mean loss and accuracy of the first passes evs and
// sends p: the step's one Exec.
func (c *core) exec(ctx context.Context, p *optim.Program, evs []optim.Eval) (optim.StepOutput, error) {
	p.ReportMetrics(p.Mean(evs))
	if _, err := c.h.Exec(ctx, p); err != nil {
		return optim.StepOutput{}, fmt.Errorf("%s: step: %w", c.name, err)
	}
	c.taken++
	return optim.StepOutput{}, nil
}

// stateVecs lists the persistent vectors, by name then member.
func (c *core) stateVecs() []optim.Vec {
	var out []optim.Vec
	for _, name := range c.state {
		out = append(out, c.vecs[name]...)
	}
	return out
}

// savedState is a variant's checkpoint blob: its own persistent vectors
// and steps taken, and its update rule's blob (none for the base step).
type savedState struct {
	Version int             `json:"version"`
	Taken   int64           `json:"taken"`
	Vecs    []optim.Vec     `json:"vecs"`
	Rule    json.RawMessage `json:"rule,omitempty"`
}

// SaveState implements optim.Optimizer (Features.State): the persistent
// vectors and the number of steps taken, then the rule's state and
// vectors.
func (c *core) SaveState(ctx context.Context) ([]byte, []optim.Vec, error) {
	if c.h == nil {
		return nil, nil, fmt.Errorf("%s: save state before Configure", c.name)
	}
	rule, ruleVecs, err := c.update.SaveState(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", c.name, err)
	}
	b, err := json.Marshal(savedState{Version: 1, Taken: c.taken, Vecs: c.stateVecs(), Rule: rule})
	if err != nil {
		return nil, nil, fmt.Errorf("%s: save state: %w", c.name, err)
	}
	return b, append(c.stateVecs(), ruleVecs...), nil
}

// LoadState implements optim.Optimizer (Features.State), after Configure;
// the host has restored the vectors into the handles Configure allocated.
func (c *core) LoadState(ctx context.Context, blob []byte) error {
	var s savedState
	if err := json.Unmarshal(blob, &s); err != nil {
		return fmt.Errorf("%s: load state: %w", c.name, err)
	}
	if want := c.stateVecs(); s.Version != 1 || s.Taken < 0 || !slices.Equal(s.Vecs, want) {
		return fmt.Errorf("%s: load state: unsupported state %+v (want version 1, vecs %v)", c.name, s, want)
	}
	if err := c.update.LoadState(ctx, s.Rule); err != nil {
		return fmt.Errorf("%s: %w", c.name, err)
	}
	c.taken = s.Taken
	return nil
}
