package otmdr_test

import (
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
	optimtest.TestTraces(t, *update,
		optimtest.TraceCase{Golden: "testdata/trace.golden", New: otmdr.New, Params: map[string]any{"particles": 2}},
		optimtest.TraceCase{Golden: "testdata/trace_reference.golden", New: otmdr.New, Params: map[string]any{"mode": "reference"}},
		optimtest.TraceCase{Golden: "testdata/trace_joint.golden", New: otmdr.New, Members: 2, Params: map[string]any{"joint": true}})
}
