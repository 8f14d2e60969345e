package ensembles

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/optlab/optlab/sdk/hparams"
	"github.com/optlab/optlab/sdk/optim"
)

// Options tell New which optimizers may drive the members' steps. The
// ensembles package imports none of them: the caller lists them
// (plugins/builtin lists the built-in methods once, for the plugins and for
// the ensembles alike).
type Options struct {
	// Members are the optimizers that the member hyperparameter may name,
	// in the order of the schema (their hyperparameters are
	// "<member>_<name>"). The member hyperparameter's default is "sgd".
	Members *optim.Registry
	// FollowsSetLR names the Members whose step size follows SetLR: they
	// step with the host's base optimizer (BaseStep), so snapshot and FGE
	// can schedule their rate. The others (bsam, which does its own update)
	// serve deep ensembles only.
	//
	// The property belongs to the member optimizer, but it is not part of
	// optim.Info (an SDK change for the sake of one consumer), and an
	// optional interface would make every member package implement a method
	// for ensembles' sake, or need a wrapper around the member, which would
	// hide its optional interfaces (Predictor, Stateful) from the type
	// assertions that ensembles and the host make. So whoever lists the
	// members says which follow SetLR, next to the list. A member left out
	// is the safe default: snapshot and FGE refuse it in Configure rather
	// than schedule a rate that it would ignore.
	FollowsSetLR []string
}

// names returns the member optimizers' names in schema order.
func (o Options) names() []string {
	if o.Members == nil {
		return nil
	}
	return o.Members.Names()
}

// followsSetLR reports whether member's step size follows SetLR.
func (o Options) followsSetLR(member string) bool { return slices.Contains(o.FollowsSetLR, member) }

// scheduled returns the members whose rate SetLR sets, in schema order.
func (o Options) scheduled() []string {
	return slices.DeleteFunc(o.names(), func(n string) bool { return !o.followsSetLR(n) })
}

// prefixed returns the member optimizers' hyperparameters under the names
// "<member>_<name>" (an underscore, not a dot: a dotted key in TOML is a
// nested table, so "sam.rho" would have to be quoted in every experiment).
func (o Options) prefixed() []optim.ParamSpec {
	var out []optim.ParamSpec
	if o.Members == nil {
		return nil
	}
	for _, m := range o.Members.Entries() {
		for _, p := range m.New().Info().Params {
			p.Name = m.Name + "_" + p.Name
			p.Doc = "member = " + m.Name + ": " + p.Doc
			out = append(out, p)
		}
	}
	return out
}

// splitMember returns the member optimizer whose prefix key has and the
// name without the prefix.
func (o Options) splitMember(key string) (member, rest string, ok bool) {
	for _, m := range o.names() {
		if rest, ok := strings.CutPrefix(key, m+"_"); ok {
			return m, rest, true
		}
	}
	return "", "", false
}

// isDefault reports whether v is the default of spec (canonical types).
func isDefault(spec optim.ParamSpec, v any) bool {
	def, err1 := hparams.Convert(spec.Type, spec.Default)
	val, err2 := hparams.Convert(spec.Type, v)
	return err1 == nil && err2 == nil && def == val
}

// memberParams splits the member optimizers' prefixed hyperparameters off
// params: it returns the chosen member's, without the prefix, and the rest.
// A prefixed name unknown to its optimizer is an error, and so is a value
// other than the default for an optimizer that is not the member, which
// would otherwise be ignored without a word.
func (o Options) memberParams(member string, params map[string]any) (inner, own map[string]any, err error) {
	inner, own = map[string]any{}, map[string]any{}
	specs := map[string]optim.ParamSpec{}
	for _, s := range o.prefixed() {
		specs[s.Name] = s
	}
	for _, k := range slices.Sorted(maps.Keys(params)) {
		m, rest, ok := o.splitMember(k)
		if !ok {
			own[k] = params[k]
			continue
		}
		spec, known := specs[k]
		switch {
		case !known:
			return nil, nil, fmt.Errorf("ensembles: %q: %w (%s has no %q)", k, hparams.ErrUnknown, m, rest)
		case m == member:
			inner[rest] = params[k]
		case !isDefault(spec, params[k]):
			return nil, nil, fmt.Errorf("ensembles: %s = %v is set but member = %q: only %s_* parameters apply",
				k, params[k], member, member)
		}
	}
	return inner, own, nil
}
