package optimtest

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"

	"github.com/optlab/optlab/sdk/optim"
)

// Problem is a differentiable toy loss that a Host evaluates for every
// member. All members of a Host share one Problem (and so one layout).
type Problem interface {
	// Name is reported as the members' Arch.
	Name() string
	// Tensors describes the flat parameter vector (offsets contiguous).
	Tensors() []optim.Tensor
	// Numel is the length of the parameter vector.
	Numel() int
	// Samples is the number of training samples; 0 for a loss that uses no
	// data, whose Loss ignores the samples it is given.
	Samples() int
	// Init writes the initial parameters for the given seed into theta.
	Init(seed uint64, theta []float64)
	// Loss returns the mean loss and the accuracy over the given training
	// samples at theta and, when grad is non-nil, overwrites grad with the
	// gradient of the mean loss. Losses without a notion of accuracy return
	// NaN for it.
	Loss(theta []float64, samples []int, grad []float64) (loss, acc float64)
}

// Classifier is a Problem with a held-out test set, which Host.Evaluate
// uses to score predictive distributions.
type Classifier interface {
	Problem
	// Classes is the number of classes.
	Classes() int
	// TestLabels returns the labels of the test samples.
	TestLabels() []int
	// TestProbs writes the class probabilities of every test sample at theta
	// into p (len(TestLabels()) rows of Classes() columns).
	TestProbs(theta []float64, p [][]float64)
}

// SampleClassifier is a Classifier whose training loss is the mean
// cross-entropy of per-sample softmax probabilities, exposed one training
// sample at a time so that the JointGrad op can average the probabilities
// of several members and backpropagate a loss of the average. MLP
// implements it.
type SampleClassifier interface {
	Classifier
	// TrainLabel returns the label of training sample s.
	TrainLabel(s int) int
	// TrainProbs writes the class probabilities of training sample s at
	// theta into p (Classes() values).
	TrainProbs(theta []float64, s int, p []float64)
	// BackpropLogits adds to grad the vector-Jacobian product dzᵀ·∂z/∂θ of
	// the logits z of training sample s at theta.
	BackpropLogits(theta []float64, s int, dz, grad []float64)
}

// Quadratic is L(θ) = ½θᵀAθ − bᵀθ, independent of the batch. The gradient is
// ½(A+Aᵀ)θ − b, which is Aθ − b bitwise when A is symmetric.
type Quadratic struct {
	A  [][]float64
	B  []float64 // nil means 0
	X0 []float64 // initial point; nil means 0
}

// DiagQuadratic returns the quadratic with A = diag(d), b = 0.
func DiagQuadratic(d ...float64) *Quadratic {
	a := make([][]float64, len(d))
	for i := range d {
		a[i] = make([]float64, len(d))
		a[i][i] = d[i]
	}
	return &Quadratic{A: a}
}

// Name implements Problem.
func (q *Quadratic) Name() string { return "quadratic" }

// Numel implements Problem.
func (q *Quadratic) Numel() int { return len(q.A) }

// Samples implements Problem.
func (q *Quadratic) Samples() int { return 0 }

// Tensors implements Problem.
func (q *Quadratic) Tensors() []optim.Tensor {
	return []optim.Tensor{{Name: "theta", Shape: []int64{int64(len(q.A))}, Kind: "weight"}}
}

// Init implements Problem.
func (q *Quadratic) Init(_ uint64, theta []float64) { initFrom(q.X0, theta) }

// Loss implements Problem.
func (q *Quadratic) Loss(theta []float64, _ []int, grad []float64) (float64, float64) {
	n := len(q.A)
	var loss float64
	for i := range n {
		var ai, sym float64
		for j := range n {
			ai += q.A[i][j] * theta[j]
			sym += 0.5 * (q.A[i][j] + q.A[j][i]) * theta[j]
		}
		var b float64
		if q.B != nil {
			b = q.B[i]
		}
		loss += 0.5*theta[i]*ai - b*theta[i]
		if grad != nil {
			grad[i] = sym - b
		}
	}
	return loss, math.NaN()
}

// Linear is L(θ) = cᵀθ, whose gradient is c everywhere.
type Linear struct {
	C  []float64
	X0 []float64 // initial point; nil means 0
}

// Name implements Problem.
func (l *Linear) Name() string { return "linear" }

// Numel implements Problem.
func (l *Linear) Numel() int { return len(l.C) }

// Samples implements Problem.
func (l *Linear) Samples() int { return 0 }

// Tensors implements Problem.
func (l *Linear) Tensors() []optim.Tensor {
	return []optim.Tensor{{Name: "theta", Shape: []int64{int64(len(l.C))}, Kind: "weight"}}
}

// Init implements Problem.
func (l *Linear) Init(_ uint64, theta []float64) { initFrom(l.X0, theta) }

