// Package landscape probes the loss landscape of a trained model around its
// parameters θ along filter-normalized random directions (Li et al. 2018,
// "Visualizing the Loss Landscape of Neural Nets"): it evaluates
// L(θ + α·d) on a line (and L(θ + α·d₁ + β·d₂) on a plane), summarizes the
// sharpness of the minimum, and writes CSV, JSON and PNG results.
//
// The model is evaluated through an Evaluator, and direction arithmetic runs
// on the host in float64. The host command builds the Evaluator on an engine
// with HostParams and EvalAt (eval.go), the package's only use of torch.
package landscape

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/optlab/optlab/sdk/optim"
)

// KindWeight is the parameter kind whose filters get a direction; every
// other kind (bias, bn, rho) gets d = 0, as in Li et al.'s "ignore biasbn".
const KindWeight = "weight"

// directionStream separates the random streams of the directions from
// other uses of the same seed (direction k uses stream directionStream+k).
const directionStream = 0x6c616e64

// Direction returns random direction number index (0 for the x axis, 1 for
// the y axis) for parameters theta with the given layout, filter-normalized
// (see FilterNormalized). The Gaussian draw depends only on seed, index and
// len(theta), so checkpoints of the same architecture are probed along the
// same random direction, each rescaled to its own filters.
func Direction(theta []float32, layout []optim.Tensor, seed uint64, index int) ([]float64, error) {
	if index < 0 {
		return nil, fmt.Errorf("direction index %d < 0", index)
	}
	r := rand.New(rand.NewPCG(seed, directionStream+uint64(index)))
	d := make([]float64, len(theta))
	for i := range d {
		d[i] = r.NormFloat64()
	}
	return FilterNormalized(d, theta, layout)
}

// FilterNormalized returns a copy of direction d in which, for every filter
// of every weight tensor (kind "weight" with at least two dimensions: a
// conv's output channel, a linear layer's row), d_filter is rescaled to
// d_filter/‖d_filter‖·‖θ_filter‖, and every other entry (biases, BatchNorm
// parameters, 1-D weights, entries no tensor covers) is zero. A filter of d
// with norm zero stays zero.
func FilterNormalized(d []float64, theta []float32, layout []optim.Tensor) ([]float64, error) {
	if len(d) != len(theta) {
		return nil, fmt.Errorf("direction has %d entries, parameters %d", len(d), len(theta))
	}
	out := make([]float64, len(d))
	for _, t := range layout {
		n, err := numel(t.Shape)
		if err != nil {
			return nil, fmt.Errorf("tensor %s: %w", t.Name, err)
		}
		if t.Offset < 0 || t.Offset+n > int64(len(theta)) {
			return nil, fmt.Errorf("tensor %s: elements [%d, %d) outside the %d parameters", t.Name, t.Offset, t.Offset+n, len(theta))
		}
		if t.Kind != KindWeight || len(t.Shape) < 2 || n == 0 {
			continue
		}
		rows := t.Shape[0]
		rowLen := n / rows
		for r := int64(0); r < rows; r++ {
			lo := t.Offset + r*rowLen
			normalizeFilter(out[lo:lo+rowLen], d[lo:lo+rowLen], theta[lo:lo+rowLen])
		}
	}
	return out, nil
}

// normalizeFilter writes d·‖θ‖/‖d‖ into dst.
func normalizeFilter(dst, d []float64, theta []float32) {
	var nd, nt float64
	for i, v := range d {
		nd += v * v
		nt += float64(theta[i]) * float64(theta[i])
	}
	if nd == 0 {
		return
	}
	scale := math.Sqrt(nt) / math.Sqrt(nd)
	for i, v := range d {
		dst[i] = v * scale
	}
}

// numel returns the number of elements of shape.
func numel(shape []int64) (int64, error) {
	n := int64(1)
	for _, s := range shape {
		if s < 0 {
			return 0, fmt.Errorf("negative dimension in shape %v", shape)
		}
		n *= s
	}
	return n, nil
}

// Axis returns the coefficients of a scan: steps values evenly spaced on
// [−radius, radius], with 0 added in the middle when steps is even, so
// that the centre θ is always evaluated. steps = 1 gives just 0.
func Axis(steps int, radius float64) ([]float64, error) {
	if steps < 1 {
		return nil, fmt.Errorf("steps %d: want at least 1", steps)
	}
	if !(radius > 0) || math.IsInf(radius, 0) {
		return nil, fmt.Errorf("radius %v: want a positive finite number", radius)
	}
	if steps == 1 {
		return []float64{0}, nil
	}
	out := make([]float64, 0, steps+1)
	for i := 0; i < steps; i++ {
		// (2i − (steps−1))/(steps−1) is exact at the ends and at 0.
		v := radius * float64(2*i-(steps-1)) / float64(steps-1)
		if steps%2 == 0 && i == steps/2 {
			out = append(out, 0)
		}
		out = append(out, v)
	}
	return out, nil
}

// Perturb writes θ + Σₖ coefs[k]·dirs[k] into dst, computed in float64 and
// rounded to float32 once (so all-zero coefficients give θ exactly).
func Perturb(dst, theta []float32, dirs [][]float64, coefs []float64) error {
	if len(dirs) != len(coefs) {
		return fmt.Errorf("%d directions, %d coefficients", len(dirs), len(coefs))
	}
	if len(dst) != len(theta) {
		return fmt.Errorf("destination has %d entries, parameters %d", len(dst), len(theta))
	}
	for _, d := range dirs {
		if len(d) != len(theta) {
			return errors.New("direction and parameters differ in length")
		}
	}
	for i, t := range theta {
		v := float64(t)
		for k, d := range dirs {
			v += coefs[k] * d[i]
		}
		dst[i] = float32(v)
	}
	return nil
}
