package plot

import (
	"bytes"
	"image/png"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/optlab/optlab/host/curves"
)

func curve(key string, vals ...float64) curves.Curve {
	m, a, s, _ := curves.ParseKey(key)
	c := curves.Curve{Key: key, Method: m, Arch: a, Seed: s}
	for i, v := range vals {
		r := curves.NaNRow(i+1, int64(10*(i+1)))
		r.EvalAcc = v
		c.Rows = append(c.Rows, r)
	}
	return c
}

func TestMeanOverSeeds(t *testing.T) {
	nan := math.NaN()
	runs := []curves.Curve{
		curve("method=SAM/arch=cnn/seed=1", 0.5, nan, 0.7),
		curve("method=SAM/arch=cnn/seed=2", 0.7, 0.8, 0.9),
		curve("method=SGD/arch=cnn/seed=1", 0.4, 0.6),
	}
	tests := []struct {
		name   string
		opts   MeanOptions
		labels []string
		x      [][]float64
		y      [][]float64
		band   bool
	}{
		{"epoch with band", MeanOptions{Band: true}, []string{"SAM", "SGD"},
			[][]float64{{1, 2, 3}, {1, 2}}, [][]float64{{0.6, 0.8, 0.8}, {0.4, 0.6}}, true},
		{"step without band", MeanOptions{X: curves.ColStep}, []string{"SAM", "SGD"},
			[][]float64{{10, 20, 30}, {10, 20}}, [][]float64{{0.6, 0.8, 0.8}, {0.4, 0.6}}, false},
	}
	for _, tt := range tests {
		got, err := MeanOverSeeds(runs, curves.ColEvalAcc, tt.opts)
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		if len(got) != len(tt.labels) {
			t.Fatalf("%s: %d series", tt.name, len(got))
		}
		for i, s := range got {
			if s.Label != tt.labels[i] || s.Color != i || !reflect.DeepEqual(s.X, tt.x[i]) || !near(s.Y, tt.y[i]) {
				t.Errorf("%s: series %d = %+v", tt.name, i, s)
			}
			if (s.Hi != nil) != (tt.band && s.Label == "SAM") {
				t.Errorf("%s: series %s band %v", tt.name, s.Label, s.Hi)
			}
		}
		if tt.band {
			sd := math.Sqrt(0.02) // std of {0.5, 0.7}
			if math.Abs(got[0].Hi[0]-0.6-sd) > 1e-12 || math.Abs(got[0].Lo[1]-0.8) > 1e-12 {
				t.Errorf("%s: band %v %v", tt.name, got[0].Lo, got[0].Hi)
			}
		}
	}
	if s, err := MeanOverSeeds(runs, curves.ColEvalAcc, MeanOptions{}); err != nil || s[0].Runs != 2 || s[1].Runs != 1 {
		t.Errorf("runs of %+v, %v: want 2 and 1", s, err)
	}
	for _, bad := range []struct{ metric, x string }{{"nll", ""}, {curves.ColEpoch, ""}, {curves.ColEvalAcc, "lr"}, {curves.ColTrainLoss, ""}} {
		if _, err := MeanOverSeeds(runs, bad.metric, MeanOptions{X: bad.x}); err == nil {
			t.Errorf("MeanOverSeeds(%q, x=%q): no error", bad.metric, bad.x)
		}
	}
	// Several archs: the arch joins the label.
	multi := append(runs[:1:1], curve("method=SAM/arch=mlp/seed=1", 0.1))
	s, err := MeanOverSeeds(multi, curves.ColEvalAcc, MeanOptions{})
	if err != nil || len(s) != 2 || s[0].Label != "SAM (cnn)" || s[1].Label != "SAM (mlp)" {
		t.Errorf("multi-arch series %+v, %v", s, err)
	}
}

func near(a, b []float64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if math.Abs(a[i]-b[i]) > 1e-12 {
			return false
		}
	}
	return true
}

// checkPNG fails unless path is a PNG of the given pixel size (or any size
// when w is 0) and at least minBytes long.
func checkPNG(t *testing.T, path string, w, h, minBytes int) {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(raw) < minBytes {
		t.Errorf("%s: %d bytes, want ≥ %d", path, len(raw), minBytes)
	}
	img, err := png.Decode(bytes.NewReader(raw))
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	if b := img.Bounds(); w > 0 && (b.Dx() != w || b.Dy() != h) {
		t.Errorf("%s: %d×%d pixels, want %d×%d", path, b.Dx(), b.Dy(), w, h)
	}
}