// Loss implements Problem.
func (l *Linear) Loss(theta []float64, _ []int, grad []float64) (float64, float64) {
	var loss float64
	for i, c := range l.C {
		loss += c * theta[i]
	}
	if grad != nil {
		copy(grad, l.C)
	}
	return loss, math.NaN()
}

func initFrom(x0, theta []float64) {
	if x0 == nil {
		clear(theta)
		return
	}
	copy(theta, x0)
}

// MLPConfig configures NewMLP. Zero fields take the defaults in brackets.
type MLPConfig struct {
	Inputs      int     // input features [4]
	Hidden      int     // tanh hidden units; 0 gives softmax regression
	Classes     int     // classes [3]
	Samples     int     // training samples [96]
	TestSamples int     // test samples [96]
	Separation  float64 // scale of the class means [1.5]
	Seed        int64   // data seed
}

// MLP is a one-hidden-layer tanh network (or softmax regression when
// Hidden = 0) with mean cross-entropy loss on a seeded synthetic Gaussian
// mixture: class c's inputs are N(μ_c, I) with μ_c ~ N(0, Separation²·I).
// Its gradients are hand-written backprop.
type MLP struct {
	cfg                   MLPConfig
	x, testX              [][]float64
	y, testY              []int
	w1, b1, w2, b2, numel int // offsets and size
}

var _ SampleClassifier = (*MLP)(nil)

// NewMLP generates the dataset and returns the problem.
func NewMLP(cfg MLPConfig) *MLP {
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&cfg.Inputs, 4)
	def(&cfg.Classes, 3)
	def(&cfg.Samples, 96)
	def(&cfg.TestSamples, 96)
	if cfg.Hidden < 0 {
		cfg.Hidden = 0
	}
	if cfg.Separation <= 0 {
		cfg.Separation = 1.5
	}
	rng := rand.New(rand.NewPCG(uint64(cfg.Seed), 0x5eed))
	mu := make([][]float64, cfg.Classes)
	for c := range mu {
		mu[c] = make([]float64, cfg.Inputs)
		for i := range mu[c] {
			mu[c][i] = cfg.Separation * rng.NormFloat64()
		}
	}
	gen := func(n int) ([][]float64, []int) {
		x, y := make([][]float64, n), make([]int, n)
		for k := range n {
			y[k] = k % cfg.Classes
			x[k] = make([]float64, cfg.Inputs)
			for i := range x[k] {
				x[k][i] = mu[y[k]][i] + rng.NormFloat64()
			}
		}
		return x, y
	}
	m := &MLP{cfg: cfg}
	m.x, m.y = gen(cfg.Samples)
	m.testX, m.testY = gen(cfg.TestSamples)
	d, h, c := cfg.Inputs, cfg.Hidden, cfg.Classes
	if h == 0 {
		m.w2, m.b2, m.numel = 0, c*d, c*d+c
	} else {
		m.w1, m.b1, m.w2, m.b2, m.numel = 0, h*d, h*d+h, h*d+h+c*h, h*d+h+c*h+c
	}
	return m
}

// Name implements Problem.
func (m *MLP) Name() string {
	if m.cfg.Hidden == 0 {
		return fmt.Sprintf("softmax-%dx%d", m.cfg.Inputs, m.cfg.Classes)
	}
	return fmt.Sprintf("mlp-%dx%dx%d", m.cfg.Inputs, m.cfg.Hidden, m.cfg.Classes)
}

// Numel implements Problem.
func (m *MLP) Numel() int { return m.numel }

// Samples implements Problem.
func (m *MLP) Samples() int { return len(m.x) }

// Classes implements Classifier.
func (m *MLP) Classes() int { return m.cfg.Classes }

// TestLabels implements Classifier.
func (m *MLP) TestLabels() []int { return m.testY }

// Tensors implements Problem.
func (m *MLP) Tensors() []optim.Tensor {
	d, h, c := int64(m.cfg.Inputs), int64(m.cfg.Hidden), int64(m.cfg.Classes)
	if h == 0 {
		return []optim.Tensor{
			{Name: "fc.weight", Shape: []int64{c, d}, Offset: 0, Kind: "weight"},
			{Name: "fc.bias", Shape: []int64{c}, Offset: int64(m.b2), Kind: "bias"},
		}
	}
	return []optim.Tensor{
		{Name: "fc1.weight", Shape: []int64{h, d}, Offset: 0, Kind: "weight"},
		{Name: "fc1.bias", Shape: []int64{h}, Offset: int64(m.b1), Kind: "bias"},
		{Name: "fc2.weight", Shape: []int64{c, h}, Offset: int64(m.w2), Kind: "weight"},
		{Name: "fc2.bias", Shape: []int64{c}, Offset: int64(m.b2), Kind: "bias"},
	}
}

