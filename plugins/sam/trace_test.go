package sam_test

import (
	"flag"
	"testing"

	"github.com/optlab/optlab/plugins/sam"
	"github.com/optlab/optlab/sdk/optimtest"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden")

// TestTraceGolden pins the ops that Configure and two steps send in the
// main modes: the golden files document the algorithm.
func TestTraceGolden(t *testing.T) {
	optimtest.TestTraces(t, *update,
		optimtest.TraceCase{Golden: "testdata/trace.golden", New: sam.New, Members: 2},
		optimtest.TraceCase{Golden: "testdata/trace_asam_weights.golden", New: sam.New,
			Params: map[string]any{"rho": 2.0, "adaptive": true, "adaptive_scope": "weights"}},
		optimtest.TraceCase{Golden: "testdata/trace_m2.golden", New: sam.New, Params: map[string]any{"m": 2}})
}
