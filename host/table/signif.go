package table

import "math"

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
