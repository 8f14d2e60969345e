// Package table renders result tables from run records: mean ± sample
// standard deviation over seeds for each method (rows) and each group of
// runs (columns: dataset × metric or arch × metric, as in the paper's
// tables), in Markdown, LaTeX (booktabs) or tidy CSV.
//
// Only records with status "ok" are counted; failed runs are reported in a
// footnote. Records are first combined with results.Merge, so duplicates
// collapse and mixed configurations under one method name are refused.
// Runs trained with different label noise get rows (or columns) of their
// own. RenderCorruptions and SeverityCurves show accuracy on corrupted test
// sets (mCE against a baseline; see docs/METRICS.md).
package table

import (
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/optlab/optlab/host/results"
	"github.com/optlab/optlab/internal/suggest"
)

// Format is an output format.
type Format string

// Output formats.
const (
	// Markdown renders a GitHub-flavoured Markdown table (the default).
	Markdown Format = "markdown"
	// LaTeX renders a booktabs tabular.
	LaTeX Format = "latex"
	// CSV renders tidy rows: method, dataset, arch, metric, mean, std, n.
	CSV Format = "csv"
)

// Grouping fields accepted in Options.By.
const (
	// FieldDataset groups the columns by dataset (the default).
	FieldDataset = "dataset"
	// FieldArch groups the columns by architecture.
	FieldArch = "arch"
	// FieldNoise groups the columns by the label noise the runs were
	// trained with (data.label_noise.rate and kind; "0" without noise).
	FieldNoise = "noise"
	// ByNone in Options.By disables column grouping.
	ByNone = "none"
)

// Options configures Render.
type Options struct {
	// By lists the fields whose values group the columns: "dataset",
	// "arch", "noise", or several (their combinations form the groups).
	// Empty means {"dataset"}; {"none"} means no grouping. A field not in
	// By becomes a leading row column when it takes more than one value, so
	// runs trained with different label noise are never pooled: each
	// method gets a row per label-noise setting ("Label noise" column,
	// "0.2 symmetric"; a sweep's label shows it there instead of in the
	// method's name). CSV ignores By and always has dataset and arch, and
	// a label_noise column when the noise varies.
	By []string
	// Metrics lists the metric keys to show, in order. Empty means acc,
	// nll and ece, those of them present in some run (or every present
	// metric when none of the three is), for Markdown and LaTeX; and every
	// present metric for CSV. A key that is neither a metric this package
	// knows nor one in some record's Metrics is an error listing the valid
	// keys, and so is a key that no successful run has a value for.
	Metrics []string
	// Format is the output format; empty means Markdown.
	Format Format
	// Baseline, when not empty, names the method (as in the Method column)
	// every other row is compared with: each cell also shows the
	// difference of its mean to the baseline's mean in the same column
	// group and with the same leading row values (dataset, arch, label
	// noise), with a 95 % Welch t interval over seeds, and bold requires
	// that difference to be significantly better. CSV gets diff, diff_lo,
	// diff_hi and significant columns. An unknown name is an error.
	Baseline string
	// Select, when not empty, names a metric of the validation split with
	// a direction (val_acc, val_nll, val_brier, val_ece, val_aac,
	// val_auroc): for each method and each dataset × arch, among the
	// settings of a sweep (records that share Base and differ in Setting)
	// the one whose runs all succeeded and whose Select has the best mean
	// over seeds is kept, as the method's row, and the others are left
	// out. The table then shows the chosen settings' test metrics, and a
	// note names them (CSV: a setting column). A test or training metric
	// is refused (a choice is never made on test data), and so are records
	// without the metric, with a message saying how to hold out a
	// validation split. Label-noise settings never compete: each is a
	// row of its own.
	Select string
	// Corruptions renders the corrupted-test-set views instead of the
	// table of Metrics (which must then be empty): a summary per row (ACC,
	// corrupted ACC, retained and, with a Baseline, mCE and relative mCE)
	// and, but for CSV, one table of corrupted ACC per family and severity
	// for each row; CSV has every value as tidy rows. Records without
	// corr.F.S.acc keys are an error. See RenderCorruptions.
	Corruptions bool
	// Target, when > 0, is a target accuracy (a fraction, 0.9 for 90 %)
	// for the time-to-target columns, AlgoPerf style: for each run, the
	// first evaluation during training (results.Record.Evals, on the
	// validation split when there is one) that reaches it, in training
	// seconds (ttt_seconds), gradient evaluations (ttt_grad_evals) and
	// epochs (ttt_epochs). With Metrics empty the table shows the default
	// metrics and the first two. A run that never reaches it counts as
	// not reached; the cell says how many seeds did.
	Target float64
}

