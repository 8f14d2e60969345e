package optimtest_test

import (
	"context"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/optlab/optlab/sdk/optim"
	"github.com/optlab/optlab/sdk/optimtest"
)

// Handles used by the variational tests.
const (
	gMu  optim.Vec = 1
	gRho optim.Vec = 2
	eps  optim.Vec = 3
)

// varProg allocates the three test vectors and fills eps with N(0, 1).
func varProg(seed int64) *optim.Program {
	return optim.Prog().Alloc(gMu, 0).Alloc(gRho, 0).Alloc(eps, 0).RandN(eps, 1, seed)
}

// varGrad appends a variational pass at at: gradients into out and outRho,
// noise from e.
func varGrad(p *optim.Program, out, outRho, at, e optim.Vec, bn optim.BNMode) optim.Eval {
	return p.GradOp(optim.Grad{Out: out, OutRho: outRho, At: at, Eps: e, BN: bn})
}

// ref §8 item 28.
func TestSoftplus(t *testing.T) {
	for _, tt := range []struct{ rho, sigma float64 }{{-5, 0.0067153}, {-3, 0.0485874}} {
		if got := optimtest.Softplus(tt.rho); math.Abs(got-tt.sigma) > 5e-8 {
			t.Errorf("softplus(%g) = %.8f, want %.7f", tt.rho, got, tt.sigma)
		}
	}
	for _, rho := range []float64{-30, -5, -3, -0.5, 0, 0.5, 3, 30, 200} {
		got := optimtest.InvSoftplus(optimtest.Softplus(rho))
		if math.Abs(got-rho) > 1e-12*max(1, math.Abs(rho)) {
			t.Errorf("InvSoftplus(Softplus(%g)) = %.17g", rho, got)
		}
	}
	for _, sigma := range []float64{1e-13, 0.0067153, 0.1, 0.2, 1, 50, 800} {
		got := optimtest.Softplus(optimtest.InvSoftplus(sigma))
		if math.Abs(got-sigma) > 1e-12*sigma {
			t.Errorf("Softplus(InvSoftplus(%g)) = %.17g", sigma, got)
		}
	}
	// The host's Softplus op on the ρ handle gives σ.
	h := optimtest.MustHost(t, &optimtest.Linear{C: make([]float64, 2)}, optimtest.WithVariational(0, []float64{-5, -3}, 0.1, 0, ""))
	exec(t, h, optim.Prog().Alloc(1, 0).Unary(1, optim.RhoOf(0), optim.Softplus))
	if s := vec(t, h, 1); math.Abs(s[0]-0.0067153) > 5e-8 || math.Abs(s[1]-0.0485874) > 5e-8 {
		t.Errorf("softplus of the ρ handle: %v", s)
	}
}

// ref §8 items 29–30: the KL term on the fake host's loss. With L = 0·W,
// N = 1 and β = 1 the pass's loss is the summed KL.
func TestKL(t *testing.T) {
	rho02, rho01 := optimtest.InvSoftplus(0.2), optimtest.InvSoftplus(0.1)
	tests := []struct {
		name      string
		n         int
		rho, beta float64
		trainSize int64
		kl        string
		want      float64 // loss
	}{
		{"qp σ=0.2", 1, rho02, 1, 1, "qp", 0.806853},
		{"default direction is qp", 1, rho02, 1, 1, "", 0.806853},
		{"pq σ=0.2", 1, rho02, 1, 1, "pq", 0.318147},
		{"qp σ=0.1", 1, rho01, 1, 1, "qp", 0},
		{"pq σ=0.1", 1, rho01, 1, 1, "pq", 0},
		{"qp sum over 3", 3, rho02, 1, 1, "qp", 3 * 0.806853},
		{"qp sum over 10", 10, rho02, 1, 1, "qp", 10 * 0.806853},
		{"pq sum over 10", 10, rho02, 1, 1, "pq", 10 * 0.318147},
		{"β/N", 10, rho02, 0.5, 4, "qp", 0.5 * 10 * 0.806853 / 4},
		{"β = 0", 10, rho02, 0, 4, "qp", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := optimtest.MustHost(t, &optimtest.Linear{C: make([]float64, tt.n)}, optimtest.WithTrainSize(tt.trainSize),
				optimtest.WithVariational(0, []float64{tt.rho}, 0.1, tt.beta, tt.kl))
			p := varProg(7)
			ev := varGrad(p, gMu, gRho, optim.Params, eps, optim.BNUpdate)
			r := exec(t, h, p)
			if math.Abs(r.Get(ev.Loss)-tt.want) > 5e-6*float64(tt.n) {
				t.Errorf("loss %.7f, want %.7f", r.Get(ev.Loss), tt.want)
			}
			rec := h.Grads()[0]
			wantKL := tt.want * float64(tt.trainSize) / tt.beta
			if tt.beta == 0 {
				wantKL = float64(tt.n) * 0.806853
			}
			if math.Abs(rec.KL-wantKL) > 5e-6*float64(tt.n) {
				t.Errorf("recorded KL %.7f, want %.7f", rec.KL, wantKL)
			}
		})
	}
}

