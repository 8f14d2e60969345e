package table

import (
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/optlab/optlab/host/results"
)

// Keys of the metrics on corrupted test sets (CIFAR-10-C style): for a
// family F ("gaussian_noise"), a severity S (1–5) and a clean test metric
// M, corr.F.S.M is M on that corrupted set, corr.F.M its mean over the
// severities of F and corr_M the mean over every family × severity. The
// table derives corr.S.acc (S a number: the mean over the families at
// severity S) and the summary metrics mce, rel_mce and retained.
const (
	corrPrefix = "corr_"
	corrDot    = "corr."
	corrAcc    = "corr_acc"
	mCE        = "mce"
	relMCE     = "rel_mce"
	retained   = "retained"
)

// parseCorrKey splits a key corr.F.S.M into family F, severity S and
// metric M, or corr.F.M into F and M (sev ""). ok is false for other keys.
func parseCorrKey(key string) (family, sev, metric string, ok bool) {
	rest, found := strings.CutPrefix(key, corrDot)
	if !found {
		return "", "", "", false
	}
	parts := strings.Split(rest, ".")
	switch len(parts) {
	case 2:
		family, metric = parts[0], parts[1]
	case 3:
		if _, err := strconv.Atoi(parts[1]); err != nil {
			return "", "", "", false
		}
		family, sev, metric = parts[0], parts[1], parts[2]
	default:
		return "", "", "", false
	}
	if family == "" || metric == "" {
		return "", "", "", false
	}
	if _, err := strconv.Atoi(family); err == nil && sev == "" {
		// corr.S.M: the mean over the families at severity S.
		return "", "severity " + family, metric, true
	}
	return family, sev, metric, true
}

// famKey returns corr.F.S.acc, or corr.F.acc when sev is 0.
func famKey(family string, sev int) string {
	if sev == 0 {
		return corrDot + family + ".acc"
	}
	return corrDot + family + "." + strconv.Itoa(sev) + ".acc"
}

// sevKey returns corr.S.acc, the mean over the families at severity S.
func sevKey(sev int) string { return corrDot + strconv.Itoa(sev) + ".acc" }

// corrAccs returns a run's accuracies on corrupted test sets, by family
// and severity (its corr.F.S.acc keys).
func corrAccs(r *results.Record) map[string]map[int]float64 {
	out := map[string]map[int]float64{}
	for k := range r.Metrics {
		family, sev, metric, ok := parseCorrKey(k)
		if !ok || sev == "" || metric != "acc" || family == "" {
			continue
		}
		v, has := metricValue(r, k)
		s, err := strconv.Atoi(sev)
		if !has || err != nil {
			continue
		}
		if out[family] == nil {
			out[family] = map[int]float64{}
		}
		out[family][s] = v
	}
	return out
}

// corruption is what the corrupted-test-set views show.
type corruption struct {
	families   []string // sorted
	severities []int    // sorted
	// summary are the metrics of the summary table; the grid's other
	// metrics are the family × severity accuracies.
	summary []string
	notes   []string
}

// note adds a note once.
func (c *corruption) note(s string) {
	if !slices.Contains(c.notes, s) {
		c.notes = append(c.notes, s)
	}
}

// metrics are the grid's metrics: the summary, then per family its
// severities and mean, then per severity the mean over the families.
func (c *corruption) metrics() []string {
	out := slices.Clone(c.summary)
	for _, f := range c.families {
		for _, s := range c.severities {
			out = append(out, famKey(f, s))
		}
		out = append(out, famKey(f, 0))
	}
	for _, s := range c.severities {
		out = append(out, sevKey(s))
	}
	return out
}

// errNoCorruptions says that --corruptions found nothing to show.
var errNoCorruptions = errors.New("--corruptions: no successful run has accuracies on corrupted test sets " +
	"(keys corr.FAMILY.SEVERITY.acc, e.g. corr.gaussian_noise.3.acc, in its metrics); evaluate the runs on corrupted test sets and run them again")