// stat summarises one cell's values.
type stat struct {
	mean, std float64
	n         int
	// reached counts the finite values, over which mean and std are
	// taken: n but for the time-to-target metrics, whose +Inf is a run
	// that did not reach the target.
	reached int
}

// summarize returns the mean and sample standard deviation (n−1) of vs;
// std is NaN when n < 2.
func summarize(vs []float64) stat {
	s := stat{n: len(vs), mean: math.NaN(), std: math.NaN()}
	if slices.ContainsFunc(vs, func(v float64) bool { return math.IsInf(v, 1) }) {
		vs = slices.DeleteFunc(slices.Clone(vs), func(v float64) bool { return math.IsInf(v, 1) })
		s.reached = len(vs)
		if len(vs) == 0 {
			return s
		}
		f := summarize(vs)
		f.n, f.reached = s.n, s.reached
		return f
	}
	s.reached = s.n
	if s.n == 0 {
		return s
	}
	sum := 0.0
	for _, v := range vs {
		sum += v
	}
	s.mean = sum / float64(s.n)
	if s.n > 1 {
		ss := 0.0
		for _, v := range vs {
			d := v - s.mean
			ss += d * d
		}
		s.std = math.Sqrt(ss / float64(s.n-1))
	}
	return s
}

// row is one table row: the row-field values and the method.
type row struct {
	fields []string
	method string
}

// grid is a table before formatting.
type grid struct {
	rowFields   []string   // leading row columns (dataset and/or arch)
	groupFields []string   // fields grouping the columns
	rows        []row      // in display order
	groups      [][]string // group field values, in first-appearance order
	metrics     []string
	// cells[r][g][m] is the stat of row r, group g, metric m.
	cells     [][][]stat
	failed    []failure
	uniformN  int  // the common n of all non-empty cells, or 0
	mixedN    bool // whether non-empty cells have different n
	anyValues bool
	// baseline is Options.Baseline; diffs[r][g][m] is cell (r, g, m)'s
	// difference to it (nil without a baseline).
	baseline string
	diffs    [][][]diff
	// unpaired names the places (dataset, arch, label noise, as describe
	// writes them) where a cell has a value but the baseline has none.
	unpaired []string
	// sel is the outcome of Options.Select (nil without).
	sel *selection
	// extra are notes that follow the ones on values and baseline (the
	// corruption views' definitions, the time-to-target columns').
	extra []string
	// target is Options.Target (0: none); CSV then has a reached column.
	target float64
}

// failure counts failed runs of one row/group.
type failure struct {
	label string
	count int
}

// fieldValue returns a record's value of a grouping field.
func fieldValue(r *results.Record, field string) string {
	switch field {
	case FieldArch:
		return r.Arch
	case FieldNoise:
		return noiseValue(r)
	}
	return r.Dataset
}

// metricValue returns a record's value of a metric key and whether it has
// one. seconds_per_epoch and wall_seconds come from the Record fields (a
// zero means not measured) unless Metrics has them.
func metricValue(r *results.Record, key string) (float64, bool) {
	if v, ok := r.Metrics[key]; ok {
		if isTargetKey(key) { // +Inf: not reached
			return v, !math.IsNaN(v)
		}
		return v, !math.IsNaN(v) && !math.IsInf(v, 0)
	}
	switch key {
	case secondsPerEpoch:
		return r.SecondsPerEpoch, r.SecondsPerEpoch > 0
	case wallSeconds:
		return r.WallSeconds, r.WallSeconds > 0
	}
	return 0, false
}

