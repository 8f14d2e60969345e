// Package compose holds what a method that wraps a member method shares
// (the ensembles and swa methods): which methods may be the member
// (Options; those whose Info declares optim.Features.BaseStep follow
// SetLR), the member's hyperparameters in the wrapper's schema under
// prefixed names ("<member>_<name>") and their split off the wrapper's
// own, the member's construction in the wrapper's handle namespace, its
// resolved values and predictive seen from the wrapper, and the host
// through which a wrapper sets a step's rate with SetLR in front of the
// member's first program (LRHost).
//
// Error messages start with the wrapping method's name (the method
// argument), so that they read as the wrapper's own.
package compose

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/optlab/optlab/sdk/hparams"
	"github.com/optlab/optlab/sdk/optim"
)

// DefaultMember is the default of a wrapper's member hyperparameter: the
// host's base optimizer on one gradient per step.
const DefaultMember = "sgd"

// Options tell a wrapping method which optimizers may be its member. The
// wrapping packages import none of them: the caller lists them
// (plugins/builtin lists the built-in methods once, for the plugins and for
// the wrappers alike). A member whose Info declares optim.Features.BaseStep
// steps with the host's base optimizer, so a wrapper can schedule its rate
// with SetLR; the others (bsam, which does its own update) can only be
// wrapped without a schedule of the wrapper's.
type Options struct {
	// Members are the optimizers that the member hyperparameter may name,
	// in the order of the schema (their hyperparameters are
	// "<member>_<name>").
	Members *optim.Registry
}

// Clone returns o for a wrapper's New to keep: a nil Members replaced by
// an empty registry (the registry is shared).
func (o Options) Clone() Options {
	if o.Members == nil {
		o.Members = &optim.Registry{}
	}
	return o
}

// Names returns the member optimizers' names in schema order.
func (o Options) Names() []string {
	if o.Members == nil {
		return nil
	}
	return o.Members.Names()
}

// Follows reports whether member's step size follows SetLR: its Info
// declares optim.Features.BaseStep.
func (o Options) Follows(member string) bool {
	e, ok := o.Members.Lookup(member)
	return ok && e.New().Info().Features.BaseStep
}

// Scheduled returns the members whose rate SetLR sets, in schema order.
func (o Options) Scheduled() []string {
	return slices.DeleteFunc(o.Names(), func(n string) bool { return !o.Follows(n) })
}

// RequireSetLR returns nil if member follows SetLR, else the wrapping
// method's error saying that what (its setting that schedules the rate,
// e.g. `kind "snapshot"`) needs a member that does, and which do.
func (o Options) RequireSetLR(method, what, member string) error {
	if o.Follows(member) {
		return nil
	}
	return fmt.Errorf("%s: %s needs a member optimizer that steps with the host's base optimizer, "+
		"whose rate SetLR sets (%s); %s does its own update", method, what, strings.Join(o.Scheduled(), ", "), member)
}

// Prefixed returns the member optimizers' hyperparameters under the names
// "<member>_<name>" (an underscore, not a dot: a dotted key in TOML is a
// nested table, so "sam.rho" would have to be quoted in every experiment),
// for the wrapper's schema after its own.
func (o Options) Prefixed() []optim.ParamSpec {
	if o.Members == nil {
		return nil
	}
	var groups []prefixGroup
	for _, m := range o.Members.Entries() {
		groups = append(groups, prefixGroup{m.Name, m.New().Info().Params})
	}
	return prefixed("member", groups)
}

// prefixGroup is one choice's hyperparameters (a member optimizer's, an
// update rule's), prefixed with its name in the schema of what uses it.
type prefixGroup struct {
	name   string
	params []optim.ParamSpec
}

// prefixed returns the groups' hyperparameters as "<name>_<param>", each
// documented as applying when key (the hyperparameter that chooses) names
// its group.
func prefixed(key string, groups []prefixGroup) []optim.ParamSpec {
	var out []optim.ParamSpec
	for _, g := range groups {
		for _, p := range g.params {
			p.Name = g.name + "_" + p.Name
			p.Doc = key + " = " + g.name + ": " + p.Doc
			out = append(out, p)
		}
	}
	return out
}

