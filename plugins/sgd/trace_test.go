package sgd_test

import (
	"flag"
	"testing"

	"github.com/optlab/optlab/plugins/sgd"
	"github.com/optlab/optlab/sdk/optimtest"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden")

// TestTraceGolden pins the ops that Configure and two steps of a
// two-member run send: testdata/trace.golden documents the algorithm.
func TestTraceGolden(t *testing.T) {
	optimtest.TestTraces(t, *update, optimtest.TraceCase{Golden: "testdata/trace.golden", New: sgd.New, Members: 2})
}