// presentMetrics returns every metric key some record has, canonically
// ordered; withTime adds the time fields.
func presentMetrics(recs []results.Record, withTime bool) []string {
	seen := map[string]bool{}
	var keys []string
	add := func(k string) {
		if !seen[k] {
			seen[k] = true
			keys = append(keys, k)
		}
	}
	for i := range recs {
		for k := range recs[i].Metrics {
			if _, ok := metricValue(&recs[i], k); ok {
				add(k)
			}
		}
		if withTime {
			for _, k := range []string{secondsPerEpoch, wallSeconds} {
				if _, ok := metricValue(&recs[i], k); ok {
					add(k)
				}
			}
		}
	}
	return sortMetrics(keys)
}

// chooseMetrics applies the Metrics default.
func chooseMetrics(ok []results.Record, opts Options, format Format) (out []string) {
	if len(opts.Metrics) > 0 {
		return opts.Metrics
	}
	present := presentMetrics(ok, format == CSV)
	if format == CSV {
		return present
	}
	if opts.Target > 0 {
		defer func() {
			for _, k := range []string{tttSeconds, tttGradEvals} {
				if slices.Contains(present, k) && !slices.Contains(out, k) {
					out = append(out, k)
				}
			}
		}()
	}
	for _, k := range []string{"acc", "nll", "ece"} {
		if slices.Contains(present, k) {
			out = append(out, k)
		}
	}
	if len(out) == 0 {
		return present
	}
	return out
}

// checkMetrics checks the metric keys asked for: each must be one this
// package knows (canonicalOrder and the time metrics) or one in some
// record's Metrics, and some successful run must have a value for it, so
// that a typo or a metric that was never measured is an error rather than
// a column of dashes. When no run succeeded the table shows only the
// failure note, and only the names are checked.
func checkMetrics(want []string, all, ok []results.Record) error {
	if len(want) == 0 {
		return nil
	}
	valid := append(canonicalOrder(), secondsPerEpoch, wallSeconds)
	if slices.ContainsFunc(want, isTargetKey) { // with a target (checkTarget)
		valid = append(valid, targetKeys()...)
	}
	for i := range all {
		for k := range all[i].Metrics {
			if !slices.Contains(valid, k) {
				valid = append(valid, k)
			}
		}
	}
	valid = sortMetrics(valid)
	for _, m := range want {
		if !slices.Contains(valid, m) {
			return fmt.Errorf("unknown metric %q%s (valid metrics: %s)", m, suggest.DidYouMean(m, valid), joinPrintable(valid))
		}
	}
	if len(ok) == 0 {
		return nil
	}
	present := presentMetrics(ok, true)
	for _, m := range want {
		if slices.Contains(present, m) {
			continue
		}
		runs := "the only successful run"
		if len(ok) > 1 {
			runs = fmt.Sprintf("all %d successful runs", len(ok))
		}
		has := "metrics present: " + joinPrintable(present)
		if len(present) == 0 {
			has = "no metric has a value"
		}
		return fmt.Errorf("metric %q is missing from %s (%s)", m, runs, has)
	}
	return nil
}

// joinPrintable joins strings read from results files with ", " for an
// error message, each as quoteOdd returns it.
func joinPrintable(items []string) string {
	out := make([]string, len(items))
	for i, s := range items {
		out[i] = quoteOdd(s)
	}
	return strings.Join(out, ", ")
}

// quoteOdd returns s, or s quoted by strconv.Quote if it holds a character
// that is not printable, so that a message quoting a results file cannot
// drive the terminal or span lines.
func quoteOdd(s string) string {
	if !utf8.ValidString(s) || strings.ContainsFunc(s, func(r rune) bool { return !unicode.IsPrint(r) }) {
		return strconv.Quote(s)
	}
	return s
}

