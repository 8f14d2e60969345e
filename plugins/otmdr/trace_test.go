package otmdr_test

import (
	"bytes"
	"flag"
	"testing"

	"github.com/optlab/optlab/plugins/otmdr"
	"github.com/optlab/optlab/sdk/optimtest"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden")

// TestTraceGolden pins the ops that Configure and two steps send in the
// paper, reference and joint modes: the golden files document the
// algorithm.
func TestTraceGolden(t *testing.T) {
	tests := []struct {
		golden  string
		members int
		params  map[string]any
	}{
		{"testdata/trace.golden", 1, map[string]any{"particles": 2}},
		{"testdata/trace_reference.golden", 1, map[string]any{"mode": "reference"}},
		{"testdata/trace_joint.golden", 2, map[string]any{"joint": true}},
	}
	for _, tt := range tests {
		t.Run(tt.golden, func(t *testing.T) {
			var trace bytes.Buffer
			h := optimtest.MustHost(t, optimtest.NewMLP(optimtest.MLPConfig{Hidden: 4, Samples: 64}),
				optimtest.WithBatchSize(16), optimtest.WithMembers(tt.members))
			optimtest.MustRun(t, otmdr.New(), h, 2, optimtest.WithLR(0.1), optimtest.WithHParams(tt.params), optimtest.WithTrace(&trace))
			optimtest.Golden(t, tt.golden, trace.Bytes(), *update)
		})
	}
}
