package landscape

import (
	"bytes"
	"context"
	"image/png"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/optlab/optlab/host/results"
	"github.com/optlab/optlab/sdk/optim"
)

// smallLayout is the layout of a conv(3→4, 3×3)+BN+linear(4→5) model, as
// host/model lays it out: weights, biases and BatchNorm affine parameters.
func smallLayout() ([]optim.Tensor, int) {
	specs := []struct {
		name  string
		shape []int64
		kind  string
	}{
		{"features.0.conv.weight", []int64{4, 3, 3, 3}, "weight"},
		{"features.0.conv.bias", []int64{4}, "bias"},
		{"features.0.bn.weight", []int64{4}, "bn"},
		{"features.0.bn.bias", []int64{4}, "bn"},
		{"fc.weight", []int64{5, 4}, "weight"},
		{"fc.bias", []int64{5}, "bias"},
		{"odd.weight", []int64{3}, "weight"}, // a 1-D weight: no filters
	}
	var out []optim.Tensor
	off := int64(0)
	for _, s := range specs {
		out = append(out, optim.Tensor{Name: s.name, Shape: s.shape, Offset: off, Kind: s.kind})
		n, _ := numel(s.shape)
		off += n
	}
	return out, int(off)
}

func randomTheta(n int, seed uint64) []float32 {
	r := rand.New(rand.NewPCG(seed, 1))
	th := make([]float32, n)
	for i := range th {
		th[i] = float32(r.NormFloat64() * 0.3)
	}
	return th
}

func norm64(v []float64) float64 {
	var s float64
	for _, x := range v {
		s += x * x
	}
	return math.Sqrt(s)
}

func norm32(v []float32) float64 {
	var s float64
	for _, x := range v {
		s += float64(x) * float64(x)
	}
	return math.Sqrt(s)
}

