package train

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"

	"github.com/optlab/optlab/host/experiment"
	"github.com/optlab/optlab/host/identity"
	"github.com/optlab/optlab/sdk/optim"
)

// Config is run's configuration with method m: what makes it the run it
// is (identity.Config), its files identified by content. Its Map is the
// record's Config.
func (r *Runner) Config(run experiment.Run, m Optimizer) identity.Config {
	e := run.Experiment(r.Exp)
	params := m.Params
	switch { // not the update rules it does not use
	case m.Optimizer != nil:
		params = m.Optimizer.Info().Applied(m.Params)
	case m.Info != nil:
		params = m.Info.Applied(m.Params)
	}
	c := identity.Config{Plugin: m.Plugin, Params: params, Train: e.Train, Data: e.Data, Model: e.Model, Eval: e.Eval, OwnsUpdate: m.ownsUpdate()}
	if d := e.Data; d.Path != "" && r.Data != nil && r.Data.Content != "" {
		// The data this run trains on, identified as it was loaded: the
		// file at d.Path may have been replaced since.
		c.DataContent = r.Data.Content
	} else if d.Path != "" {
		switch d.Dataset {
		case experiment.DatasetCSV:
			if id, ok := FileIdentity(d.Path); ok {
				c.DataContent = id
			}
		case experiment.DatasetNumPy:
			c.DataContent = filesIdentity(d.Path)
		}
	}
	if e.Model.InitFrom != "" {
		if id, ok := FileIdentity(e.Model.InitFrom); ok {
			c.InitFromContent = id
		}
	}
	c.ArchContent = archIdentity(run.Members)
	return c
}

// archIdentity identifies the TorchScript files among members by content
// (identity.Config.ArchContent).
func archIdentity(members []string) string {
	var ids []string
	seen := map[string]bool{}
	for _, a := range members {
		path, ok := experiment.TorchScriptPath(a)
		if !ok || seen[path] {
			continue
		}
		seen[path] = true
		id, ok := FileIdentity(path)
		if !ok {
			id = "unreadable"
		}
		ids = append(ids, id)
	}
	return strings.Join(ids, "+")
}

// NoBaseOptimizer is the train.optimizer of the configuration of a run
// whose optimizer applies its own update (optim.Features.OwnsUpdate).
const NoBaseOptimizer = identity.NoBaseOptimizer

// resolvedOf returns what opt chose in Configure for the hyperparameters
// that left it the choice (Optimizer.Resolved), under the keys of the
// record's Config, for the record's Resolved; nil for none.
func resolvedOf(opt optim.Optimizer) map[string]any {
	var out map[string]any
	for k, v := range opt.Resolved() {
		if out == nil {
			out = map[string]any{}
		}
		out[identity.ParamKey(k)] = v
	}
	return out
}

// checkResolved checks the values a plugin resolved (Optimizer.Resolved):
// one that is, or holds, NaN or ±Inf (an "auto" hyperparameter computed
// wrong) is named, for a warning. Like a non-finite metric (moved to the
// record's Undefined), it does not fail the run: the record writes it as a
// string ("NaN", "+Inf", "-Inf"), since JSON cannot carry it as a number.
func checkResolved(vals map[string]any) error {
	for _, k := range slices.Sorted(maps.Keys(vals)) {
		if s := nonFinite(vals[k]); s != "" {
			return fmt.Errorf("the optimizer resolved %s = %s: not a finite number", identity.ParamKey(k), s)
		}
	}
	return nil
}

// nonFinite returns "NaN", "+Inf" or "-Inf" when v is, or holds (a list, a
// table), a non-finite float; "" otherwise.
func nonFinite(v any) string {
	switch v := v.(type) {
	case float64:
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return fmt.Sprint(v)
		}
	case float32:
		return nonFinite(float64(v))
	case []any:
		for _, e := range v {
			if s := nonFinite(e); s != "" {
				return s
			}
		}
	case []float64:
		for _, e := range v {
			if s := nonFinite(e); s != "" {
				return s
			}
		}
	case map[string]any:
		for _, e := range v {
			if s := nonFinite(e); s != "" {
				return s
			}
		}
	}
	return ""
}
