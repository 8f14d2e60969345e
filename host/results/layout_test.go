package results

import (
	"path/filepath"
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
