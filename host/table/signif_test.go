package table

import (
	"math"
	"strings"
	"testing"

	"github.com/optlab/optlab/host/results"
)

// tDensity is Student's t density with nu degrees of freedom.
func tDensity(t, nu float64) float64 {
	a, _ := math.Lgamma((nu + 1) / 2)
	b, _ := math.Lgamma(nu / 2)
	return math.Exp(a-b-(nu+1)/2*math.Log1p(t*t/nu)) / math.Sqrt(nu*math.Pi)
}

// simpson integrates f over [a, b] with n (even) panels.
func simpson(f func(float64) float64, a, b float64, n int) float64 {
	h := (b - a) / float64(n)
	sum := f(a) + f(b)
	for i := 1; i < n; i++ {
		w := 2.0
		if i%2 == 1 {
			w = 4
		}
		sum += w * f(a+float64(i)*h)
	}
	return sum * h / 3
}

func TestTQuantile(t *testing.T) {
	// Reference values: mpmath at 30 digits (root of 1/2 + ∫₀^q density = p).
	tests := []struct {
		p, nu, want float64
	}{
		{0.975, 1, 12.7062047361747},
		{0.975, 2, 4.30265272974946},
		{0.975, 4, 2.77644510519779},
		{0.975, 10, 2.22813885198627},
		{0.975, 30, 2.04227245630124},
		{0.975, 1e6, 1.95996635681411},
		{0.975, 2.5, 3.57465484200368},
		{0.975, 50.0 / 17, 3.21875861453288},
		{0.025, 4, -2.77644510519779},
		{0.5, 3, 0},
		{0.975, math.Inf(1), 1.95996398454005},
	}
	for _, tc := range tests {
		if got := tQuantile(tc.p, tc.nu); math.Abs(got-tc.want) > 1e-9*math.Max(1, math.Abs(tc.want)) {
			t.Errorf("tQuantile(%v, %v) = %.15g, want %.15g", tc.p, tc.nu, got, tc.want)
		}
	}
	for _, bad := range [][2]float64{{0, 3}, {1, 3}, {0.9, 0}, {0.9, -1}, {math.NaN(), 3}, {0.9, math.NaN()}} {
		if got := tQuantile(bad[0], bad[1]); !math.IsNaN(got) {
			t.Errorf("tQuantile(%v, %v) = %v, want NaN", bad[0], bad[1], got)
		}
	}
}

// TestTQuantileIntegral checks the quantile independently of the
// incomplete beta function: the density integrated from 0 to q by
// Simpson's rule must give p − 1/2.
func TestTQuantileIntegral(t *testing.T) {
	for _, nu := range []float64{1, 1.5, 2, 2.5, 50.0 / 17, 4, 7.3, 10, 30, 1000} {
		for _, p := range []float64{0.9, 0.975, 0.995} {
			q := tQuantile(p, nu)
			got := 0.5 + simpson(func(x float64) float64 { return tDensity(x, nu) }, 0, q, 20000)
			if math.Abs(got-p) > 1e-10 {
				t.Errorf("ν=%v p=%v: q=%.12g integrates to %.12g", nu, p, q, got)
			}
		}
	}
}

func TestWelch(t *testing.T) {
	nan := math.NaN()
	tests := []struct {
		name           string
		m, b           []float64
		d, lo, hi, df  float64
		ci, has, signf bool
	}{
		// a = {1,2,3}: mean 2, s² = 1; b = {2,4,6}: mean 4, s² = 4.
		// d = −2, se² = 1/3 + 4/3 = 5/3, se = 1.2909944487,
		// ν = (5/3)² / ((1/3)²/2 + (4/3)²/2) = 50/17 = 2.9411764706,
		// t_{0.975,ν} = 3.2187586145, half-width = 4.1553995032.
		{"hand example", []float64{1, 2, 3}, []float64{2, 4, 6}, -2, -6.1553995031825, 2.1553995031825, 50.0 / 17, true, true, false},
		// Baseline without variance: ν = n_m − 1 = 2, se = 1/√3,
		// half-width = 4.30265273/√3 = 2.48413771.
		{"one side constant", []float64{4, 5, 6}, []float64{1, 1, 1}, 4, 1.51586228825, 6.48413771175, 2, true, true, true},
		{"both constant", []float64{2, 2}, []float64{1, 1, 1}, 1, nan, nan, nan, false, true, false},
		// summarize gives s ≈ 1.4e-16 and 1.7e-17 here: still constant.
		{"both constant with rounding", []float64{0.7, 0.7, 0.7}, []float64{0.1, 0.1, 0.1}, 0.6, nan, nan, nan, false, true, false},
		{"single seed", []float64{2}, []float64{1, 2, 3}, 0, nan, nan, nan, false, true, false},
		{"empty", nil, []float64{1, 2, 3}, nan, nan, nan, nan, false, false, false},
	}
	same := func(a, b float64) bool { return (math.IsNaN(a) && math.IsNaN(b)) || math.Abs(a-b) < 1e-9 }
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := welch(summarize(tc.m), summarize(tc.b), 0.95)
			if d.has != tc.has || d.ci != tc.ci || d.significant() != tc.signf ||
				!same(d.lo, tc.lo) || !same(d.hi, tc.hi) || !same(d.df, tc.df) || (tc.has && !same(d.d, tc.d)) {
				t.Errorf("welch = %+v (significant %v), want d %v [%v, %v] ν %v ci %v has %v significant %v",
					d, d.significant(), tc.d, tc.lo, tc.hi, tc.df, tc.ci, tc.has, tc.signf)
			}
		})
	}
}

func TestDiffText(t *testing.T) {
	acc, nll := metricSpec("acc"), metricSpec("nll")
	tests := []struct {
		d        diff
		sp       spec
		md, ltex string
	}{
		{diff{has: true, d: 0.0042, lo: 0.001, hi: 0.0074, ci: true}, acc, " Δ +0.42 [0.10, 0.74]*", ` $\Delta\,{+0.42}\,[0.10, 0.74]^*$`},
		{diff{has: true, d: -0.01, lo: -0.03, hi: 0.01, ci: true}, nll, " Δ -0.0100 [-0.0300, 0.0100]", ` $\Delta\,{-0.0100}\,[-0.0300, 0.0100]$`},
		{diff{has: true, d: -0.00001}, nll, " Δ 0.0000", ` $\Delta\,{0.0000}$`},
		{diff{}, acc, "", ""},
	}
	for _, tc := range tests {
		if got := diffText(tc.d, tc.sp, false); got != tc.md {
			t.Errorf("markdown %+v: %q, want %q", tc.d, got, tc.md)
		}
		if got := diffText(tc.d, tc.sp, true); got != tc.ltex {
			t.Errorf("latex %+v: %q, want %q", tc.d, got, tc.ltex)
		}
	}
}

func TestBaselineUnknown(t *testing.T) {
	recs, err := results.Read("testdata/baseline.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	err = Render(&strings.Builder{}, recs, Options{Baseline: "Adam"})
	want := `unknown baseline method "Adam" (methods: SGD, SAM, ASAM)`
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("err = %v, want containing %q", err, want)
	}
}
