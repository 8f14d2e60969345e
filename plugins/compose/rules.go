package compose

import (
	"context"
	"fmt"

	"github.com/optlab/optlab/sdk/optim"
)

// A Rule is an update rule: how a method applies a gradient to the
// parameters, with ops of its own where the host's base step
// (optim.BaseStep) would apply the experiment's base optimizer. A method
// whose Info declares optim.Features.UpdateRule takes its rule from its
// "update" hyperparameter (Rules), so that SAM, ASAM and OT-MDR run over
// AdamW or Muon with no plugin per combination (optax's
// sam(optimizer, adv_optimizer)).
type Rule interface {
	// Info names the rule and lists its hyperparameters (in the schema of
	// a method that uses it, prefixed "<rule>_"); Features.State says
	// whether it keeps state across steps.
	Info() optim.Info
	// Configure reads the rule's hyperparameters (cfg.Params) and
	// allocates its vectors for every member (cfg.MemberCount()) in its
	// namespace (cfg.Namespace), sending h what it needs.
	Configure(ctx context.Context, h optim.Host, cfg optim.Config) error
	// Apply appends to p the update of member m's parameters th with the
	// gradient g (which it may overwrite) at the step in (in.LR is the
	// schedule's rate, or the rate a wrapping method set).
	Apply(p *optim.Program, m int, th, g optim.Vec, in optim.StepInput)
	// Begin is called once per step before the first Apply (a step
	// count, a rate seen for the first time); an error fails the step.
	Begin(in optim.StepInput) error
	// SaveState and LoadState checkpoint the rule's state, as
	// optim.Optimizer's do.
	SaveState(ctx context.Context) ([]byte, []optim.Vec, error)
	LoadState(ctx context.Context, blob []byte) error
}

// RuleEntry is one update rule of Rules.
type RuleEntry struct {
	Name string
	New  func() Rule
	// Doc is a one-line description.
	Doc string
}

// Rules are the update rules a method may take ("update"), besides the
// host's base step (optim.BaseUpdate), in the order of its schema.
type Rules []RuleEntry

// Names returns optim.BaseUpdate and the rules' names.
func (rs Rules) Names() []string {
	out := []string{optim.BaseUpdate}
	for _, r := range rs {
		out = append(out, r.Name)
	}
	return out
}

// Params returns the hyperparameters of a method that takes its update
// from rs, for its schema after its own: "update" (one of Names, default
// optim.BaseUpdate) and every rule's, prefixed "<rule>_" (adamw_beta2).
func (rs Rules) Params() []optim.ParamSpec {
	if len(rs) == 0 {
		return nil
	}
	out := []optim.ParamSpec{{Name: optim.UpdateParam, Type: optim.String, Default: optim.BaseUpdate, Enum: rs.Names(),
		Doc: "update rule: \"base\" is the host's base optimizer ([train.optimizer]); another rule applies the update itself, at the schedule's rate"}}
	groups := make([]prefixGroup, len(rs))
	for i, r := range rs {
		groups[i] = prefixGroup{r.Name, r.New().Info().Params}
	}
	return append(out, prefixed(optim.UpdateParam, groups)...)
}

// Split splits the update rules' hyperparameters off params (a method's
// validated ones): the chosen rule's name, its hyperparameters without
// the prefix, and the method's own (without "update"). A rule's value
// other than its default while another rule is chosen is an error.
func (rs Rules) Split(method string, params map[string]any) (rule string, inner, own map[string]any, err error) {
	if len(rs) == 0 {
		return optim.BaseUpdate, map[string]any{}, params, nil
	}
	rule, inner, own, err = splitPrefixed(method, optim.UpdateParam, optim.BaseUpdate, rs.Names(), rs.Params()[1:], params)
	delete(own, optim.UpdateParam)
	return rule, inner, own, err
}

// NewUpdate makes the update named rule (optim.BaseUpdate or one of rs)
// and configures it with the method's own Config cfg, its Params replaced
// by params (the rule's hyperparameters, from Split) and its Handles by
// hs, the method's namespace, which the rule allocates in
// (<method>/<rule>/…).
func (rs Rules) NewUpdate(ctx context.Context, h optim.Host, method, rule string, params map[string]any, cfg optim.Config, hs *optim.Handles) (*Update, error) {
	cfg.Params, cfg.Handles = params, hs
	u := &Update{name: rule}
	if rule == optim.BaseUpdate {
		return u, nil
	}
	for _, r := range rs {
		if r.Name == rule {
			u.rule = r.New()
			if err := u.rule.Configure(ctx, h, cfg); err != nil {
				return nil, fmt.Errorf("%s: update %s: %w", method, rule, err)
			}
			return u, nil
		}
	}
	return nil, fmt.Errorf("%s: update %q: want one of %q", method, rule, rs.Names())
}

// Update is a method's update: the host's base step, or an update rule's
// ops. The zero Update is the base step.
type Update struct {
	name string
	rule Rule // nil: the base step
}

// Name returns the rule's name (optim.BaseUpdate for the base step).
func (u *Update) Name() string {
	if u == nil || u.rule == nil {
		return optim.BaseUpdate
	}
	return u.name
}

// Begin starts a step (before the first Apply).
func (u *Update) Begin(in optim.StepInput) error {
	if u == nil || u.rule == nil {
		return nil
	}
	if err := u.rule.Begin(in); err != nil {
		return fmt.Errorf("update %s: %w", u.name, err)
	}
	return nil
}

// Apply appends the update of member m's parameters th with gradient g:
// p.BaseStep(th, g), or the rule's ops.
func (u *Update) Apply(p *optim.Program, m int, th, g optim.Vec, in optim.StepInput) {
	if u == nil || u.rule == nil {
		p.BaseStep(th, g)
		return
	}
	u.rule.Apply(p, m, th, g, in)
}

// SaveState returns the rule's state (none for the base step, whose state
// is the host's).
func (u *Update) SaveState(ctx context.Context) ([]byte, []optim.Vec, error) {
	if u == nil || u.rule == nil {
		return nil, nil, nil
	}
	return u.rule.SaveState(ctx)
}

// LoadState restores the rule's state; the base step has none, and only
// an empty state loads.
func (u *Update) LoadState(ctx context.Context, blob []byte) error {
	if u == nil || u.rule == nil {
		return optim.Defaults{}.LoadState(ctx, blob)
	}
	return u.rule.LoadState(ctx, blob)
}