func TestFilterNormalization(t *testing.T) {
	layout, n := smallLayout()
	theta := randomTheta(n, 7)
	// A filter of θ that is all zero gives a zero filter of d.
	copy(theta[layout[4].Offset:layout[4].Offset+4], []float32{0, 0, 0, 0})
	d, err := Direction(theta, layout, 42, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, tn := range layout {
		sz, _ := numel(tn.Shape)
		seg := d[tn.Offset : tn.Offset+sz]
		if tn.Kind != KindWeight || len(tn.Shape) < 2 {
			for i, v := range seg {
				if v != 0 {
					t.Errorf("%s[%d] = %g, want 0 (biases, BatchNorm and 1-D weights are ignored)", tn.Name, i, v)
				}
			}
			continue
		}
		rowLen := sz / tn.Shape[0]
		for r := int64(0); r < tn.Shape[0]; r++ {
			lo := tn.Offset + r*rowLen
			nd, nt := norm64(d[lo:lo+rowLen]), norm32(theta[lo:lo+rowLen])
			if math.Abs(nd-nt) > 1e-12*math.Max(1, nt) {
				t.Errorf("%s filter %d: ‖d‖ = %.15g, ‖θ‖ = %.15g", tn.Name, r, nd, nt)
			}
		}
	}
	// Same seed and index: the same direction; another index or seed: another one.
	again, _ := Direction(theta, layout, 42, 0)
	other, _ := Direction(theta, layout, 42, 1)
	seed2, _ := Direction(theta, layout, 43, 0)
	for i := range d {
		if d[i] != again[i] {
			t.Fatalf("direction not reproducible at %d", i)
		}
	}
	if equal(d, other) || equal(d, seed2) {
		t.Error("different index or seed gave the same direction")
	}
	// A second checkpoint of the same layout gets the same Gaussian draw:
	// each filter of its direction is parallel to the first one's.
	theta2 := randomTheta(n, 8)
	d2, _ := Direction(theta2, layout, 42, 0)
	conv := layout[0]
	for r := int64(0); r < 4; r++ {
		lo, hi := conv.Offset+r*27, conv.Offset+(r+1)*27
		var dot float64
		for i := lo; i < hi; i++ {
			dot += d[i] * d2[i]
		}
		if cos := dot / norm64(d[lo:hi]) / norm64(d2[lo:hi]); math.Abs(cos-1) > 1e-12 {
			t.Errorf("conv filter %d: cos(d, d') = %g, want 1", r, cos)
		}
	}
}

func equal(a, b []float64) bool {
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestFilterNormalizedErrors(t *testing.T) {
	layout, n := smallLayout()
	theta := randomTheta(n, 1)
	tests := []struct {
		name   string
		d      []float64
		layout []optim.Tensor
	}{
		{"length mismatch", make([]float64, n-1), layout},
		{"tensor past the end", make([]float64, n), []optim.Tensor{{Name: "w", Shape: []int64{int64(n), 2}, Kind: "weight"}}},
		{"negative offset", make([]float64, n), []optim.Tensor{{Name: "w", Shape: []int64{2, 2}, Offset: -1, Kind: "weight"}}},
		{"negative dim", make([]float64, n), []optim.Tensor{{Name: "w", Shape: []int64{-2, 2}, Kind: "weight"}}},
	}
	for _, tt := range tests {
		if _, err := FilterNormalized(tt.d, theta, tt.layout); err == nil {
			t.Errorf("%s: no error", tt.name)
		}
	}
}

func TestAxis(t *testing.T) {
	tests := []struct {
		steps  int
		radius float64
		want   []float64
		err    bool
	}{
		{1, 1, []float64{0}, false},
		{2, 1, []float64{-1, 0, 1}, false},
		{5, 1, []float64{-1, -0.5, 0, 0.5, 1}, false},
		{4, 0.3, []float64{-0.3, -0.1, 0, 0.1, 0.3}, false},
		{21, 1, nil, false},
		{0, 1, nil, true},
		{5, 0, nil, true},
		{5, math.Inf(1), nil, true},
		{5, math.NaN(), nil, true},
	}
	for _, tt := range tests {
		got, err := Axis(tt.steps, tt.radius)
		if (err != nil) != tt.err {
			t.Errorf("Axis(%d, %g): error %v", tt.steps, tt.radius, err)
			continue
		}
		if tt.err {
			continue
		}
		if tt.want != nil && !near(got, tt.want, 1e-15) {
			t.Errorf("Axis(%d, %g) = %v, want %v", tt.steps, tt.radius, got, tt.want)
		}
		zero := 0
		for i, v := range got {
			if v == 0 {
				zero++
			}
			if i > 0 && v <= got[i-1] {
				t.Errorf("Axis(%d, %g) not increasing: %v", tt.steps, tt.radius, got)
			}
		}
		if zero != 1 || (tt.steps > 1 && (got[0] != -tt.radius || got[len(got)-1] != tt.radius)) {
			t.Errorf("Axis(%d, %g) = %v: want exactly one 0 and the exact ends", tt.steps, tt.radius, got)
		}
	}
}

func near(a, b []float64, tol float64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if math.Abs(a[i]-b[i]) > tol {
			return false
		}
	}
	return true
}

func TestPerturbCentreIsExact(t *testing.T) {
	theta := []float32{1.1, -2.2, 3.3e-7, float32(math.Pi)}
	d := []float64{0.3, 0.1, 1, -1}
	dst := make([]float32, 4)
	if err := Perturb(dst, theta, [][]float64{d, d}, []float64{0, 0}); err != nil {
		t.Fatal(err)
	}
	for i := range theta {
		if dst[i] != theta[i] {
			t.Errorf("θ + 0·d at %d = %v, want %v", i, dst[i], theta[i])
		}
	}
	if err := Perturb(dst, theta, [][]float64{d}, []float64{2}); err != nil {
		t.Fatal(err)
	}
	if dst[0] != float32(float64(theta[0])+0.6) {
		t.Errorf("θ + 2d = %v", dst)
	}
	if Perturb(dst, theta, [][]float64{d}, nil) == nil || Perturb(dst[:2], theta, nil, nil) == nil || Perturb(dst, theta, [][]float64{d[:2]}, []float64{1}) == nil {
		t.Error("mismatched lengths: no error")
	}
}

// quadratic is a toy model: the loss at θ + α·d is read off the parameter
// vector's first entry x = θ₀ + α·d₀ as a·x² + b·x + c (train) and twice
// that (test); with θ₀ = 0 and d₀ = 1, x = α.
func quadratic(a, b, c float64) Evaluator {
	return func(_ context.Context, p []float32) (Metrics, error) {
		x := float64(p[0])
		l := a*x*x + b*x + c
		return Metrics{TrainLoss: l, TestLoss: 2 * l, TrainAcc: 1 / (1 + l), TestAcc: 0.5}, nil
	}
}

func TestSharpnessQuadratic(t *testing.T) {
	theta := []float32{0, 5}
	d := []float64{1, 0}
	tests := []struct {
		name            string
		a, b, c         float64
		steps           int
		radius, sharpR  float64
		wantInc, wantAt float64
	}{
		// a·r² + |b|·r at the end of the interval where b pushes up.
		{"symmetric bowl", 2, 0, 0.1, 21, 1, 1, 2, -1},
		{"tilted bowl", 1, 0.5, 0.3, 21, 1, 1, 1.5, 1},
		{"tilted the other way", 1, -0.5, 0.3, 21, 1, 1, 1.5, -1},
		{"smaller radius than the scan", 3, 0, 0, 21, 1, 0.5, 0.75, -0.5},
		// Even steps: the grid gets 0 added, the ends stay exact.
		{"even steps", 1, 0, 0, 4, 2, 2, 4, -2},
		// A concave (saddle) direction: the centre is the maximum.
		{"concave", -1, 0, 1, 11, 1, 1, 0, 0},
	}
	for _, tt := range tests {
		alphas, err := Axis(tt.steps, tt.radius)
		if err != nil {
			t.Fatal(err)
		}
		var calls int
		sc := &Scanner{Theta: theta, Eval: quadratic(tt.a, tt.b, tt.c), Progress: func(done, total int) {
			calls++
			if done != calls || total != len(alphas) {
				t.Errorf("%s: progress %d/%d at call %d", tt.name, done, total, calls)
			}
		}}
		pts, err := sc.Line(context.Background(), d, alphas)
		if err != nil {
			t.Fatal(err)
		}
		if calls != len(alphas) {
			t.Errorf("%s: %d progress calls for %d points", tt.name, calls, len(alphas))
		}
		s, err := SharpnessOf(pts, tt.sharpR, TrainLoss)
		if err != nil {
			t.Fatal(err)
		}
		if math.Abs(s.Increase-tt.wantInc) > 1e-6 || s.Alpha != tt.wantAt || s.Base != tt.c {
			t.Errorf("%s: sharpness %+v, want increase %g at α = %g over base %g", tt.name, s, tt.wantInc, tt.wantAt, tt.c)
		}
		st, _ := SharpnessOf(pts, tt.sharpR, TestLoss)
		if math.Abs(st.Increase-2*tt.wantInc) > 1e-6 {
			t.Errorf("%s: test sharpness %g, want %g", tt.name, st.Increase, 2*tt.wantInc)
		}
		// The evaluation at α = 0 is the loss at θ itself.
		for _, p := range pts {
			if p.Alpha == 0 && p.TrainLoss != tt.c {
				t.Errorf("%s: loss at α = 0 is %g, want %g", tt.name, p.TrainLoss, tt.c)
			}
		}
	}
}

func TestPlaneAndDiskSharpness(t *testing.T) {
	theta := []float32{0, 0}
	dx, dy := []float64{1, 0}, []float64{0, 1}
	eval := func(_ context.Context, p []float32) (Metrics, error) {
		x, y := float64(p[0]), float64(p[1])
		return Metrics{TrainLoss: x*x + 3*y*y, TestLoss: 1}, nil
	}
	axis, _ := Axis(5, 1)
	sc := &Scanner{Theta: theta, Eval: eval}
	pts, err := sc.Plane(context.Background(), dx, dy, axis, axis)
	if err != nil {
		t.Fatal(err)
	}
	if len(pts) != 25 || pts[1].Alpha != -0.5 || pts[1].Beta != -1 || pts[5].Beta != -0.5 {
		t.Fatalf("plane order: %+v", pts[:6])
	}
	// Within the unit disk the largest value is at (0, ±1): 3.
	s, err := SharpnessOf(pts, 1, TrainLoss)
	if err != nil {
		t.Fatal(err)
	}
	if s.Increase != 3 || s.Alpha != 0 || math.Abs(s.Beta) != 1 || s.Points != 13 {
		t.Errorf("disk sharpness %+v", s)
	}
	g, err := PlaneGrid(pts, TrainLoss)
	if err != nil {
		t.Fatal(err)
	}
	if !near(g.X, axis, 0) || g.Z[0][2] != 3 || g.Z[2][4] != 1 {
		t.Errorf("grid %+v", g)
	}
	if _, err := PlaneGrid(pts[:24], TrainLoss); err == nil {
		t.Error("incomplete plane: no error")
	}
}

func TestSharpnessErrors(t *testing.T) {
	pts := []Point{{Alpha: -1, Metrics: Metrics{TrainLoss: 2}}, {Alpha: 1, Metrics: Metrics{TrainLoss: math.NaN()}}}
	if _, err := SharpnessOf(pts, 1, TrainLoss); err == nil {
		t.Error("no centre: no error")
	}
	pts = append(pts, Point{Metrics: Metrics{TrainLoss: 1}})
	s, err := SharpnessOf(pts, 1, TrainLoss)
	if err != nil || !math.IsInf(s.Increase, 1) {
		t.Errorf("NaN within the radius: %+v, %v; want +Inf", s, err)
	}
	if _, err := SharpnessOf(pts, -1, TrainLoss); err == nil {
		t.Error("negative radius: no error")
	}
}

func TestScanCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	sc := &Scanner{Theta: []float32{0}, Eval: quadratic(1, 0, 0)}
	if _, err := sc.Line(ctx, []float64{1}, []float64{0, 1}); err == nil {
		t.Error("cancelled context: no error")
	}
}

