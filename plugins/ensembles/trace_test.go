package ensembles_test

import (
	"flag"
	"testing"

	"github.com/optlab/optlab/sdk/optimtest"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden")

// TestTraceGolden pins the ops that Configure and the steps send in each
// kind: the golden files document the algorithm, with the member
// optimizer's handles inside the ensemble's namespace.
func TestTraceGolden(t *testing.T) {
	optimtest.TestTraces(t, *update,
		// Two sgd members, each its own model: sgd's own programs (and
		// numbers: see plugins/sgd/testdata/trace.golden).
		optimtest.TraceCase{Golden: "testdata/trace_deep.golden", New: newEnsemble, Members: 2},
		// Two cycles of two steps: a snapshot after the second step of each.
		optimtest.TraceCase{Golden: "testdata/trace_snapshot.golden", New: newEnsemble, Steps: 4,
			Params: map[string]any{"kind": "snapshot", "cycles": 2}},
		// Four steps per epoch, no pretraining, cycles of two epochs: a
		// snapshot at the end of the first epoch.
		optimtest.TraceCase{Golden: "testdata/trace_fge.golden", New: newEnsemble, Steps: 4,
			Params: map[string]any{"kind": "fge", "pretrain_epochs": 0, "cycle": 2}})
}
