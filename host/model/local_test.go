package model

import (
	"context"
	"math"
	"testing"

	"github.com/optlab/optlab/host/tensor"
)

// oneLayer is a net of a single convolution or linear layer, so the local
// reparameterization's output moments have a closed form.
type oneLayer struct {
	conv   Conv
	lin    Linear
	isConv bool
}

func (n oneLayer) Forward(f *Fwd, x tensor.T) tensor.T {
	if n.isConv {
		return n.conv.Forward(f, x)
	}
	return n.lin.Forward(f, x)
}

// The local reparameterization trick (Kingma et al., 2015) samples each
// pre-activation from N(x·μ + μ_b, x²·σ² + σ_b²), independently per sample:
// over many copies of one input the empirical mean and variance of a conv
// and of a linear layer's outputs match the closed form, the mean path is
// the deterministic forward, and the variance receives a gradient.
func TestForwardLocalMoments(t *testing.T) {
	const copies = 20000
	x := []float64{0.5, -1, 2, 1.5, 0, -0.5, 1, 0.25, -2} // a 1×3×3 image, or 9 features
	tests := []struct {
		name   string
		isConv bool
		// weights then bias, means and variances
		mu, v []float64
	}{
		{"conv 2×2", true, []float64{0.3, -0.2, 0.5, 0.1, 0.05}, []float64{0.04, 0.01, 0.09, 0.02, 0.03}},
		{"linear 9→2", false,
			[]float64{0.1, -0.2, 0.3, 0, 0.5, -0.1, 0.2, 0.1, -0.3, 0.2, 0.1, 0, -0.4, 0.3, 0.2, -0.1, 0.05, 0.1, 0.5, -0.5},
			[]float64{0.01, 0.02, 0.03, 0.04, 0.05, 0.01, 0.02, 0.03, 0.04, 0.01, 0.01, 0.01, 0.02, 0.02, 0.02, 0.03, 0.03, 0.03, 0.05, 0.02}},
	}
	w := tensor.NewWorker(0)
	defer w.Close()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := NewBuilder()
			net := oneLayer{isConv: tt.isConv}
			in := []int64{9}
			if tt.isConv {
				net.conv = b.Conv("c", 1, 1, 2, 1, 0, 1, true, KaimingNormalFanIn)
				in = []int64{1, 3, 3}
			} else {
				net.lin = b.Linear("l", 9, 2, false)
			}
			m, err := b.Build("one-layer", 2, in, net)
			if err != nil {
				t.Fatal(err)
			}
			// The closed form, in float64.
			var wantMean, wantVar []float64
			if tt.isConv {
				for oy := range 2 {
					for ox := range 2 {
						mean, v := tt.mu[4], tt.v[4]
						for ky := range 2 {
							for kx := range 2 {
								xi := x[(oy+ky)*3+ox+kx]
								mean += xi * tt.mu[ky*2+kx]
								v += xi * xi * tt.v[ky*2+kx]
							}
						}
						wantMean, wantVar = append(wantMean, mean), append(wantVar, v)
					}
				}
			} else {
				for o := range 2 {
					mean, v := tt.mu[18+o], tt.v[18+o]
					for i := range 9 {
						mean += x[i] * tt.mu[o*9+i]
						v += x[i] * x[i] * tt.v[o*9+i]
					}
					wantMean, wantVar = append(wantMean, mean), append(wantVar, v)
				}
			}
			k := len(wantMean)
			var got []float64
			var gradNorm float64
			var det []float64
			err = w.Do(context.Background(), func() error {
				s := tensor.NewScope()
				defer s.Close()
				tensor.ManualSeed(5)
				f32 := func(v []float64) []float32 {
					out := make([]float32, len(v))
					for i, a := range v {
						out[i] = float32(a)
					}
					return out
				}
				mu := s.FromFloat32(f32(tt.mu), []int64{m.Numel}, tensor.CPU)
				variance := s.RequiresGrad(s.FromFloat32(f32(tt.v), []int64{m.Numel}, tensor.CPU))
				one := s.FromFloat32(f32(x), append([]int64{1}, in...), tensor.CPU)
				xs := s.Expand(one, append([]int64{copies}, in...)...)
				buf := s.Zeros([]int64{1}, tensor.Float32, tensor.CPU)
				out := m.ForwardLocal(s, mu, variance, buf, xs, true, 0)
				got = s.Float64s(out)
				gradNorm = s.Scalars(s.Norm(s.Gradient(s.Sum(out, tensor.Float32), variance)))[0]
				det = s.Float64s(m.Forward(s, mu, buf, one, true, 0))
				return s.Err()
			})
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != copies*k {
				t.Fatalf("%d outputs, want %d", len(got), copies*k)
			}
			for j := range k {
				var sum, sq float64
				for r := range copies {
					sum += got[r*k+j]
				}
				mean := sum / copies
				for r := range copies {
					d := got[r*k+j] - mean
					sq += d * d
				}
				v := sq / (copies - 1)
				if se := math.Sqrt(wantVar[j] / copies); math.Abs(mean-wantMean[j]) > 5*se {
					t.Errorf("output %d: mean %.5f, want %.5f (±%.5f)", j, mean, wantMean[j], se)
				}
				if rel := math.Abs(v/wantVar[j] - 1); rel > 5*math.Sqrt(2.0/copies) {
					t.Errorf("output %d: variance %.5f, want %.5f (off by %.1f%%)", j, v, wantVar[j], 100*rel)
				}
				if math.Abs(det[j]-wantMean[j]) > 1e-5 {
					t.Errorf("output %d: deterministic forward %.6f, want the mean %.6f", j, det[j], wantMean[j])
				}
			}
			if !(gradNorm > 0) || math.IsInf(gradNorm, 0) {
				t.Errorf("gradient norm with respect to the variances %v", gradNorm)
			}
		})
	}
}