// normalize validates opts and fills defaults.
func normalize(opts Options) (Options, error) {
	if opts.Format == "" {
		opts.Format = Markdown
	}
	switch opts.Format {
	case Markdown, LaTeX, CSV:
	default:
		return opts, fmt.Errorf("unknown format %q (want markdown, latex or csv)", opts.Format)
	}
	if len(opts.By) == 0 {
		opts.By = []string{FieldDataset}
	}
	var by []string
	for _, f := range opts.By {
		switch f {
		case FieldDataset, FieldArch, FieldNoise:
			if slices.Contains(by, f) {
				return opts, fmt.Errorf("grouping field %q given twice", f)
			}
			by = append(by, f)
		case ByNone:
			if len(opts.By) > 1 {
				return opts, errors.New(`grouping "none" cannot be combined with other fields`)
			}
		default:
			return opts, fmt.Errorf("unknown grouping field %q (want dataset, arch, noise or none)", f)
		}
	}
	opts.By = by
	for _, m := range opts.Metrics {
		if m == "" {
			return opts, errors.New("empty metric name")
		}
	}
	if opts.Select != "" {
		if err := checkSelect(opts.Select); err != nil {
			return opts, err
		}
	}
	if err := checkTarget(opts); err != nil {
		return opts, err
	}
	return opts, nil
}

// build merges recs and lays out the grid.
func build(recs []results.Record, opts Options) (*grid, error) {
	merged, sel, err := mergeSelect(recs, opts)
	if err != nil {
		return nil, err
	}
	if err := checkMetrics(opts.Metrics, merged, succeeded(merged)); err != nil {
		return nil, err
	}
	return layoutGrid(merged, sel, opts)
}

// mergeSelect merges recs (results.Merge), takes the label noise out of
// the method names (withoutNoise) and applies Options.Select.
func mergeSelect(recs []results.Record, opts Options) ([]results.Record, *selection, error) {
	merged, err := results.Merge(recs)
	if err != nil {
		return nil, nil, err
	}
	merged = withoutNoise(merged)
	if opts.Target > 0 {
		merged = withTimeToTarget(merged, opts.Target)
	}
	var sel *selection
	if opts.Select != "" {
		if merged, sel, err = choose(merged, opts.Select); err != nil {
			return nil, nil, err
		}
	}
	return merged, sel, nil
}

// succeeded returns the records of recs with status "ok".
func succeeded(recs []results.Record) []results.Record {
	out, _ := splitByStatus(recs)
	return out
}

// layoutGrid lays out the grid of merged records (mergeSelect's) with the
// metrics opts.Metrics names (or the default ones).
func layoutGrid(merged []results.Record, sel *selection, opts Options) (*grid, error) {
	ok, failed := splitByStatus(merged)
	g := &grid{groupFields: opts.By, sel: sel, target: opts.Target}
	g.metrics = chooseMetrics(ok, opts, opts.Format)
	if opts.Target > 0 && slices.ContainsFunc(g.metrics, isTargetKey) {
		g.extra = append(g.extra, targetNote(opts.Target, evalSets(ok)))
	}
	g.rowFields = varyingFields(ok, opts.By)
	l, err := g.collect(ok)
	if err != nil {
		return nil, err
	}
	g.fillCells(l, g.rowOrder(l))
	g.countFailed(failed)
	if opts.Baseline != "" {
		if err := g.compare(opts.Baseline); err != nil {
			return nil, err
		}
	}
	return g, nil
}

// splitByStatus separates the records with status "ok" from the others,
// each in the order given.
func splitByStatus(recs []results.Record) (ok, failed []results.Record) {
	for _, r := range recs {
		if r.Status == results.StatusOK {
			ok = append(ok, r)
		} else {
			failed = append(failed, r)
		}
	}
	return ok, failed
}

// varyingFields returns the fields not used for columns (by) that take more
// than one value among recs: they become leading row columns.
func varyingFields(recs []results.Record, by []string) []string {
	var out []string
	for _, f := range []string{FieldDataset, FieldArch, FieldNoise} {
		if slices.Contains(by, f) {
			continue
		}
		vals := map[string]bool{}
		for i := range recs {
			vals[fieldValue(&recs[i], f)] = true
		}
		if len(vals) > 1 {
			out = append(out, f)
		}
	}
	return out
}

// fieldValues returns a record's values of the given grouping fields.
func fieldValues(r *results.Record, fields []string) []string {
	out := make([]string, len(fields))
	for i, f := range fields {
		out[i] = fieldValue(r, f)
	}
	return out
}

// joinKey joins field values into one map key.
func joinKey(vs []string) string { return strings.Join(vs, "\x00") }

