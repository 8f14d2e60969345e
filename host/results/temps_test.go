package results

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// TestRemoveTemps (hardening 26, also seen): the temporary files a kill -9
// leaves are removed by the next run: those of the results file and its
// claims at once (their writers hold the lock), the others once they are
// older than any write in progress.
func TestRemoveTemps(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "exp")
	path := filepath.Join(dir, FileName)
	old := time.Now().Add(-2 * TempMaxAge)
	files := map[string]bool{ // file → removed
		".runs.jsonl.tmp-123":               true,
		".runs.jsonl.claims.tmp-456":        true,
		"runs.jsonl":                        false,
		".runs-1of2.jsonl.tmp-7":            false, // another file's lock, recent
		"superseded/.runs.jsonl.tmp-8":      false, // recent
		"superseded/.runs.jsonl.tmp-9":      true,  // old
		"checkpoints/.k.safetensors.tmp-1":  true,  // old
		"curves/.k.csv.tmp-2":               false, // not looked at
		"superseded/curves/.k.csv.tmp-3":    false,
		"state/.k.state.tmp-4":              true, // old
		"state/k.state":                     false,
		"superseded/state/.k.state.x.tmp-5": true, // old
		"superseded/state/.k.state.x.tmp-6": false,
		// A run's folder of parameter dumps (train.dump_params_every).
		"params/k/.step-00000005.safetensors.tmp-7": true, // old
		"params/k/.step-00000010.safetensors.tmp-8": false,
		"params/k/step-00000005.safetensors":        false,
	}
	for f := range files {
		p := filepath.Join(dir, f)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		if f == "superseded/.runs.jsonl.tmp-9" || f == "checkpoints/.k.safetensors.tmp-1" || f == "state/.k.state.tmp-4" || f == "superseded/state/.k.state.x.tmp-5" || f == "curves/.k.csv.tmp-2" || f == "params/k/.step-00000005.safetensors.tmp-7" || f == "params/k/step-00000005.safetensors" {
			os.Chtimes(p, old, old)
		}
	}
	os.Chtimes(filepath.Join(dir, "superseded/state/.k.state.x.tmp-6"), time.Now(), time.Now())
	gone, err := RemoveTemps(path)
	if err != nil {
		t.Fatal(err)
	}
	for f, want := range files {
		p := filepath.Join(dir, f)
		_, err := os.Stat(p)
		if removed := os.IsNotExist(err); removed != want || slices.Contains(gone, p) != want {
			t.Errorf("%s: removed %v (reported %v), want %v", f, removed, slices.Contains(gone, p), want)
		}
	}
}
