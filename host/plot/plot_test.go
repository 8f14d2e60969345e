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
)

func TestKeyFileNameRoundTrip(t *testing.T) {
	tests := []struct {
		key, file string
	}{
		{"method=SAM/arch=cnn/seed=1", "method=SAM,arch=cnn,seed=1.csv"},
		{"method=OT-MDR/arch=resnet10*5/seed=12", "method=OT-MDR,arch=resnet10%2A5,seed=12.csv"},
		{"method=SAM (ρ=0.05)/arch=cnn+mlp/seed=-3", "method=SAM%20%28%CF%81=0.05%29,arch=cnn+mlp,seed=-3.csv"},
		{"a,b%c/d", "a%2Cb%25c,d.csv"},
	}
	for _, tt := range tests {
		got := KeyFileName(tt.key)
		if got != tt.file {
			t.Errorf("KeyFileName(%q) = %q, want %q", tt.key, got, tt.file)
		}
		back, err := KeyFromFileName(filepath.Join("results", "x", CurvesDir, got))
		if err != nil || back != tt.key {
			t.Errorf("KeyFromFileName(%q) = %q, %v; want %q", got, back, err, tt.key)
		}
	}
	for _, bad := range []string{"x.txt", "a%2.csv", "a%zz.csv"} {
		if _, err := KeyFromFileName(bad); err == nil {
			t.Errorf("KeyFromFileName(%q): no error", bad)
		}
	}
}

func TestParseKey(t *testing.T) {
	tests := []struct {
		key          string
		method, arch string
		seed         int64
		ok           bool
	}{
		{"method=SGD/arch=cnn/seed=1", "SGD", "cnn", 1, true},
		{"method=a/b/arch=resnet18*2+mlp/seed=30", "a/b", "resnet18*2+mlp", 30, true},
		{"method=SGD/seed=1", "", "", 0, false},
		{"SGD", "", "", 0, false},
		{"method=SGD/arch=cnn/seed=x", "", "", 0, false},
	}
	for _, tt := range tests {
		m, a, s, err := ParseKey(tt.key)
		if (err == nil) != tt.ok || m != tt.method || a != tt.arch || s != tt.seed {
			t.Errorf("ParseKey(%q) = %q, %q, %d, %v", tt.key, m, a, s, err)
		}
	}
}

// sameRows compares rows with NaN equal to NaN.
func sameRows(a, b []Row) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		for _, c := range Columns() {
			x, okx := a[i].Value(c)
			y, oky := b[i].Value(c)
			if okx != oky || (okx && x != y) {
				return false
			}
		}
	}
	return true
}

func TestCurveRoundTrip(t *testing.T) {
	path := CurvePath(t.TempDir(), "exp", "method=SAM/arch=cnn/seed=2")
	w, err := CreateCurve(path)
	if err != nil {
		t.Fatal(err)
	}
	r2 := NaNRow(2, 44)
	r2.LR, r2.TrainLoss, r2.TrainAcc, r2.Seconds = 0.05, 0.25, 0.9, 2.5
	rows := []Row{
		{Epoch: 1, Step: 22, LR: 0.1, TrainLoss: 1.0 / 3, TrainAcc: 0.5, TestLoss: 0.7, TestAcc: 0.75, Seconds: 1.25},
		r2,
		{Epoch: 3, Step: 66, LR: 1e-5, TrainLoss: 0.01, TrainAcc: 1, TestLoss: 0.2, TestAcc: 0.9375, Seconds: 3.75},
	}
	for _, r := range rows {
		if err := w.Append(r); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := w.Append(rows[0]); err == nil {
		t.Error("Append after Close: no error")
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(raw)), "\n")
	if lines[0] != "epoch,step,lr,train_loss,train_acc,test_loss,test_acc,seconds" || lines[2] != "2,44,0.05,0.25,0.9,,,2.5" {
		t.Errorf("file:\n%s", raw)
	}
	got, err := ReadCurve(path)
	if err != nil {
		t.Fatal(err)
	}
	if !sameRows(got, rows) {
		t.Errorf("read back %+v\nwant %+v", got, rows)
	}
	curves, err := ReadCurves(filepath.Dir(filepath.Dir(path)))
	if err != nil {
		t.Fatal(err)
	}
	if len(curves) != 1 || curves[0].Method != "SAM" || curves[0].Arch != "cnn" || curves[0].Seed != 2 || !sameRows(curves[0].Rows, rows) {
		t.Errorf("ReadCurves: %+v", curves)
	}
}

