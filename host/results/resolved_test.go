package results

import (
	"bytes"
	"context"
	"os"
	"reflect"
	"testing"
)

// A record's Resolved (what the optimizer chose for a -1 "auto") is kept
// apart from its configuration: it survives the records file, and neither
// the hash nor Begin's comparison sees it, so a host that configures the
// run again (rho2 = -1) finds it finished rather than changed.
func TestResolvedIsNotConfiguration(t *testing.T) {
	l := Layout{Dir: t.TempDir()}
	cfg := map[string]any{"params.rho1": 0.05, "params.rho2": -1.0}
	r := rec("k", "OT-MDR", 1, cfg, t0)
	r.Resolved = map[string]any{"params.rho2": 0.1}
	plain := rec("k2", "SAM", 1, map[string]any{"params.rho": 0.05}, t0)
	for _, x := range []Record{r, plain} {
		if err := Append(l.Runs(), x); err != nil {
			t.Fatal(err)
		}
	}
	got, err := Read(l.Runs())
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got[0].Resolved, r.Resolved) || got[0].ConfigHash != HashConfig(cfg) {
		t.Errorf("record round trip: resolved %v, hash %s; want %v, %s", got[0].Resolved, got[0].ConfigHash, r.Resolved, HashConfig(cfg))
	}
	raw, err := os.ReadFile(l.Runs())
	if err != nil {
		t.Fatal(err)
	}
	if n := bytes.Count(raw, []byte(`"resolved":`)); n != 1 {
		t.Errorf(`%d "resolved" fields, want 1 (omitted when empty)`, n)
	}
	s, _, err := Open(l, StoreOptions{Owner: "me"})
	if err != nil {
		t.Fatal(err)
	}
	st, err := s.Begin(context.Background(), "k", map[string]any{"params.rho1": 0.05, "params.rho2": -1.0})
	if err != nil || st.Skip != SkipFinished || st.Superseded != "" {
		t.Errorf("Begin with the configured -1 = %+v, %v; want SkipFinished", st, err)
	}
}
