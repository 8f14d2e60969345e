package results

import (
	"strings"
	"testing"
)

func TestKeyFileStem(t *testing.T) {
	cases := []struct{ key, stem string }{
		{"method=SAM/arch=cnn/seed=1", "method=SAM,arch=cnn,seed=1"},
		{"method=A B/arch=cnn/seed=1", "method=A%20B,arch=cnn,seed=1"},
		{"method=A_B/arch=cnn/seed=1", "method=A_B,arch=cnn,seed=1"},
		{"method=a,b/arch=x/seed=2", "method=a%2Cb,arch=x,seed=2"},
		{"method=OT-MDR σ 0/arch=lenet5/seed=3", "method=OT-MDR%20%CF%83%200,arch=lenet5,seed=3"},
	}
	seen := map[string]string{}
	for _, c := range cases {
		got := KeyFileStem(c.key)
		if got != c.stem {
			t.Errorf("KeyFileStem(%q) = %q, want %q", c.key, got, c.stem)
		}
		if other, ok := seen[got]; ok {
			t.Errorf("%q and %q share the file stem %q", other, c.key, got)
		}
		seen[got] = c.key
		back, err := KeyFromFileStem(got)
		if err != nil || back != c.key {
			t.Errorf("KeyFromFileStem(%q) = %q, %v", got, back, err)
		}
	}
	if err := CheckKeyFileName("method=" + strings.Repeat("x", 300) + "/arch=cnn/seed=1"); err == nil || !strings.Contains(err.Error(), "more than the 255") {
		t.Errorf("long key: %v", err)
	}
	if err := CheckKeyFileName("method=SAM/arch=cnn/seed=1"); err != nil {
		t.Error(err)
	}
}

// FuzzKeyFileStem checks the mapping is injective (it round-trips) and
// yields one path element.
func FuzzKeyFileStem(f *testing.F) {
	f.Add("method=A B/arch=cnn/seed=1")
	f.Add("%2F,/..")
	f.Fuzz(func(t *testing.T, key string) {
		stem := KeyFileStem(key)
		if strings.ContainsAny(stem, "/\\ \x00") {
			t.Fatalf("stem %q of %q is not one safe path element", stem, key)
		}
		back, err := KeyFromFileStem(stem)
		if err != nil || back != key {
			t.Fatalf("round trip of %q: %q, %v", key, back, err)
		}
	})
}

func TestConfigDiff(t *testing.T) {
	old := map[string]any{"train.epochs": float64(10), "params.rho": 0.05, "train.optimizer": "sgd lr=0.05", "params.fail_at": float64(1)}
	now := map[string]any{"train.epochs": int64(10), "params.rho": 0.1, "train.optimizer": "sgd lr=0.1", "data.validation": 0.1}
	got := strings.Join(ConfigDiff(old, now), "; ")
	want := `params.fail_at: 1 → (unset); params.rho: 0.05 → 0.1; train.optimizer: "sgd lr=0.05" → "sgd lr=0.1"`
	if got != want {
		t.Errorf("ConfigDiff = %s\nwant        %s", got, want)
	}
	if d := ConfigDiff(map[string]any{"a": float64(5)}, map[string]any{"a": int64(5), "b": 1}); d != nil {
		t.Errorf("equal configurations differ: %v", d)
	}
}

// Keys omitted at their default (train.tf32, …): a side that lacks one has
// the default, so turning the setting on, or off again, is a difference,
// and a record without it equals a configuration at the default.
func TestConfigDiffOmittedAtDefault(t *testing.T) {
	plain := map[string]any{"params.rho": 0.05}
	tf32 := map[string]any{"params.rho": 0.05, "train.tf32": true}
	if d := strings.Join(ConfigDiff(plain, tf32), "; "); d != "train.tf32: false → true" {
		t.Errorf("turning tf32 on: %q", d)
	}
	if d := strings.Join(ConfigDiff(tf32, plain), "; "); d != "train.tf32: true → false" {
		t.Errorf("turning tf32 off: %q", d)
	}
	if d := ConfigDiff(plain, map[string]any{"params.rho": 0.05, "train.deterministic": false}); d != nil {
		t.Errorf("an explicit default differs: %v", d)
	}
	if SameConfig(plain, tf32) || !SameConfig(tf32, map[string]any{"params.rho": 0.05, "train.tf32": true}) {
		t.Error("SameConfig with a key omitted at its default")
	}
	if HashConfig(plain) == HashConfig(tf32) {
		t.Error("the hash ignores train.tf32")
	}
}

