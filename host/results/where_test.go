package results

import (
	"strings"
	"testing"
)

func TestWhere(t *testing.T) {
	clean := Record{Method: "SGD", Arch: "mlp", Seed: 1, Config: map[string]any{"train.optimizer.lr": 0.05}}
	noisy := Record{Method: "SGD rate=0.2", Base: "SGD", Arch: "mlp", Seed: 2, Config: map[string]any{"data.label_noise.rate": 0.2, "data.label_noise.kind": "symmetric"}}
	for _, tc := range []struct {
		where        string
		clean, noisy bool
	}{
		{"data.label_noise.rate=0", true, false},
		{"data.label_noise.rate=0.20", false, true},
		{"data.label_noise.kind=symmetric", false, true},
		{"method=SGD", true, true},
		{"seed=2", false, true},
		{"arch=mlp", true, true},
		{"train.optimizer.lr=0.05", true, false},
		{"params.rho=0.05", false, false},
		{"seed=2|3", false, true},
		{"seed=1 | 2", true, true},
		{"method=SAM|SGD", true, true},
		{"method=SAM|SWA", false, false},
		{"data.label_noise.rate=0.4|0.2", false, true},
	} {
		w, err := ParseWhere(tc.where)
		if err != nil {
			t.Fatal(err)
		}
		if got := w.Match(clean); got != tc.clean {
			t.Errorf("%s on the clean run: %v", tc.where, got)
		}
		if got := w.Match(noisy); got != tc.noisy {
			t.Errorf("%s on the noisy run: %v", tc.where, got)
		}
	}
	for _, bad := range []string{"rate", "=0", ""} {
		if _, err := ParseWhere(bad); err == nil {
			t.Errorf("ParseWhere(%q): no error", bad)
		}
	}
	w, _ := ParseWhere("seed=3")
	if _, err := Filter([]Record{clean, noisy}, []Where{w}); err == nil || !strings.Contains(err.Error(), "no record of the 2 matches --where seed=3") {
		t.Errorf("Filter with no match: %v", err)
	}
	w, _ = ParseWhere("data.label_noise.rate=0")
	if got, err := Filter([]Record{clean, noisy}, []Where{w}); err != nil || len(got) != 1 || got[0].Seed != 1 {
		t.Errorf("Filter: %v, %v", got, err)
	}
}
