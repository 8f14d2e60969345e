package table

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/optlab/optlab/host/results"
	"github.com/optlab/optlab/internal/suggest"
)

// valPrefix starts the keys of the validation split's metrics in a record
// (host/train's ValPrefix).
const valPrefix = "val_"

// selection is the outcome of Options.Select.
type selection struct {
	metric string
	// notes name the chosen setting of every swept method, one sentence
	// per method.
	notes []string
	// settings maps method, dataset and arch (joined by "\x00") to the
	// chosen setting.
	settings map[string]string
	// unchosen counts the workloads left without a row although none of
	// their runs failed (every setting's metric was not finite).
	unchosen int
}

// workload is one (method, dataset, arch, label noise) whose settings
// compete. Label noise is part of the workload, not of its settings: runs
// at different noise rates are different experiments, never alternatives.
type workload struct {
	method, dataset, arch, noise string
}

func (w workload) key() string {
	return joinKey([]string{w.method, w.dataset, w.arch, w.noise})
}

// candidate is one setting of a workload.
type candidate struct {
	setting string
	vals    []float64
	failed  int
	// undefined counts successful runs whose metric was NaN or ±Inf (in
	// Record.Undefined): the setting is left out like one with failures.
	undefined int
	// missing is a successful run without the metric at all (no
	// validation split), which makes the choice impossible.
	missing *results.Record
	recs    []results.Record
}

// selectable are the validation metrics --select chooses by.
var selectable = []string{"val_acc", "val_nll", "val_brier", "val_ece", "val_aac", "val_auroc"}

// checkSelect checks the metric of Options.Select: a metric of the
// validation split with a direction.
func checkSelect(metric string) error {
	if lower := strings.ToLower(metric); lower != metric && checkSelect(lower) == nil {
		return fmt.Errorf("--select %s: metric names are lower case: select %s", quoteOdd(metric), lower)
	}
	if strings.HasPrefix(metric, valPrefix) && !slices.Contains(selectable, metric) {
		base := strings.TrimPrefix(metric, valPrefix)
		want := ""
		switch {
		case base == "loss":
			want = valPrefix + "nll"
		default:
			if c, ok := suggest.Closest(metric, selectable); ok {
				want = c
			}
		}
		if want != "" {
			return fmt.Errorf("--select %s: unknown validation metric; did you mean %s? (%s)", quoteOdd(metric), want, strings.Join(selectable, ", "))
		}
		return fmt.Errorf("--select %s: unknown validation metric (select %s)", quoteOdd(metric), strings.Join(selectable, ", "))
	}
	if !strings.HasPrefix(metric, valPrefix) {
		base := strings.TrimPrefix(strings.TrimPrefix(strings.TrimPrefix(metric, "test_"), "cal_"), "train_")
		if base == "loss" {
			base = "nll"
		}
		return fmt.Errorf("--select %s: a setting must be chosen on the validation split, never on test (or training) data: select %s%s (val_acc, val_nll, val_brier, val_ece, val_aac or val_auroc)",
			quoteOdd(metric), valPrefix, quoteOdd(base))
	}
	return nil
}

// choose applies the selection rule to merged records: for each method and
// each dataset × arch, among the method's settings (records of a sweep
// share Base and differ in Setting), the setting whose runs all succeeded
// and whose validation metric has the best mean over seeds wins (the
// first in the files on a tie); its records are kept, renamed to the
// method's name, and the other settings' records are dropped. Methods with
// one setting are kept as they are (renamed to the method's name).
//
// It refuses a choice that cannot be made on validation data: a setting
// among several whose runs lack the metric, or no run with the metric at
// all. The message says how to add a validation split.
func choose(merged []results.Record, metric string) ([]results.Record, *selection, error) {
	g := groupCandidates(merged, metric)
	if !g.anyMetric {
		for _, r := range merged {
			if r.Status == results.StatusOK {
				return nil, nil, noValidation(metric, r)
			}
		}
	}
	sel := &selection{metric: metric, settings: map[string]string{}}
	sp := metricSpec(metric)
	chosen := map[string][]string{} // method → "setting" or "setting on workload", in order
	var methods []string
	var out []results.Record
	for _, w := range g.order {
		cands := g.cands[w]
		if len(cands) == 1 {
			out = append(out, renamed(cands[0].recs, w.method)...)
			sel.settings[w.key()] = cands[0].setting
			continue
		}
		p, err := pickCandidate(cands, metric, sp)
		if err != nil {
			return nil, nil, err
		}
		if _, seen := chosen[w.method]; !seen {
			methods = append(methods, w.method)
		}
		where := ""
		if workloads(g.order, w.method) > 1 {
			where = " on " + displayValue(FieldDataset, w.dataset) + " / " + w.arch
			if noiseVaries(g.order, w.method) {
				where += " / " + describeValue(FieldNoise, w.noise)
			}
		}
		recs, text := sel.keep(w, p, sp, where)
		out = append(out, recs...)
		chosen[w.method] = append(chosen[w.method], text)
	}
	if len(methods) > 0 {
		sel.notes = append(sel.notes, choiceNote(methods, chosen, sp))
	}
	return out, sel, nil
}

