package train

import (
	"context"
	"strings"
	"testing"

	"github.com/optlab/optlab/host/checkpoint"
	"github.com/optlab/optlab/host/checkpoint/statedict"
	"github.com/optlab/optlab/host/experiment"
	"github.com/optlab/optlab/host/results"
	"github.com/optlab/optlab/host/tensor"
	"github.com/optlab/optlab/plugins/sparse"
)

// A DST run's model file holds its members as dense tensors and, beside
// each, its mask ("mask.members.<i>.…", 0 or 1): every weight the mask
// drops is zero, some layers are sparse, and the file loads back
// (init_from skips the masks).
func TestSparseModelFileHasMasks(t *testing.T) {
	w := tensor.NewWorker(2)
	defer w.Close()
	ctx := context.Background()
	r, exp := newRunner(t, w, digitsTOML)
	exp.Model.Archs = []string{"mlp*2"}
	exp.Train.Epochs = 1
	run := experiment.Grid(exp)[0]
	r.Checkpoints = &results.Layout{Dir: t.TempDir()}
	rec, err := r.Run(ctx, run, method(t, sparse.NewDST(), map[string]any{"density": 0.3, "update_frequency": 5}))
	if err != nil || rec.Status != results.StatusOK {
		t.Fatalf("run: %v %s", err, rec.Error)
	}
	path := r.Checkpoints.Model(run.Key)
	ts, _, err := checkpoint.Read(path)
	if err != nil {
		t.Fatal(err)
	}
	masks, sparseLayers := 0, 0
	for name, m := range ts {
		param, ok := strings.CutPrefix(name, statedict.MaskPrefix)
		if !ok {
			continue
		}
		masks++
		p, ok := ts[param]
		if !ok || len(p.F32) != len(m.F32) {
			t.Fatalf("mask %s has no tensor %s of its size", name, param)
		}
		ones := 0
		for i, v := range m.F32 {
			switch {
			case v == 1:
				ones++
			case v != 0:
				t.Fatalf("%s[%d] = %v, not 0 or 1", name, i, v)
			case p.F32[i] != 0:
				t.Fatalf("%s[%d] = %v where the mask drops it", param, i, p.F32[i])
			}
		}
		if ones > 0 && ones < len(m.F32) {
			sparseLayers++
		}
	}
	if sparseLayers == 0 {
		t.Error("no mask drops a weight: nothing is sparse")
	}
	if masks == 0 || masks != len(ts)/2 {
		t.Errorf("%d masks among %d tensors, want one per parameter", masks, len(ts))
	}
	exp.Model.InitFrom = path
	if err := r.Preflight(ctx, run, method(t, sparse.NewDST(), nil)); err != nil {
		t.Errorf("model.init_from of the saved file: %v", err)
	}
}
