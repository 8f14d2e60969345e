package sgvb_test

import (
	"flag"
	"testing"

	"github.com/optlab/optlab/plugins/sgvb"
	"github.com/optlab/optlab/sdk/optimtest"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden")

// TestTraceGolden pins the ops that Configure and two steps send, for sgvb
// and for otmdr-sgvb in both modes: the golden files document the
// algorithms.
func TestTraceGolden(t *testing.T) {
	variational := []optimtest.HostOption{vari(-3, 1)}
	optimtest.TestTraces(t, *update,
		optimtest.TraceCase{Golden: "testdata/trace.golden", New: sgvb.New, LR: 0.01, Host: variational},
		optimtest.TraceCase{Golden: "testdata/trace_otmdr.golden", New: sgvb.NewOTMDR, LR: 0.01, Host: variational,
			Params: map[string]any{"particles": 2}},
		optimtest.TraceCase{Golden: "testdata/trace_otmdr_reference.golden", New: sgvb.NewOTMDR, LR: 0.01, Host: variational,
			Params: map[string]any{"mode": "reference"}})
}