// grouped are records grouped into candidates by workload and setting.
type grouped struct {
	// order is the workloads in the order of their first records.
	order []workload
	// cands are each workload's settings, in the order of their first
	// records.
	cands map[workload][]*candidate
	// anyMetric says whether a successful run has the metric, finite or
	// not.
	anyMetric bool
}

// groupCandidates groups merged into the candidate settings of every
// workload, with the values of metric of each one's successful runs.
func groupCandidates(merged []results.Record, metric string) grouped {
	g := grouped{cands: map[workload][]*candidate{}}
	for _, r := range merged {
		w := workload{r.MethodName(), r.Dataset, r.Arch, noiseValue(&r)}
		if _, seen := g.cands[w]; !seen {
			g.order = append(g.order, w)
		}
		i := slices.IndexFunc(g.cands[w], func(c *candidate) bool { return c.setting == r.Setting })
		if i < 0 {
			i = len(g.cands[w])
			g.cands[w] = append(g.cands[w], &candidate{setting: r.Setting})
		}
		if g.cands[w][i].add(r, metric) {
			g.anyMetric = true
		}
	}
	return g
}

// add adds run r to the candidate: a failure, a value of metric, an
// undefined value or, the first time, a run without the metric. It
// reports whether r has the metric, finite or not.
func (c *candidate) add(r results.Record, metric string) bool {
	c.recs = append(c.recs, r)
	if r.Status != results.StatusOK {
		c.failed++
		return false
	}
	switch v, ok := metricValue(&r, metric); {
	case ok:
		c.vals = append(c.vals, v)
		return true
	case slices.Contains(r.Undefined, metric):
		c.undefined++
		return true
	case c.missing == nil:
		c.missing = &r
	}
	return false
}

// pick is the choice among a workload's several settings.
type pick struct {
	cands []*candidate
	// best is the chosen setting (nil: none can be chosen), mean its
	// metric's mean.
	best *candidate
	mean float64
	// excluded counts the settings left out for failed runs (or no runs
	// with the metric), undefined those left out for a metric that is not
	// finite.
	excluded, undefined int
}

// pickCandidate chooses among cands the setting with the best mean of
// metric whose runs all succeeded with a finite value, the first on a tie.
// A setting with a run that lacks the metric is an error.
func pickCandidate(cands []*candidate, metric string, sp spec) (pick, error) {
	p := pick{cands: cands, mean: math.NaN()}
	for _, c := range cands {
		if c.missing != nil {
			return pick{}, noValidation(metric, *c.missing)
		}
		switch {
		case c.failed > 0:
			p.excluded++
			continue
		case c.undefined > 0:
			p.undefined++
			continue
		case len(c.vals) == 0:
			p.excluded++
			continue
		}
		m := summarize(c.vals).mean
		if p.best == nil || (sp.dir == up && m > p.mean) || (sp.dir == down && m < p.mean) {
			p.best, p.mean = c, m
		}
	}
	return p, nil
}

// keep records the pick of workload w in the selection and returns the
// records it keeps, renamed to the method's name, and the text that names
// it in the note (where says which workload, when the method has several).
func (s *selection) keep(w workload, p pick, sp spec, where string) ([]results.Record, string) {
	if p.best == nil {
		text, unchosen := p.noneText(sp, where)
		if unchosen {
			s.unchosen++
		}
		return p.failures(w.method), text
	}
	s.settings[w.key()] = p.best.setting
	return renamed(p.best.recs, w.method), p.chosenText(sp, where)
}

// failures returns the failed runs of every setting under the method's
// name: what a workload whose setting cannot be chosen shows.
func (p pick) failures(method string) []results.Record {
	var out []results.Record
	for _, c := range p.cands {
		for _, r := range c.recs {
			if r.Status != results.StatusOK {
				out = append(out, renamed([]results.Record{r}, method)...)
			}
		}
	}
	return out
}