// cellAcc collects one cell's metric values, with the configuration hash
// and key of the first record pooled into it.
type cellAcc struct {
	vals map[string][]float64
	hash string
	key  string
}

// layout is what collect gathers from the successful records: the order
// in which methods and row-field values first appear, the index of each
// row and group by key, and each cell's values.
type layout struct {
	methodOrder   map[string]int
	rowFieldOrder map[string]int
	groupIndex    map[string]int
	rowIndex      map[string]int
	acc           [][]*cellAcc // [row][group], grown as needed
}

// collect appends to g.rows and g.groups the rows and groups of ok in
// first-appearance order and pools each record's metric values into its
// cell. It fails when one cell would pool runs of different
// configurations.
func (g *grid) collect(ok []results.Record) (*layout, error) {
	l := &layout{
		methodOrder:   map[string]int{},
		rowFieldOrder: map[string]int{},
		groupIndex:    map[string]int{},
		rowIndex:      map[string]int{},
	}
	for i := range ok {
		r := &ok[i]
		rf := fieldValues(r, g.rowFields)
		ri := g.rowOf(l, r, rf)
		gv := fieldValues(r, g.groupFields)
		gi := g.groupOf(l, gv)
		for len(l.acc[ri]) <= gi {
			l.acc[ri] = append(l.acc[ri], nil)
		}
		c := l.acc[ri][gi]
		if c == nil {
			c = &cellAcc{vals: map[string][]float64{}, hash: r.ConfigHash, key: r.Key}
			l.acc[ri][gi] = c
		}
		if c.hash != r.ConfigHash {
			return nil, fmt.Errorf("table cell %q %s pools runs with different configurations: %q (config hash %s) and %q (config hash %s)",
				r.Method, quoteOdd(g.describe(gv, rf)), c.key, quoteOdd(c.hash), r.Key, quoteOdd(r.ConfigHash))
		}
		for _, m := range g.metrics {
			if v, has := metricValue(r, m); has {
				c.vals[m] = append(c.vals[m], v)
			}
		}
	}
	return l, nil
}

// rowOf returns the index in g.rows of record r's row (its row-field
// values rf and its method), adding the row when it is new and noting the
// first appearance of its method and row-field values.
func (g *grid) rowOf(l *layout, r *results.Record, rf []string) int {
	if _, seen := l.methodOrder[r.Method]; !seen {
		l.methodOrder[r.Method] = len(l.methodOrder)
	}
	if _, seen := l.rowFieldOrder[joinKey(rf)]; !seen {
		l.rowFieldOrder[joinKey(rf)] = len(l.rowFieldOrder)
	}
	rk := joinKey(append(slices.Clone(rf), r.Method))
	ri, seen := l.rowIndex[rk]
	if !seen {
		ri = len(g.rows)
		l.rowIndex[rk] = ri
		g.rows = append(g.rows, row{fields: rf, method: r.Method})
		l.acc = append(l.acc, nil)
	}
	return ri
}

// groupOf returns the index in g.groups of the group with values gv,
// adding the group when it is new.
func (g *grid) groupOf(l *layout, gv []string) int {
	gi, seen := l.groupIndex[joinKey(gv)]
	if !seen {
		gi = len(g.groups)
		l.groupIndex[joinKey(gv)] = gi
		g.groups = append(g.groups, gv)
	}
	return gi
}

// rowOrder returns the display order of g.rows as a permutation: by their
// row-field values' first appearance, then by the method's first
// appearance.
func (g *grid) rowOrder(l *layout) []int {
	perm := make([]int, len(g.rows))
	for i := range perm {
		perm[i] = i
	}
	slices.SortStableFunc(perm, func(a, b int) int {
		ra, rb := g.rows[a], g.rows[b]
		if d := l.rowFieldOrder[joinKey(ra.fields)] - l.rowFieldOrder[joinKey(rb.fields)]; d != 0 {
			return d
		}
		return l.methodOrder[ra.method] - l.methodOrder[rb.method]
	})
	return perm
}

