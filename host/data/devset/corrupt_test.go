package devset

import (
	"context"
	"slices"
	"testing"

	"github.com/optlab/optlab/host/corrupt"
	"github.com/optlab/optlab/host/data"
	"github.com/optlab/optlab/host/tensor"
)

// TestCorrupted: the corrupted test sets are made once and kept; a reload
// for other label noise takes them over, and they outlive the old data.
func TestCorrupted(t *testing.T) {
	dir := t.TempDir()
	if err := data.WriteMNIST(dir, data.FashionMNIST, 40, 12, 1); err != nil {
		t.Fatal(err)
	}
	w := tensor.NewWorker(1)
	defer w.Close()
	ctx := context.Background()
	d := data.Spec{Dataset: data.FashionMNIST, Dir: dir, Normalize: true}
	first, err := Load(ctx, w, tensor.CPU, d)
	if err != nil {
		t.Fatal(err)
	}
	f, _ := corrupt.Lookup("contrast")
	a, err := first.Corrupted(ctx, w, f, 2, 0)
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := first.Corrupted(ctx, w, f, 2, 0); b != a {
		t.Error("the second call made the set again")
	}
	if a.N != first.Test.N || !slices.Equal(a.Shape, first.Test.Shape) {
		t.Errorf("corrupted set %d × %v, test set %d × %v", a.N, a.Shape, first.Test.N, first.Test.Shape)
	}
	d.LabelNoise = data.NoiseOptions{Kind: data.NoiseSymmetric, Rate: 0.5}
	second, err := Load(ctx, w, tensor.CPU, d)
	if err != nil {
		t.Fatal(err)
	}
	defer second.Drop()
	second.TakeCorrupted(first)
	first.Drop()
	if got := second.CorruptedKeys(); !slices.Equal(got, []string{"contrast/2/0"}) {
		t.Fatalf("taken over: %v", got)
	}
	var labels, clean []int32
	err = w.Do(ctx, func() error {
		s := tensor.NewScope()
		defer s.Close()
		b, err := second.Corrupted(ctx, w, f, 2, 0)
		if err != nil || b != a {
			t.Errorf("after the reload: %p, %v; want the set taken over", b, err)
		}
		labels, clean = a.Labels(s), second.Test.Labels(s)
		return s.Err()
	})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(labels, clean) {
		t.Error("the corrupted set's labels are not the test set's")
	}
}
