package grid

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"github.com/optlab/optlab/host/data"
	"github.com/optlab/optlab/host/experiment"
)

// smoke settings: two epochs of two steps (the epoch structure of a real
// run, so that an optimizer with an epoch-based schedule meets an epoch
// boundary) with small batches on generated data.
const (
	smokeEpochs    = 2
	smokeSteps     = 2  // per epoch
	smokeBatch     = 8  // the smallest batch bSAM's m = 8 allows
	smokeTrainPerB = 16 // CIFAR-format records per training batch file
	smokeTest      = 16
)

// smokeData points CIFAR and MNIST-format experiments at small generated
// files of their format, caps batch sizes, and (when tmpResults) sends
// results to a temporary folder.
func smokeData(exp *experiment.Experiment, tmpResults bool) (func(), error) {
	tmp, err := os.MkdirTemp("", "optlab-smoke-")
	if err != nil {
		return nil, err
	}
	cleanup := func() { _ = os.RemoveAll(tmp) }
	gen := func(kind string) (string, error) {
		dir := filepath.Join(tmp, kind)
		if data.IsMNISTFormat(kind) {
			return dir, data.WriteMNIST(dir, kind, 5*smokeTrainPerB, smokeTest, 1)
		}
		return dir, data.WriteCIFAR(dir, kind, smokeTrainPerB, smokeTest, 1)
	}
	for _, ds := range []*struct{ name, dir *string }{{&exp.Data.Dataset, &exp.Data.Dir}, {&exp.Data.OOD, &exp.Data.OODDir}} {
		if experiment.HasDir(*ds.name) {
			d, err := gen(*ds.name)
			if err != nil {
				cleanup()
				return nil, fmt.Errorf("generating smoke data: %w", err)
			}
			*ds.dir = d
		}
	}
	exp.Train.BatchSize = min(exp.Train.BatchSize, smokeBatch)
	exp.Train.EvalBatchSize = min(exp.Train.EvalBatchSize, 64)
	if tmpResults {
		exp.ResultsDir = filepath.Join(tmp, "results")
	}
	return cleanup, nil
}

// smokeRuns caps the swept batch sizes of runs at batch, as host run
// --smoke caps train.batch_size (labels and keys are kept).
func smokeRuns(runs []experiment.Run, batch int) []experiment.Run {
	out := slices.Clone(runs)
	for i, r := range out {
		for j, s := range r.Setting {
			if n, ok := s.Value.(int64); ok && s.Key == "train.batch_size" && n > int64(batch) {
				out[i].Setting = slices.Clone(r.Setting)
				out[i].Setting[j].Value = int64(batch)
			}
		}
	}
	return out
}