func TestCSVRoundTrip(t *testing.T) {
	tests := []struct {
		name  string
		plane bool
		pts   []Point
	}{
		{"line", false, []Point{
			{Alpha: -1, Metrics: Metrics{TrainLoss: 1.0 / 3, TestLoss: 2.5, TrainAcc: 0.25, TestAcc: 0.125}},
			{Alpha: 0, Metrics: Metrics{TrainLoss: 1e-9, TestLoss: math.Inf(1), TrainAcc: 1, TestAcc: 0}},
		}},
		{"plane", true, []Point{
			{Alpha: -0.5, Beta: 0.5, Metrics: Metrics{TrainLoss: math.Pi, TestLoss: math.E, TrainAcc: 0.1, TestAcc: 0.2}},
			{Alpha: 0.5, Beta: 0.5, Metrics: Metrics{TrainLoss: math.NaN(), TestLoss: 7, TrainAcc: 0.3, TestAcc: 0.4}},
		}},
	}
	for _, tt := range tests {
		path := filepath.Join(t.TempDir(), "scan.csv")
		if err := WriteCSV(path, tt.pts, tt.plane); err != nil {
			t.Fatal(err)
		}
		raw, _ := os.ReadFile(path)
		head := strings.SplitN(string(raw), "\n", 2)[0]
		wantHead := "alpha,train_loss,test_loss,train_acc,test_acc"
		if tt.plane {
			wantHead = "alpha,beta,train_loss,test_loss,train_acc,test_acc"
		}
		if head != wantHead {
			t.Errorf("%s: header %q, want %q", tt.name, head, wantHead)
		}
		got, plane, err := ReadCSV(path)
		if err != nil {
			t.Fatal(err)
		}
		if plane != tt.plane || len(got) != len(tt.pts) {
			t.Fatalf("%s: read %d points, plane %v", tt.name, len(got), plane)
		}
		for i := range got {
			a, b := got[i], tt.pts[i]
			for _, pair := range [][2]float64{{a.Alpha, b.Alpha}, {a.Beta, b.Beta}, {a.TrainLoss, b.TrainLoss}, {a.TestLoss, b.TestLoss},
				{a.TrainAcc, b.TrainAcc}, {a.TestAcc, b.TestAcc}} {
				if pair[0] != pair[1] && !(math.IsNaN(pair[0]) && math.IsNaN(pair[1])) {
					t.Errorf("%s: point %d read back as %+v, want %+v", tt.name, i, a, b)
				}
			}
		}
	}
	for _, bad := range []string{"", "alpha,train_loss\n", "alpha,train_loss,test_loss,train_acc,test_acc\n1,x,1,1,1\n"} {
		if _, _, err := DecodeCSV(strings.NewReader(bad)); err == nil {
			t.Errorf("DecodeCSV(%q): no error", bad)
		}
	}
}

