package grid

import (
	"testing"

	"github.com/optlab/optlab/host/experiment"
)

// --smoke caps swept batch sizes as it caps train.batch_size, keeping the
// runs' labels and keys, and leaves the runs it was given as they were.
func TestSmokeRuns(t *testing.T) {
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
	capped := smokeRuns(runs, 16)
	for i, r := range capped {
		if r.Setting[0].Value != int64(16) || r.Key != runs[i].Key {
			t.Errorf("run %d: setting %v key %q, want batch 16 and key %q", i, r.Setting, r.Key, runs[i].Key)
		}
	}
	if runs[1].Setting[0].Value != int64(64) || runs[1].Key != "method=SGD batch_size=64/arch=cnn/seed=1" {
		t.Errorf("smokeRuns changed the runs it was given: %v %q", runs[1].Setting, runs[1].Key)
	}
}
