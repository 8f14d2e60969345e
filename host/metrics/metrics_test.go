package metrics

import (
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"testing"
)

// near reports whether a and b agree to tol (absolute).
func near(a, b, tol float64) bool { return math.Abs(a-b) <= tol }

// uniform returns n rows of the uniform distribution over c classes.
func uniform(n, c int) []float64 {
	p := make([]float64, n*c)
	for i := range p {
		p[i] = 1 / float64(c)
	}
	return p
}

// randomProbs returns n×c softmax probabilities of Gaussian logits with
// the given scale, their log-probabilities and the logits.
func randomProbs(rng *rand.Rand, n, c int, scale float64) (p, logp, z []float64) {
	z = make([]float64, n*c)
	for i := range z {
		z[i] = scale * rng.NormFloat64()
	}
	logp = make([]float64, n*c)
	p = make([]float64, n*c)
	for i := 0; i < n*c; i += c {
		lse := logSumExp(z[i : i+c])
		for j := range c {
			logp[i+j] = z[i+j] - lse
			p[i+j] = math.Exp(logp[i+j])
		}
	}
	return p, logp, z
}

// sampleLabels draws one label per row from the rows of p.
func sampleLabels(rng *rand.Rand, p []float64, c int) []int32 {
	n := len(p) / c
	y := make([]int32, n)
	for i := range n {
		u := rng.Float64()
		y[i] = int32(c - 1)
		acc := 0.0
		for j := range c {
			acc += p[i*c+j]
			if u < acc {
				y[i] = int32(j)
				break
			}
		}
	}
	return y
}

func repeatConf(v float64, n int) []float64 {
	out := make([]float64, n)
	for i := range out {
		out[i] = v
	}
	return out
}

func firstK(n, k int) []bool {
	out := make([]bool, n)
	for i := range k {
		out[i] = true
	}
	return out
}

// Reference §8 item 19.
func TestECEToy(t *testing.T) {
	tests := []struct {
		name    string
		conf    []float64
		correct []bool
		want    float64
	}{
		{"calibrated 0.8", repeatConf(0.8, 10), firstK(10, 8), 0},
		{"overconfident? no: 0.95 all right", repeatConf(0.95, 10), firstK(10, 10), 0.05},
		{"all wrong at 0.6", repeatConf(0.6, 4), firstK(4, 0), 0.6},
		{"two bins", []float64{0.55, 0.55, 0.95, 0.95}, []bool{true, false, true, true}, (0.05*2 + 0.05*2) / 4},
		{"zero confidence in first bin", []float64{0, 1.0 / 15}, []bool{false, false}, (1.0 / 15) / 2},
		{"edge 1/15 belongs to first bin", []float64{1.0 / 15, 1.0/15 + 1e-9}, []bool{false, true}, (1.0/15 + 1 - 1.0/15 - 1e-9) / 2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ECE(tc.conf, tc.correct, DefaultECEBins)
			if err != nil {
				t.Fatal(err)
			}
			if !near(got, tc.want, 1e-12) {
				t.Fatalf("ECE = %.17g, want %.17g", got, tc.want)
			}
			if got != bruteECE(tc.conf, tc.correct, DefaultECEBins) && !near(got, bruteECE(tc.conf, tc.correct, DefaultECEBins), 1e-12) {
				t.Fatalf("ECE disagrees with brute force")
			}
		})
	}
}

// bruteECE computes ECE bin by bin with explicit (lo, hi] comparisons.
func bruteECE(conf []float64, correct []bool, bins int) float64 {
	n := float64(len(conf))
	total := 0.0
	for b := range bins {
		lo, hi := float64(b)/float64(bins), float64(b+1)/float64(bins)
		var cnt, sc, sa float64
		for i, v := range conf {
			in := v > lo && v <= hi
			if b == 0 && v <= 0 {
				in = true
			}
			if b == bins-1 && v > 1 {
				in = true
			}
			if !in {
				continue
			}
			cnt++
			sc += v
			if correct[i] {
				sa++
			}
		}
		if cnt > 0 {
			total += cnt / n * math.Abs(sc/cnt-sa/cnt)
		}
	}
	return total
}

