package corrupt

import (
	"math"
	"os"
	"slices"
	"strings"
	"testing"
)

func TestDefocusKernel(t *testing.T) {
	for i, p := range Families()[5].Params {
		k, side := DefocusKernel(p[0], p[1])
		var sum float64
		for _, v := range k {
			sum += v
		}
		if math.Abs(sum-1) > 1e-12 || len(k) != side*side || side%2 != 1 {
			t.Errorf("severity %d: side %d, %d weights summing to %v", i+1, side, len(k), sum)
		}
	}
	// Radius 0.3 is one pixel: the kernel is the 3×3 Gaussian itself.
	k, side := DefocusKernel(0.3, 0.4)
	g := Gaussian1D(0.4, 1)
	if side != 3 {
		t.Fatalf("side %d, want 3", side)
	}
	for i := range 3 {
		for j := range 3 {
			if math.Abs(k[i*3+j]-g[i]*g[j]) > 1e-15 {
				t.Errorf("k[%d][%d] = %v, want %v", i, j, k[i*3+j], g[i]*g[j])
			}
		}
	}
	// Radius 1.5 holds the 3×3 square; blurred, it reaches 5×5.
	if _, side := DefocusKernel(1.5, 0.1); side != 5 {
		t.Errorf("radius 1.5: side %d, want 5", side)
	}
}

func TestBoxResize(t *testing.T) {
	for _, tc := range []struct {
		in, out int
		want    []float64
	}{
		{4, 2, []float64{0.5, 0.5, 0, 0, 0, 0, 0.5, 0.5}},
		{2, 4, []float64{1, 0, 1, 0, 0, 1, 0, 1}},
		// Input pixel 1's centre (1.5) is on the boundary of the two boxes:
		// PIL's box (−0.5, 0.5] gives it to the first.
		{3, 2, []float64{0.5, 0.5, 0, 0, 0, 1}},
	} {
		if got := BoxResize(tc.in, tc.out); !slices.Equal(got, tc.want) {
			t.Errorf("BoxResize(%d, %d) = %v, want %v", tc.in, tc.out, got, tc.want)
		}
	}
}

func TestQuantTable(t *testing.T) {
	if got := QuantTable(LumaTable(), 50); got != LumaTable() {
		t.Errorf("quality 50 changed the table: %v", got)
	}
	// scale 200 − 2·80 = 40: (16·40 + 50)/100 = 6; quality 40: 5000/40 = 125.
	if got := QuantTable(LumaTable(), 80)[0]; got != 6 {
		t.Errorf("quality 80: %d, want 6", got)
	}
	if got := QuantTable(ChromaTable(), 40)[63]; got != (99*125+50)/100 {
		t.Errorf("quality 40: %d", got)
	}
	d := DCTMatrix()
	for i := range 8 {
		for j := range 8 {
			var dot float64
			for k := range 8 {
				dot += float64(d[i*8+k]) * float64(d[j*8+k])
			}
			want := 0.0
			if i == j {
				want = 1
			}
			if math.Abs(dot-want) > 1e-6 {
				t.Fatalf("DCT rows %d·%d = %v", i, j, dot)
			}
		}
	}
}

func TestRecordKeys(t *testing.T) {
	got := Record([]Result{
		{Family: "contrast", Severity: 1, Metrics: map[string]float64{"acc": 0.8}},
		{Family: "contrast", Severity: 2, Metrics: map[string]float64{"acc": 0.6}},
		{Family: "jpeg", Severity: 1, Metrics: map[string]float64{"acc": 0.4}},
	})
	want := map[string]float64{
		"corr.contrast.1.acc": 0.8, "corr.contrast.2.acc": 0.6, "corr.jpeg.1.acc": 0.4,
		"corr.contrast.acc": 0.7, "corr.jpeg.acc": 0.4, "corr_acc": 0.6,
	}
	if len(got) != len(want) {
		t.Fatalf("got %v", got)
	}
	for k, v := range want {
		if math.Abs(got[k]-v) > 1e-12 {
			t.Errorf("%s = %v, want %v", k, got[k], v)
		}
	}
}

func TestSelect(t *testing.T) {
	if _, err := Select([]string{"contrast", "fog"}); err == nil {
		t.Error("Select accepted fog")
	}
	if fs, err := Select([]string{"all"}); err != nil || len(fs) != len(Families()) {
		t.Errorf("Select(all) = %d families, %v", len(fs), err)
	}
	if fs, err := Select([]string{"jpeg", "contrast"}); err != nil || len(fs) != 2 || fs[0].Name != "contrast" {
		t.Errorf("Select(jpeg, contrast) = %v, %v; want both, in the order of Families", fs, err)
	}
	if Families()[5].Name != "defocus_blur" {
		t.Fatal("the tests take defocus_blur to be family 5")
	}
}

// TestDocsTable: docs/METRICS.md shows Markdown's table.
func TestDocsTable(t *testing.T) {
	doc, err := os.ReadFile("../../docs/METRICS.md")
	if err != nil {
		t.Fatal(err)
	}
	const begin, end = "<!-- corrupt.Markdown -->\n", "<!-- end corrupt.Markdown -->"
	s := string(doc)
	i, j := strings.Index(s, begin), strings.Index(s, end)
	if i < 0 || j < i {
		t.Fatalf("docs/METRICS.md has no %q … %q block", begin, end)
	}
	if got, want := s[i+len(begin):j], Markdown(); got != want {
		t.Errorf("docs/METRICS.md's table of corruptions differs from corrupt.Markdown(); it should read:\n%s", want)
	}
}