// A problem whose tensor "norm" has Kind "bn": those elements stay
// deterministic in a variational member.
type bnLinear struct{ optimtest.Linear }

func (b *bnLinear) Tensors() []optim.Tensor {
	n := int64(len(b.C))
	return []optim.Tensor{
		{Name: "w", Shape: []int64{n - 2}, Kind: "weight"},
		{Name: "norm.weight", Shape: []int64{2}, Offset: n - 2, Kind: "bn"},
	}
}

// The gradients with respect to μ and ρ match central finite differences
// of the loss with κ held fixed (same Eps), for both KL directions, on the
// MLP and on a loss with deterministic BatchNorm elements.
func TestVariationalGradFiniteDifference(t *testing.T) {
	mlp := func() optimtest.Problem {
		return optimtest.NewMLP(optimtest.MLPConfig{Hidden: 4, Samples: 24, Seed: 5})
	}
	tests := []struct {
		name string
		prob func() optimtest.Problem
		kl   string
		rho  float64
	}{
		{"mlp qp", mlp, "qp", -2},
		{"mlp pq", mlp, "pq", -2},
		{"mlp qp small σ", mlp, "qp", -5},
		{"bn elements pq", func() optimtest.Problem {
			return &bnLinear{optimtest.Linear{C: []float64{1, -2, 0.5, 3, -1}, X0: []float64{0.3, -0.1, 0.2, 1, 0.5}}}
		}, "pq", -1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := tt.prob()
			rho0 := make([]float64, p.Numel())
			for i := range rho0 {
				rho0[i] = tt.rho + 0.3*math.Sin(float64(i))
			}
			// β/N large enough for the KL to matter.
			h := optimtest.MustHost(t, p, optimtest.WithTrainSize(20), optimtest.WithBatchSize(8),
				optimtest.WithVariational(0, rho0, 0.3, 2, tt.kl))
			pass := func() float64 {
				p := optim.Prog()
				ev := varGrad(p, gMu, gRho, optim.Params, eps, optim.BNFreeze)
				return exec(t, h, p).Get(ev.Loss)
			}
			exec(t, h, varProg(11))
			pass()
			gmu, grho := vec(t, h, gMu), vec(t, h, gRho)
			mu, rho := h.Params(0), h.Rho(0)
			const d = 1e-6
			fd := func(v optim.Vec, x []float64, i int) float64 {
				x = slices.Clone(x)
				x0 := x[i]
				x[i] = x0 + d
				if err := h.SetVec(v, x); err != nil {
					t.Fatal(err)
				}
				lp := pass()
				x[i] = x0 - d
				if err := h.SetVec(v, x); err != nil {
					t.Fatal(err)
				}
				lm := pass()
				x[i] = x0
				if err := h.SetVec(v, x); err != nil {
					t.Fatal(err)
				}
				return (lp - lm) / (2 * d)
			}
			for i := range mu {
				if f := fd(optim.Params, mu, i); math.Abs(f-gmu[i]) > 1e-6*max(1, math.Abs(f)) {
					t.Errorf("∂/∂μ[%d]: %.10g, finite difference %.10g", i, gmu[i], f)
				}
				if f := fd(optim.RhoOf(0), rho, i); math.Abs(f-grho[i]) > 1e-6*max(1, math.Abs(f)) {
					t.Errorf("∂/∂ρ[%d]: %.10g, finite difference %.10g", i, grho[i], f)
				}
			}
			if _, ok := p.(*bnLinear); ok {
				rec := h.Grads()[0]
				n := len(mu)
				if grho[n-1] != 0 || grho[n-2] != 0 || rec.Weights[n-1] != mu[n-1] || rec.Weights[0] == mu[0] {
					t.Errorf("bn elements: gρ %v, W %v, μ %v", grho, rec.Weights, mu)
				}
			}
		})
	}
}