func TestECEBruteForce(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for trial := range 50 {
		n := 1 + rng.IntN(300)
		conf := make([]float64, n)
		correct := make([]bool, n)
		for i := range conf {
			if trial%2 == 0 {
				conf[i] = float64(rng.IntN(31)) / 30 // many exact bin edges
			} else {
				conf[i] = rng.Float64()
			}
			correct[i] = rng.Float64() < conf[i]
		}
		bins := []int{1, 10, 15, 20}[trial%4]
		got, err := ECE(conf, correct, bins)
		if err != nil {
			t.Fatal(err)
		}
		if want := bruteECE(conf, correct, bins); !near(got, want, 1e-12) {
			t.Fatalf("trial %d: ECE = %v, brute force %v", trial, got, want)
		}
	}
}

func TestEceBinEdges(t *testing.T) {
	for bins := 1; bins <= 40; bins++ {
		for k := 0; k <= bins; k++ {
			edge := float64(k) / float64(bins)
			want := max(k-1, 0)
			if got := eceBin(edge, bins); got != want {
				t.Errorf("bins=%d: edge %d/%d in bin %d, want %d", bins, k, bins, got, want)
			}
			if k < bins {
				if got := eceBin(math.Nextafter(edge, 2), bins); got != k {
					t.Errorf("bins=%d: just above %d/%d in bin %d, want %d", bins, k, bins, got, k)
				}
			}
		}
	}
}

// Reference §8 items 22 and 23, through Evaluate.
func TestBrierNLLAccuracy(t *testing.T) {
	oneHot := func(n, c int) ([]float64, []int32) {
		p := make([]float64, n*c)
		y := make([]int32, n)
		for i := range n {
			y[i] = int32(i % c)
			p[i*c+i%c] = 1
		}
		return p, y
	}
	labelsMod := func(n, c int) []int32 {
		y := make([]int32, n)
		for i := range y {
			y[i] = int32(i % c)
		}
		return y
	}
	p1, y1 := oneHot(20, 10)
	pw := make([]float64, 20*10) // one-hot on a wrong class
	for i := range 20 {
		pw[i*10+(int(y1[i])+1)%10] = 1
	}
	tests := []struct {
		name            string
		p               []float64
		y               []int32
		acc, nll, brier float64
		nllTol          float64
	}{
		{"one-hot correct", p1, y1, 1, 0, 0, 0},
		{"one-hot wrong hits floor", pw, y1, 0, -math.Log(ProbFloor), 2, 1e-12},
		{"uniform C10", uniform(30, 10), labelsMod(30, 10), 0.1, 2.302585, 0.9, 1e-6},
		{"uniform C100", uniform(200, 100), labelsMod(200, 100), 0.01, 4.605170, 0.99, 1e-6},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r, err := Evaluate(Predictions{Probs: tc.p}, tc.y, Options{Calibration: CalNone})
			if err != nil {
				t.Fatal(err)
			}
			if !near(r.Brier, tc.brier, 1e-12) || !near(r.NLL, tc.nll, tc.nllTol) {
				t.Errorf("brier %v nll %v, want %v %v", r.Brier, r.NLL, tc.brier, tc.nll)
			}
			// Uniform rows tie everywhere: the arg-max is class 0.
			if !near(r.Acc, tc.acc, 1e-12) {
				t.Errorf("acc %v, want %v", r.Acc, tc.acc)
			}
		})
	}
}

func TestBrierAlgebraicForm(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	p, _, _ := randomProbs(rng, 500, 10, 2)
	y := sampleLabels(rng, p, 10)
	r, err := Evaluate(Predictions{Probs: p}, y, Options{Calibration: CalNone})
	if err != nil {
		t.Fatal(err)
	}
	// brier_score form from the reference: 1 + (Σp² − 2Σp_y)/N.
	var sq, py float64
	for i, v := range p {
		sq += v * v
		if int32(i%10) == y[i/10] {
			py += v
		}
	}
	alg := 1 + (sq-2*py)/500
	if !near(r.Brier, alg, 1e-12) {
		t.Fatalf("Brier %v, algebraic form %v", r.Brier, alg)
	}
	// Straight NLL and accuracy.
	var nll float64
	hits := 0
	for i := range 500 {
		row := p[i*10 : (i+1)*10]
		nll -= math.Log(row[y[i]])
		if slices.Index(row, slices.Max(row)) == int(y[i]) {
			hits++
		}
	}
	if !near(r.NLL, nll/500, 1e-12) || r.Acc != float64(hits)/500 {
		t.Fatalf("NLL %v acc %v, want %v %v", r.NLL, r.Acc, nll/500, float64(hits)/500)
	}
}

