package grid

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/optlab/optlab/host/identity"
	"github.com/optlab/optlab/host/results"
)

// SAM-AdamW is a few TOML lines: plugin "sam" with update = "adamw" (and
// the rule's hyperparameters prefixed). Such a run owns its update: its
// record has no base optimizer and its params name the rule, while plain
// SAM in the same file keeps the base optimizer; both train.
func TestUpdateRuleFromTOML(t *testing.T) {
	dir := t.TempDir()
	src := `name = "rules"
results_dir = "results"
[model]
archs = ["mlp"]
[train]
epochs = 1
batch_size = 64
seeds = [1]
threads = 1
device = "cpu"
[train.optimizer]
name = "sgd"
lr = 0.05
momentum = 0.9
[eval]
aac_steps = 10
[[method]]
name = "SAM"
plugin = "sam"
[[method]]
name = "SAM-AdamW"
plugin = "sam"
[method.optimizer]
lr = 0.002
[method.params]
update = "adamw"
adamw_weight_decay = 0.05
`
	path := filepath.Join(dir, "rules.toml")
	if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	p := plan(t, path)
	if p.OwnsUpdate("SAM") || !p.OwnsUpdate("SAM-AdamW") {
		t.Errorf("owns its update: SAM %v, SAM-AdamW %v; want false, true", p.OwnsUpdate("SAM"), p.OwnsUpdate("SAM-AdamW"))
	}
	if _, err := Run(context.Background(), p, RunOptions{Log: io.Discard}); err != nil {
		t.Fatal(err)
	}
	recs, err := results.Read(results.NewLayout(filepath.Join(dir, "results"), "rules").Runs())
	if err != nil {
		t.Fatal(err)
	}
	byMethod := map[string]results.Record{}
	for _, r := range recs {
		byMethod[r.Method] = r
	}
	sam, rule := byMethod["SAM"], byMethod["SAM-AdamW"]
	if sam.Status != results.StatusOK || rule.Status != results.StatusOK {
		t.Fatalf("statuses %q and %q (%s %s)", sam.Status, rule.Status, sam.Error, rule.Error)
	}
	if got := rule.Config["train.optimizer"]; got != identity.NoBaseOptimizer {
		t.Errorf("SAM-AdamW's train.optimizer = %v, want %q", got, identity.NoBaseOptimizer)
	}
	if rule.Config["params.update"] != "adamw" || rule.Config["params.adamw_weight_decay"] != 0.05 {
		t.Errorf("SAM-AdamW's params: update %v, adamw_weight_decay %v", rule.Config["params.update"], rule.Config["params.adamw_weight_decay"])
	}
	if got := sam.Config["train.optimizer"]; got == identity.NoBaseOptimizer || sam.Config["params.update"] != "base" {
		t.Errorf("SAM's train.optimizer %v, update %v: want the base optimizer", got, sam.Config["params.update"])
	}
}
