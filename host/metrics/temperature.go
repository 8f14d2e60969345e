package metrics

import (
	"errors"
	"fmt"
	"math"
)

// Temperature search defaults.
const (
	// DefaultTempLo and DefaultTempHi bracket the temperature search.
	DefaultTempLo = 1e-2
	DefaultTempHi = 1e2
	// DefaultTempTol is the absolute tolerance on log T, i.e. a relative
	// tolerance of about 1e-5 on T.
	DefaultTempTol = 1e-5
	// DefaultTempMaxIter bounds the optimizer's iterations.
	DefaultTempMaxIter = 200
)

// TemperatureOptions configures FitTemperature. Zero fields take the
// defaults.
type TemperatureOptions struct {
	// Lo and Hi bracket T (0 < Lo < Hi); defaults DefaultTempLo and
	// DefaultTempHi.
	Lo, Hi float64
	// Tol is the absolute tolerance on log T; default DefaultTempTol.
	Tol float64
	// MaxIter bounds the iterations; default DefaultTempMaxIter.
	MaxIter int
}

// withDefaults fills zero fields and validates the rest.
func (o TemperatureOptions) withDefaults() (TemperatureOptions, error) {
	if o.Lo == 0 {
		o.Lo = DefaultTempLo
	}
	if o.Hi == 0 {
		o.Hi = DefaultTempHi
	}
	if o.Tol == 0 {
		o.Tol = DefaultTempTol
	}
	if o.MaxIter == 0 {
		o.MaxIter = DefaultTempMaxIter
	}
	if !(o.Lo > 0 && o.Hi > o.Lo) || math.IsInf(o.Hi, 0) {
		return o, fmt.Errorf("temperature bracket [%v, %v] is not 0 < lo < hi < ∞", o.Lo, o.Hi)
	}
	if !(o.Tol > 0) || o.MaxIter < 1 {
		return o, fmt.Errorf("temperature tolerance %v and max iterations %d must be positive", o.Tol, o.MaxIter)
	}
	return o, nil
}

// ApplyTemperature returns log_softmax(logp/t) row by row: the
// log-probabilities after temperature scaling. logp holds log-probabilities
// (for an ensemble, the log of the averaged probabilities, so this
// power-scales p̄ to p̄^{1/t}/Σ p̄^{1/t}); t = 1 returns the normalised
// input. Entries of −Inf stay −Inf.
func ApplyTemperature(logp []float64, classes int, t float64) ([]float64, error) {
	if classes < 1 || len(logp) == 0 || len(logp)%classes != 0 {
		return nil, fmt.Errorf("apply temperature: %d values are not a non-empty multiple of %d classes", len(logp), classes)
	}
	if !(t > 0) || math.IsInf(t, 1) {
		return nil, fmt.Errorf("apply temperature: T = %v, want 0 < T < ∞", t)
	}
	out := make([]float64, len(logp))
	for i := 0; i < len(logp); i += classes {
		row := out[i : i+classes]
		for j, v := range logp[i : i+classes] {
			if math.IsNaN(v) || math.IsInf(v, 1) {
				return nil, fmt.Errorf("apply temperature: row %d class %d is %v", i/classes, j, v)
			}
			row[j] = v / t
		}
		lse := logSumExp(row)
		if math.IsInf(lse, -1) {
			return nil, fmt.Errorf("apply temperature: row %d has no finite entry", i/classes)
		}
		for j := range row {
			row[j] -= lse
		}
	}
	return out, nil
}

// scaledNLL is the mean over rows of −max(log q_y, log ProbFloor) where
// q = softmax(beta·logp_row), i.e. the reported NLL at T = 1/beta.
func scaledNLL(logp []float64, labels []int32, c int, beta float64) float64 {
	logFloor := math.Log(ProbFloor)
	sum := 0.0
	for i, y := range labels {
		row := logp[i*c : (i+1)*c]
		m := math.Inf(-1)
		for _, v := range row {
			if v > m {
				m = v
			}
		}
		m *= beta
		s := 0.0
		for _, v := range row {
			s += math.Exp(beta*v - m)
		}
		lq := beta*row[y] - m - math.Log(s)
		sum -= math.Max(lq, logFloor)
	}
	return sum / float64(len(labels))
}

