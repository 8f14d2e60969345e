package table

import (
	"fmt"
	"math"
	"slices"
	"strings"
)

// confidence is the two-sided level of the intervals shown with --baseline.
const confidence = 0.95

// diff is a cell's difference to the baseline method's cell in the same
// column group (and the same row-field values): d = mean − mean_baseline,
// with a Welch t interval [lo, hi] when one can be computed.
type diff struct {
	has    bool    // both cells have a value and the row is not the baseline
	d      float64 // difference of means, in stored units
	lo, hi float64 // the interval; NaN when ci is false
	df     float64 // Welch–Satterthwaite degrees of freedom; NaN when ci is false
	ci     bool    // whether the interval could be computed
}

// significant reports whether the interval excludes 0.
func (d diff) significant() bool {
	return d.ci && (d.lo > 0 || d.hi < 0)
}

// better reports whether the interval lies entirely on the better side of
// 0 for a metric of direction dir.
func (d diff) better(dir direction) bool {
	return d.ci && ((dir == up && d.lo > 0) || (dir == down && d.hi < 0))
}

// welch returns the difference m − b of two cells' means with its
// two-sided Welch t interval at the given level (unequal variances):
//
//	se = sqrt(s_m²/n_m + s_b²/n_b)
//	ν  = se⁴ / ((s_m²/n_m)²/(n_m−1) + (s_b²/n_b)²/(n_b−1))
//	CI = d ± t_{(1+level)/2, ν}·se
//
// No interval is computed (ci false) when either side has fewer than two
// values or both have zero variance. A standard deviation below 1e-12 of
// the mean counts as zero: identical values can leave a rounding residue
// (0.7, 0.7, 0.7 gives s ≈ 1.4e-16), which must not make a difference of
// constant cells look significant.
func welch(m, b stat, level float64) diff {
	out := diff{has: m.n > 0 && b.n > 0, d: m.mean - b.mean, lo: math.NaN(), hi: math.NaN(), df: math.NaN()}
	if m.n < 2 || b.n < 2 {
		return out
	}
	sqErr := func(s stat) float64 { // s²/n
		if s.std <= 1e-12*math.Abs(s.mean) {
			return 0
		}
		return s.std * s.std / float64(s.n)
	}
	vm, vb := sqErr(m), sqErr(b)
	se2 := vm + vb
	if !(se2 > 0) {
		return out
	}
	out.df = se2 * se2 / (vm*vm/float64(m.n-1) + vb*vb/float64(b.n-1))
	h := tQuantile((1+level)/2, out.df) * math.Sqrt(se2)
	out.lo, out.hi, out.ci = out.d-h, out.d+h, true
	return out
}

// tQuantile returns the p-quantile of Student's t distribution with nu > 0
// degrees of freedom (not necessarily an integer), found by bisection on
// the CDF to full float64 precision; nu = +Inf gives the normal quantile.
func tQuantile(p, nu float64) float64 {
	switch {
	case math.IsNaN(p) || math.IsNaN(nu) || p <= 0 || p >= 1 || nu <= 0:
		return math.NaN()
	case p < 0.5:
		return -tQuantile(1-p, nu)
	case p == 0.5:
		return 0
	case math.IsInf(nu, 1):
		return math.Sqrt2 * math.Erfinv(2*p-1)
	}
	// tail(t) = P(T > t) = ½·I_{ν/(ν+t²)}(ν/2, ½), decreasing in t ≥ 0.
	tail := func(t float64) float64 {
		return regIncBeta(nu/2, 0.5, nu/(nu+t*t), t*t/(nu+t*t)) / 2
	}
	q := 1 - p
	lo, hi := 0.0, 1.0
	for tail(hi) > q {
		lo, hi = hi, 2*hi
	}
	for i := 0; i < 200; i++ {
		mid := lo + (hi-lo)/2
		if mid <= lo || mid >= hi {
			break
		}
		if tail(mid) > q {
			lo = mid
		} else {
			hi = mid
		}
	}
	return lo + (hi-lo)/2
}

// regIncBeta returns the regularized incomplete beta function I_x(a, b)
// for a, b > 0; y = 1 − x is passed separately to keep its precision near
// x = 1. It uses the continued fraction (modified Lentz), on the side of
// the symmetry I_x(a, b) = 1 − I_y(b, a) where it converges quickly.
func regIncBeta(a, b, x, y float64) float64 {
	switch {
	case x <= 0:
		return 0
	case y <= 0:
		return 1
	case x > (a+1)/(a+b+2):
		return 1 - regIncBeta(b, a, y, x)
	}
	la, _ := math.Lgamma(a)
	lb, _ := math.Lgamma(b)
	lab, _ := math.Lgamma(a + b)
	front := math.Exp(a*math.Log(x)+b*math.Log(y)-la-lb+lab) / a

	const tiny, eps = 1e-300, 1e-16
	clamp := func(v float64) float64 {
		if math.Abs(v) < tiny {
			return tiny
		}
		return v
	}
	c, d := 1.0, 1/clamp(1-(a+b)*x/(a+1))
	h := d
	for m := 1.0; m <= 100000; m++ {
		// Even step, then odd step of the continued fraction.
		num := m * (b - m) * x / ((a + 2*m - 1) * (a + 2*m))
		d = 1 / clamp(1+num*d)
		c = clamp(1 + num/c)
		h *= d * c
		num = -(a + m) * (a + b + m) * x / ((a + 2*m) * (a + 2*m + 1))
		d = 1 / clamp(1+num*d)
		c = clamp(1 + num/c)
		del := d * c
		h *= del
		if math.Abs(del-1) < eps {
			break
		}
	}
	return front * h
}