// fillCells reorders g.rows by perm and summarises each cell's values into
// g.cells, noting whether any cell has a value and whether all non-empty
// cells have the same number of values.
func (g *grid) fillCells(l *layout, perm []int) {
	rows := make([]row, len(perm))
	g.cells = make([][][]stat, len(perm))
	ns := map[int]bool{}
	for i, p := range perm {
		rows[i] = g.rows[p]
		g.cells[i] = make([][]stat, len(g.groups))
		for gi := range g.groups {
			var c *cellAcc
			if gi < len(l.acc[p]) {
				c = l.acc[p][gi]
			}
			g.cells[i][gi] = g.cellStats(c, ns)
		}
	}
	g.rows = rows
	g.mixedN = len(ns) > 1
	if len(ns) == 1 {
		for n := range ns {
			g.uniformN = n
		}
	}
}

// cellStats summarises cell c (nil when the cell has no run) for each of
// g.metrics, adding to ns the number of values of each non-empty one.
func (g *grid) cellStats(c *cellAcc, ns map[int]bool) []stat {
	out := make([]stat, len(g.metrics))
	for mi, m := range g.metrics {
		if c == nil {
			out[mi] = summarize(nil)
			continue
		}
		s := summarize(c.vals[m])
		out[mi] = s
		if s.n > 0 {
			ns[s.n] = true
			g.anyValues = true
		}
	}
	return out
}

// countFailed counts the failed runs per row and group into g.failed, in
// first-appearance order.
func (g *grid) countFailed(failed []results.Record) {
	fi := map[string]int{}
	for i := range failed {
		r := &failed[i]
		label := r.Method + " / " + g.describe(fieldValues(r, g.groupFields), fieldValues(r, g.rowFields))
		label = strings.TrimSuffix(label, " / ")
		if j, seen := fi[label]; seen {
			g.failed[j].count++
			continue
		}
		fi[label] = len(g.failed)
		g.failed = append(g.failed, failure{label: label, count: 1})
	}
}

// describe names a cell's group and row-field values for messages.
func (g *grid) describe(groupVals, rowVals []string) string {
	var parts []string
	for i, f := range g.rowFields {
		parts = append(parts, describeValue(f, rowVals[i]))
	}
	for i, f := range g.groupFields {
		parts = append(parts, describeValue(f, groupVals[i]))
	}
	return strings.Join(parts, " / ")
}

// describeValue is displayValue for a message or a title, where a
// label-noise value needs its name: "label noise 0.2 symmetric".
func describeValue(field, v string) string {
	if field == FieldNoise {
		return "label noise " + v
	}
	return displayValue(field, v)
}

// groupLabel returns the display label of group gi.
func (g *grid) groupLabel(gi int) string {
	parts := make([]string, len(g.groupFields))
	for i, f := range g.groupFields {
		parts[i] = describeValue(f, g.groups[gi][i])
	}
	return strings.Join(parts, " ")
}

// best returns, for each (group, metric) column, which rows to bold: the
// rows whose displayed mean equals the best displayed mean, when the
// metric has a direction, at least two rows have a value and not all of
// them display the same mean. With a baseline, such a row is bold only if
// its interval lies on the better side of 0, so the baseline never is.
func (g *grid) best() [][][]bool {
	out := make([][][]bool, len(g.rows))
	for ri := range out {
		out[ri] = make([][]bool, len(g.groups))
		for gi := range out[ri] {
			out[ri][gi] = make([]bool, len(g.metrics))
		}
	}
	for gi := range g.groups {
		for mi, m := range g.metrics {
			sp := metricSpec(m)
			if sp.dir == neutral {
				continue
			}
			bestV, worstV, count := math.NaN(), math.NaN(), 0
			for ri := range g.rows {
				s := g.cells[ri][gi][mi]
				if s.n == 0 || s.reached < s.n {
					continue
				}
				count++
				v := sp.rounded(s.mean)
				if math.IsNaN(bestV) || (sp.dir == up && v > bestV) || (sp.dir == down && v < bestV) {
					bestV = v
				}
				if math.IsNaN(worstV) || (sp.dir == up && v < worstV) || (sp.dir == down && v > worstV) {
					worstV = v
				}
			}
			if count < 2 || bestV == worstV {
				continue
			}
			for ri := range g.rows {
				s := g.cells[ri][gi][mi]
				out[ri][gi][mi] = s.n > 0 && s.reached == s.n && sp.rounded(s.mean) == bestV &&
					(g.diffs == nil || g.diffs[ri][gi][mi].better(sp.dir))
			}
		}
	}
	return out
}

