package model

import (
	"context"
	"strings"
	"testing"

	"github.com/optlab/optlab/host/tensor"
)

// TestTrapNamesLayer: with tensor.TrapNonFinite on, a NaN in one layer's
// weight fails the forward pass at that layer's op, and the scope's error
// names the layer (Fwd.Seq) and the op, so that a diverging run says where
// its NaN starts.
func TestTrapNamesLayer(t *testing.T) {
	w := tensor.NewWorker(0)
	defer w.Close()
	err := w.Do(context.Background(), func() error {
		s := tensor.NewScope()
		defer s.Close()
		m, err := Builtin().New("resnet10", 10, []int64{3, 16, 16})
		if err != nil {
			return err
		}
		flat := s.Zeros([]int64{m.Numel}, tensor.Float32, tensor.CPU)
		buf := s.Zeros([]int64{m.BufNumel + 1}, tensor.Float32, tensor.CPU)
		m.InitParams(s, flat)
		m.InitBuffers(s, buf)
		const layer = "layer2.0.conv1"
		at := -1
		for i, p := range m.Params {
			if p.Name == layer+".weight" {
				at = i
			}
		}
		if at < 0 {
			t.Fatalf("resnet10 has no %s.weight", layer)
		}
		nan := s.Log(s.Scale(s.Ones([]int64{1}, tensor.Float32, tensor.CPU), -1))
		s.CopyFrom(s.Narrow(flat, 0, m.Offsets[at]+3, 1), nan)
		if err := s.Err(); err != nil {
			return err
		}
		x := s.Randn([]int64{2, 3, 16, 16}, tensor.Float32, tensor.CPU)
		defer tensor.TrapNonFinite(tensor.TrapNonFinite(true))
		fs := tensor.NewScope()
		defer fs.Close()
		m.Forward(fs, flat, buf, x, true, 0.1)
		got := fs.Err()
		if got == nil || !strings.HasPrefix(got.Error(), layer+": ") || !strings.Contains(got.Error(), "non-finite") {
			t.Errorf("forward with a NaN in %s: %v, want an error naming the layer and the non-finite output", layer, got)
		} else {
			t.Log(got)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
