package ensembles_test

import (
	"bytes"
	"flag"
	"testing"

	"github.com/optlab/optlab/sdk/optimtest"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden")

// TestTraceGolden pins the ops that Configure and the steps send in each
// kind: the golden files document the algorithm, with the member
// optimizer's handles inside the ensemble's namespace.
func TestTraceGolden(t *testing.T) {
	tests := []struct {
		golden  string
		members int
		steps   int
		params  map[string]any
	}{
		// Two sgd members, each its own model: sgd's own programs (and
		// numbers: see plugins/sgd/testdata/trace.golden).
		{"testdata/trace_deep.golden", 2, 2, nil},
		// Two cycles of two steps: a snapshot after the second step of each.
		{"testdata/trace_snapshot.golden", 1, 4, map[string]any{"kind": "snapshot", "cycles": 2}},
		// Four steps per epoch, no pretraining, cycles of two epochs: a
		// snapshot at the end of the first epoch.
		{"testdata/trace_fge.golden", 1, 4, map[string]any{"kind": "fge", "pretrain_epochs": 0, "cycle": 2}},
	}
	for _, tt := range tests {
		t.Run(tt.golden, func(t *testing.T) {
			var trace bytes.Buffer
			h := optimtest.MustHost(t, optimtest.NewMLP(optimtest.MLPConfig{Hidden: 4, Samples: 64}),
				optimtest.WithBatchSize(16), optimtest.WithMembers(tt.members))
			optimtest.MustRun(t, newEnsemble(), h, tt.steps, optimtest.WithLR(0.1), hp(tt.params), optimtest.WithTrace(&trace))
			optimtest.Golden(t, tt.golden, trace.Bytes(), *update)
		})
	}
}