// Passes that share Eps see the same weights (identical loss); Eps = 0
// draws fresh noise per pass from the seeded host stream.
func TestEpsReuse(t *testing.T) {
	p := optimtest.NewMLP(optimtest.MLPConfig{Hidden: 4, Samples: 32, Seed: 1})
	newH := func() *optimtest.Host {
		return optimtest.MustHost(t, p, optimtest.WithSeed(3), optimtest.WithVariational(0, []float64{-1}, 0.1, 1, "qp"))
	}
	h := newH()
	prog := varProg(5)
	ev := []optim.Eval{
		varGrad(prog, gMu, gRho, optim.Params, eps, optim.BNUpdate),
		varGrad(prog, gMu, gRho, optim.Params, eps, optim.BNFreeze),
		varGrad(prog, gMu, 0, optim.Params, 0, optim.BNUpdate),
		varGrad(prog, gMu, 0, optim.Params, 0, optim.BNUpdate),
	}
	r := exec(t, h, prog)
	g := h.Grads()
	kappa := vec(t, h, eps)
	if r.Get(ev[0].Loss) != r.Get(ev[1].Loss) || !slices.Equal(g[0].Weights, g[1].Weights) || !slices.Equal(g[0].GradRho, g[1].GradRho) ||
		!slices.Equal(g[0].Eps, kappa) {
		t.Errorf("same Eps: losses %v, %v; weights differ: %v", r.Get(ev[0].Loss), r.Get(ev[1].Loss), !slices.Equal(g[0].Weights, g[1].Weights))
	}
	if r.Get(ev[2].Loss) == r.Get(ev[3].Loss) || slices.Equal(g[2].Eps, g[3].Eps) || slices.Equal(g[2].Eps, kappa) {
		t.Error("Eps = 0 did not draw fresh noise per pass")
	}
	for i, w := range g[0].Weights {
		if want := g[0].At[i] + optimtest.Softplus(-1)*kappa[i]; w != want {
			t.Fatalf("W[%d] = %v, want μ + σκ = %v", i, w, want)
		}
	}
	// The fresh draws come from the seeded host stream: reproducible.
	h2 := newH()
	prog = varProg(5)
	varGrad(prog, gMu, gRho, optim.Params, eps, optim.BNUpdate)
	varGrad(prog, gMu, gRho, optim.Params, eps, optim.BNFreeze)
	varGrad(prog, gMu, 0, optim.Params, 0, optim.BNUpdate)
	exec(t, h2, prog)
	if !slices.Equal(h2.Grads()[2].Eps, g[2].Eps) {
		t.Error("fresh draws are not reproducible under the same host seed")
	}
}

// With σ → 0 (ρ = −30) and β = 0 a variational pass equals the
// deterministic one within 1e-12, and the ρ-gradient vanishes.
func TestSmallSigmaIsDeterministic(t *testing.T) {
	p := optimtest.NewMLP(optimtest.MLPConfig{Hidden: 5, Samples: 32, Seed: 2})
	hv := optimtest.MustHost(t, p, optimtest.WithVariational(0, []float64{-30}, 0.1, 0, "qp"))
	hd := optimtest.MustHost(t, p)
	pv, pd := varProg(9), optim.Prog().Alloc(gMu, 0)
	evv, evd := varGrad(pv, gMu, gRho, optim.Params, eps, optim.BNUpdate), pd.Grad(gMu, optim.Params, optim.Batch{}, optim.BNUpdate)
	rv, rd := exec(t, hv, pv), exec(t, hd, pd)
	if math.Abs(rv.Get(evv.Loss)-rd.Get(evd.Loss)) > 1e-12 || rv.Get(evv.Acc) != rd.Get(evd.Acc) {
		t.Errorf("loss %v, acc %v; deterministic %v, %v", rv.Get(evv.Loss), rv.Get(evv.Acc), rd.Get(evd.Loss), rd.Get(evd.Acc))
	}
	gv, gd := vec(t, hv, gMu), vec(t, hd, gMu)
	for i := range gv {
		if math.Abs(gv[i]-gd[i]) > 1e-12 {
			t.Fatalf("∂/∂μ[%d] = %v, deterministic %v", i, gv[i], gd[i])
		}
	}
	for i, g := range vec(t, hv, gRho) {
		if math.Abs(g) > 1e-12 {
			t.Fatalf("∂/∂ρ[%d] = %v", i, g)
		}
	}
}