func TestSummaryJSON(t *testing.T) {
	path := filepath.Join(t.TempDir(), "out", "landscape.json")
	s := Summary{Experiment: "e", Radius: 1, Metric: MetricName(1), Checkpoints: []CheckpointSummary{{
		Label: "sam", Centre: Metrics{TrainLoss: 0.1, TestLoss: math.Inf(1)},
		Sharpness: Sharpness{Radius: 1, Base: 0.1, Max: math.Inf(1), Increase: math.Inf(1)},
	}}}
	if err := WriteSummary(path, s); err != nil {
		t.Fatal(err)
	}
	raw, _ := os.ReadFile(path)
	for _, want := range []string{`"metric": "sharpness_r1"`, `"test_loss": null`, `"increase": null`, `"train_loss": 0.1`} {
		if !strings.Contains(string(raw), want) {
			t.Errorf("landscape.json lacks %s:\n%s", want, raw)
		}
	}
}

func TestMetricName(t *testing.T) {
	for r, want := range map[float64]string{1: "sharpness_r1", 0.5: "sharpness_r0.5", 0.05: "sharpness_r0.05", 2.25: "sharpness_r2.25"} {
		if got := MetricName(r); got != want {
			t.Errorf("MetricName(%g) = %q, want %q", r, got, want)
		}
	}
}

