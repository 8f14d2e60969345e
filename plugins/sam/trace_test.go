package sam_test

import (
	"bytes"
	"flag"
	"testing"

	"github.com/optlab/optlab/plugins/sam"
	"github.com/optlab/optlab/sdk/optimtest"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden")

// TestTraceGolden pins the ops that Configure and two steps send in the
// main modes: the golden files document the algorithm.
func TestTraceGolden(t *testing.T) {
	tests := []struct {
		golden  string
		members int
		params  map[string]any
	}{
		{"testdata/trace.golden", 2, nil},
		{"testdata/trace_asam_weights.golden", 1, map[string]any{"rho": 2.0, "adaptive": true, "adaptive_scope": "weights"}},
		{"testdata/trace_m2.golden", 1, map[string]any{"m": 2}},
	}
	for _, tt := range tests {
		t.Run(tt.golden, func(t *testing.T) {
			var trace bytes.Buffer
			h := optimtest.MustHost(t, optimtest.NewMLP(optimtest.MLPConfig{Hidden: 4, Samples: 64}),
				optimtest.WithBatchSize(16), optimtest.WithMembers(tt.members))
			optimtest.MustRun(t, sam.New(), h, 2, optimtest.WithLR(0.1), optimtest.WithHParams(tt.params), optimtest.WithTrace(&trace))
			optimtest.Golden(t, tt.golden, trace.Bytes(), *update)
		})
	}
}