// Init implements Problem: weights N(0, 1/fan_in), biases 0.
func (m *MLP) Init(seed uint64, theta []float64) {
	rng := rand.New(rand.NewPCG(seed, 0x1417))
	clear(theta)
	d, h, c := m.cfg.Inputs, m.cfg.Hidden, m.cfg.Classes
	if h == 0 {
		h = d
	} else {
		for i := range h * d {
			theta[m.w1+i] = rng.NormFloat64() / math.Sqrt(float64(d))
		}
	}
	for i := range c * h {
		theta[m.w2+i] = rng.NormFloat64() / math.Sqrt(float64(h))
	}
}

// forward computes the hidden activations (into hid) and the softmax
// probabilities (into p) of input x.
func (m *MLP) forward(theta, x, hid, p []float64) {
	d, h, c := m.cfg.Inputs, m.cfg.Hidden, m.cfg.Classes
	in := x
	if h > 0 {
		for j := range h {
			a := theta[m.b1+j]
			for i := range d {
				a += theta[m.w1+j*d+i] * x[i]
			}
			hid[j] = math.Tanh(a)
		}
		in = hid
	}
	k := len(in)
	zmax := math.Inf(-1)
	for o := range c {
		z := theta[m.b2+o]
		for j := range k {
			z += theta[m.w2+o*k+j] * in[j]
		}
		p[o] = z
		zmax = max(zmax, z)
	}
	var sum float64
	for o := range c {
		p[o] = math.Exp(p[o] - zmax)
		sum += p[o]
	}
	for o := range c {
		p[o] /= sum
	}
}

func argmax(p []float64) int {
	best := 0
	for i, v := range p {
		if v > p[best] {
			best = i
		}
	}
	return best
}

// Loss implements Problem: mean cross-entropy and accuracy over samples.
func (m *MLP) Loss(theta []float64, samples []int, grad []float64) (float64, float64) {
	h, c := m.cfg.Hidden, m.cfg.Classes
	hid, p, dz, dh := make([]float64, h), make([]float64, c), make([]float64, c), make([]float64, h)
	if grad != nil {
		clear(grad)
	}
	var loss float64
	var correct int
	inv := 1 / float64(len(samples))
	for _, s := range samples {
		x, y := m.x[s], m.y[s]
		m.forward(theta, x, hid, p)
		loss -= math.Log(p[y])
		if argmax(p) == y {
			correct++
		}
		if grad == nil {
			continue
		}
		for o := range c {
			dz[o] = p[o] * inv
			if o == y {
				dz[o] -= inv
			}
		}
		m.backprop(theta, x, hid, dz, dh, grad)
	}
	return loss * inv, float64(correct) * inv
}

// backprop adds to grad dzᵀ·∂z/∂θ for the logits z of input x, whose hidden
// activations forward left in hid; dh is scratch of Hidden values.
func (m *MLP) backprop(theta, x, hid, dz, dh, grad []float64) {
	d, h, c := m.cfg.Inputs, m.cfg.Hidden, m.cfg.Classes
	in := x
	if h > 0 {
		in = hid
	}
	k := len(in)
	clear(dh)
	for o := range c {
		grad[m.b2+o] += dz[o]
		for j := range k {
			grad[m.w2+o*k+j] += dz[o] * in[j]
			if h > 0 {
				dh[j] += dz[o] * theta[m.w2+o*k+j]
			}
		}
	}
	for j := range h {
		da := dh[j] * (1 - hid[j]*hid[j])
		grad[m.b1+j] += da
		for i := range d {
			grad[m.w1+j*d+i] += da * x[i]
		}
	}
}

// TrainSet returns copies of the training inputs and labels, for reference
// implementations that replay a run on the same data (GradRecord.Samples
// index them).
func (m *MLP) TrainSet() ([][]float64, []int) {
	x := make([][]float64, len(m.x))
	for i := range m.x {
		x[i] = slices.Clone(m.x[i])
	}
	return x, slices.Clone(m.y)
}

// TrainLabel implements SampleClassifier.
func (m *MLP) TrainLabel(s int) int { return m.y[s] }

// TrainProbs implements SampleClassifier.
func (m *MLP) TrainProbs(theta []float64, s int, p []float64) {
	m.forward(theta, m.x[s], make([]float64, m.cfg.Hidden), p)
}

// BackpropLogits implements SampleClassifier.
func (m *MLP) BackpropLogits(theta []float64, s int, dz, grad []float64) {
	hid := make([]float64, m.cfg.Hidden)
	m.forward(theta, m.x[s], hid, make([]float64, m.cfg.Classes))
	m.backprop(theta, m.x[s], hid, dz, make([]float64, m.cfg.Hidden), grad)
}

// TestProbs implements Classifier.
func (m *MLP) TestProbs(theta []float64, p [][]float64) {
	hid := make([]float64, m.cfg.Hidden)
	for i, x := range m.testX {
		m.forward(theta, x, hid, p[i])
	}
}
