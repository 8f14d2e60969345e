package results

import (
	"bytes"
	"context"
	"math"
	"os"
	"reflect"
	"strings"
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

// A non-finite resolved value that reaches a record is written as a
// string, never failing the record's encoding.
func TestResolvedNonFiniteEncoded(t *testing.T) {
	r := rec("k", "m", 1, map[string]any{"params.x": 1.0}, t0)
	r.Resolved = map[string]any{"params.a": math.NaN(), "params.b": []any{1.0, math.Inf(1)}, "params.c": float32(math.Inf(-1)), "params.d": 0.5}
	line, err := Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{`"params.a":"NaN"`, `"params.b":[1,"+Inf"]`, `"params.c":"-Inf"`, `"params.d":0.5`} {
		if !strings.Contains(string(line), w) {
			t.Errorf("record %s lacks %s", line, w)
		}
	}
}
