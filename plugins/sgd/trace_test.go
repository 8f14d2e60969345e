package sgd_test

import (
	"bytes"
	"flag"
	"testing"

	"github.com/optlab/optlab/plugins/sgd"
	"github.com/optlab/optlab/sdk/optimtest"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden")

// TestTraceGolden pins the ops that Configure and two steps of a
// two-member run send: testdata/trace.golden documents the algorithm.
func TestTraceGolden(t *testing.T) {
	var trace bytes.Buffer
	h := optimtest.MustHost(t, optimtest.NewMLP(optimtest.MLPConfig{Hidden: 4, Samples: 64}),
		optimtest.WithBatchSize(16), optimtest.WithMembers(2))
	optimtest.MustRun(t, sgd.New(), h, 2, optimtest.WithLR(0.1), optimtest.WithTrace(&trace))
	optimtest.Golden(t, "testdata/trace.golden", trace.Bytes(), *update)
}
