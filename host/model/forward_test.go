package model

import (
	"context"
	"fmt"
	"math"
	"testing"

	"github.com/optlab/optlab/host/tensor"
)

// forwardSide is the input height and width TestForwardBackward uses: every
// architecture ends in adaptive pooling, and 16×16 keeps the test cheap
// (PyramidNet needs a multiple of 4, DenseNet at least 8).
const forwardSide = 16

// forwardSideOf overrides forwardSide. EfficientNet-B0 downsamples 16×: at
// 16×16 its last stages see 1×1 maps, where BatchNorm over a batch of two
// outputs ±1 whatever the input, so the gradient reaching the layers below
// is rounding noise divided by a tiny σ (norms of 1e9 in PyTorch too).
var forwardSideOf = map[string]int64{"efficientnet-b0": 32}

// TestForwardBackward runs a forward and backward pass on a tiny batch for
// every architecture and checks the loss and the gradient are finite and the
// gradient is non-zero.
func TestForwardBackward(t *testing.T) {
	w := tensor.NewWorker(0)
	defer w.Close()
	zoo := Builtin()
	for _, arch := range zoo.Names() {
		side := int64(forwardSide)
		if v, ok := forwardSideOf[arch]; ok {
			side = v
		}
		// CIFAR-shaped, and MNIST-shaped (one channel, 28×28).
		for _, in := range [][]int64{{3, side, side}, {1, 28, 28}} {
			t.Run(fmt.Sprintf("%s/%dx%dx%d", arch, in[0], in[1], in[2]), func(t *testing.T) {
				forwardBackward(t, w, zoo, arch, in)
			})
		}
	}
}

func forwardBackward(t *testing.T, w *tensor.Worker, zoo Zoo, arch string, in []int64) {
	if testing.Short() && arch != "cnn" && arch != "mlp" && arch != "resnet10" {
		t.Skip("large model in -short mode")
	}
	err := w.Do(context.Background(), func() error {
		// Every CPU allocation starts as NaN: a layer that reads memory no
		// op wrote makes the loss or the gradient NaN on any libtorch.
		prevFill, err := tensor.FillFreshWithNaN(true)
		if err != nil {
			return err
		}
		defer func() { _, _ = tensor.FillFreshWithNaN(prevFill) }()
		// The fill also puts 1 KiB of NaN past the end of every CPU
		// allocation: a kernel that reads past its input's end gives NaN,
		// and one that writes past its output's end is counted when the
		// memory is freed (checked after the scope closes).
		guardBefore, _, _ := tensor.GuardWrites()
		defer func() {
			if n, size, at := tensor.GuardWrites(); n != guardBefore {
				t.Errorf("%d allocations written past their end (the first: %d bytes, written at +%d)", n-guardBefore, size, at)
			}
		}()
		// And a forward op whose output holds a NaN or an infinity fails
		// the scope naming itself: if the pyramidnet101 NaN seen on
		// libtorch 2.6 (an AMD Zen 5 guest, 2026-11-27) comes back, the
		// failure names the op, not only the loss.
		defer tensor.TrapNonFinite(tensor.TrapNonFinite(true))
		s := tensor.NewScope()
		defer s.Close()
		tensor.ManualSeed(1)
		m, err := zoo.New(arch, 10, in)
		if err != nil {
			return err
		}
		flat := s.Zeros([]int64{m.Numel}, tensor.Float32, tensor.CPU)
		buf := s.Zeros([]int64{m.BufNumel + 1}, tensor.Float32, tensor.CPU)
		m.InitParams(s, flat)
		m.InitBuffers(s, buf)
		leaf := s.RequiresGrad(flat)
		x := s.Randn(append([]int64{2}, in...), tensor.Float32, tensor.CPU)
		y := s.FromInt64([]int64{3, 7}, []int64{2}, tensor.CPU)
		logits := m.Forward(s, leaf, buf, x, true, 0.1)
		loss := s.CrossEntropy(logits, y, 0)
		g := s.Gradient(loss, leaf)
		v := s.Scalars(loss, s.Norm(g))
		if err := s.Err(); err != nil {
			return err
		}
		if sh := g.Shape(); len(sh) != 1 || sh[0] != m.Numel {
			t.Errorf("gradient shape %v, want [%d]", sh, m.Numel)
		}
		if math.IsNaN(v[0]) || math.IsInf(v[0], 0) || !(v[1] > 0) || math.IsInf(v[1], 0) {
			t.Errorf("loss %v, gradient norm %v", v[0], v[1])
		}
		// Evaluation: without autograd the pass frees each activation as
		// it goes (Fwd.Seq); the logits are those of a pass that records.
		withGrad := s.Float32s(m.Forward(s, leaf, buf, x, false, 0))
		prev, err := tensor.SetGradEnabled(false)
		if err != nil {
			return err
		}
		noGrad := s.Float32s(m.Forward(s, flat, buf, x, false, 0))
		_, _ = tensor.SetGradEnabled(prev)
		if err := s.Err(); err != nil {
			return err
		}
		for i := range withGrad {
			if withGrad[i] != noGrad[i] {
				t.Errorf("evaluation logit %d: %v without autograd, %v with", i, noGrad[i], withGrad[i])
				break
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