// compare fills g.diffs with every cell's difference to the baseline
// method's cell in the same group and with the same row-field values
// (dataset, arch, label noise), and g.unpaired with the cells that have
// values but no baseline value to compare with. It fails when no row has
// the baseline method.
func (g *grid) compare(baseline string) error {
	var methods []string
	for _, r := range g.rows {
		if !slices.Contains(methods, r.method) {
			methods = append(methods, r.method)
		}
	}
	if !slices.Contains(methods, baseline) {
		if len(methods) == 0 {
			return fmt.Errorf("unknown baseline method %q: no method has a successful run", baseline)
		}
		return fmt.Errorf("unknown baseline method %q (methods: %s)", baseline, joinPrintable(methods))
	}
	g.baseline = baseline
	g.diffs = make([][][]diff, len(g.rows))
	for ri, r := range g.rows {
		bi := slices.IndexFunc(g.rows, func(o row) bool { return o.method == baseline && slices.Equal(o.fields, r.fields) })
		g.diffs[ri] = make([][]diff, len(g.groups))
		for gi := range g.groups {
			g.diffs[ri][gi] = make([]diff, len(g.metrics))
			if bi == ri {
				continue
			}
			for mi := range g.metrics {
				if bi < 0 || g.cells[bi][gi][mi].n == 0 {
					if g.cells[ri][gi][mi].n > 0 {
						g.unpair(g.describe(g.groups[gi], r.fields))
					}
					continue
				}
				m, b := g.cells[ri][gi][mi], g.cells[bi][gi][mi]
				if m.reached < m.n || b.reached < b.n {
					continue // a time to a target some seed did not reach: no difference
				}
				g.diffs[ri][gi][mi] = welch(m, b, confidence)
			}
		}
	}
	return nil
}

// unpair notes a place (as describe names it) where some cell has no
// baseline value to compare with, once.
func (g *grid) unpair(where string) {
	if where == "" {
		where = "some cells"
	}
	if !slices.Contains(g.unpaired, where) {
		g.unpaired = append(g.unpaired, where)
	}
}

// signed formats a difference in display units with an explicit sign
// ("+0.25", "-0.25"; "0.00" when it rounds to zero).
func signed(sp spec, v float64) string {
	s := sp.format(v)
	if !strings.HasPrefix(s, "-") && strings.Trim(s, "0.") != "" {
		s = "+" + s
	}
	return s
}

// diffText returns the " Δ +D [LO, HI]*" suffix of a cell (LaTeX: in math
// mode), or "" when the cell has no difference to show. The interval is
// left out when it cannot be computed; * marks an interval excluding 0.
func diffText(d diff, sp spec, latex bool) string {
	if !d.has {
		return ""
	}
	body := signed(sp, d.d)
	if latex {
		body = "{" + body + "}"
	}
	if d.ci {
		body += " [" + sp.formatLike(d.lo, d.d) + ", " + sp.formatLike(d.hi, d.d) + "]"
	}
	star := ""
	if d.significant() {
		star = "*"
	}
	if latex {
		if star != "" {
			star = "^*"
		}
		return ` $\Delta\,` + strings.Replace(body, " ", `\,`, 1) + star + "$"
	}
	return " Δ " + body + star
}

// baselineNotes returns the footnote sentences of a --baseline table.
func (g *grid) baselineNotes() []string {
	out := []string{fmt.Sprintf("Δ vs %s: difference of means with a %g %% Welch t interval over seeds; * the interval excludes 0.", g.baseline, 100*confidence)}
	if pc := g.percentLabels(); pc != "" {
		out[0] += " " + pc + " differences in percentage points."
	}
	noCI := false
	for ri := range g.diffs {
		for gi := range g.diffs[ri] {
			for _, d := range g.diffs[ri][gi] {
				noCI = noCI || (d.has && !d.ci)
			}
		}
	}
	if noCI {
		out = append(out, "Δ without an interval: fewer than 2 seeds on a side or zero variance on both; never marked significant.")
	}
	if len(g.unpaired) > 0 {
		out = append(out, fmt.Sprintf("No Δ where %s has no value to compare with: %s.", g.baseline, strings.Join(g.unpaired, "; ")))
	}
	return append(out, fmt.Sprintf("Bold: best per column and significantly better than %s (interval on the better side of 0); %s itself is never bold.", g.baseline, g.baseline))
}
