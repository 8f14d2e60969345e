package bsam_test

import (
	"bytes"
	"flag"
	"testing"

	"github.com/optlab/optlab/plugins/bsam"
	"github.com/optlab/optlab/sdk/optimtest"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden")

// TestTraceGolden pins the ops that Configure and two steps with m = 2
// send: testdata/trace.golden documents the algorithm.
func TestTraceGolden(t *testing.T) {
	var trace bytes.Buffer
	h := optimtest.MustHost(t, optimtest.NewMLP(optimtest.MLPConfig{Hidden: 4, Samples: 64}), optimtest.WithBatchSize(16))
	optimtest.MustRun(t, bsam.New(), h, 2, optimtest.WithLR(0.1),
		optimtest.WithHParams(map[string]any{"m": 2}), optimtest.WithTrace(&trace))
	optimtest.Golden(t, "testdata/trace.golden", trace.Bytes(), *update)
}