// FitTemperature returns the T > 0 minimising the NLL (as reported, with
// ProbFloor) of log_softmax(logp/T) on the given predictions and labels.
// It runs Brent's minimiser (golden section with parabolic steps) on log T
// over [log Lo, log Hi] to an absolute tolerance Tol on log T. The NLL is
// convex in 1/T, hence unimodal in log T, so the minimum found is global
// within the bracket; a T at the edge of the bracket means the optimum
// lies outside it.
func FitTemperature(pred Predictions, labels []int32, opts TemperatureOptions) (float64, error) {
	if len(labels) == 0 {
		return math.NaN(), errors.New("fit temperature: no labels")
	}
	d, err := newDist(pred, len(labels), 0)
	if err != nil {
		return math.NaN(), fmt.Errorf("fit temperature: %w", err)
	}
	if err := checkLabels(labels, d.c); err != nil {
		return math.NaN(), fmt.Errorf("fit temperature: %w", err)
	}
	o, err := opts.withDefaults()
	if err != nil {
		return math.NaN(), fmt.Errorf("fit temperature: %w", err)
	}
	return fitTemperature(d.logp, labels, d.c, o), nil
}

// fitTemperature is FitTemperature on validated input.
func fitTemperature(logp []float64, labels []int32, c int, o TemperatureOptions) float64 {
	f := func(u float64) float64 { return scaledNLL(logp, labels, c, math.Exp(-u)) }
	u, _ := brent(f, math.Log(o.Lo), math.Log(o.Hi), o.Tol, o.MaxIter)
	return math.Exp(u)
}

// brent minimises f on [a, b] with Brent's method: parabolic interpolation
// through the three best points when it is safe, golden-section steps
// otherwise. It stops when the bracket around the best point x is within
// 2·tol of x, or after maxIter evaluations.
func brent(f func(float64) float64, a, b, tol float64, maxIter int) (float64, float64) {
	const golden = 0.3819660112501051 // (3 − √5)/2
	x := a + golden*(b-a)
	w, v := x, x
	fx := f(x)
	fw, fv := fx, fx
	var d, e float64
	for range maxIter {
		m := (a + b) / 2
		tol1 := tol + 1e-12*math.Abs(x)
		tol2 := 2 * tol1
		if math.Abs(x-m) <= tol2-(b-a)/2 {
			break
		}
		useGolden := true
		if math.Abs(e) > tol1 {
			// Parabola through (v, fv), (w, fw), (x, fx).
			r := (x - w) * (fx - fv)
			q := (x - v) * (fx - fw)
			p := (x-v)*q - (x-w)*r
			q = 2 * (q - r)
			if q > 0 {
				p = -p
			} else {
				q = -q
			}
			eOld := e
			e = d
			if math.Abs(p) < math.Abs(q*eOld/2) && p > q*(a-x) && p < q*(b-x) {
				d = p / q
				if u := x + d; u-a < tol2 || b-u < tol2 {
					d = math.Copysign(tol1, m-x)
				}
				useGolden = false
			}
		}
		if useGolden {
			if x >= m {
				e = a - x
			} else {
				e = b - x
			}
			d = golden * e
		}
		u := x + d
		if math.Abs(d) < tol1 {
			u = x + math.Copysign(tol1, d)
		}
		fu := f(u)
		if fu <= fx {
			if u >= x {
				a = x
			} else {
				b = x
			}
			v, fv = w, fw
			w, fw = x, fx
			x, fx = u, fu
			continue
		}
		if u < x {
			a = u
		} else {
			b = u
		}
		if fu <= fw || w == x {
			v, fv = w, fw
			w, fw = u, fu
		} else if fu <= fv || v == x || v == w {
			v, fv = u, fu
		}
	}
	return x, fx
}