// BaseStep on RhoOf(m) updates ρ with its own state and no weight decay;
// μ's state is not disturbed; SetLR applies to both.
func TestRhoBaseStep(t *testing.T) {
	bases := []optimtest.BaseOptimizer{
		{Momentum: 0.9, WeightDecay: 0.1, Nesterov: true},
		{Adam: true, WeightDecay: 0.1},
	}
	c, rho0 := []float64{1, -2, 3}, []float64{-1, -2, -3}
	gr := []float64{0.5, -0.25, 2}
	for _, b := range bases {
		// ρ's updates on a variational host equal μ's updates on a
		// deterministic host whose parameters start at ρ with weight
		// decay 0 and gradient gr.
		hv := optimtest.MustHost(t, &optimtest.Linear{C: c}, optimtest.WithBase(b), optimtest.WithVariational(0, rho0, 0.1, 0, ""))
		bNoWD := b
		bNoWD.WeightDecay = 0
		hr := optimtest.MustHost(t, &optimtest.Linear{C: c, X0: rho0}, optimtest.WithBase(bNoWD))
		hd := optimtest.MustHost(t, &optimtest.Linear{C: c}, optimtest.WithBase(b))
		for _, h := range []*optimtest.Host{hv, hr, hd} {
			exec(t, h, optim.Prog().Alloc(gMu, 0).Alloc(gRho, 0))
			if err := h.SetVec(gRho, gr); err != nil {
				t.Fatal(err)
			}
		}
		for s := range int64(3) {
			for _, h := range []*optimtest.Host{hv, hr, hd} {
				h.BeginStep(optim.StepInput{Step: s, LR: 0.1})
			}
			pv := optim.Prog().SetLR(0, 0.05)
			pv.Grad(gMu, optim.Params, optim.Batch{}, optim.BNUpdate)
			exec(t, hv, pv.BaseStep(optim.Params, gMu).BaseStep(optim.RhoOf(0), gRho))
			exec(t, hr, optim.Prog().SetLR(0, 0.05).BaseStep(optim.Params, gRho))
			pd := optim.Prog().SetLR(0, 0.05)
			pd.Grad(gMu, optim.Params, optim.Batch{}, optim.BNUpdate)
			exec(t, hd, pd.BaseStep(optim.Params, gMu))
		}
		if got, want := hv.Rho(0), hr.Params(0); !slices.Equal(got, want) {
			t.Errorf("%+v: ρ = %v, want %v", b, got, want)
		}
		if got, want := hv.Params(0), hd.Params(0); !slices.Equal(got, want) {
			t.Errorf("%+v: μ = %v, want %v (ρ's steps disturbed μ's state)", b, got, want)
		}
		if st := hv.Stats(0); st.BaseSteps != 3 || st.RhoSteps != 3 {
			t.Errorf("stats %+v", st)
		}
	}
}

func TestVariationalLayoutAndHandles(t *testing.T) {
	h := optimtest.MustHost(t, &optimtest.Linear{C: []float64{1, 2}}, optimtest.WithMembers(3),
		optimtest.WithVariational(1, nil, 0.1, 0, ""), optimtest.WithVariational(2, []float64{-3, -4}, 0.1, 0, "pq"))
	l, err := h.Layout(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if l.Members[0].Variational || !l.Members[1].Variational || !l.Members[2].Variational {
		t.Errorf("layout %+v", l.Members)
	}
	if h.Rho(0) != nil || !slices.Equal(h.Rho(1), []float64{-5, -5}) || !slices.Equal(h.Rho(2), []float64{-3, -4}) {
		t.Errorf("ρ: %v, %v, %v", h.Rho(0), h.Rho(1), h.Rho(2))
	}
	// ρ handles work in the vector ops, both ways.
	exec(t, h, optim.Prog().Alloc(1, 0).Copy(1, optim.RhoOf(2)).AddConst(1, optim.K(1)).Copy(optim.RhoOf(1), 1))
	if got := vec(t, h, optim.RhoOf(1)); !slices.Equal(got, []float64{-2, -3}) {
		t.Errorf("ρ of member 1 = %v", got)
	}
}

// TestVariationalOptionErrors checks WithVariational's validation (the
// errors of variational ops are in the conformance suite).
func TestVariationalOptionErrors(t *testing.T) {
	lin := func() optimtest.Problem { return &optimtest.Linear{C: []float64{1, 2}} }
	opts := []struct {
		name string
		opt  optimtest.HostOption
		want string
	}{
		{"member out of range", optimtest.WithVariational(2, nil, 0.1, 0, ""), "with 2 members"},
		{"kl", optimtest.WithVariational(0, nil, 0.1, 0, "kl"), `kl "kl"`},
		{"prior sigma", optimtest.WithVariational(0, nil, 0, 0, ""), "prior sigma"},
		{"beta", optimtest.WithVariational(0, nil, 0.1, -1, ""), "beta -1"},
		{"rho0 length", optimtest.WithVariational(0, []float64{1, 2, 3}, 0.1, 0, ""), "3 values of ρ"},
		{"rho0 NaN", optimtest.WithVariational(0, []float64{math.NaN()}, 0.1, 0, ""), "ρ[0]"},
		{"beta without N", optimtest.WithVariational(0, nil, 0.1, 1, ""), "WithTrainSize"},
	}
	for _, tt := range opts {
		t.Run(tt.name, func(t *testing.T) {
			_, err := optimtest.NewHost(lin(), optimtest.WithMembers(2), tt.opt)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %v, want one containing %q", err, tt.want)
			}
		})
	}
}