func TestDecodeCurve(t *testing.T) {
	tests := []struct {
		name, in string
		want     []Row
		err      string
	}{
		{"reordered columns and extras", "test_acc,epoch,extra\n0.5,1,x\n,2,y\n",
			[]Row{withTestAcc(NaNRow(1, 0), 0.5), NaNRow(2, 0)}, ""},
		{"no epoch column", "step,lr\n1,2\n", nil, "no epoch column"},
		{"bad number", "epoch,lr\n1,abc\n", nil, "column lr"},
		{"short row", "epoch,lr\n1\n", nil, "1 cells"},
		{"empty", "", nil, "empty file"},
		{"empty epoch", "epoch,lr\n,0.1\n", nil, "empty epoch"},
	}
	for _, tt := range tests {
		got, err := DecodeCurve(strings.NewReader(tt.in))
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("%s: error %v, want %q", tt.name, err, tt.err)
			}
			continue
		}
		if err != nil || !sameRows(got, tt.want) {
			t.Errorf("%s: got %+v, %v; want %+v", tt.name, got, err, tt.want)
		}
	}
}

func withTestAcc(r Row, v float64) Row {
	r.TestAcc = v
	return r
}

func curve(key string, vals ...float64) Curve {
	m, a, s, _ := ParseKey(key)
	c := Curve{Key: key, Method: m, Arch: a, Seed: s}
	for i, v := range vals {
		r := NaNRow(i+1, int64(10*(i+1)))
		r.TestAcc = v
		c.Rows = append(c.Rows, r)
	}
	return c
}

func TestMeanOverSeeds(t *testing.T) {
	nan := math.NaN()
	curves := []Curve{
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
		{"step without band", MeanOptions{X: ColStep}, []string{"SAM", "SGD"},
			[][]float64{{10, 20, 30}, {10, 20}}, [][]float64{{0.6, 0.8, 0.8}, {0.4, 0.6}}, false},
	}
	for _, tt := range tests {
		got, err := MeanOverSeeds(curves, ColTestAcc, tt.opts)
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
	if s, err := MeanOverSeeds(curves, ColTestAcc, MeanOptions{}); err != nil || s[0].Runs != 2 || s[1].Runs != 1 {
		t.Errorf("runs of %+v, %v: want 2 and 1", s, err)
	}
	for _, bad := range []struct{ metric, x string }{{"nll", ""}, {ColEpoch, ""}, {ColTestAcc, "lr"}, {ColTrainLoss, ""}} {
		if _, err := MeanOverSeeds(curves, bad.metric, MeanOptions{X: bad.x}); err == nil {
			t.Errorf("MeanOverSeeds(%q, x=%q): no error", bad.metric, bad.x)
		}
	}
	// Several archs: the arch joins the label.
	multi := append(curves[:1:1], curve("method=SAM/arch=mlp/seed=1", 0.1))
	s, err := MeanOverSeeds(multi, ColTestAcc, MeanOptions{})
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
	_, err := MeanOverSeeds([]Curve{curve("method=SAM/arch=cnn/seed=1", nan, nan)}, ColTestAcc, MeanOptions{})
	if err == nil || !strings.Contains(err.Error(), "eval.every_epochs") {
		t.Fatalf("error %v, want a hint about eval.every_epochs", err)
	}
}
