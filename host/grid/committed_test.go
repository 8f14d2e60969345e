package grid

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/optlab/optlab/host/identity"
	"github.com/optlab/optlab/host/results"
	"github.com/optlab/optlab/host/train"
	"github.com/optlab/optlab/plugins/builtin"
)

// committedResults is the folder of the results committed with the
// documentation: one folder per experiment, named as the experiment (and
// its file, experiments/<name>.toml).
const committedResults = "../../docs/results"

// TestCommittedResultsFinished: host run of each experiment whose results
// are committed under docs/results would train nothing again. Every run of
// the experiment file's grid, its identity computed as host run computes it
// (Prepare with the built-in plugins, the runner's Config), is found
// finished by results.Store.Begin in a copy of the committed records files:
// its record's configuration is the same (no ConfigDiff, under this
// optlab's identity version), and so is its hash when the record is of
// this version. A change of the identity rules that is not
// a new version with a migration, or a setting added without keeping the
// configuration of the runs at its default, fails here.
func TestCommittedResultsFinished(t *testing.T) {
	dirs, err := filepath.Glob(filepath.Join(committedResults, "*"))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, dir := range dirs {
		if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
			continue
		}
		n++
		name := filepath.Base(dir)
		t.Run(name, func(t *testing.T) {
			exp, err := Load(filepath.Join("..", "..", "experiments", name+".toml"))
			if err != nil {
				t.Fatal(err)
			}
			p, err := Prepare(context.Background(), exp, Plugins{Output: io.Discard, InProcess: builtin.Registry()})
			if err != nil {
				t.Fatal(err)
			}
			committed, err := results.NewLayout(committedResults, name).RecordFiles()
			if err != nil || len(committed) == 0 {
				t.Fatalf("no records files in %s (%v)", dir, err)
			}
			// A copy: Begin claims a run it does not find finished.
			layout := results.NewLayout(t.TempDir(), name)
			if err := os.MkdirAll(layout.Dir, 0o755); err != nil {
				t.Fatal(err)
			}
			recs := map[string]results.Record{}
			for _, f := range committed {
				b, err := os.ReadFile(f)
				if err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(layout.Dir, filepath.Base(f)), b, 0o644); err != nil {
					t.Fatal(err)
				}
				rs, err := results.Read(f)
				if err != nil {
					t.Fatal(err)
				}
				for _, r := range rs {
					if recs[r.Key].Status != results.StatusOK {
						recs[r.Key] = r // a finished record, else the last failure
					}
				}
			}
			store, _, err := results.Open(layout, results.StoreOptions{Owner: "test"})
			if err != nil {
				t.Fatal(err)
			}
			runner := &train.Runner{Exp: exp}
			finished := 0
			for _, run := range p.Runs {
				cfg := runner.Config(run, p.Method(run)).Map()
				st, err := store.Begin(context.Background(), run.Key, cfg)
				if err != nil {
					t.Fatalf("%s: %v", run.Key, err)
				}
				rec, ok := recs[run.Key]
				if !ok {
					t.Errorf("%s: no committed record; host run would train it", run.Key)
					continue
				}
				old, err := rec.MigratedConfig()
				if err != nil {
					t.Fatal(err)
				}
				diff := results.ConfigDiff(old, cfg)
				switch {
				case rec.Status != results.StatusOK:
					// A run that failed (docs/RESULTS.md says which and
					// why) is tried again by design; its configuration
					// is the same all the same.
					if st.Skip != results.NotSkipped || diff != nil {
						t.Errorf("%s: failed; Begin's skip %d, configuration changed: %s", run.Key, st.Skip, strings.Join(diff, "; "))
					}
					t.Logf("%s failed (%s): host run tries it again", run.Key, rec.Error)
				case st.Skip != results.SkipFinished || diff != nil:
					t.Errorf("%s: not finished (Begin's skip %d); host run would train it again: %s", run.Key, st.Skip, strings.Join(diff, "; "))
				default:
					finished++
					// Under the same identity version, the same hash.
					if v := max(rec.Identity, 1); v == identity.Version && rec.ConfigHash != results.HashConfig(cfg) {
						t.Errorf("%s: configuration hash %s, committed %s", run.Key, results.HashConfig(cfg), rec.ConfigHash)
					}
				}
			}
			if len(recs) != len(p.Runs) {
				t.Errorf("%d committed runs, %d runs in the grid", len(recs), len(p.Runs))
			}
			t.Logf("%d of %d runs finished", finished, len(p.Runs))
		})
	}
	if n == 0 {
		t.Fatalf("no results folders in %s", committedResults)
	}
}