func TestLinesPNG(t *testing.T) {
	dir := t.TempDir()
	s := []Series{
		{Label: "SAM", X: []float64{1, 2, 3}, Y: []float64{0.5, 0.7, 0.8}, Lo: []float64{0.4, 0.6, 0.75}, Hi: []float64{0.6, 0.8, 0.85}},
		{Label: "SGD", X: []float64{1, 2, 3}, Y: []float64{0.4, math.NaN(), 0.7}, Dashed: true, Color: 1},
		{Label: "one point", X: []float64{2}, Y: []float64{0.6}, Color: 2},
	}
	tests := []struct {
		name   string
		panels []Panel
		size   Size
		w, h   int
	}{
		{"one panel", []Panel{{Title: "t", XLabel: "epoch", YLabel: "acc", Series: s}}, Size{Width: 5, Height: 4, DPI: 100}, 500, 400},
		{"two panels default size", []Panel{{Series: s}, {Series: s[:1]}}, Size{}, 0, 0},
	}
	for _, tt := range tests {
		path := filepath.Join(dir, strings.ReplaceAll(tt.name, " ", "_")+".png")
		if err := Lines(path, tt.panels, tt.size); err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		checkPNG(t, path, tt.w, tt.h, 5000)
	}
	if err := Lines(filepath.Join(dir, "x.png"), nil, Size{}); err == nil {
		t.Error("no panels: no error")
	}
	if err := Lines(filepath.Join(dir, "x.png"), []Panel{{Series: []Series{{X: []float64{1}}}}}, Size{}); err == nil {
		t.Error("mismatched series: no error")
	}
}

func TestHeatMapsPNG(t *testing.T) {
	n := 9
	g := Grid{}
	for i := 0; i < n; i++ {
		v := -1 + 2*float64(i)/float64(n-1)
		g.X = append(g.X, v)
		g.Y = append(g.Y, v)
	}
	g2 := Grid{X: g.X, Y: g.Y}
	for j := range g.Y {
		row, row2 := make([]float64, n), make([]float64, n)
		for i := range g.X {
			row[i] = 0.1 + g.X[i]*g.X[i] + 2*g.Y[j]*g.Y[j]
			row2[i] = row[i] * 1.5
		}
		g.Z = append(g.Z, row)
		g2.Z = append(g2.Z, row2)
	}
	g2.Z[0][0] = math.Inf(1)
	g2.Z[1][1] = math.NaN()
	dir := t.TempDir()
	path := filepath.Join(dir, "heat.png")
	err := HeatMaps(path, []HeatPanel{{Title: "train", XLabel: "α", YLabel: "β", Grid: g}, {Title: "test", Grid: g2}},
		HeatOptions{Log: true, Contours: 6, Label: "log10 loss", Size: Size{Width: 10, Height: 4, DPI: 80}})
	if err != nil {
		t.Fatal(err)
	}
	checkPNG(t, path, 800, 320, 10000)
	flat := Grid{X: []float64{0, 1}, Y: []float64{0, 1}, Z: [][]float64{{1, 1}, {1, 1}}}
	if err := HeatMaps(filepath.Join(dir, "flat.png"), []HeatPanel{{Grid: flat}}, HeatOptions{Contours: 3}); err != nil {
		t.Errorf("constant grid: %v", err)
	}
	bad := Grid{X: []float64{0, 1}, Y: []float64{0}, Z: [][]float64{{1}}}
	if err := HeatMaps(filepath.Join(dir, "bad.png"), []HeatPanel{{Grid: bad}}, HeatOptions{}); err == nil {
		t.Error("ragged grid: no error")
	}
}

// TestMeanOverSeedsNoTestCurve: asking for test curves of runs that never
// evaluated on the test set says how to get them.
func TestMeanOverSeedsNoTestCurve(t *testing.T) {
	nan := math.NaN()
	_, err := MeanOverSeeds([]curves.Curve{curve("method=SAM/arch=cnn/seed=1", nan, nan)}, curves.ColEvalAcc, MeanOptions{})
	if err == nil || !strings.Contains(err.Error(), "eval.every_epochs") {
		t.Fatalf("error %v, want a hint about eval.every_epochs", err)
	}
}