// refAAC is the reference code's acc_aac (for the documentation of the
// departure only).
func refAAC(conf []float64, correct []bool, steps int) float64 {
	n := len(conf)
	idx := make([]int, n)
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(a, b int) bool { return conf[idx[a]] < conf[idx[b]] })
	step := n / steps
	var acc []float64
	for i := 1; i < n; i += step {
		h := 0
		for _, j := range idx[i:] {
			if correct[j] {
				h++
			}
		}
		acc = append(acc, float64(h)/float64(n-i))
	}
	tr := 0.0
	for i := 1; i < len(acc); i++ {
		tr += (acc[i] + acc[i-1]) / 2
	}
	return 1 - tr/float64(steps)
}

// bruteAAC computes AAC without sorting: each sample keeps the fraction of
// its tie group's mass that lies above the rejection point.
func bruteAAC(conf []float64, correct []bool, steps int) float64 {
	n := len(conf)
	A := func(k float64) float64 {
		r := 0.0
		for i := range n {
			below, same := 0.0, 0.0
			for j := range n {
				if conf[j] < conf[i] {
					below++
				} else if conf[j] == conf[i] {
					same++
				}
			}
			rej := math.Min(math.Max(k-below, 0), same)
			if correct[i] {
				r += 1 - rej/same
			}
		}
		return r / (float64(n) - k)
	}
	area := 0.0
	for j := range steps {
		k0 := float64(j) * float64(n-1) / float64(steps)
		k1 := float64(j+1) * float64(n-1) / float64(steps)
		area += (A(k0) + A(k1)) / 2
	}
	return 1 - area/float64(steps)
}

// Reference §8 item 24, in our definition (and the reference's, to pin the
// documented departure).
func TestAACBounds(t *testing.T) {
	tests := []struct {
		n       int
		refOK   float64 // reference value with all correct, steps=10
		hasRefV bool
	}{
		{1, 0, false}, {2, 0, false}, {10, 0.2, true}, {11, 0.1, true}, {512, 0, true},
		{784, 0, true}, {5000, 0.1, true}, {10000, 0.1, true},
	}
	for _, tc := range tests {
		conf := make([]float64, tc.n)
		for i := range conf {
			conf[i] = 0.5 + 0.5*float64(i%7)/7
		}
		for _, steps := range []int{1, 10, DefaultAACSteps, 1000} {
			good, err := AAC(conf, firstK(tc.n, tc.n), steps)
			if err != nil {
				t.Fatal(err)
			}
			bad, err := AAC(conf, firstK(tc.n, 0), steps)
			if err != nil {
				t.Fatal(err)
			}
			if !near(good, 0, 1e-12) || bad != 1 {
				t.Errorf("N=%d steps=%d: all correct %v (want 0), all wrong %v (want 1)", tc.n, steps, good, bad)
			}
		}
		if tc.hasRefV {
			if got := refAAC(conf, firstK(tc.n, tc.n), 10); !near(got, tc.refOK, 1e-12) {
				t.Errorf("reference AAC N=%d all correct = %v, want %v", tc.n, got, tc.refOK)
			}
		}
	}
	if got := refAAC(repeatConf(0.9, 10000), firstK(10000, 10000), 1000); !near(got, 0.001, 1e-12) {
		t.Errorf("reference AAC steps=1000 N=10000 = %v, want 0.001", got)
	}
}

func TestAACValues(t *testing.T) {
	tests := []struct {
		name    string
		conf    []float64
		correct []bool
		steps   int
		want    float64
		tol     float64
	}{
		// Wrong sample least confident: A(k) = 1/(2−k), ∫₀¹ = ln 2.
		{"good ranking", []float64{0.6, 0.9}, []bool{false, true}, 1000, 1 - math.Ln2, 1e-6},
		// Wrong sample most confident: A(k) = (1−k)/(2−k), ∫₀¹ = 1 − ln 2.
		{"bad ranking", []float64{0.9, 0.6}, []bool{false, true}, 1000, math.Ln2, 1e-6},
		// Tied: A(k) = ½ throughout.
		{"tied", []float64{0.7, 0.7}, []bool{false, true}, 10, 0.5, 1e-15},
		// N=3, steps=2, no ties: k = 0, 1, 2 → A = 2/3, 1, 1.
		{"integer grid", []float64{0.5, 0.6, 0.7}, []bool{false, true, true}, 2, 1 - (2.0/3+1+1+1)/4, 1e-15},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := AAC(tc.conf, tc.correct, tc.steps)
			if err != nil {
				t.Fatal(err)
			}
			if !near(got, tc.want, tc.tol) {
				t.Fatalf("AAC = %.12g, want %.12g", got, tc.want)
			}
		})
	}
}