func TestRecordMetric(t *testing.T) {
	path := filepath.Join(t.TempDir(), "runs.jsonl")
	t0 := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	base := func(key, method string, seed int64, status string, finished time.Time, acc float64) results.Record {
		return results.Record{Experiment: "exp", Key: key, Method: method, Seed: seed, Status: status, Dataset: "uci-digits", Arch: "cnn",
			Config: map[string]any{"plugin": "sam", "params.rho": 0.05}, Metrics: map[string]float64{"acc": acc}, Finished: finished}
	}
	for _, r := range []results.Record{
		base("method=SAM/arch=cnn/seed=1", "SAM", 1, results.StatusOK, t0, 0.9),
		base("method=SAM/arch=cnn/seed=2", "SAM", 2, results.StatusOK, t0, 0.8),
		base("method=SAM/arch=cnn/seed=1", "SAM", 1, results.StatusOK, t0.Add(time.Hour), 0.95), // a rerun
		base("method=SAM/arch=cnn/seed=3", "SAM", 3, results.StatusFailed, t0, 0),
	} {
		if err := results.Append(path, r); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name, key, exp string
		radius, value  float64
		ok             bool
	}{
		{"latest record of seed 1", "method=SAM/arch=cnn/seed=1", "exp", 1, 0.25, true},
		{"second radius keeps the first", "method=SAM/arch=cnn/seed=1", "exp", 0.5, 0.125, true},
		{"failed run", "method=SAM/arch=cnn/seed=3", "exp", 1, 1, false},
		{"unknown run", "method=SGD/arch=cnn/seed=1", "exp", 1, 1, false},
		{"other experiment", "method=SAM/arch=cnn/seed=2", "other", 1, 1, false},
	}
	for _, tt := range tests {
		ok, err := RecordMetric(results.LockWait{}, path, tt.exp, tt.key, MetricName(tt.radius), tt.value)
		if err != nil || ok != tt.ok {
			t.Errorf("%s: RecordMetric = %v, %v; want %v", tt.name, ok, err, tt.ok)
		}
	}
	recs, err := results.Read(path)
	if err != nil {
		t.Fatal(err)
	}
	merged, err := results.Merge(recs)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 6 || len(merged) != 3 {
		t.Fatalf("%d records, %d merged; want 6 and 3", len(recs), len(merged))
	}
	m := merged[0].Metrics
	if merged[0].Key != "method=SAM/arch=cnn/seed=1" || m["acc"] != 0.95 || m["sharpness_r1"] != 0.25 || m["sharpness_r0.5"] != 0.125 {
		t.Errorf("merged record of seed 1: %+v", merged[0])
	}
	if !merged[0].Finished.Equal(t0.Add(time.Hour)) {
		t.Errorf("finished time changed to %v", merged[0].Finished)
	}
	if _, ok := merged[1].Metrics["sharpness_r1"]; ok {
		t.Error("seed 2 got a sharpness")
	}
	if ok, err := RecordMetric(results.LockWait{}, filepath.Join(t.TempDir(), "none.jsonl"), "exp", "k", "m", 1); ok || err != nil {
		t.Errorf("missing file: %v, %v", ok, err)
	}
}

func TestPlots(t *testing.T) {
	dir := t.TempDir()
	alphas, _ := Axis(11, 1)
	var lines []Line
	for k, a := range []float64{1, 4} {
		sc := &Scanner{Theta: []float32{0}, Eval: quadratic(a, 0.1*float64(k), 0.05)}
		pts, err := sc.Line(context.Background(), []float64{1}, alphas)
		if err != nil {
			t.Fatal(err)
		}
		lines = append(lines, Line{Label: []string{"sam", "otmdr"}[k], Points: pts})
	}
	p1 := filepath.Join(dir, "landscape_1d.png")
	if err := PlotLines(p1, lines); err != nil {
		t.Fatal(err)
	}
	sc := &Scanner{Theta: []float32{0, 0}, Eval: func(_ context.Context, p []float32) (Metrics, error) {
		x, y := float64(p[0]), float64(p[1])
		return Metrics{TrainLoss: 0.01 + x*x + 2*y*y, TestLoss: 0.1 + x*x + y*y}, nil
	}}
	plane, err := sc.Plane(context.Background(), []float64{1, 0}, []float64{0, 1}, alphas, alphas)
	if err != nil {
		t.Fatal(err)
	}
	p2 := filepath.Join(dir, "sam_2d.png")
	if err := PlotPlane(p2, "sam", plane); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{p1, p2} {
		raw, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if len(raw) < 10000 {
			t.Errorf("%s: only %d bytes", p, len(raw))
		}
		if _, err := png.Decode(bytes.NewReader(raw)); err != nil {
			t.Errorf("%s: %v", p, err)
		}
	}
}