// threshold is a 2-class problem with one parameter and one test sample of
// label 0 whose logits are [10·1{W > 0}, 0]; it records the weights
// TestProbs is called with.
type threshold struct {
	optimtest.Linear
	seen [][]float64
}

func (p *threshold) Classes() int      { return 2 }
func (p *threshold) TestLabels() []int { return []int{0} }
func (p *threshold) TestProbs(theta []float64, probs [][]float64) {
	p.seen = append(p.seen, slices.Clone(theta))
	z := 0.0
	if theta[0] > 0 {
		z = 10
	}
	probs[0][0] = 1 / (1 + math.Exp(-z))
	probs[0][1] = 1 - probs[0][0]
}

// ref §8 item 31: the Samples predictive with Std = 0 averages the
// probabilities of N weight draws, not their logits. With μ = 0 about half
// the draws give logits [0, 0] and half [10, 0]: the probability average
// is ≈ [0.75, 0.25] (NLL ≈ 0.288), the logit average would be
// softmax([5, 0]) ≈ [0.9933, 0.0067] (NLL ≈ 0.0067).
func TestVariationalSamplesPredictive(t *testing.T) {
	ctx := context.Background()
	const n = 2000
	p := &threshold{Linear: optimtest.Linear{C: []float64{1}}}
	h := optimtest.MustHost(t, p, optimtest.WithVariational(0, []float64{optimtest.InvSoftplus(1)}, 0.1, 0, ""))
	e, err := h.Evaluate(ctx, optim.Predictive{Kind: optim.Samples, Mean: optim.Params, N: n})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.seen) != n {
		t.Fatalf("%d weight samples, want %d", len(p.seen), n)
	}
	var above, mean, sq float64
	for _, w := range p.seen {
		if w[0] > 0 {
			above++
		}
		mean += w[0] / n
		sq += w[0] * w[0] / n
	}
	f := above / n
	s0 := 1 / (1 + math.Exp(-10))
	probAvg := (1-f)*0.5 + f*s0
	logitAvg := 1 / (1 + math.Exp(-10*f))
	if math.Abs(e.NLL+math.Log(probAvg)) > 1e-12 {
		t.Errorf("NLL %v, want −log of the probability average %v", e.NLL, -math.Log(probAvg))
	}
	if math.Abs(probAvg-0.75) > 0.02 || math.Abs(logitAvg-0.9933) > 0.01 || math.Abs(e.NLL+math.Log(logitAvg)) < 0.2 {
		t.Errorf("probability average %v (want ≈ 0.75), logit average %v (want ≈ 0.9933), NLL %v", probAvg, logitAvg, e.NLL)
	}
	// The draws are μ + σξ with σ = 1: mean ≈ 0, variance ≈ 1 (5 s.d.).
	if math.Abs(mean) > 5/math.Sqrt(n) || math.Abs(sq-1) > 5*math.Sqrt(2.0/n) {
		t.Errorf("draws: mean %v, second moment %v", mean, sq)
	}
	// Errors: Std = 0 needs a variational member's means.
	hd := optimtest.MustHost(t, &threshold{Linear: optimtest.Linear{C: []float64{1}}})
	for _, tt := range []struct {
		h    *optimtest.Host
		pred optim.Predictive
		want string
	}{
		{hd, optim.Predictive{Kind: optim.Samples, N: 3}, "not variational"},
		{h, optim.Predictive{Kind: optim.Samples, Mean: optim.RhoOf(0), N: 3}, "ρ handle"},
		{h, optim.Predictive{Kind: optim.Samples, N: 0}, "N < 1"},
		{h, optim.Predictive{Kind: optim.Members, Vecs: []optim.Vec{optim.RhoOf(0)}}, "ρ handle"},
	} {
		if _, err := tt.h.Evaluate(ctx, tt.pred); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%+v: err = %v, want one containing %q", tt.pred, err, tt.want)
		}
	}
}
