package tensor

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"gonum.org/v1/gonum/mat"

	"github.com/optlab/optlab/sdk/optim"
	"github.com/optlab/optlab/sdk/optimtest"
)

// TestNewtonSchulz: the batched kernel gives every matrix of a batch what
// the exact host's float64 iteration (gonum) gives it: to 1e-12 in
// float64, to 1e-5 in float32, transposed views included, and it frees
// its temporaries (a scope holds only its result).
func TestNewtonSchulz(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for _, c := range []struct {
		b, rows, cols int64
		steps         int
		transposed    bool // the batch is a transposed view of [b, cols, rows]
	}{
		{3, 4, 6, 5, false}, {1, 1, 7, 5, false}, {2, 5, 5, 3, false}, {2, 3, 8, 5, true}, {1, 16, 144, 5, false},
	} {
		n := c.b * c.rows * c.cols
		data := randF32(r, int(n), r.NormFloat64)
		for _, dt := range []DType{Float64, Float32} {
			t.Run(fmt.Sprintf("%dx%dx%d %v transposed=%v", c.b, c.rows, c.cols, dt, c.transposed), func(t *testing.T) {
				tol := 1e-12
				if dt == Float32 {
					tol = 1e-5
				}
				onWorker(t, func(s *Scope) error {
					var x T
					if c.transposed {
						x = s.Transpose(s.Cast(s.FromFloat32(data, []int64{c.b, c.cols, c.rows}, CPU), dt), 1, 2)
					} else {
						x = s.Cast(s.FromFloat32(data, []int64{c.b, c.rows, c.cols}, CPU), dt)
					}
					ns := NewScope()
					y := ns.NewtonSchulz(x, c.steps, optim.NS5A, optim.NS5B, optim.NS5C, optim.NS5Eps)
					if len(ns.owned) != 1 {
						t.Errorf("the kernel's scope holds %d tensors, want its result alone", len(ns.owned))
					}
					got := s.Float64s(y)
					if y.DType() != dt {
						t.Errorf("result dtype %v, want %v", y.DType(), dt)
					}
					ns.Close()
					in := s.Float64s(s.Contiguous(x))
					if err := s.Err(); err != nil {
						return err
					}
					if err := ns.Err(); err != nil {
						return err
					}
					m := c.rows * c.cols
					for i := range c.b {
						g := mat.NewDense(int(c.rows), int(c.cols), in[i*m:(i+1)*m])
						want := optimtest.NewtonSchulzMatrix(g, c.steps, optim.NS5A, optim.NS5B, optim.NS5C, optim.NS5Eps)
						var d mat.Dense
						d.Sub(mat.NewDense(int(c.rows), int(c.cols), got[i*m:(i+1)*m]), want)
						e, w := mat.Norm(&d, 2), mat.Norm(want, 2)
						if !(e <= tol*w) {
							t.Errorf("matrix %d: ‖got − want‖ = %.3g, ‖want‖ = %.3g (relative %.3g > %g)", i, e, w, e/w, tol)
						}
						t.Logf("matrix %d: relative error %.2g", i, e/w)
					}
					return nil
				})
			})
		}
	}
	onWorker(t, func(s *Scope) error {
		s.NewtonSchulz(s.Zeros([]int64{4, 5}, Float32, CPU), 5, 1, 1, 1, 0)
		if err := s.Err(); err == nil {
			t.Errorf("a 2-D tensor: err = %v, want one", err)
		}
		return nil
	})
}

// TestDiagOrder: each matrix's diagonal sorted descending, equal values in
// their order and NaN first, as the exact host's optimtest.SortOrder.
func TestDiagOrder(t *testing.T) {
	nan := float32(math.NaN())
	diags := [][]float32{{1, nan, 3, 3}, {0, 5, 0, 5}, {-1, -2, -3, -4}}
	const n = 4
	var data []float32
	for _, d := range diags {
		for i := range n {
			for j := range n {
				v := float32(100 * (i - j)) // off the diagonal: ignored
				if i == j {
					v = d[i]
				}
				data = append(data, v)
			}
		}
	}
	onWorker(t, func(s *Scope) error {
		got := s.Float64s(s.DiagOrder(s.FromFloat32(data, []int64{int64(len(diags)), n, n}, CPU)))
		if err := s.Err(); err != nil {
			return err
		}
		for b, d := range diags {
			k := mat.NewDense(n, n, nil)
			for i := range n {
				k.Set(i, i, float64(d[i]))
			}
			want := optimtest.SortOrder(k)
			for i, w := range want {
				if got[b*n+i] != float64(w) {
					t.Errorf("matrix %d (diag %v): order %v, want %v", b, d, got[b*n:(b+1)*n], want)
					break
				}
			}
		}
		return nil
	})
}
