package render

import (
	"context"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/optlab/optlab/host/corrupt"
	"github.com/optlab/optlab/host/tensor"
)

// run applies f at sev to the uint8 images x (shape) on a fresh worker and
// returns the result's bytes as float64 and its shape.
func run(t *testing.T, f corrupt.Family, x []uint8, shape []int64, sev int, seed int64) ([]float64, []int64) {
	t.Helper()
	w := tensor.NewWorker(1)
	defer w.Close()
	var out []float64
	var sh []int64
	err := w.Do(context.Background(), func() error {
		s := tensor.NewScope()
		defer s.Close()
		y := Apply(s, f, s.FromUint8(x, shape, tensor.CPU), sev, seed)
		if err := s.Err(); err != nil {
			return err
		}
		if y.DType() != tensor.Uint8 {
			t.Errorf("%s: dtype %v, want uint8", f.Name, y.DType())
		}
		sh = y.Shape()
		out = s.Float64s(s.Cast(y, tensor.Float64))
		return s.Err()
	})
	if err != nil {
		t.Fatalf("%s severity %d: %v", f.Name, sev, err)
	}
	return out, sh
}

func lookup(t *testing.T, name string) corrupt.Family {
	t.Helper()
	f, err := corrupt.Lookup(name)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func randomImages(n int, seed uint64) []uint8 {
	r := rand.New(rand.NewPCG(seed, 1))
	out := make([]uint8, n)
	for i := range out {
		out[i] = uint8(r.IntN(256))
	}
	return out
}

func constant(n int, v uint8) []uint8 {
	out := make([]uint8, n)
	for i := range out {
		out[i] = v
	}
	return out
}

// TestEveryFamily: every family at every severity, on grayscale and colour
// images, keeps the shape, stays in 0..255, is a pure function of its seed,
// and changes the images (each severity differently).
func TestEveryFamily(t *testing.T) {
	// The sizes of Fashion-MNIST and CIFAR (smaller images can pixelate
	// two severities to the same size).
	for _, shape := range [][]int64{{3, 1, 28, 28}, {2, 3, 32, 32}} {
		n := int(shape[0] * shape[1] * shape[2] * shape[3])
		x := randomImages(n, 7)
		for _, f := range corrupt.Families() {
			var prev []float64
			for sev := 1; sev <= corrupt.Severities; sev++ {
				a, sh := run(t, f, x, shape, sev, 1)
				if !slices.Equal(sh, shape) {
					t.Fatalf("%s %d: shape %v, want %v", f.Name, sev, sh, shape)
				}
				for _, v := range a {
					if v < 0 || v > 255 || v != math.Trunc(v) {
						t.Fatalf("%s %d: value %v", f.Name, sev, v)
					}
				}
				b, _ := run(t, f, x, shape, sev, 1)
				if !slices.Equal(a, b) {
					t.Errorf("%s %d: two runs with one seed differ", f.Name, sev)
				}
				if changed(a, x) == 0 {
					t.Errorf("%s %d on %v: no pixel changed", f.Name, sev, shape)
				}
				if prev != nil && slices.Equal(prev, a) {
					t.Errorf("%s: severities %d and %d give the same images", f.Name, sev-1, sev)
				}
				prev = a
			}
		}
	}
}

func changed(a []float64, x []uint8) int {
	n := 0
	for i := range a {
		if a[i] != float64(x[i]) {
			n++
		}
	}
	return n
}

// TestSeeds: the random families draw other noise under another seed; the
// deterministic ones ignore it.
func TestSeeds(t *testing.T) {
	shape := []int64{2, 1, 16, 16}
	x := randomImages(2*16*16, 3)
	random := []string{"gaussian_noise", "shot_noise", "impulse_noise", "speckle_noise", "rotate", "translate"}
	for _, f := range corrupt.Families() {
		a, _ := run(t, f, x, shape, 3, 1)
		b, _ := run(t, f, x, shape, 3, 2)
		if got, want := !slices.Equal(a, b), slices.Contains(random, f.Name); got != want {
			t.Errorf("%s: seeds 1 and 2 differ = %v, want %v", f.Name, got, want)
		}
	}
}

// TestKnownValues checks families with a value worked out by hand on tiny
// images.
func TestKnownValues(t *testing.T) {
	g04 := corrupt.Gaussian1D(0.4, 2)
	g04d := corrupt.Gaussian1D(0.4, 1)
	for _, tc := range []struct {
		name  string
		sev   int
		shape []int64
		x     []uint8
		want  []float64 // nil: only the indices in at
		at    map[int]float64
	}{
		// mean 0.75; (0 − 0.75)·0.75 + 0.75 = 0.1875 → 47.81; 0.9375 → 239.06.
		{name: "contrast", sev: 1, shape: []int64{1, 1, 2, 2}, x: []uint8{0, 255, 255, 255}, want: []float64{47, 239, 239, 239}},
		// 100/255 + 0.05 → 112.75; 250/255 + 0.05 > 1 → 255.
		{name: "brightness", sev: 1, shape: []int64{1, 1, 1, 2}, x: []uint8{100, 250}, want: []float64{112, 255}},
		// Colour: value 100 → 112.75, so every channel × 1.1275 (hue and
		// saturation kept); black becomes the gray 0.05·255 = 12.75.
		{name: "brightness", sev: 1, shape: []int64{1, 3, 1, 2}, x: []uint8{100, 0, 50, 0, 0, 0}, want: []float64{112, 12, 56, 12, 0, 12}},
		// A white dot blurred by σ = 0.4 keeps g(0)² of itself and gives its
		// 4-neighbours g(0)·g(1).
		{name: "gaussian_blur", sev: 1, shape: []int64{1, 1, 5, 5}, x: dot(5, 2, 2), at: map[int]float64{12: math.Floor(255 * float64(float32(g04[2]*g04[2]))), 7: math.Floor(255 * float64(float32(g04[2]*g04[1]))), 0: 0}},
		// A white dot under defocus (radius 0.3: one pixel, blurred by the
		// 3×3 Gaussian of σ = 0.4) keeps g(0)² of itself.
		{name: "defocus_blur", sev: 1, shape: []int64{1, 1, 7, 7}, x: dot(7, 3, 3), at: map[int]float64{24: math.Floor(255 * float64(float32(g04d[1]*g04d[1]))), 17: math.Floor(255 * float64(float32(g04d[1]*g04d[0]))), 0: 0}},
		// A shift by one pixel leaves a white image's centre white.
		{name: "translate", sev: 1, shape: []int64{1, 1, 9, 9}, x: constant(81, 255), at: map[int]float64{40: 255}},
		// A constant image: JPEG changes nothing (only the DC term, 8·(200 − 128) = 576 = 96·6 at quality 80),
		// nor does pixelating it.
		{name: "jpeg", sev: 1, shape: []int64{1, 1, 12, 12}, x: constant(144, 200), want: repeat(200, 144)},
		{name: "pixelate", sev: 5, shape: []int64{1, 1, 10, 10}, x: constant(100, 77), want: repeat(77, 100)},
		// Rotating white by 25° leaves the centre white and the corners
		// black (outside the rotated image).
		{name: "rotate", sev: 5, shape: []int64{1, 1, 9, 9}, x: constant(81, 255), at: map[int]float64{40: 255, 0: 0, 8: 0, 72: 0, 80: 0}},
	} {
		got, _ := run(t, lookup(t, tc.name), tc.x, tc.shape, tc.sev, 1)
		if tc.want != nil && !slices.Equal(got, tc.want) {
			t.Errorf("%s %d on %v: got %v, want %v", tc.name, tc.sev, tc.x, got, tc.want)
		}
		for i, v := range tc.at {
			if got[i] != v {
				t.Errorf("%s %d: pixel %d = %v, want %v", tc.name, tc.sev, i, got[i], v)
			}
		}
	}
}

func dot(n, i, j int) []uint8 {
	out := make([]uint8, n*n)
	out[i*n+j] = 255
	return out
}

func repeat(v float64, n int) []float64 {
	out := make([]float64, n)
	for i := range out {
		out[i] = v
	}
	return out
}

// TestNoiseStatistics: on a flat gray image, the noise families have the
// spread their parameter says (shot noise on both sides of the rate where
// sampling switches from inversion to the normal approximation), and
// impulse noise hits the fraction c of the pixels with 0 or 255.
func TestNoiseStatistics(t *testing.T) {
	const side = 96
	shape := []int64{1, 1, side, side}
	x := constant(side*side, 128)
	v := 128.0 / 255
	for _, tc := range []struct {
		name string
		sev  int
		std  float64
	}{
		{"gaussian_noise", 5, param(t, "gaussian_noise", 5)},
		{"speckle_noise", 5, v * param(t, "speckle_noise", 5)},
		{"shot_noise", 5, math.Sqrt(v / param(t, "shot_noise", 5))}, // rate 25: inversion
		{"shot_noise", 1, math.Sqrt(v / param(t, "shot_noise", 1))}, // rate 251: normal
	} {
		got, _ := run(t, lookup(t, tc.name), x, shape, tc.sev, 9)
		var sum, sq float64
		for _, g := range got {
			d := g/255 - v
			sum += d
			sq += d * d
		}
		n := float64(len(got))
		mean := sum / n
		std := math.Sqrt(sq/n - mean*mean)
		// Truncation to uint8 shifts the mean by about −0.5/255.
		if math.Abs(mean) > 0.004 || math.Abs(std/tc.std-1) > 0.06 {
			t.Errorf("%s %d: mean shift %.4f, std %.4f, want ≈ 0 and %.4f", tc.name, tc.sev, mean, std, tc.std)
		}
	}
	got, _ := run(t, lookup(t, "impulse_noise"), x, shape, 5, 9)
	hit := 0
	for _, g := range got {
		switch g {
		case 0, 255:
			hit++
		case 128:
		default:
			t.Fatalf("impulse noise: value %v", g)
		}
	}
	if frac := float64(hit) / float64(len(got)); math.Abs(frac-param(t, "impulse_noise", 5)) > 0.01 {
		t.Errorf("impulse noise: %.4f of the pixels hit, want %v", frac, param(t, "impulse_noise", 5))
	}
}

func TestApplyErrors(t *testing.T) {
	w := tensor.NewWorker(1)
	defer w.Close()
	f := lookup(t, "contrast")
	for _, tc := range []struct {
		name  string
		sev   int
		build func(s *tensor.Scope) tensor.T
	}{
		{"severity 0", 0, func(s *tensor.Scope) tensor.T { return s.FromUint8(make([]uint8, 4), []int64{1, 1, 2, 2}, tensor.CPU) }},
		{"severity 6", 6, func(s *tensor.Scope) tensor.T { return s.FromUint8(make([]uint8, 4), []int64{1, 1, 2, 2}, tensor.CPU) }},
		{"float", 1, func(s *tensor.Scope) tensor.T {
			return s.FromFloat32(make([]float32, 4), []int64{1, 1, 2, 2}, tensor.CPU)
		}},
		{"vectors", 1, func(s *tensor.Scope) tensor.T { return s.FromUint8(make([]uint8, 4), []int64{1, 4}, tensor.CPU) }},
	} {
		err := w.Do(context.Background(), func() error {
			s := tensor.NewScope()
			defer s.Close()
			Apply(s, f, tc.build(s), tc.sev, 1)
			return s.Err()
		})
		if err == nil {
			t.Errorf("%s: no error", tc.name)
		}
	}
}

// TestChunks: a set larger than Chunk is corrupted chunk by chunk, each
// with its own noise, into one set of the same shape.
func TestChunks(t *testing.T) {
	n := Chunk + 6
	shape := []int64{int64(n), 1, 4, 4}
	x := constant(n*16, 128)
	got, sh := run(t, lookup(t, "gaussian_noise"), x, shape, 5, 4)
	if !slices.Equal(sh, shape) {
		t.Fatalf("shape %v", sh)
	}
	if first, next := got[:16], got[Chunk*16:Chunk*16+16]; slices.Equal(first, next) {
		t.Error("the first images of two chunks drew the same noise")
	}
}

func param(t *testing.T, name string, sev int) float64 {
	t.Helper()
	return lookup(t, name).Param(sev)[0]
}

// TestImplemented: every family has its device implementation.
func TestImplemented(t *testing.T) {
	impl := families()
	for _, f := range corrupt.Families() {
		if impl[f.Name] == nil {
			t.Errorf("%s has no implementation", f.Name)
		}
	}
	if len(impl) != len(corrupt.Families()) {
		t.Errorf("%d implementations for %d families", len(impl), len(corrupt.Families()))
	}
}

// hostUniform is SplitMixUniform computed on the host from the same
// SplitMix64 keys.
func hostUniform(n int, seed int64) []float64 {
	out := make([]float64, n)
	for i, k := range tensor.SplitMixKeys(int64(n), seed) {
		out[i] = float64((uint64(k)>>40)&(1<<24-1)) / (1 << 24)
	}
	return out
}

// TestNoiseKnownValues recomputes the noise families on the host from the
// counter-based draws (SplitMix64 of the element index, Box–Muller) and
// checks the device's images pixel by pixel, up to one level for float32
// rounding at a truncation boundary.
func TestNoiseKnownValues(t *testing.T) {
	const n = 2 * 1 * 5 * 5
	shape := []int64{2, 1, 5, 5}
	x := randomImages(n, 11)
	normal := func(seed int64) []float64 {
		u1, u2 := hostUniform(n, seed), hostUniform(n, seed^0x5bd1e995)
		out := make([]float64, n)
		for i := range out {
			out[i] = math.Sqrt(-2*math.Log(1-u1[i])) * math.Cos(2*math.Pi*u2[i])
		}
		return out
	}
	clip := func(v float64) float64 { return math.Floor(255 * min(max(v, 0), 1)) }
	for sev := 1; sev <= corrupt.Severities; sev++ {
		for _, tc := range []struct {
			name string
			want func(seed int64, c float64) []float64
		}{
			{"gaussian_noise", func(seed int64, c float64) []float64 {
				z := normal(seed)
				out := make([]float64, n)
				for i := range out {
					out[i] = clip(float64(x[i])/255 + c*z[i])
				}
				return out
			}},
			{"speckle_noise", func(seed int64, c float64) []float64 {
				z := normal(seed)
				out := make([]float64, n)
				for i := range out {
					v := float64(x[i]) / 255
					out[i] = clip(v + v*c*z[i])
				}
				return out
			}},
			{"impulse_noise", func(seed int64, c float64) []float64 {
				hit, salt := hostUniform(n, seed), hostUniform(n, seed+1)
				out := make([]float64, n)
				for i := range out {
					switch {
					case hit[i] >= c:
						out[i] = float64(x[i])
					case salt[i] < 0.5:
						out[i] = 255
					}
				}
				return out
			}},
		} {
			seed := corrupt.Seed(5, tc.name, sev)
			want := tc.want(seed, lookup(t, tc.name).Param(sev)[0])
			got, _ := run(t, lookup(t, tc.name), x, shape, sev, 5)
			for i := range want {
				if math.Abs(got[i]-want[i]) > 1 {
					t.Errorf("%s %d: pixel %d = %v, want %v", tc.name, sev, i, got[i], want[i])
				}
			}
		}
	}
}

// TestShotNoiseInversion: at rates below 30 shot noise is Poisson by
// inversion of the uniform draw, which the host recomputes exactly.
func TestShotNoiseInversion(t *testing.T) {
	const n = 64
	shape := []int64{1, 1, 8, 8}
	x := randomImages(n, 12)
	f := lookup(t, "shot_noise")
	const sev = 5 // c = 50: rates up to 50·x
	c := f.Param(sev)[0]
	u := hostUniform(n, corrupt.Seed(2, f.Name, sev))
	got, _ := run(t, f, x, shape, sev, 2)
	checked := 0
	for i := range n {
		lam := c * float64(x[i]) / 255
		if lam >= 29 { // the normal approximation's side, and the float32 edge
			continue
		}
		k, p := 0, math.Exp(-lam)
		cdf := p
		for cdf < u[i] {
			k++
			p *= lam / float64(k)
			cdf += p
		}
		want := math.Floor(255 * min(float64(k)/c, 1))
		// float32 CDF sums may round a draw that sits on a boundary the
		// other way: one count, 255/50 levels.
		if math.Abs(got[i]-want) > 255/c+1 {
			t.Errorf("pixel %d (rate %.2f, u %.4f): %v, want %v", i, lam, u[i], got[i], want)
		}
		checked++
	}
	if checked < 20 {
		t.Fatalf("only %d pixels below rate 29", checked)
	}
}
