package sgvb_test

import (
	"bytes"
	"flag"
	"testing"

	"github.com/optlab/optlab/plugins/sgvb"
	"github.com/optlab/optlab/sdk/optim"
	"github.com/optlab/optlab/sdk/optimtest"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden")

// TestTraceGolden pins the ops that Configure and two steps send, for sgvb
// and for otmdr-sgvb in both modes: the golden files document the
// algorithms.
func TestTraceGolden(t *testing.T) {
	tests := []struct {
		golden string
		opt    func() optim.Optimizer
		params map[string]any
	}{
		{"testdata/trace.golden", sgvb.New, nil},
		{"testdata/trace_otmdr.golden", sgvb.NewOTMDR, map[string]any{"particles": 2}},
		{"testdata/trace_otmdr_reference.golden", sgvb.NewOTMDR, map[string]any{"mode": "reference"}},
	}
	for _, tt := range tests {
		t.Run(tt.golden, func(t *testing.T) {
			var trace bytes.Buffer
			h := optimtest.MustHost(t, optimtest.NewMLP(optimtest.MLPConfig{Hidden: 4, Samples: 64}),
				optimtest.WithBatchSize(16), vari(-3, 1))
			optimtest.MustRun(t, tt.opt(), h, 2, optimtest.WithLR(0.01), optimtest.WithHParams(tt.params), optimtest.WithTrace(&trace))
			optimtest.Golden(t, tt.golden, trace.Bytes(), *update)
		})
	}
}