func TestAACBruteForce(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for trial := range 40 {
		n := 1 + rng.IntN(120)
		conf := make([]float64, n)
		correct := make([]bool, n)
		for i := range conf {
			if trial%2 == 0 {
				conf[i] = float64(rng.IntN(6)) / 5 // heavy ties
			} else {
				conf[i] = rng.Float64()
			}
			correct[i] = rng.Float64() < 0.3+0.6*conf[i]
		}
		steps := []int{1, 7, 10, 100}[trial%4]
		got, err := AAC(conf, correct, steps)
		if err != nil {
			t.Fatal(err)
		}
		if want := bruteAAC(conf, correct, steps); !near(got, want, 1e-12) {
			t.Fatalf("trial %d (N=%d steps=%d): AAC = %v, brute force %v", trial, n, steps, got, want)
		}
	}
}

// bruteAUROC counts pairs.
func bruteAUROC(pos, neg []float64) float64 {
	s := 0.0
	for _, p := range pos {
		for _, q := range neg {
			switch {
			case p > q:
				s++
			case p == q:
				s += 0.5
			}
		}
	}
	return s / float64(len(pos)*len(neg))
}

// Reference §8 item 26, and the exact Mann–Whitney definition.
func TestAUROC(t *testing.T) {
	tests := []struct {
		name     string
		pos, neg []float64
		want     float64
		undef    bool
	}{
		{"all correct with confidence 1", []float64{1, 1, 1}, nil, 0, true},
		{"all wrong", nil, []float64{0.3}, 0, true},
		{"perfect separation", []float64{0.9, 0.8, 0.95}, []float64{0.5, 0.7}, 1, false},
		{"reversed", []float64{0.1, 0.2}, []float64{0.5, 0.7}, 0, false},
		{"all tied", []float64{0.5, 0.5}, []float64{0.5, 0.5, 0.5}, 0.5, false},
		{"one tie", []float64{0.9, 0.6}, []float64{0.6, 0.1}, (2 + 1 + 0.5) / 4, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := AUROC(tc.pos, tc.neg)
			if tc.undef {
				if !errors.Is(err, ErrUndefined) || !math.IsNaN(got) {
					t.Fatalf("got %v, %v; want NaN and ErrUndefined", got, err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("AUROC = %v, %v; want %v", got, err, tc.want)
			}
		})
	}
	rng := rand.New(rand.NewPCG(7, 8))
	for trial := range 30 {
		pos := make([]float64, 1+rng.IntN(80))
		neg := make([]float64, 1+rng.IntN(80))
		for i := range pos {
			pos[i] = float64(rng.IntN(10)) / 10
		}
		for i := range neg {
			neg[i] = float64(rng.IntN(10))/10 - 0.1
		}
		got, err := AUROC(pos, neg)
		if err != nil {
			t.Fatal(err)
		}
		if want := bruteAUROC(pos, neg); !near(got, want, 1e-12) {
			t.Fatalf("trial %d: AUROC = %v, brute force %v", trial, got, want)
		}
	}
}

func TestEvaluateAUROCUndefined(t *testing.T) {
	p := []float64{1, 0, 0, 1}
	r, err := Evaluate(Predictions{Probs: p}, []int32{0, 1}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !math.IsNaN(r.AUROC) || len(r.Notes) == 0 || !strings.Contains(r.Notes[0], "misclassification auroc") {
		t.Fatalf("AUROC %v notes %q; want NaN with a note", r.AUROC, r.Notes)
	}
	if _, ok := r.Map()[KeyAUROC]; ok {
		t.Fatal("undefined auroc should be left out of Map")
	}
}

func TestOODAUROC(t *testing.T) {
	in := []float64{0.9, 0.1, 0.8, 0.2, 0.6, 0.4}
	ood := []float64{0.5, 0.5, 0.7, 0.3}
	r, err := Evaluate(Predictions{Probs: in}, []int32{0, 0, 1}, Options{OOD: &Predictions{Probs: ood}})
	if err != nil {
		t.Fatal(err)
	}
	// In-dist conf {0.9, 0.8, 0.6} vs OOD {0.5, 0.7}: pairs won 2+2+1 of 6.
	if !r.HasOOD || !near(r.AUROCOOD, 5.0/6, 1e-15) {
		t.Fatalf("auroc_ood = %v", r.AUROCOOD)
	}
	if v, ok := r.Map()[KeyAUROCOOD]; !ok || v != r.AUROCOOD {
		t.Fatal("auroc_ood missing from Map")
	}
	if _, err := Evaluate(Predictions{Probs: in}, []int32{0, 0, 1}, Options{OOD: &Predictions{Probs: []float64{0.2, 0.3, 0.5}}}); err == nil {
		t.Fatal("accepted OOD set with the wrong class count")
	}
}

// Reference §8 item 25.
func TestApplyTemperature(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	_, logp, z := randomProbs(rng, 50, 7, 3)
	for _, T := range []float64{1, 0.5, 2, 13} {
		got, err := ApplyTemperature(logp, 7, T)
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < len(z); i += 7 {
			zt := make([]float64, 7)
			for j := range 7 {
				zt[j] = z[i+j] / T
			}
			lse := logSumExp(zt)
			for j := range 7 {
				if want := zt[j] - lse; !near(got[i+j], want, 1e-12) {
					t.Fatalf("T=%v: apply_t(log_softmax z) = %v, log_softmax(z/T) = %v", T, got[i+j], want)
				}
				if T == 1 && !near(got[i+j], logp[i+j], 1e-14) {
					t.Fatalf("T=1 is not the identity: %v vs %v", got[i+j], logp[i+j])
				}
			}
		}
	}
	// −Inf entries stay −Inf.
	got, err := ApplyTemperature([]float64{0, math.Inf(-1)}, 2, 3)
	if err != nil || got[0] != 0 || !math.IsInf(got[1], -1) {
		t.Fatalf("got %v, %v", got, err)
	}
	for _, bad := range []struct {
		lp []float64
		c  int
		t  float64
	}{{[]float64{0}, 2, 1}, {[]float64{0, 0}, 2, 0}, {[]float64{0, 0}, 2, math.Inf(1)}, {[]float64{math.NaN(), 0}, 2, 1}, {nil, 1, 1}} {
		if _, err := ApplyTemperature(bad.lp, bad.c, bad.t); err == nil {
			t.Errorf("ApplyTemperature(%v, %d, %v) accepted", bad.lp, bad.c, bad.t)
		}
	}
}

func TestFitTemperature(t *testing.T) {
	tests := []struct {
		name   string
		trueT  float64 // labels drawn from softmax(z/trueT); the model predicts softmax(z)
		n, c   int
		tolRel float64
	}{
		{"self-consistent C10", 1, 40000, 10, 0.03},
		{"self-consistent C100", 1, 10000, 100, 0.03},
		{"overconfident model", 2, 40000, 10, 0.03},
		{"underconfident model", 0.5, 40000, 10, 0.03},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(11, uint64(i)))
			_, logp, z := randomProbs(rng, tc.n, tc.c, 2)
			zt := make([]float64, len(z))
			for j := range z {
				zt[j] = z[j] / tc.trueT
			}
			pt, _, _ := randomProbsFromLogits(zt, tc.c)
			y := sampleLabels(rng, pt, tc.c)
			T, err := FitTemperature(Predictions{LogProbs: logp}, y, TemperatureOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if math.Abs(T/tc.trueT-1) > tc.tolRel {
				t.Fatalf("fitted T = %v, want ≈ %v", T, tc.trueT)
			}
			// The fit is a minimum: nudging T either way does not lower the NLL.
			f := func(T float64) float64 { return scaledNLL(logp, y, tc.c, 1/T) }
			if f(T*1.001) < f(T)-1e-12 || f(T/1.001) < f(T)-1e-12 {
				t.Fatalf("T=%v is not a local minimum: %v %v %v", T, f(T/1.001), f(T), f(T*1.001))
			}
		})
	}
}