// withCorruptions returns copies of merged with the derived corruption
// metrics added to every successful run's Metrics (corr_acc, corr.F.acc
// and corr.S.acc when missing; retained; with a baseline, mce and
// rel_mce), and what the views show. It fails when no successful run has
// a corr.F.S.acc key.
func withCorruptions(merged []results.Record, baseline string) ([]results.Record, *corruption, error) {
	c := &corruption{summary: []string{"acc", corrAcc, retained}}
	out := make([]results.Record, len(merged))
	accs := make([]map[string]map[int]float64, len(merged))
	anyOK := false
	for i, r := range merged {
		out[i] = r
		if r.Status != results.StatusOK {
			continue
		}
		anyOK = true
		accs[i] = corrAccs(&r)
		for f, sevs := range accs[i] {
			if !slices.Contains(c.families, f) {
				c.families = append(c.families, f)
			}
			for s := range sevs {
				if !slices.Contains(c.severities, s) {
					c.severities = append(c.severities, s)
				}
			}
		}
	}
	if !anyOK {
		return out, c, nil
	}
	if len(c.families) == 0 {
		return nil, nil, errNoCorruptions
	}
	slices.Sort(c.families)
	slices.Sort(c.severities)
	var base map[string]*baseErrors
	if baseline != "" {
		c.summary = append(c.summary, mCE, relMCE)
		base = baselineErrors(out, accs, baseline)
	}
	for i := range out {
		if accs[i] == nil {
			continue
		}
		r := &out[i]
		m := make(map[string]float64, len(r.Metrics)+8)
		for k, v := range r.Metrics {
			m[k] = v
		}
		r.Metrics = m
		c.derive(r, accs[i])
		if baseline != "" {
			c.compare(r, accs[i], base, baseline)
		}
	}
	return out, c, nil
}

// derive adds to r's Metrics the means of its corrupted accuracies it
// lacks (corr_acc, corr.F.acc), corr.S.acc and retained.
func (c *corruption) derive(r *results.Record, accs map[string]map[int]float64) {
	if len(accs) == 0 {
		return
	}
	// Sums in a fixed order (families, then severities, sorted): map order
	// would change the last bits of a mean, and so now and then a rounded
	// cell, from one printing to the next.
	var all []float64
	bySev := map[int][]float64{}
	for _, f := range slices.Sorted(maps.Keys(accs)) {
		sevs := accs[f]
		var vs []float64
		for _, s := range slices.Sorted(maps.Keys(sevs)) {
			v := sevs[s]
			vs = append(vs, v)
			bySev[s] = append(bySev[s], v)
		}
		all = append(all, vs...)
		if _, has := r.Metrics[famKey(f, 0)]; !has {
			r.Metrics[famKey(f, 0)] = summarize(vs).mean
		}
	}
	for s, vs := range bySev {
		r.Metrics[sevKey(s)] = summarize(vs).mean
	}
	if _, has := r.Metrics[corrAcc]; !has {
		r.Metrics[corrAcc] = summarize(all).mean
	}
	if acc, has := metricValue(r, "acc"); has && acc > 0 {
		r.Metrics[retained] = r.Metrics[corrAcc] / acc
	}
}

// baseErrors are the baseline's errors (1 − acc) on one dataset × arch ×
// label noise, averaged over its seeds.
type baseErrors struct {
	corr  map[string]map[int]float64 // by family and severity
	clean float64                    // NaN when no run has acc
}