// notes returns the footnote sentences as plain text.
func (g *grid) notes() []string {
	var out []string
	if g.anyValues {
		switch {
		case g.mixedN:
			out = append(out, "Mean ± sample standard deviation over seeds; n per cell as shown.")
		case g.uniformN == 1:
			out = append(out, "Single seed per cell.")
		default:
			out = append(out, fmt.Sprintf("Mean ± sample standard deviation over %d seeds.", g.uniformN))
		}
		if pc := g.percentLabels(); pc != "" {
			out[len(out)-1] += " " + pc + " in %."
		}
		if g.diffs != nil {
			out = append(out, g.baselineNotes()...)
		} else {
			out = append(out, "Best per column in bold.")
		}
	}
	if g.sel != nil {
		out = append(out, g.sel.notes...)
	}
	out = append(out, g.extra...)
	if len(g.failed) > 0 {
		total := 0
		parts := make([]string, len(g.failed))
		for i, f := range g.failed {
			total += f.count
			parts[i] = fmt.Sprintf("%s: %d", f.label, f.count)
		}
		run := "runs"
		if total == 1 {
			run = "run"
		}
		out = append(out, fmt.Sprintf("Excluded %d failed %s (%s).", total, run, strings.Join(parts, "; ")))
	}
	return out
}

// percentLabels names the kinds of g.metrics shown as percentages, for a
// note: "ACC", or "ACC, retained and mCE"; "" when there is none.
func (g *grid) percentLabels() string {
	var labels []string
	for _, m := range g.metrics {
		sp := metricSpec(m)
		if sp.scale != 100 {
			continue
		}
		l := sp.label
		if strings.HasSuffix(l, "ACC") {
			l = "ACC"
		}
		if !slices.Contains(labels, l) {
			labels = append(labels, l)
		}
	}
	if len(labels) < 2 {
		return strings.Join(labels, "")
	}
	return strings.Join(labels[:len(labels)-1], ", ") + " and " + labels[len(labels)-1]
}

// cellText formats a cell's mean ± std, or "" when empty.
func cellText(s stat, sp spec, pm string) string {
	if s.n == 0 {
		return ""
	}
	if s.reached == 0 {
		return "not reached"
	}
	t := sp.format(s.mean)
	if s.reached > 1 {
		t += " " + pm + " " + sp.formatLike(s.std, s.mean)
	}
	if s.reached < s.n {
		t += fmt.Sprintf(" (%d/%d)", s.reached, s.n)
	}
	return t
}

// Render writes the table of recs in opts.Format.
func Render(w io.Writer, recs []results.Record, opts Options) error {
	opts, err := normalize(opts)
	if err != nil {
		return fmt.Errorf("table: %w", err)
	}
	if opts.Format == CSV {
		opts.By = []string{FieldDataset, FieldArch}
	}
	if opts.Corruptions {
		g, c, err := buildCorruptions(recs, opts)
		if err == nil {
			err = renderCorruptions(w, g, c, opts.Format)
		}
		if err != nil {
			return fmt.Errorf("table: %w", err)
		}
		return nil
	}
	g, err := build(recs, opts)
	if err != nil {
		return fmt.Errorf("table: %w", err)
	}
	switch opts.Format {
	case CSV:
		err = writeCSV(w, g)
	case LaTeX:
		err = writeLaTeX(w, g)
	default:
		err = writeMarkdown(w, g)
	}
	if err != nil {
		return fmt.Errorf("table: %w", err)
	}
	return nil
}

// RenderTime writes the training-time table (like the paper's Table 5):
// seconds per epoch, mean ± std over seeds, for each method (rows) and
// arch (columns). opts.Format selects the format; By and Metrics are
// ignored.
func RenderTime(w io.Writer, recs []results.Record, opts Options) error {
	opts.By = []string{FieldArch}
	opts.Metrics = []string{secondsPerEpoch}
	return Render(w, recs, opts)
}
