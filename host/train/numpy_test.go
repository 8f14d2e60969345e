package train

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/optlab/optlab/host/tensor"
	"github.com/optlab/optlab/plugins/sam"
)

// A run trains and is scored on a dataset given as NumPy arrays (the
// NumPy-made fixture of host/data: 6 training and 3 test images of 2×3×3
// uint8 pixels, 3 classes), with SAM, end to end.
func TestNumPyDatasetTrains(t *testing.T) {
	w := tensor.NewWorker(2)
	defer w.Close()
	path, err := filepath.Abs(filepath.Join("..", "data", "testdata", "numpy", "tiny.npz"))
	if err != nil {
		t.Fatal(err)
	}
	src := fmt.Sprintf(`
name = "npz"
[data]
dataset = "npz"
path = %q
[model]
archs = ["mlp"]
[train]
epochs = 2
batch_size = 2
seeds = [1]
[train.optimizer]
name = "sgd"
lr = 0.05
[eval]
temperature = "none"
[[method]]
name = "SAM"
plugin = "sam"
`, path)
	r, exp := newRunner(t, w, src)
	if r.Data.TrainSize != 6 || r.Data.TestSize != 3 || r.Data.Classes != 3 {
		t.Fatalf("data: %d train, %d test, %d classes", r.Data.TrainSize, r.Data.TestSize, r.Data.Classes)
	}
	rec := runOnce(t, r, exp, sam.New(), map[string]any{"rho": 0.05})
	if rec.Steps != 6 || rec.Metrics["acc"] < 0 || rec.Metrics["acc"] > 1 {
		t.Errorf("record: %d steps, acc %v", rec.Steps, rec.Metrics["acc"])
	}
	if rec.Config["data.path.content"] == nil {
		t.Error("the npz file is not identified in the configuration")
	}
}