// baselineErrors averages the baseline method's errors over its seeds for
// each dataset × arch × label noise (corrKey).
func baselineErrors(recs []results.Record, accs []map[string]map[int]float64, baseline string) map[string]*baseErrors {
	type pooled struct {
		corr  map[string]map[int][]float64
		clean []float64
	}
	pools := map[string]*pooled{}
	for i := range recs {
		r := &recs[i]
		if r.Method != baseline || accs[i] == nil {
			continue
		}
		p := pools[corrKey(r)]
		if p == nil {
			p = &pooled{corr: map[string]map[int][]float64{}}
			pools[corrKey(r)] = p
		}
		if acc, has := metricValue(r, "acc"); has {
			p.clean = append(p.clean, 1-acc)
		}
		for f, sevs := range accs[i] {
			if p.corr[f] == nil {
				p.corr[f] = map[int][]float64{}
			}
			for s, v := range sevs {
				p.corr[f][s] = append(p.corr[f][s], 1-v)
			}
		}
	}
	out := map[string]*baseErrors{}
	for k, p := range pools {
		b := &baseErrors{corr: map[string]map[int]float64{}, clean: summarize(p.clean).mean}
		for f, sevs := range p.corr {
			b.corr[f] = map[int]float64{}
			for s, vs := range sevs {
				b.corr[f][s] = summarize(vs).mean
			}
		}
		out[k] = b
	}
	return out
}

// corrKey is the dataset × arch × label noise of a run, on which the
// baseline's errors are paired with it.
func corrKey(r *results.Record) string {
	return joinKey(fieldValues(r, []string{FieldDataset, FieldArch, FieldNoise}))
}

// placeOf names a run's dataset, arch and label noise for a note.
func placeOf(r *results.Record) string {
	parts := []string{describeValue(FieldDataset, r.Dataset), r.Arch, describeValue(FieldNoise, noiseValue(r))}
	return strings.Join(parts, " / ")
}

// compare adds run r's mce and rel_mce (Hendrycks & Dietterich, 2019) to
// its Metrics, against the baseline's mean errors on the same dataset ×
// arch × label noise; where they are undefined it leaves them out and
// notes why.
//
//	CE_F     = Σ_S err(F,S) / Σ_S err_b(F,S)
//	relCE_F  = Σ_S (err(F,S) − err) / Σ_S (err_b(F,S) − err_b)
//	mce, rel_mce = the means of CE_F and relCE_F over the families of r
func (c *corruption) compare(r *results.Record, accs map[string]map[int]float64, base map[string]*baseErrors, baseline string) {
	b := base[corrKey(r)]
	if b == nil {
		c.note(fmt.Sprintf("No mCE on %s: the baseline %s has no run with corrupted-test accuracies there.", placeOf(r), baseline))
		return
	}
	acc, hasAcc := metricValue(r, "acc")
	var ces, rels []float64
	relOK := hasAcc && !math.IsNaN(b.clean)
	for _, f := range c.families {
		sevs, has := accs[f]
		if !has {
			continue
		}
		var num, den, rnum, rden float64
		for _, s := range c.severities {
			v, has := sevs[s]
			if !has {
				continue
			}
			be, has := b.corr[f][s]
			if !has {
				c.note(fmt.Sprintf("No mCE where %s lacks a corrupted test set that a run has (%s %d on %s).", baseline, f, s, placeOf(r)))
				return
			}
			num += 1 - v
			den += be
			rnum += (1 - v) - (1 - acc)
			rden += be - b.clean
		}
		if den <= 0 {
			c.note(fmt.Sprintf("No mCE where %s makes no error on %s (%s).", baseline, f, placeOf(r)))
			return
		}
		ces = append(ces, num/den)
		if rden <= 0 {
			relOK = false
			c.note(fmt.Sprintf("No relative mCE where the errors of %s on %s are not above its clean error (%s).", baseline, f, placeOf(r)))
		}
		rels = append(rels, rnum/rden)
	}
	r.Metrics[mCE] = summarize(ces).mean
	if relOK {
		r.Metrics[relMCE] = summarize(rels).mean
	}
}

// definitionNotes are the notes that define the summary's columns.
func (c *corruption) definitionNotes(baseline string) []string {
	out := []string{fmt.Sprintf("Corrupted ACC: mean over %d corruption families × severities %s; retained = corrupted ACC / ACC, per run.",
		len(c.families), severityRange(c.severities))}
	if baseline != "" {
		out = append(out, fmt.Sprintf("mCE = mean over families F of Σ_S err(F,S) / Σ_S err_%s(F,S); rel. mCE the same with err(F,S) − err(clean) (Hendrycks & Dietterich, 2019); err = 1 − ACC, %s's errors averaged over its seeds at the same dataset, arch and label noise; per run, then over seeds.",
			baseline, baseline))
	} else {
		out = append(out, "mCE and rel. mCE need a baseline (--baseline METHOD).")
	}
	return append(out, c.notes...)
}

