package cli

import (
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
		{stepsSummary(exp, runs, 640), "2 runs × 20 to 80 steps (the swept [train] keys differ)"},
	}
	for _, tc := range tests {
		if tc.got != tc.want {
			t.Errorf("got %q, want %q", tc.got, tc.want)
		}
	}
}