// TestConfigDiffOmittedDefaults: train.precision is written only when not
// fp32; a record without it is an fp32 run: the same as an fp32 run of
// today (no key either), different from a bf16 one, both ways, and Merge
// keeps them apart.
func TestConfigDiffOmittedDefaults(t *testing.T) {
	fp32 := map[string]any{"params.rho": 0.05}
	bf16 := map[string]any{"params.rho": 0.05, "train.precision": "bf16"}
	explicit := map[string]any{"params.rho": 0.05, "train.precision": "fp32"}
	if d := ConfigDiff(fp32, map[string]any{"params.rho": 0.05}); d != nil {
		t.Errorf("fp32 vs fp32: %v", d)
	}
	if d := ConfigDiff(fp32, explicit); d != nil {
		t.Errorf("missing key vs its default written out: %v", d)
	}
	if got, want := strings.Join(ConfigDiff(fp32, bf16), "; "), `train.precision: "fp32" → "bf16"`; got != want {
		t.Errorf("fp32 record, bf16 now: %q, want %q", got, want)
	}
	if got, want := strings.Join(ConfigDiff(bf16, fp32), "; "), `train.precision: "bf16" → "fp32"`; got != want {
		t.Errorf("bf16 record, fp32 now: %q, want %q", got, want)
	}
	if SameConfig(fp32, bf16) || SameConfig(bf16, fp32) {
		t.Error("SameConfig: fp32 and bf16 are the same")
	}
	if got, want := strings.Join(ConfigDiff(fp32, map[string]any{"params.rho": 0.05, "model.memory_format": "channels_last"}), "; "),
		`model.memory_format: "contiguous" → "channels_last"`; got != want {
		t.Errorf("memory format: %q, want %q", got, want)
	}
	base := Record{Experiment: "e", Method: "SAM", Dataset: "d", Arch: "cnn", Status: StatusOK}
	a, b := base, base
	a.Key, a.Config = "method=SAM/arch=cnn/seed=1", fp32
	b.Key, b.Config = "method=SAM/arch=cnn/seed=2", bf16
	if _, err := Merge([]Record{a, b}); err == nil || !strings.Contains(err.Error(), "mixes configurations") {
		t.Errorf("fp32 and bf16 runs merged into one cell: %v", err)
	}
}

// TestMergeOlderRecord: a record written by an older optlab (fewer config
// keys, so another hash) merges with a newer one of the same settings; a
// real difference is still refused.
func TestMergeOlderRecord(t *testing.T) {
	base := Record{Experiment: "e", Method: "SAM", Dataset: "d", Arch: "cnn", Status: StatusOK}
	old, now, other := base, base, base
	old.Key, old.Config = "method=SAM/arch=cnn/seed=1", map[string]any{"params.rho": 0.05}
	now.Key, now.Config = "method=SAM/arch=cnn/seed=2", map[string]any{"params.rho": 0.05, "train.optimizer.lr": 0.1}
	other.Key, other.Config = "method=SAM/arch=cnn/seed=3", map[string]any{"params.rho": 0.1, "train.optimizer.lr": 0.1}
	if _, err := Merge([]Record{old, now}); err != nil {
		t.Errorf("older and newer record of one configuration: %v", err)
	}
	if _, err := Merge([]Record{old, now, other}); err == nil || !strings.Contains(err.Error(), "mixes configurations") {
		t.Errorf("different rho merged: %v", err)
	}
}

// TestConfigDiffLabelNoise: the [data.label_noise] keys are recorded only
// when label noise is on; a record without them is a run without noise,
// another run than one with noise, both ways.
func TestConfigDiffLabelNoise(t *testing.T) {
	clean := map[string]any{"params.rho": 0.05}
	noisy := map[string]any{"params.rho": 0.05, "data.label_noise.kind": "symmetric", "data.label_noise.rate": 0.2, "data.label_noise.seed": int64(0)}
	if got, want := strings.Join(ConfigDiff(clean, noisy), "; "), `data.label_noise.kind: "" → "symmetric"; data.label_noise.rate: 0 → 0.2`; got != want {
		t.Errorf("clean record, noise now: %q, want %q", got, want)
	}
	if got, want := strings.Join(ConfigDiff(noisy, clean), "; "), `data.label_noise.kind: "symmetric" → ""; data.label_noise.rate: 0.2 → 0`; got != want {
		t.Errorf("noisy record, none now: %q, want %q", got, want)
	}
	if SameConfig(clean, noisy) {
		t.Error("SameConfig: runs with and without label noise are the same")
	}
	asym := map[string]any{"params.rho": 0.05, "data.label_noise.kind": "asymmetric", "data.label_noise.rate": 0.2, "data.label_noise.seed": int64(0), "data.label_noise.map": "{9 = 1}"}
	if got, want := strings.Join(ConfigDiff(noisy, asym), "; "), `data.label_noise.kind: "symmetric" → "asymmetric"; data.label_noise.map: "" → "{9 = 1}"`; got != want {
		t.Errorf("symmetric record, asymmetric now: %q, want %q", got, want)
	}
}