// severityRange writes sorted severities as "1–5" when contiguous, else
// as a list.
func severityRange(sevs []int) string {
	if len(sevs) > 1 && sevs[len(sevs)-1]-sevs[0] == len(sevs)-1 {
		return fmt.Sprintf("%d–%d", sevs[0], sevs[len(sevs)-1])
	}
	parts := make([]string, len(sevs))
	for i, s := range sevs {
		parts[i] = strconv.Itoa(s)
	}
	return strings.Join(parts, ", ")
}

// buildCorruptions merges recs and lays out the grid of the corruption
// views, with c saying which of its metrics are the summary.
func buildCorruptions(recs []results.Record, opts Options) (*grid, *corruption, error) {
	if len(opts.Metrics) > 0 {
		return nil, nil, errors.New("--corruptions chooses its own columns: leave out --metrics")
	}
	merged, sel, err := mergeSelect(recs, opts)
	if err != nil {
		return nil, nil, err
	}
	merged, c, err := withCorruptions(merged, opts.Baseline)
	if err != nil {
		return nil, nil, err
	}
	opts.Metrics = c.metrics()
	g, err := layoutGrid(merged, sel, opts)
	if err != nil {
		return nil, nil, err
	}
	g.extra = c.definitionNotes(opts.Baseline)
	return g, c, nil
}

// RenderCorruptions writes the corrupted-test-set views of recs (what
// Options.Corruptions asks Render for): a summary table with a row per
// method (and per dataset, arch or label noise where they vary, as in
// Render) and columns ACC, corrupted ACC (corr_acc), retained (corr_acc /
// acc) and, with opts.Baseline, mCE and relative mCE, each mean ± std over
// seeds of a per-run value; then, for each row and column group, its
// corrupted ACC by family (rows) and severity (columns, and the family's
// mean), mean over seeds, with a last row of the means over the families.
// CSV writes every value of both as tidy rows instead (metrics acc,
// corr_acc, retained, mce, rel_mce, corr.F.S.acc, corr.F.acc and
// corr.S.acc, the mean over families at severity S). opts.Metrics must be
// empty.
func RenderCorruptions(w io.Writer, recs []results.Record, opts Options) error {
	opts.Corruptions = true
	return Render(w, recs, opts)
}

// renderCorruptions renders the views of grid g in format f.
func renderCorruptions(w io.Writer, g *grid, c *corruption, f Format) error {
	if f == CSV {
		return writeCSV(w, g)
	}
	sum := g.view(len(c.summary))
	var err error
	if f == LaTeX {
		err = writeLaTeX(w, sum)
	} else {
		err = writeMarkdown(w, sum)
	}
	if err != nil {
		return err
	}
	for ri := range g.rows {
		for gi := range g.groups {
			title, header, rows := g.familyTable(c, ri, gi)
			if rows == nil {
				continue
			}
			if f == LaTeX {
				err = writeSimpleLaTeX(w, title, header, rows)
			} else {
				err = writeSimpleMarkdown(w, title, header, rows)
			}
			if err != nil {
				return err
			}
		}
	}
	return nil
}

// view returns g restricted to its first n metrics.
func (g *grid) view(n int) *grid {
	v := *g
	v.metrics = g.metrics[:n]
	v.cells = make([][][]stat, len(g.cells))
	for ri := range g.cells {
		v.cells[ri] = make([][]stat, len(g.cells[ri]))
		for gi := range g.cells[ri] {
			v.cells[ri][gi] = g.cells[ri][gi][:n]
		}
	}
	if g.diffs != nil {
		v.diffs = make([][][]diff, len(g.diffs))
		for ri := range g.diffs {
			v.diffs[ri] = make([][]diff, len(g.diffs[ri]))
			for gi := range g.diffs[ri] {
				v.diffs[ri][gi] = g.diffs[ri][gi][:n]
			}
		}
	}
	return &v
}