// randomProbsFromLogits returns the softmax of given logits.
func randomProbsFromLogits(z []float64, c int) (p, logp, zz []float64) {
	logp = make([]float64, len(z))
	p = make([]float64, len(z))
	for i := 0; i < len(z); i += c {
		lse := logSumExp(z[i : i+c])
		for j := range c {
			logp[i+j] = z[i+j] - lse
			p[i+j] = math.Exp(logp[i+j])
		}
	}
	return p, logp, z
}

func TestBrent(t *testing.T) {
	tests := []struct {
		name string
		f    func(float64) float64
		a, b float64
		want float64
	}{
		{"quadratic", func(x float64) float64 { return (x - 0.3) * (x - 0.3) }, -4, 4, 0.3},
		{"asymmetric", func(x float64) float64 { return math.Exp(x) - 2*x }, -4, 4, math.Ln2},
		{"abs (non-smooth)", func(x float64) float64 { return math.Abs(x - 1.25) }, -4, 4, 1.25},
		{"minimum at lower edge", func(x float64) float64 { return x }, -2, 3, -2},
		{"minimum at upper edge", func(x float64) float64 { return -x }, -2, 3, 3},
		{"cosh", math.Cosh, -3, 5, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			x, _ := brent(tc.f, tc.a, tc.b, 1e-7, 500)
			if !near(x, tc.want, 1e-5) {
				t.Fatalf("argmin = %v, want %v", x, tc.want)
			}
		})
	}
}

