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

// workload is one (method, dataset, arch) whose settings compete.
type workload struct {
	method, dataset, arch string
}

func (w workload) key() string { return w.method + "\x00" + w.dataset + "\x00" + w.arch }

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
	sel := &selection{metric: metric, settings: map[string]string{}}
	var order []workload
	groups := map[workload][]*candidate{}
	anyMetric := false
	for _, r := range merged {
		w := workload{r.MethodName(), r.Dataset, r.Arch}
		if _, seen := groups[w]; !seen {
			order = append(order, w)
		}
		i := slices.IndexFunc(groups[w], func(c *candidate) bool { return c.setting == r.Setting })
		if i < 0 {
			i = len(groups[w])
			groups[w] = append(groups[w], &candidate{setting: r.Setting})
		}
		c := groups[w][i]
		c.recs = append(c.recs, r)
		if r.Status != results.StatusOK {
			c.failed++
			continue
		}
		switch v, ok := metricValue(&r, metric); {
		case ok:
			c.vals = append(c.vals, v)
			anyMetric = true
		case slices.Contains(r.Undefined, metric):
			c.undefined++
			anyMetric = true
		case c.missing == nil:
			c.missing = &r
		}
	}
	if !anyMetric {
		for _, r := range merged {
			if r.Status == results.StatusOK {
				return nil, nil, noValidation(metric, r)
			}
		}
	}
	sp := metricSpec(metric)
	chosen := map[string][]string{} // method → "setting" or "setting on workload", in order
	var methods []string
	var out []results.Record
	for _, w := range order {
		cands := groups[w]
		if len(cands) == 1 {
			out = append(out, renamed(cands[0].recs, w.method)...)
			sel.settings[w.key()] = cands[0].setting
			continue
		}
		var best *candidate
		bestMean := math.NaN()
		excluded, undefined := 0, 0
		for _, c := range cands {
			if c.missing != nil {
				return nil, nil, noValidation(metric, *c.missing)
			}
			switch {
			case c.failed > 0:
				excluded++
				continue
			case c.undefined > 0:
				undefined++
				continue
			case len(c.vals) == 0:
				excluded++
				continue
			}
			m := summarize(c.vals).mean
			if best == nil || (sp.dir == up && m > bestMean) || (sp.dir == down && m < bestMean) {
				best, bestMean = c, m
			}
		}
		if _, seen := chosen[w.method]; !seen {
			methods = append(methods, w.method)
		}
		where := ""
		if workloads(order, w.method) > 1 {
			where = " on " + displayValue(FieldDataset, w.dataset) + " / " + w.arch
		}
		if best == nil {
			// No setting can be chosen: show the failures only, and say
			// why each setting was left out.
			for _, c := range cands {
				for _, r := range c.recs {
					if r.Status != results.StatusOK {
						out = append(out, renamed([]results.Record{r}, w.method)...)
					}
				}
			}
			why := fmt.Sprintf("each of the %d settings has failed runs", len(cands))
			switch {
			case excluded == 0:
				why = fmt.Sprintf("the %s of each of the %d settings is not finite", sp.label, len(cands))
				sel.unchosen++
			case undefined > 0:
				why = fmt.Sprintf("of the %d settings, %d have failed runs and %d a %s that is not finite", len(cands), excluded, undefined, sp.label)
				sel.unchosen++
			}
			chosen[w.method] = append(chosen[w.method], fmt.Sprintf("none%s (%s)", where, why))
			continue
		}
		out = append(out, renamed(best.recs, w.method)...)
		sel.settings[w.key()] = best.setting
		name := quoteOdd(best.setting)
		if name == "" {
			name = "the runs without swept values"
		}
		text := fmt.Sprintf("%s%s (%s %s, best of %d settings", name, where, sp.label, sp.format(bestMean), len(cands))
		if excluded > 0 {
			text += fmt.Sprintf("; %d left out for failed runs", excluded)
		}
		if undefined > 0 {
			text += fmt.Sprintf("; %d left out for a %s that is not finite", undefined, sp.label)
		}
		if uneven := unevenSeeds(cands); uneven != "" {
			text += "; the settings' means are over unequal numbers of seeds: " + uneven
		}
		chosen[w.method] = append(chosen[w.method], text+")")
	}
	if len(methods) > 0 {
		parts := make([]string, len(methods))
		for i, m := range methods {
			parts[i] = quoteOdd(m) + ": " + strings.Join(chosen[m], ", ")
		}
		sel.notes = append(sel.notes, fmt.Sprintf("Settings chosen per method on the validation split by the best mean %s %s over seeds; the table shows their test metrics. %s.",
			sp.label, sp.arrow(), strings.Join(parts, "; ")))
	}
	return out, sel, nil
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

// cellSetting returns the chosen setting of a table cell, or "".
func (s *selection) cellSetting(method, dataset, arch string) string {
	if s == nil {
		return ""
	}
	return s.settings[workload{method, dataset, arch}.key()]
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
