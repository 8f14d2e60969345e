package plugin

import (
	"context"
	"math"
	"reflect"
	"testing"

	"github.com/optlab/optlab/sdk/optim"
	"github.com/optlab/optlab/sdk/optimtest"
	"github.com/optlab/optlab/sdk/protocoltest"
)

// TestPluginMatchesInProcess runs the toy optimizer on the exact float64
// reference host of sdk/optimtest twice, in process and as a plugin
// process, and requires bit-identical metrics and parameters: the transport
// changes nothing.
func TestPluginMatchesInProcess(t *testing.T) {
	const steps = 20
	run := func(opt optim.Optimizer) ([]optim.StepOutput, []float64) {
		t.Helper()
		h, err := optimtest.NewHost(optimtest.NewMLP(optimtest.MLPConfig{Hidden: 8}), optimtest.WithSeed(3))
		if err != nil {
			t.Fatal(err)
		}
		outs, err := optimtest.Run(context.Background(), opt, h, steps,
			optimtest.WithLR(0.05), optimtest.WithHParams(map[string]any{"scale": 0.5}))
		if err != nil {
			t.Fatal(err)
		}
		return outs, h.Params(0)
	}
	wantOuts, wantParams := run(protocoltest.New())
	c := launch(t, "toy", Timeouts{})
	gotOuts, gotParams := run(c.AsOptimizer())
	t.Logf("step 0: %v; step %d: %v", gotOuts[0].Metrics, steps-1, gotOuts[steps-1].Metrics)
	if !reflect.DeepEqual(gotOuts, wantOuts) {
		t.Fatalf("plugin step outputs differ:\n got %v\nwant %v", gotOuts, wantOuts)
	}
	for i := range wantParams {
		if math.Float64bits(gotParams[i]) != math.Float64bits(wantParams[i]) {
			t.Fatalf("param %d: plugin %v, in process %v", i, gotParams[i], wantParams[i])
		}
	}
}