// noneText says why no setting was chosen; unchosen is true when no run
// failed (the metric was not finite).
func (p pick) noneText(sp spec, where string) (text string, unchosen bool) {
	n := len(p.cands)
	why := fmt.Sprintf("each of the %d settings has failed runs", n)
	switch {
	case p.excluded == 0:
		why = fmt.Sprintf("the %s of each of the %d settings is not finite", sp.label, n)
		unchosen = true
	case p.undefined > 0:
		why = fmt.Sprintf("of the %d settings, %d have failed runs and %d a %s that is not finite", n, p.excluded, p.undefined, sp.label)
		unchosen = true
	}
	return fmt.Sprintf("none%s (%s)", where, why), unchosen
}

// chosenText names the chosen setting, its mean and the settings left out.
func (p pick) chosenText(sp spec, where string) string {
	name := quoteOdd(p.best.setting)
	if name == "" {
		name = "the runs without swept values"
	}
	text := fmt.Sprintf("%s%s (%s %s, best of %d settings", name, where, sp.label, sp.format(p.mean), len(p.cands))
	if p.excluded > 0 {
		text += fmt.Sprintf("; %d left out for failed runs", p.excluded)
	}
	if p.undefined > 0 {
		text += fmt.Sprintf("; %d left out for a %s that is not finite", p.undefined, sp.label)
	}
	if uneven := unevenSeeds(p.cands); uneven != "" {
		text += "; the settings' means are over unequal numbers of seeds: " + uneven
	}
	return text + ")"
}

// choiceNote is the note that names the settings chosen for methods
// (chosen holds each one's texts, workload by workload).
func choiceNote(methods []string, chosen map[string][]string, sp spec) string {
	parts := make([]string, len(methods))
	for i, m := range methods {
		parts[i] = quoteOdd(m) + ": " + strings.Join(chosen[m], ", ")
	}
	return fmt.Sprintf("Settings chosen per method on the validation split by the best mean %s %s over seeds; the table shows their test metrics. %s.",
		sp.label, sp.arrow(), strings.Join(parts, "; "))
}

// workloads counts the dataset × arch workloads of method in order.
func workloads(order []workload, method string) int {
	n := 0
	for _, w := range order {
		if w.method == method {
			n++
		}
	}
	return n
}

// noiseVaries reports whether method's workloads in order differ in label
// noise.
func noiseVaries(order []workload, method string) bool {
	first := ""
	for _, w := range order {
		if w.method != method {
			continue
		}
		if first == "" {
			first = w.noise
		} else if w.noise != first {
			return true
		}
	}
	return false
}

// renamed returns copies of recs under the method's name.
func renamed(recs []results.Record, method string) []results.Record {
	out := make([]results.Record, len(recs))
	for i, r := range recs {
		r.Method = method
		out[i] = r
	}
	return out
}

// noValidation explains that run r has no value of the validation metric.
func noValidation(metric string, r results.Record) error {
	v, has := r.Config["data.validation"]
	if f, _ := v.(float64); !has || f == 0 {
		return fmt.Errorf("--select %s chooses on the validation split, but run %q was trained without one (data.validation = 0): hold one out by setting data.validation in the experiment's [data] table, e.g. validation = 0.1 (a tenth of the training set; --set data.validation=0.1 on host run), and run it again",
			quoteOdd(metric), quoteOdd(r.Key))
	}
	return fmt.Errorf("--select %s: run %q has a validation split (data.validation = %v) but no %s in its record (was it written by an older optlab? run it again to record the validation metrics)",
		quoteOdd(metric), quoteOdd(r.Key), v, quoteOdd(metric))
}

// cellSetting returns the chosen setting of a table cell's workload, or "".
func (s *selection) cellSetting(w workload) string {
	if s == nil {
		return ""
	}
	return s.settings[w.key()]
}

// unevenSeeds lists the competing candidates' numbers of runs with the metric
// ("rho=0.05 3, rho=0.1 2") when they differ, else "": a mean over fewer
// seeds is less certain, so the choice may favour it by chance.
func unevenSeeds(cands []*candidate) string {
	var parts []string
	uneven := false
	first := -1
	for _, c := range cands {
		if len(c.vals) == 0 || c.failed > 0 || c.undefined > 0 { // left out of the choice
			continue
		}
		if first < 0 {
			first = len(c.vals)
		} else if len(c.vals) != first {
			uneven = true
		}
		name := quoteOdd(c.setting)
		if name == "" {
			name = "(none)"
		}
		parts = append(parts, fmt.Sprintf("%s %d", name, len(c.vals)))
	}
	if !uneven {
		return ""
	}
	return strings.Join(parts, ", ")
}
