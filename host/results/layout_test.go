package results

import (
	"path/filepath"
	"slices"
	"testing"
)

// Curve files are named by the run key, reversibly.
func TestCurveFileRoundTrip(t *testing.T) {
	tests := []struct {
		key, file string
	}{
		{"method=SAM/arch=cnn/seed=1", "method=SAM,arch=cnn,seed=1.csv"},
		{"method=OT-MDR/arch=resnet10*5/seed=12", "method=OT-MDR,arch=resnet10%2A5,seed=12.csv"},
		{"method=SAM (ρ=0.05)/arch=cnn+mlp/seed=-3", "method=SAM%20%28%CF%81=0.05%29,arch=cnn+mlp,seed=-3.csv"},
		{"a,b%c/d", "a%2Cb%25c,d.csv"},
	}
	for _, tt := range tests {
		got := filepath.Base(CurveFile(tt.key))
		if got != tt.file {
			t.Errorf("CurveFile(%q) = %q, want %q", tt.key, got, tt.file)
		}
		back, err := CurveKey(filepath.Join("results", "x", CurvesDir, got))
		if err != nil || back != tt.key {
			t.Errorf("CurveKey(%q) = %q, %v; want %q", got, back, err, tt.key)
		}
	}
	for _, bad := range []string{"x.txt", "a%2.csv", "a%zz.csv"} {
		if _, err := CurveKey(bad); err == nil {
			t.Errorf("CurveKey(%q): no error", bad)
		}
	}
}

// The parameter dumps of train.dump_params_every (issue 39): one folder
// per run, named by its key as its other files are, one file per step
// whose name sorts by step; the folder is among the run's files (kept
// aside with them when the run is superseded) and among the folders host
// check tries when dumps are on.
func TestParamsLayout(t *testing.T) {
	l := NewLayout("results", "exp")
	key := "method=SAM (ρ=0.05)/arch=cnn/seed=1"
	stem := KeyFileStem(key)
	if got, want := l.ParamsStep(key, 42), filepath.Join("results", "exp", "params", stem, "step-00000042.safetensors"); got != want {
		t.Errorf("ParamsStep = %q, want %q", got, want)
	}
	if a, b := ParamsStepFile(9), ParamsStepFile(10); !(a < b) {
		t.Errorf("%s sorts after %s", a, b)
	}
	if !slices.Contains(RunFiles(key), filepath.Join(ParamsDir, stem)) {
		t.Errorf("RunFiles(%q) = %v, without the parameter dumps' folder", key, RunFiles(key))
	}
	if !slices.Contains(RunFolders(false, true), ParamsDir) || slices.Contains(RunFolders(true, false), ParamsDir) {
		t.Errorf("RunFolders: %v with dumps, %v without", RunFolders(false, true), RunFolders(true, false))
	}
}