// familyTable returns the corrupted ACC by family and severity of row ri
// in group gi, mean over seeds: a title, the header and the rows (nil
// when the row has no value there).
func (g *grid) familyTable(c *corruption, ri, gi int) (title string, header []string, rows [][]string) {
	cell := func(key string) string {
		mi := slices.Index(g.metrics, key)
		s := g.cells[ri][gi][mi]
		if s.n == 0 {
			return missing
		}
		return metricSpec(key).format(s.mean)
	}
	header = []string{"Corruption"}
	for _, s := range c.severities {
		header = append(header, strconv.Itoa(s))
	}
	header = append(header, "mean")
	filled := false
	line := func(name string, keys []string) {
		row := []string{name}
		for _, k := range keys {
			t := cell(k)
			filled = filled || t != missing
			row = append(row, t)
		}
		rows = append(rows, row)
	}
	for _, f := range c.families {
		var keys []string
		for _, s := range c.severities {
			keys = append(keys, famKey(f, s))
		}
		line(f, append(keys, famKey(f, 0)))
	}
	var keys []string
	for _, s := range c.severities {
		keys = append(keys, sevKey(s))
	}
	line("all (mean)", append(keys, corrAcc))
	if !filled {
		return "", nil, nil
	}
	r := g.rows[ri]
	title = r.method
	if d := g.describe(g.groups[gi], r.fields); d != "" {
		title += ", " + d
	}
	return title + ": corrupted ACC in % by family and severity, mean over seeds.", header, rows
}

// SeverityCurve is one row's accuracy against corruption severity: at
// severity 0 the clean test accuracy (acc), at severity S the mean over the
// corruption families of corr.F.S.acc; Mean and Std (sample standard
// deviation, NaN for one seed) are over the row's seeds, as fractions.
type SeverityCurve struct {
	// Label is the row's method, followed by the dataset, arch and label
	// noise in parentheses where they vary.
	Label     string
	Severity  []int
	Mean, Std []float64
	// Runs is the largest number of seeds of a point.
	Runs int
}

// SeverityCurves returns one SeverityCurve per row of the corruption
// table of recs (a method at each dataset, arch and label noise, in table
// order; opts.By is ignored), with the points that have a value. Records
// without corr.F.S.acc keys are the same error as for RenderCorruptions.
func SeverityCurves(recs []results.Record, opts Options) ([]SeverityCurve, error) {
	opts.By = []string{ByNone}
	opts.Baseline = ""
	opts, err := normalize(opts)
	if err != nil {
		return nil, fmt.Errorf("table: %w", err)
	}
	g, c, err := buildCorruptions(recs, opts)
	if err != nil {
		return nil, fmt.Errorf("table: %w", err)
	}
	keys := []string{"acc"}
	sevs := []int{0}
	for _, s := range c.severities {
		keys = append(keys, sevKey(s))
		sevs = append(sevs, s)
	}
	var out []SeverityCurve
	for ri, r := range g.rows {
		sc := SeverityCurve{Label: r.method}
		if d := g.describe(nil, r.fields); d != "" {
			sc.Label += " (" + d + ")"
		}
		for i, k := range keys {
			s := g.cells[ri][0][slices.Index(g.metrics, k)]
			if s.n == 0 {
				continue
			}
			sc.Severity = append(sc.Severity, sevs[i])
			sc.Mean = append(sc.Mean, s.mean)
			sc.Std = append(sc.Std, s.std)
			sc.Runs = max(sc.Runs, s.n)
		}
		if len(sc.Severity) > 0 {
			out = append(out, sc)
		}
	}
	if len(out) == 0 {
		return nil, errors.New("table: no successful run to plot")
	}
	return out, nil
}
