package corrupt

import "math"

// The pure arithmetic of the corruptions: kernels, resampling matrices and
// JPEG's tables, which host/corrupt/render uploads.

// Gaussian1D is the normalised Gaussian of standard deviation sigma at the
// integers −r..r.
func Gaussian1D(sigma float64, r int) []float64 {
	g := make([]float64, 2*r+1)
	var sum float64
	for i := range g {
		d := float64(i - r)
		g[i] = math.Exp(-d * d / (2 * sigma * sigma))
		sum += g[i]
	}
	for i := range g {
		g[i] /= sum
	}
	return g
}

// DefocusKernel returns make_cifar_c.py's defocus kernel for a disk of the
// given radius and aliasing blur: the aliased disk on −8..8 normalised to
// sum 1, smoothed by OpenCV's 3×3 Gaussian of σ = aliasBlur, with its
// all-zero border rows and columns trimmed (they change nothing). It
// returns the kernel row-major and its side.
func DefocusKernel(radius, aliasBlur float64) ([]float64, int) {
	const half = 8
	const n = 2*half + 1
	var disk [n][n]float64
	var sum float64
	for i := range n {
		for j := range n {
			x, y := float64(j-half), float64(i-half)
			if x*x+y*y <= radius*radius {
				disk[i][j] = 1
				sum++
			}
		}
	}
	g := Gaussian1D(aliasBlur, 1)
	var blurred [n][n]float64
	for i := range n {
		for j := range n {
			var v float64
			for di := -1; di <= 1; di++ {
				for dj := -1; dj <= 1; dj++ {
					ii, jj := reflect101(i+di, n), reflect101(j+dj, n)
					v += g[di+1] * g[dj+1] * disk[ii][jj] / sum
				}
			}
			blurred[i][j] = v
		}
	}
	// Trim to the smallest centred square holding every nonzero weight.
	r := 0
	for i := range n {
		for j := range n {
			if blurred[i][j] != 0 {
				r = max(r, abs(i-half), abs(j-half))
			}
		}
	}
	side := 2*r + 1
	out := make([]float64, 0, side*side)
	for i := half - r; i <= half+r; i++ {
		out = append(out, blurred[i][half-r:half+r+1]...)
	}
	return out, side
}

func reflect101(i, n int) int {
	if i < 0 {
		return -i
	}
	if i >= n {
		return 2*(n-1) - i
	}
	return i
}

func abs(i int) int {
	if i < 0 {
		return -i
	}
	return i
}

// BoxResize returns the out×in matrix of PIL's BOX resampling of a line of
// in pixels to out pixels: output pixel i averages the input pixels whose
// centres fall in its box (PIL's precompute_coeffs with the box filter).
func BoxResize(in, out int) []float64 {
	scale := float64(in) / float64(out)
	fscale := max(scale, 1)
	support := 0.5 * fscale
	m := make([]float64, out*in)
	for i := range out {
		center := (float64(i) + 0.5) * scale
		lo := max(int(center-support+0.5), 0)
		hi := min(int(center+support+0.5), in)
		var sum float64
		for j := lo; j < hi; j++ {
			if d := (float64(j) - center + 0.5) / fscale; d > -0.5 && d <= 0.5 {
				m[i*in+j] = 1
				sum++
			}
		}
		for j := lo; j < hi; j++ {
			m[i*in+j] /= sum
		}
	}
	return m
}

// JPEG's example quantisation tables (ITU-T T.81, Annex K) are row-major;
// the IJG library scales them by the quality (QuantTable).

// LumaTable is JPEG's example luminance table.
func LumaTable() [64]int {
	return [64]int{
		16, 11, 10, 16, 24, 40, 51, 61,
		12, 12, 14, 19, 26, 58, 60, 55,
		14, 13, 16, 24, 40, 57, 69, 56,
		14, 17, 22, 29, 51, 87, 80, 62,
		18, 22, 37, 56, 68, 109, 103, 77,
		24, 35, 55, 64, 81, 104, 113, 92,
		49, 64, 78, 87, 103, 121, 120, 101,
		72, 92, 95, 98, 112, 100, 103, 99,
	}
}

// ChromaTable is JPEG's example chrominance table.
func ChromaTable() [64]int {
	return [64]int{
		17, 18, 24, 47, 99, 99, 99, 99,
		18, 21, 26, 66, 99, 99, 99, 99,
		24, 26, 56, 99, 99, 99, 99, 99,
		47, 66, 99, 99, 99, 99, 99, 99,
		99, 99, 99, 99, 99, 99, 99, 99,
		99, 99, 99, 99, 99, 99, 99, 99,
		99, 99, 99, 99, 99, 99, 99, 99,
		99, 99, 99, 99, 99, 99, 99, 99,
	}
}

// QuantTable scales a base table to a quality in 1..100 as the IJG library
// does (jpeg_quality_scaling, baseline: entries in 1..255).
func QuantTable(base [64]int, quality int) [64]int {
	quality = min(max(quality, 1), 100)
	scale := 200 - 2*quality
	if quality < 50 {
		scale = 5000 / quality
	}
	var out [64]int
	for i, b := range base {
		out[i] = min(max((b*scale+50)/100, 1), 255)
	}
	return out
}

// DCTMatrix is the orthonormal 8-point DCT-II, JPEG's forward DCT
// (F = D·f·Dᵀ on a block f).
func DCTMatrix() []float32 {
	out := make([]float32, 64)
	for u := range 8 {
		c := math.Sqrt(2.0 / 8)
		if u == 0 {
			c = math.Sqrt(1.0 / 8)
		}
		for x := range 8 {
			out[u*8+x] = float32(c * math.Cos(float64(2*x+1)*float64(u)*math.Pi/16))
		}
	}
	return out
}
