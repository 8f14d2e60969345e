package results

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/optlab/optlab/host/identity"
)

// A record's identity version is written beside its configuration, not
// hashed; a record without one (written before versions) is version 1,
// and Begin finds it finished under the same configuration; a record of a
// version this optlab does not know (a newer optlab's) is an error naming
// it, not a run to skip or supersede.
func TestRecordIdentityVersion(t *testing.T) {
	cfg := map[string]any{"params.rho": 0.05, "train.optimizer.lr": 0.1}
	dir := t.TempDir()
	l := Layout{Dir: dir}
	old := rec("old", "SAM", 1, cfg, t0)
	now := rec("now", "SAM", 2, cfg, t0)
	now.Identity = identity.Version
	newer := rec("newer", "SAM", 3, cfg, t0)
	newer.Identity = identity.Version + 1
	for _, r := range []Record{old, now, newer} {
		if err := Append(l.Runs(), r); err != nil {
			t.Fatal(err)
		}
	}
	text, err := os.ReadFile(l.Runs())
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(text)), "\n")
	if strings.Contains(lines[0], `"identity"`) || !strings.Contains(lines[1], fmt.Sprintf(`"identity":%d`, identity.Version)) {
		t.Errorf("identity in the records' lines:\n%s", text)
	}
	recs, err := Read(l.Runs())
	if err != nil {
		t.Fatal(err)
	}
	if recs[0].ConfigHash != recs[1].ConfigHash || recs[1].ConfigHash != HashConfig(cfg) {
		t.Errorf("the version changed the hash: %s, %s, want %s", recs[0].ConfigHash, recs[1].ConfigHash, HashConfig(cfg))
	}
	if recs[1].Identity != identity.Version {
		t.Errorf("read back identity %d, want %d", recs[1].Identity, identity.Version)
	}

	s, _, err := Open(l, StoreOptions{Owner: "me"})
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"old", "now"} {
		st, err := s.Begin(context.Background(), key, cfg)
		if err != nil || st.Skip != SkipFinished {
			t.Errorf("Begin(%s) = %+v, %v; want finished", key, st, err)
		}
	}
	st, err := s.Begin(context.Background(), "newer", cfg)
	if want := fmt.Sprintf("identity version %d", identity.Version+1); err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("Begin(newer) = %+v, %v; want an error naming %s", st, err, want)
	}
	if _, err := os.Stat(filepath.Join(dir, SupersededDir)); err == nil {
		t.Error("a record of a newer optlab was superseded")
	}

	// Merge compares records of versions it knows, and refuses to pool
	// one it does not know with another configuration.
	if _, err := Merge([]Record{old, now}); err != nil {
		t.Errorf("Merge of a record without version and one of version %d: %v", identity.Version, err)
	}
	other := newer
	other.Key, other.Config = "newer2", map[string]any{"params.rho": 0.1}
	if _, err := Merge([]Record{newer, other}); err == nil {
		t.Error("Merge pooled records of an unknown identity version")
	}
}
