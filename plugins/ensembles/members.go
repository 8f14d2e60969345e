package ensembles

import (
	"fmt"
	"slices"
	"strings"

	"github.com/optlab/optlab/plugins/bsam"
	"github.com/optlab/optlab/plugins/otmdr"
	"github.com/optlab/optlab/plugins/sam"
	"github.com/optlab/optlab/plugins/sgd"
	"github.com/optlab/optlab/sdk/hparams"
	"github.com/optlab/optlab/sdk/optim"
)

// memberOpt is an optimizer that can drive the members' steps.
type memberOpt struct {
	name string
	new  func() optim.Optimizer
	// lr says whether its step size follows SetLR (it uses BaseStep), which
	// the snapshot and FGE schedules need.
	lr bool
}

// memberOpts lists the member optimizers in schema order.
func memberOpts() []memberOpt {
	return []memberOpt{
		{name: "sgd", new: sgd.New, lr: true},
		{name: "sam", new: sam.New, lr: true},
		{name: "bsam", new: bsam.New},
		{name: "otmdr", new: otmdr.New, lr: true},
	}
}

// MemberNames returns the values that the member hyperparameter accepts.
func MemberNames() []string {
	var names []string
	for _, m := range memberOpts() {
		names = append(names, m.name)
	}
	return names
}

func findMember(name string) (memberOpt, bool) {
	i := slices.IndexFunc(memberOpts(), func(m memberOpt) bool { return m.name == name })
	if i < 0 {
		return memberOpt{}, false
	}
	return memberOpts()[i], true
}

// prefixed returns the member optimizers' hyperparameters under the names
// "<member>_<name>" (an underscore, not a dot: a dotted key in TOML is a
// nested table, so "sam.rho" would have to be quoted in every experiment).
func prefixed() []optim.ParamSpec {
	var out []optim.ParamSpec
	for _, m := range memberOpts() {
		for _, p := range m.new().Info().Params {
			p.Name = m.name + "_" + p.Name
			p.Doc = "member = " + m.name + ": " + p.Doc
			out = append(out, p)
		}
	}
	return out
}

// splitMember returns the member optimizer whose prefix key has and the
// name without the prefix.
func splitMember(key string) (memberOpt, string, bool) {
	for _, m := range memberOpts() {
		if rest, ok := strings.CutPrefix(key, m.name+"_"); ok {
			return m, rest, true
		}
	}
	return memberOpt{}, "", false
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
func memberParams(member string, params map[string]any) (inner, own map[string]any, err error) {
	inner, own = map[string]any{}, map[string]any{}
	specs := map[string]optim.ParamSpec{}
	for _, s := range prefixed() {
		specs[s.Name] = s
	}
	for _, k := range sortedKeys(params) {
		m, rest, ok := splitMember(k)
		if !ok {
			own[k] = params[k]
			continue
		}
		spec, known := specs[k]
		switch {
		case !known:
			return nil, nil, fmt.Errorf("ensembles: %q: %w (%s has no %q)", k, hparams.ErrUnknown, m.name, rest)
		case m.name == member:
			inner[rest] = params[k]
		case !isDefault(spec, params[k]):
			return nil, nil, fmt.Errorf("ensembles: %s = %v is set but member = %q: only %s_* parameters apply",
				k, params[k], member, member)
		}
	}
	return inner, own, nil
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
