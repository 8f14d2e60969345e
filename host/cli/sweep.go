package cli

import (
	"fmt"
	"slices"
	"strings"

	"github.com/optlab/optlab/host/experiment"
	"github.com/optlab/optlab/host/train"
)

// setUsage documents --set.
const setUsage = "override a key of the experiment file: KEY=VALUE, KEY a dotted TOML key (train.epochs, train.optimizer.lr, " +
	"method.NAME.params.rho), VALUE a TOML value (3, 0.1, [0.02,0.05], true; a bare word is a string); repeatable"

// setFlag collects the --set flags.
type setFlag []string

// String implements flag.Value.
func (s *setFlag) String() string { return strings.Join(*s, " ") }

// Set implements flag.Value.
func (s *setFlag) Set(v string) error {
	*s = append(*s, v)
	return nil
}

// gridSummary describes the size of the grid: "grid: 2 methods × 1 arch ×
// 2 seeds = 4 runs", or, with sweeps, "grid: 4 settings (SGD: 1; SAM: 3,
// rho) × 1 arch × 2 seeds = 8 runs".
func gridSummary(exp *experiment.Experiment, runs []experiment.Run) string {
	type method struct {
		name     string
		settings []string
		swept    []string
	}
	var methods []*method
	for _, r := range runs {
		i := slices.IndexFunc(methods, func(m *method) bool { return m.name == r.Method.Name })
		if i < 0 {
			i = len(methods)
			m := &method{name: r.Method.Name}
			for _, s := range r.Setting {
				m.swept = append(m.swept, s.Name)
			}
			methods = append(methods, m)
		}
		if m := methods[i]; !slices.Contains(m.settings, r.Label) {
			m.settings = append(m.settings, r.Label)
		}
	}
	settings := 0
	parts := make([]string, len(methods))
	for i, m := range methods {
		settings += len(m.settings)
		parts[i] = fmt.Sprintf("%s: %d", m.name, len(m.settings))
		if len(m.swept) > 0 {
			parts[i] += ", " + strings.Join(m.swept, " × ")
		}
	}
	tail := fmt.Sprintf("%s × %s = %s", plural(len(exp.Model.Archs), "arch"), plural(len(exp.Train.Seeds), "seed"), plural(len(runs), "run"))
	if settings == len(methods) {
		return fmt.Sprintf("grid: %s × %s", plural(len(methods), "method"), tail)
	}
	return fmt.Sprintf("grid: %s (%s) × %s", plural(settings, "setting"), strings.Join(parts, "; "), tail)
}

// stepsSummary says how many steps the runs take, for a training set of
// trainSize samples: "4 runs × 22 steps (22 per epoch × 1 epochs, batch
// 64)", or a range when swept [train] keys make them differ.
func stepsSummary(exp *experiment.Experiment, runs []experiment.Run, trainSize int) string {
	type steps struct {
		perEpoch, total, epochs, batch int
		budget                         bool
	}
	var all []steps
	for _, r := range runs {
		tr := r.Experiment(exp).Train
		s := steps{perEpoch: trainSize / tr.BatchSize, epochs: tr.Horizon(), batch: tr.BatchSize, budget: tr.Budget > 0}
		s.total = s.perEpoch * s.epochs
		if tr.MaxSteps > 0 && tr.MaxSteps < s.total {
			s.total = tr.MaxSteps
		}
		if !slices.Contains(all, s) {
			all = append(all, s)
		}
	}
	if len(all) == 0 {
		tr := exp.Train
		all = append(all, steps{trainSize / tr.BatchSize, trainSize / tr.BatchSize * tr.Horizon(), tr.Horizon(), tr.BatchSize, tr.Budget > 0})
	}
	if len(all) == 1 {
		s := all[0]
		if s.budget {
			return fmt.Sprintf("%d runs × a budget of %d epochs of gradient evaluations (%d gradient steps: a step of two gradients counts twice; %d per epoch, batch %d)",
				len(runs), s.epochs, s.total, s.perEpoch, s.batch)
		}
		return fmt.Sprintf("%d runs × %d steps (%d per epoch × %d epochs, batch %d)", len(runs), s.total, s.perEpoch, s.epochs, s.batch)
	}
	lo, hi := all[0].total, all[0].total
	for _, s := range all {
		lo, hi = min(lo, s.total), max(hi, s.total)
	}
	return fmt.Sprintf("%d runs × %d to %d steps (the swept [train] keys or the methods' budgets differ; with a budget, steps of one gradient)", len(runs), lo, hi)
}

// optimizerSummary describes, one line each, the base optimizer and
// schedule of the methods that do not train with the experiment's: those
// with their own [method.optimizer] or [method.schedule], and those whose
// plugin applies its own update (owns, by method name); "" when there is
// none. Swept values are the first ones.
func optimizerSummary(exp *experiment.Experiment, owns func(method string) bool) string {
	var b strings.Builder
	for _, m := range exp.Methods {
		own := owns(m.Name)
		if !own && !m.Overrides() {
			continue
		}
		tr := m.Train(exp.Train)
		o := tr.Optimizer
		var opt string
		switch {
		case own:
			opt = fmt.Sprintf("%s, lr=%g", train.NoBaseOptimizer, o.LR)
		case o.Name == experiment.OptimizerAdam:
			opt = fmt.Sprintf("adam lr=%g betas=%v eps=%g wd=%g", o.LR, o.Betas, o.Eps, o.WeightDecay)
		default:
			opt = fmt.Sprintf("%s lr=%g mom=%g nesterov=%v wd=%g", o.Name, o.LR, o.Momentum, o.Nesterov, o.WeightDecay)
		}
		budget := ""
		if tr.Budget > 0 {
			budget = fmt.Sprintf("; budget %d epochs of gradient evaluations", tr.Budget)
		}
		fmt.Fprintf(&b, "method %s: optimizer %s; schedule %s%s\n", m.Name, opt, tr.Schedule.Kind, budget)
	}
	return b.String()
}

// plural writes "1 arch", "2 archs".
func plural(n int, noun string) string {
	if n == 1 {
		return fmt.Sprintf("%d %s", n, noun)
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
