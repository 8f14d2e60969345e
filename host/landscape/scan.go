package landscape

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
)

// Metrics are a model's mean loss and accuracy on the training subset and
// on the test set.
type Metrics struct {
	TrainLoss, TrainAcc float64
	TestLoss, TestAcc   float64
}

// MarshalJSON writes the metrics with snake_case names; non-finite values
// (a diverged evaluation) are written as null.
func (m Metrics) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		TrainLoss *float64 `json:"train_loss"`
		TestLoss  *float64 `json:"test_loss"`
		TrainAcc  *float64 `json:"train_acc"`
		TestAcc   *float64 `json:"test_acc"`
	}{finite(m.TrainLoss), finite(m.TestLoss), finite(m.TrainAcc), finite(m.TestAcc)})
}

// finite returns &v, or nil for NaN and ±Inf.
func finite(v float64) *float64 {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return nil
	}
	return &v
}

// TrainLoss selects the training loss (for SharpnessOf).
func TrainLoss(m Metrics) float64 { return m.TrainLoss }

// TestLoss selects the test loss (for SharpnessOf).
func TestLoss(m Metrics) float64 { return m.TestLoss }

// Evaluator returns the metrics of the model at the flat parameter vector
// params. It must not keep params after it returns.
type Evaluator func(ctx context.Context, params []float32) (Metrics, error)

// Point is one evaluated point θ + α·d₁ (+ β·d₂ on a plane).
type Point struct {
	Alpha, Beta float64
	Metrics
}

// Scanner evaluates a model around its parameters Theta.
type Scanner struct {
	Theta []float32
	Eval  Evaluator
	// Progress, when set, is called after every evaluated point.
	Progress func(done, total int)
}

// Line evaluates θ + α·d for every α in alphas, in order.
func (s *Scanner) Line(ctx context.Context, d []float64, alphas []float64) ([]Point, error) {
	out := make([]Point, 0, len(alphas))
	buf := make([]float32, len(s.Theta))
	for i, a := range alphas {
		m, err := s.at(ctx, buf, [][]float64{d}, []float64{a})
		if err != nil {
			return nil, fmt.Errorf("α = %g: %w", a, err)
		}
		out = append(out, Point{Alpha: a, Metrics: m})
		if s.Progress != nil {
			s.Progress(i+1, len(alphas))
		}
	}
	return out, nil
}

// Plane evaluates θ + α·dx + β·dy on the grid alphas × betas, row by row:
// the point of alphas[i] and betas[j] is at index j·len(alphas)+i.
func (s *Scanner) Plane(ctx context.Context, dx, dy []float64, alphas, betas []float64) ([]Point, error) {
	total := len(alphas) * len(betas)
	out := make([]Point, 0, total)
	buf := make([]float32, len(s.Theta))
	for _, b := range betas {
		for _, a := range alphas {
			m, err := s.at(ctx, buf, [][]float64{dx, dy}, []float64{a, b})
			if err != nil {
				return nil, fmt.Errorf("(α, β) = (%g, %g): %w", a, b, err)
			}
			out = append(out, Point{Alpha: a, Beta: b, Metrics: m})
			if s.Progress != nil {
				s.Progress(len(out), total)
			}
		}
	}
	return out, nil
}

func (s *Scanner) at(ctx context.Context, buf []float32, dirs [][]float64, coefs []float64) (Metrics, error) {
	if err := ctx.Err(); err != nil {
		return Metrics{}, err
	}
	if err := Perturb(buf, s.Theta, dirs, coefs); err != nil {
		return Metrics{}, err
	}
	return s.Eval(ctx, buf)
}

// Sharpness summarizes a scan: the largest increase of a loss over its
// value at the centre among the points within Radius of it.
type Sharpness struct {
	// Radius bounds the points considered: |α| ≤ Radius on a line,
	// √(α²+β²) ≤ Radius on a plane.
	Radius float64
	// Base is the loss at the centre θ.
	Base float64
	// Max is the largest loss within the radius (+Inf when one is not
	// finite).
	Max float64
	// Increase is Max − Base, the sharpness.
	Increase float64
	// Alpha and Beta locate Max.
	Alpha, Beta float64
	// Points is the number of points within the radius.
	Points int
}

// MarshalJSON writes the summary with snake_case names; non-finite values
// are written as null.
func (s Sharpness) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		Radius   float64  `json:"radius"`
		Base     *float64 `json:"base"`
		Max      *float64 `json:"max"`
		Increase *float64 `json:"increase"`
		Alpha    float64  `json:"alpha"`
		Beta     float64  `json:"beta"`
		Points   int      `json:"points"`
	}{s.Radius, finite(s.Base), finite(s.Max), finite(s.Increase), s.Alpha, s.Beta, s.Points})
}

// radiusSlack lets points computed at exactly ±radius count as within it.
const radiusSlack = 1e-9

// SharpnessOf returns the sharpness of loss over points: the maximum of
// L(θ + α·d) − L(θ) over the points within radius, where L(θ) is the
// loss of the point at α = β = 0, which must be among points. A NaN loss
// counts as +Inf.
func SharpnessOf(points []Point, radius float64, loss func(Metrics) float64) (Sharpness, error) {
	if !(radius >= 0) {
		return Sharpness{}, fmt.Errorf("radius %v: want ≥ 0", radius)
	}
	base := math.NaN()
	for _, p := range points {
		if p.Alpha == 0 && p.Beta == 0 {
			base = loss(p.Metrics)
			break
		}
	}
	if math.IsNaN(base) {
		return Sharpness{}, errors.New("the scan has no finite loss at its centre (α = β = 0)")
	}
	s := Sharpness{Radius: radius, Base: base, Max: math.Inf(-1)}
	for _, p := range points {
		if math.Hypot(p.Alpha, p.Beta) > radius*(1+radiusSlack) {
			continue
		}
		l := loss(p.Metrics)
		if math.IsNaN(l) {
			l = math.Inf(1)
		}
		s.Points++
		if l > s.Max {
			s.Max, s.Alpha, s.Beta = l, p.Alpha, p.Beta
		}
	}
	s.Increase = s.Max - s.Base
	return s, nil
}
