package optim

import (
	"context"
	"fmt"
	"slices"
	"strings"
)

// Features are an optimizer's optional features, declared once, in its
// Info. The host acts on them before and during a run; the wrapping methods
// (ensembles, SWA) read their member's. A feature with behaviour has a
// method of Optimizer beside its field, with a default in Defaults that an
// optimizer without the feature keeps: the host calls the method only when
// the feature is declared.
//
// On the wire each feature travels as its name (FeatureSpec.Name) among the
// Info's capabilities; FeatureSet lists them, for the wire, the Python SDK
// (sdk/python/optlab/ops.json) and the docs. Adding a feature is one field
// here and one row of FeatureSet (and, for a behaviour, one method of
// Optimizer with its default in Defaults).
type Features struct {
	// Members: the optimizer trains every member of a run with several
	// members (models.members > 1); the host refuses such a run for an
	// optimizer without it, which would train member 0 only.
	Members bool
	// MemberDataOrder: every member gets its own data order (deep
	// ensembles); without it all members see the same minibatch.
	MemberDataOrder bool
	// OwnsUpdate: the optimizer applies its own update to the parameters
	// (Lion, say, with Axpy and LinComb) and never sends BaseStep or SetLR,
	// so no base optimizer ([train.optimizer]) is used. The host then
	// records no base optimizer for its runs (only the schedule's lr, which
	// still arrives as StepInput.LR), refuses the base optimizer's keys
	// that would be ignored (host check), and fails a run of it that sends
	// BaseStep or SetLR. Its curves and TensorBoard show as the run's
	// learning rate the step metric "lr" it reports (StepOutput.Metrics or
	// a Report), or StepInput.LR when it reports none.
	OwnsUpdate bool
	// BaseStep: the optimizer updates the parameters with the host's base
	// optimizer (the BaseStep op) and nothing else, so SetLR sets its step
	// size: a wrapping method may schedule its rate (snapshot and FGE
	// ensembles, SWA's swa_lr). An optimizer without it (bSAM, which does
	// its own update from StepInput.LR) is refused there.
	BaseStep bool
	// UpdateRule: the optimizer takes its update from the update rule that
	// its hyperparameter UpdateParam names: BaseUpdate ("base") for the
	// host's base optimizer (BaseStep), or another rule ("adamw") whose
	// ops the optimizer sends itself. With any rule but BaseUpdate the
	// optimizer applies its own update for that run, as one with
	// OwnsUpdate does (Info.OwnsUpdateWith).
	UpdateRule bool
	// Predictive: the predictive is not the point estimate of member 0:
	// the host asks Optimizer.Predictive (ensembles, posteriors).
	Predictive bool
	// State: the optimizer keeps state across steps, which the host
	// checkpoints with Optimizer.SaveState and restores with LoadState.
	// Without it the optimizer's state between steps lives on the host
	// only (the base optimizer's, the live parameters).
	State bool
	// Finalize: the optimizer acts once more after the last step, before
	// the run is evaluated and its model saved (Optimizer.Finalize).
	Finalize bool
}

// FeatureSpec describes one field of Features.
type FeatureSpec struct {
	// Name is the feature's name on the wire and in the Python SDK (its
	// Features field is Name with "-" as "_").
	Name string
	// Field is the name of the Features field.
	Field string
	// Method is the Optimizer method the feature enables ("" for a
	// declaration only).
	Method string
	// Since is the protocol minor from which a host acts on it.
	Since int
	// Doc is a one-line description.
	Doc string

	get func(*Features) *bool
}

// featureTable is FeatureSet's table, one row per Features field.
var featureTable = []FeatureSpec{
	{Name: "members", Field: "Members", Since: 0, get: func(f *Features) *bool { return &f.Members },
		Doc: "trains every member of a run with several members"},
	{Name: "member-data-order", Field: "MemberDataOrder", Since: 0, get: func(f *Features) *bool { return &f.MemberDataOrder },
		Doc: "every member gets its own data order"},
	{Name: "owns-update", Field: "OwnsUpdate", Since: 0, get: func(f *Features) *bool { return &f.OwnsUpdate },
		Doc: "applies its own update: no base optimizer, never BaseStep or SetLR"},
	{Name: "base-step", Field: "BaseStep", Since: 6, get: func(f *Features) *bool { return &f.BaseStep },
		Doc: "updates with the host's base optimizer only, so a wrapper may schedule its rate with SetLR"},
	{Name: "update-rule", Field: "UpdateRule", Since: 6, get: func(f *Features) *bool { return &f.UpdateRule },
		Doc: "takes its update from the rule its \"update\" hyperparameter names (\"base\": the host's base optimizer)"},
	{Name: "predictive", Field: "Predictive", Method: "Predictive", Since: 0, get: func(f *Features) *bool { return &f.Predictive },
		Doc: "forms its own predictive (Predictive)"},
	{Name: "state", Field: "State", Method: "SaveState", Since: 0, get: func(f *Features) *bool { return &f.State },
		Doc: "keeps state across steps (SaveState, LoadState)"},
	{Name: "finalize", Field: "Finalize", Method: "Finalize", Since: 6, get: func(f *Features) *bool { return &f.Finalize },
		Doc: "acts once after the last step (Finalize)"},
}

