package bsam_test

import (
	"flag"
	"testing"

	"github.com/optlab/optlab/plugins/bsam"
	"github.com/optlab/optlab/sdk/optimtest"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden")

// TestTraceGolden pins the ops that Configure and two steps with m = 2
// send: testdata/trace.golden documents the algorithm.
func TestTraceGolden(t *testing.T) {
	optimtest.TestTraces(t, *update,
		optimtest.TraceCase{Golden: "testdata/trace.golden", New: bsam.New, Params: map[string]any{"m": 2}})
}