// IsDefault reports whether v is the default of spec (canonical types).
func IsDefault(spec optim.ParamSpec, v any) bool {
	def, err1 := hparams.Convert(spec.Type, spec.Default)
	val, err2 := hparams.Convert(spec.Type, v)
	return err1 == nil && err2 == nil && def == val
}

// Split reads the member hyperparameter of params (DefaultMember when
// absent), which must name one of o.Members, and splits the member
// optimizers' prefixed hyperparameters off params: it returns the chosen
// member's, without the prefix, and the rest (the wrapper's own, member
// included). A prefixed name unknown to its optimizer is an error, and so
// is a value other than the default for an optimizer that is not the
// member, which would otherwise be ignored without a word.
func (o Options) Split(method string, params map[string]any) (member string, inner, own map[string]any, err error) {
	return splitPrefixed(method, "member", DefaultMember, o.Names(), o.Prefixed(), params)
}

// splitPrefixed reads the choice key of params (def when absent), which
// must be one of names, and splits the prefixed hyperparameters (specs,
// "<name>_<param>") of every choice off params: it returns the chosen
// one's, without the prefix, and the rest (the method's own, key
// included); see Options.Split for the errors.
func splitPrefixed(method, key, def string, names []string, specs []optim.ParamSpec, params map[string]any) (chosen string, inner, own map[string]any, err error) {
	chosen = def
	if s, ok := params[key].(string); ok {
		chosen = s
	}
	if !slices.Contains(names, chosen) {
		return "", nil, nil, fmt.Errorf("%s: %s %q: want one of %q", method, key, chosen, names)
	}
	inner, own = map[string]any{}, map[string]any{}
	byName := map[string]optim.ParamSpec{}
	for _, s := range specs {
		byName[s.Name] = s
	}
	split := func(k string) (name, rest string, ok bool) {
		for _, n := range names {
			if rest, ok := strings.CutPrefix(k, n+"_"); ok {
				return n, rest, true
			}
		}
		return "", "", false
	}
	for _, k := range slices.Sorted(maps.Keys(params)) {
		n, rest, ok := split(k)
		if !ok {
			own[k] = params[k]
			continue
		}
		spec, known := byName[k]
		switch {
		case !known:
			return "", nil, nil, fmt.Errorf("%s: %q: %w (%s has no %q)", method, k, hparams.ErrUnknown, n, rest)
		case n == chosen:
			inner[rest] = params[k]
		case !IsDefault(spec, params[k]):
			return "", nil, nil, fmt.Errorf("%s: %s = %v is set but %s = %q: only %s_* parameters apply",
				method, k, params[k], key, chosen, chosen)
		}
	}
	return chosen, inner, own, nil
}

// NewMember makes the member optimizer named member and configures it with
// cfg, whose Params are the member's hyperparameters (unprefixed, from
// Split) and whose Handles are the wrapper's namespace: the member
// allocates from a namespace inside it (<wrapper>/<member>/…), from the
// wrapper's counter, so its handles never collide with the wrapper's.
func (o Options) NewMember(ctx context.Context, h optim.Host, method, member string, cfg optim.Config) (optim.Optimizer, error) {
	opt, err := o.Members.New(member)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", method, err)
	}
	if err := opt.Configure(ctx, h, cfg); err != nil {
		return nil, fmt.Errorf("%s: member optimizer: %w", method, err)
	}
	return opt, nil
}

// Resolved returns own (the wrapper's resolved values) with what the member
// optimizer opt resolved under its prefixed names (otmdr_rho2), or nil
// when there is nothing. own is not changed.
func Resolved(own map[string]any, member string, opt optim.Optimizer) map[string]any {
	out := maps.Clone(own)
	for name, v := range opt.Resolved() {
		if out == nil {
			out = map[string]any{}
		}
		out[member+"_"+name] = v
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// Predictive returns the member optimizer's predictive (when it declares
// optim.Features.Predictive), or else the average of the probabilities of
// the live parameters of the run's members (a Members predictive over
// ParamsOf(m), m < members): for one member, its point estimate.
func Predictive(ctx context.Context, opt optim.Optimizer, members int) (optim.Predictive, error) {
	if opt.Info().Features.Predictive {
		return opt.Predictive(ctx)
	}
	vecs := make([]optim.Vec, max(members, 1))
	for m := range vecs {
		vecs[m] = optim.ParamsOf(m)
	}
	return optim.Predictive{Kind: optim.Members, Vecs: vecs}, nil
}