// FeatureSet returns the table of Features, in field order.
func FeatureSet() []FeatureSpec { return slices.Clone(featureTable) }

// Of reports whether f has the feature that s describes.
func (s FeatureSpec) Of(f Features) bool { return *s.get(&f) }

// Set returns f with the feature that s describes set to on.
func (s FeatureSpec) Set(f Features, on bool) Features {
	*s.get(&f) = on
	return f
}

// Names returns the names of the features f has, in FeatureSet order (the
// Info's capabilities on the wire).
func (f Features) Names() []string {
	var out []string
	for _, s := range featureTable {
		if s.Of(f) {
			out = append(out, s.Name)
		}
	}
	return out
}

// FeaturesOf returns the features named in names and the names it does not
// know (a newer SDK's, which this host ignores).
func FeaturesOf(names []string) (f Features, unknown []string) {
	for _, n := range names {
		i := slices.IndexFunc(featureTable, func(s FeatureSpec) bool { return s.Name == n })
		if i < 0 {
			unknown = append(unknown, n)
			continue
		}
		f = featureTable[i].Set(f, true)
	}
	return f, unknown
}

// Union returns the features that f or g has.
func (f Features) Union(g Features) Features {
	for _, s := range featureTable {
		if s.Of(g) {
			f = s.Set(f, true)
		}
	}
	return f
}

// UpdateParam is the hyperparameter that names the update rule of an
// optimizer with Features.UpdateRule, and BaseUpdate its value for the
// host's base optimizer.
const (
	UpdateParam = "update"
	BaseUpdate  = "base"
)

// OwnsUpdateWith reports whether the optimizer that i describes applies
// its own update when configured with params (its validated
// hyperparameters): it declares Features.OwnsUpdate, or Features.UpdateRule
// with an update rule other than BaseUpdate.
func (i Info) OwnsUpdateWith(params map[string]any) bool {
	if i.Features.OwnsUpdate {
		return true
	}
	if !i.Features.UpdateRule {
		return false
	}
	rule, _ := params[UpdateParam].(string)
	return rule != "" && rule != BaseUpdate
}

// Applied returns params (the validated hyperparameters of the optimizer
// that i describes) without the hyperparameters of the update rules it
// does not use, in a new map: with Features.UpdateRule, those named
// "<rule>_…" for every rule that its UpdateParam's Enum lists other than
// the chosen one (and BaseUpdate). They are at their defaults (a method
// refuses another value for a rule it does not use), so they say nothing
// about the run: the host leaves them out of a run's identity, and adding
// a rule to a method changes no earlier run's.
func (i Info) Applied(params map[string]any) map[string]any {
	out := make(map[string]any, len(params))
	for k, v := range params {
		out[k] = v
	}
	if !i.Features.UpdateRule {
		return out
	}
	chosen, _ := params[UpdateParam].(string)
	for _, ps := range i.Params {
		if ps.Name != UpdateParam {
			continue
		}
		for _, rule := range ps.Enum {
			if rule == chosen || rule == BaseUpdate {
				continue
			}
			for k := range out {
				if strings.HasPrefix(k, rule+"_") {
					delete(out, k)
				}
			}
		}
	}
	return out
}

// Defaults is embedded by an optimizer for the methods of the features it
// does not have: each is what the host does for an optimizer without the
// feature, so an optimizer writes only Info, Configure and Step, and the
// methods of the features it declares.
type Defaults struct{}

// Predictive is the point estimate of member 0 (no Features.Predictive).
func (Defaults) Predictive(context.Context) (Predictive, error) {
	return Predictive{Kind: Point}, nil
}

// SaveState saves nothing (no Features.State): the optimizer's state
// between steps lives on the host only.
func (Defaults) SaveState(context.Context) ([]byte, []Vec, error) { return nil, nil, nil }

// LoadState loads only an empty state (no Features.State).
func (Defaults) LoadState(_ context.Context, blob []byte) error {
	if len(blob) != 0 {
		return fmt.Errorf("unexpected %d-byte state for an optimizer without state", len(blob))
	}
	return nil
}

// Finalize does nothing (no Features.Finalize).
func (Defaults) Finalize(context.Context) error { return nil }

// Resolved derives nothing: every hyperparameter trains at its configured
// value.
func (Defaults) Resolved() map[string]any { return nil }

// Wrapper is implemented by an optimizer that runs another inside it (the
// ensembles and SWA methods around their member): Unwrap returns the
// member once Configure has made it (nil before), as errors.Unwrap and
// net/http's ResponseController follow a wrapper to what it wraps.
type Wrapper interface {
	Unwrap() Optimizer
}

// Unwrap returns the optimizer that opt wraps (a Wrapper's member), or nil.
func Unwrap(opt Optimizer) Optimizer {
	if w, ok := opt.(Wrapper); ok {
		return w.Unwrap()
	}
	return nil
}
