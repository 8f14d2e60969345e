package engine

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/optlab/optlab/sdk/optim"
)

// A plugin's vectors in host memory are bounded by the engine's Budget: an
// Alloc beyond it fails its op (wrapping ErrOverBudget, naming the vector
// and the limit), the engine keeps working, and a Free gives the bytes back.
// Spilled vectors count too; a program's ops are bounded before it runs.
func TestHostBudget(t *testing.T) {
	m := semTiny(t, []int64{4}, 5, 3)
	vec := 4 * m.Numel
	tests := []struct {
		name  string
		cfg   func(Config) Config
		limit int64
	}{
		{"cpu vectors", func(c Config) Config { return c }, 3 * vec},
		// one vector within the device budget (on the CPU, so held), the
		// next spilled (held too): the third is refused
		{"spilled vectors", func(c Config) Config {
			var log []string
			return spillCfg(c, vec, &log)
		}, 2 * vec},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := tc.cfg(Config{Seed: 3})
			cfg.HostBudget = NewBudget(tc.limit, "a test's limit")
			e := semEngine(t, cfg, m)
			p := optim.Prog()
			fit := int(tc.limit / vec)
			for i := range fit {
				p.Alloc(optim.Vec(i+1), 0)
			}
			semExec(t, e, p)
			over := optim.Vec(fit + 1)
			_, err := e.Exec(context.Background(), optim.Prog().Alloc(over, 0))
			if !errors.Is(err, ErrOverBudget) {
				t.Fatalf("alloc beyond the budget: err = %v, want ErrOverBudget", err)
			}
			for _, w := range []string{"vector", "a test's limit", "free what the plugin no longer needs"} {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
			if got := cfg.HostBudget.Held(); got != int64(fit)*vec {
				t.Errorf("held %d bytes after a refused alloc, want %d", got, int64(fit)*vec)
			}
			semExec(t, e, optim.Prog().Free(1).Alloc(over, 0))
			semExec(t, e, optim.Prog().Free(over))
			if got := cfg.HostBudget.Held(); got != int64(fit-1)*vec {
				t.Errorf("held %d bytes after frees, want %d", got, int64(fit-1)*vec)
			}
		})
	}
}

func TestCheckProgram(t *testing.T) {
	m := semTiny(t, []int64{4}, 5, 3)
	cfg := Config{Seed: 3, HostBudget: NewBudget(1<<20, "1 MiB")}
	e := semEngine(t, cfg, m)
	tests := []struct {
		ops, wire int
		want      string
	}{
		{10, 40, ""},
		{optim.MaxProgramOps + 1, 4 * (optim.MaxProgramOps + 1), "at most 65536 ops"},
		{1000, 1 << 20, "program of 1000 ops"}, // decoded estimate beyond 1 MiB
	}
	for _, tc := range tests {
		err := e.CheckProgram(tc.ops, tc.wire)
		if (err == nil) != (tc.want == "") || (err != nil && !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("CheckProgram(%d, %d) = %v, want %q", tc.ops, tc.wire, err, tc.want)
		}
	}
	long := optim.Prog()
	for i := range optim.MaxProgramOps + 1 {
		long.Fill(optim.Vec(i%3+1), optim.K(0))
	}
	if _, err := e.Exec(context.Background(), long); err == nil || !strings.Contains(err.Error(), "at most 65536 ops") {
		t.Errorf("Exec of %d ops: err = %v", len(long.Ops), err)
	}
}
