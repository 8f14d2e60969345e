package cli

import (
	"strings"
	"testing"

	"github.com/optlab/optlab/host/experiment"
)

func TestSweepSummaries(t *testing.T) {
	src := `name = "s"
[train]
batch_size = [16, 64]
epochs = 2
[[method]]
name = "SGD"
plugin = "sgd"
`
	exp, err := experiment.Parse([]byte(src), "s.toml")
	if err != nil {
		t.Fatal(err)
	}
	runs := experiment.Grid(exp)
	tests := []struct{ got, want string }{
		{gridSummary(exp, runs), "grid: 2 settings (SGD: 2, batch_size) × 1 arch × 1 seed = 2 runs"},
		{stepsSummary(exp, runs, 640), "2 runs × 20 to 80 steps (the swept [train] keys or the methods' budgets differ; with a budget, steps of one gradient)"},
	}
	for _, tc := range tests {
		if tc.got != tc.want {
			t.Errorf("got %q, want %q", tc.got, tc.want)
		}
	}
}

// host check describes the optimizer of the methods that do not train with
// the experiment's, and nothing for a file whose methods all do.
func TestOptimizerSummary(t *testing.T) {
	src := `name = "o"
[train.optimizer]
lr = 0.05
[train.schedule]
kind = "cosine"
[[method]]
name = "SGD"
plugin = "sgd"
[[method]]
name = "Adam"
plugin = "sgd"
[method.optimizer]
name = "adam"
lr = 1e-3
[[method]]
name = "Slow"
plugin = "sgd"
[method.schedule]
kind = "constant"
[[method]]
name = "Lion"
plugin = "lion"
`
	exp, err := experiment.Parse([]byte(src), "o.toml")
	if err != nil {
		t.Fatal(err)
	}
	got := optimizerSummary(exp, func(m string) bool { return m == "Lion" })
	want := `method Adam: optimizer adam lr=0.001 betas=[0.9 0.999] eps=1e-08 wd=0.0005; schedule cosine
method Slow: optimizer sgd lr=0.05 mom=0.9 nesterov=false wd=0.0005; schedule constant
method Lion: optimizer none (the plugin's own update), lr=0.05; schedule cosine
`
	if got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
	if s := optimizerSummary(exp, func(string) bool { return false }); strings.Contains(s, "SGD") || strings.Contains(s, "Lion") {
		t.Errorf("summary of methods training with the experiment's optimizer:\n%s", s)
	}
}