func TestEvaluateKeysAndCalibration(t *testing.T) {
	rng := rand.New(rand.NewPCG(12, 13))
	n, c := 4000, 10
	_, logp, z := randomProbs(rng, n, c, 2)
	zt := make([]float64, len(z))
	for i := range z {
		zt[i] = z[i] / 2 // labels from a softer distribution: model overconfident
	}
	pt, _, _ := randomProbsFromLogits(zt, c)
	y := sampleLabels(rng, pt, c)
	_, oodLogp, _ := randomProbs(rng, 300, c, 0.5)

	r, err := Evaluate(Predictions{LogProbs: logp}, y, Options{OOD: &Predictions{LogProbs: oodLogp}, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"aac", "acc", "auroc", "auroc_ood", "brier", "cal_aac", "cal_brier", "cal_ece", "cal_nll", "ece", "nll", "temperature"}
	var keys []string
	for k := range r.Map() {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	if !slices.Equal(keys, want) {
		t.Fatalf("keys = %v, want %v", keys, want)
	}
	if len(r.Temperatures) != 2 || !near(r.Temperature, math.Sqrt(r.Temperatures[0]*r.Temperatures[1]), 1e-12) {
		t.Fatalf("temperatures %v, reported %v", r.Temperatures, r.Temperature)
	}
	if math.Abs(r.Temperature-2) > 0.25 {
		t.Errorf("temperature %v, want ≈ 2", r.Temperature)
	}
	if !(r.CalNLL < r.NLL && r.CalECE < r.ECE && r.CalBrier < r.Brier) {
		t.Errorf("calibration did not help an overconfident model: nll %v→%v ece %v→%v brier %v→%v", r.NLL, r.CalNLL, r.ECE, r.CalECE, r.Brier, r.CalBrier)
	}

	// Manual two-fold computation with the same permutation.
	perm := rand.New(rand.NewPCG(1, 0x6f70746c6162)).Perm(n)
	halves := [2][]int{perm[:n/2], perm[n/2:]}
	var nll float64
	for k := range 2 {
		fitLP, fitY := gather(logp, y, c, halves[k])
		T, err := FitTemperature(Predictions{LogProbs: fitLP}, fitY, TemperatureOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if T != r.Temperatures[k] {
			t.Fatalf("fold %d: T %v, report %v", k, T, r.Temperatures[k])
		}
		evalLP, evalY := gather(logp, y, c, halves[1-k])
		scaled, err := ApplyTemperature(evalLP, c, T)
		if err != nil {
			t.Fatal(err)
		}
		s := 0.0
		for i, yy := range evalY {
			s -= scaled[i*c+int(yy)]
		}
		nll += s / float64(len(evalY)) / 2
	}
	if !near(nll, r.CalNLL, 1e-12) {
		t.Fatalf("cal_nll %v, manual two-fold %v", r.CalNLL, nll)
	}

	// Determinism and seed dependence.
	r2, _ := Evaluate(Predictions{LogProbs: logp}, y, Options{OOD: &Predictions{LogProbs: oodLogp}, Seed: 1})
	r3, _ := Evaluate(Predictions{LogProbs: logp}, y, Options{Seed: 2})
	if r2.CalNLL != r.CalNLL || r3.CalNLL == r.CalNLL {
		t.Errorf("seeded cross-fit: same seed %v vs %v, other seed %v", r.CalNLL, r2.CalNLL, r3.CalNLL)
	}
	// Repeats average more folds.
	r5, _ := Evaluate(Predictions{LogProbs: logp}, y, Options{Seed: 1, Repeats: 5})
	if len(r5.Temperatures) != 10 {
		t.Errorf("5 repeats gave %d temperatures", len(r5.Temperatures))
	}

	// Without OOD there is no auroc_ood; CalNone drops temperature and cal_*.
	rn, _ := Evaluate(Predictions{LogProbs: logp}, y, Options{Calibration: CalNone})
	if len(rn.Map()) != 6 {
		t.Errorf("CalNone map = %v", rn.Map())
	}
	// Raw metrics agree between Probs and LogProbs inputs.
	pr, _, _ := randomProbsFromLogits(logp, c)
	rp, err := Evaluate(Predictions{Probs: pr}, y, Options{Calibration: CalNone})
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range rn.Map() {
		if !near(rp.Map()[k], v, 1e-12) {
			t.Errorf("%s: probs %v, logprobs %v", k, rp.Map()[k], v)
		}
	}
}

func TestEvaluateValidationCalibration(t *testing.T) {
	rng := rand.New(rand.NewPCG(14, 15))
	c := 10
	_, logp, _ := randomProbs(rng, 3000, c, 2)
	y := sampleLabels(rng, mustExp(logp), c)
	_, vlogp, _ := randomProbs(rng, 3000, c, 2)
	vy := sampleLabels(rng, mustExp(vlogp), c)
	r, err := Evaluate(Predictions{LogProbs: logp}, y, Options{Validation: &Predictions{LogProbs: vlogp}, ValidationLabels: vy})
	if err != nil {
		t.Fatal(err)
	}
	T, err := FitTemperature(Predictions{LogProbs: vlogp}, vy, TemperatureOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Temperatures) != 1 || r.Temperature != T {
		t.Fatalf("validation T %v, report %v", T, r.Temperatures)
	}
	if math.Abs(T-1) > 0.1 {
		t.Errorf("T = %v, want ≈ 1 for a calibrated model", T)
	}
	if _, err := Evaluate(Predictions{LogProbs: logp}, y, Options{Calibration: CalValidation}); err == nil {
		t.Fatal("CalValidation without a validation set accepted")
	}
}

func mustExp(logp []float64) []float64 {
	p := make([]float64, len(logp))
	for i, v := range logp {
		p[i] = math.Exp(v)
	}
	return p
}

func TestEvaluateErrors(t *testing.T) {
	good := []float64{0.7, 0.3, 0.4, 0.6}
	tests := []struct {
		name   string
		pred   Predictions
		labels []int32
		opts   Options
		want   string
	}{
		{"no labels", Predictions{Probs: good}, nil, Options{}, "no labels"},
		{"neither", Predictions{}, []int32{0, 1}, Options{}, "neither"},
		{"both", Predictions{Probs: good, LogProbs: good}, []int32{0, 1}, Options{}, "both"},
		{"ragged", Predictions{Probs: good[:3]}, []int32{0, 1}, Options{}, "not a multiple"},
		{"rows vs labels", Predictions{Probs: good, Classes: 2}, []int32{0, 1, 1}, Options{}, "2 rows"},
		{"classes mismatch", Predictions{Probs: good, Classes: 3}, []int32{0, 1}, Options{}, "not a multiple of 3"},
		{"negative classes", Predictions{Probs: good, Classes: -1}, []int32{0, 1}, Options{}, "class count"},
		{"label range", Predictions{Probs: good}, []int32{0, 2}, Options{}, "label 1 is 2"},
		{"negative label", Predictions{Probs: good}, []int32{-1, 0}, Options{}, "label 0 is -1"},
		{"row sum", Predictions{Probs: []float64{0.7, 0.4, 0.4, 0.6}}, []int32{0, 1}, Options{}, "sum to"},
		{"nan prob", Predictions{Probs: []float64{math.NaN(), 1, 0.4, 0.6}}, []int32{0, 1}, Options{}, "not in [0, 1]"},
		{"negative prob", Predictions{Probs: []float64{-0.1, 1.1, 0.4, 0.6}}, []int32{0, 1}, Options{}, "not in [0, 1]"},
		{"logits not logprobs", Predictions{LogProbs: []float64{-1, -2, -3, -1}}, []int32{0, 1}, Options{}, "logits"},
		{"positive logprob", Predictions{LogProbs: []float64{2, -2, -3, -1}}, []int32{0, 1}, Options{}, "not ≤ 0"},
		{"bad bins", Predictions{Probs: good}, []int32{0, 1}, Options{ECEBins: -1}, "bins"},
		{"bad bracket", Predictions{Probs: good}, []int32{0, 1}, Options{Temperature: TemperatureOptions{Lo: 2, Hi: 1}}, "bracket"},
		{"one sample cross-fit", Predictions{Probs: good[:2]}, []int32{0}, Options{}, "at least 2"},
		{"bad OOD", Predictions{Probs: good}, []int32{0, 1}, Options{OOD: &Predictions{Probs: []float64{0.5, 0.6}}}, "OOD set: row 0"},
		{"bad repeats", Predictions{Probs: good}, []int32{0, 1}, Options{Repeats: -1}, "repeats"},
		{"bad mode", Predictions{Probs: good}, []int32{0, 1}, Options{Calibration: 17}, "Calibration(17)"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Evaluate(tc.pred, tc.labels, tc.opts)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want containing %q", err, tc.want)
			}
		})
	}
	// The same validation guards the stand-alone functions.
	if _, _, err := Confidences(Predictions{Probs: good}, []int32{0, 5}); err == nil {
		t.Error("Confidences accepted a bad label")
	}
	if _, err := FitTemperature(Predictions{Probs: good[:3]}, []int32{0, 1}, TemperatureOptions{}); err == nil {
		t.Error("FitTemperature accepted a ragged matrix")
	}
	if _, err := ECE([]float64{0.5}, []bool{true, false}, 15); err == nil {
		t.Error("ECE accepted mismatched lengths")
	}
	if _, err := AAC([]float64{math.NaN()}, []bool{true}, 10); err == nil {
		t.Error("AAC accepted NaN confidence")
	}
	if _, err := AAC([]float64{0.5}, []bool{true}, 0); err == nil {
		t.Error("AAC accepted 0 steps")
	}
}

func TestTemperatureAtBracketEdge(t *testing.T) {
	// Every prediction right: the NLL keeps falling as T → 0, so the fit
	// stops at the lower bracket end and says so.
	p := []float64{0.505, 0.495, 0.496, 0.504, 0.503, 0.497, 0.498, 0.502}
	r, err := Evaluate(Predictions{Probs: p}, []int32{0, 1, 0, 1}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if r.Temperature > DefaultTempLo*1.001 {
		t.Fatalf("T = %v, want the lower bracket end %v", r.Temperature, DefaultTempLo)
	}
	if !slices.ContainsFunc(r.Notes, func(n string) bool { return strings.Contains(n, "edge of the bracket") }) {
		t.Fatalf("notes %q lack the bracket warning", r.Notes)
	}
}

func TestProbFloorInCalibration(t *testing.T) {
	// A zero probability on the label stays finite in both raw and
	// calibrated NLL.
	p := []float64{1, 0, 0, 1, 0.5, 0.5, 0.9, 0.1}
	y := []int32{1, 1, 0, 0}
	r, err := Evaluate(Predictions{Probs: p}, y, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if math.IsInf(r.NLL, 0) || math.IsNaN(r.NLL) || math.IsInf(r.CalNLL, 0) || math.IsNaN(r.CalNLL) {
		t.Fatalf("nll %v cal_nll %v", r.NLL, r.CalNLL)
	}
	if want := (-math.Log(ProbFloor) + 0 + math.Ln2 - math.Log(0.9)) / 4; !near(r.NLL, want, 1e-12) {
		t.Fatalf("nll %v, want %v", r.NLL, want)
	}
}

func BenchmarkEvaluate(b *testing.B) {
	rng := rand.New(rand.NewPCG(16, 17))
	n, c := 10000, 100
	p, _, _ := randomProbs(rng, n, c, 3)
	y := sampleLabels(rng, p, c)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if _, err := Evaluate(Predictions{Probs: p}, y, Options{}); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkEvaluateNoCalibration(b *testing.B) {
	rng := rand.New(rand.NewPCG(16, 17))
	n, c := 10000, 100
	p, _, _ := randomProbs(rng, n, c, 3)
	y := sampleLabels(rng, p, c)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if _, err := Evaluate(Predictions{Probs: p}, y, Options{Calibration: CalNone}); err != nil {
			b.Fatal(err)
		}
	}
}
