package render

import (
	"math"
	"math/rand/v2"

	"github.com/optlab/optlab/host/corrupt"
	"github.com/optlab/optlab/host/tensor"
)

// numel is the number of elements of a shape.
func numel(shape []int64) int64 {
	n := int64(1)
	for _, v := range shape {
		n *= v
	}
	return n
}

// uniform returns values uniform in [0, 1) shaped like x.
func uniform(s *tensor.Scope, x tensor.T, seed int64) tensor.T {
	sh := x.Shape()
	return s.View(s.SplitMixUniform(numel(sh), seed, x.Device()), sh...)
}

// normal returns standard normal values shaped like x (Box–Muller on two
// counter-based uniform streams).
func normal(s *tensor.Scope, x tensor.T, seed int64) tensor.T {
	u1, u2 := uniform(s, x, seed), uniform(s, x, seed^0x5bd1e995)
	// 1 − u1 is in (0, 1], so the logarithm is finite.
	r := s.Sqrt(s.Scale(s.Log(s.AddScalar(s.Neg(u1), 1)), -2))
	return s.Mul(r, s.Cos(s.Scale(u2, 2*math.Pi)))
}

func applyGaussianNoise(s *tensor.Scope, f corrupt.Family, x tensor.T, sev int, seed int64) tensor.T {
	return s.Add(x, s.Scale(normal(s, x, seed), f.Param(sev)[0]))
}

func applySpeckleNoise(s *tensor.Scope, f corrupt.Family, x tensor.T, sev int, seed int64) tensor.T {
	return s.Add(x, s.Mul(x, s.Scale(normal(s, x, seed), f.Param(sev)[0])))
}

// poissonInversionMax is the rate below which shot noise samples the
// Poisson distribution exactly, by inversion; above it, the normal
// approximation N(λ, λ) rounded is used. poissonTerms bounds the
// inversion: P(X > 90) for λ = 30 is below 1e-15.
const (
	poissonInversionMax = 30
	poissonTerms        = 90
)

func applyShotNoise(s *tensor.Scope, f corrupt.Family, x tensor.T, sev int, seed int64) tensor.T {
	c := f.Param(sev)[0]
	lam := s.Scale(x, c)
	return s.Scale(poisson(s, lam, seed), 1/c)
}

// poisson draws one Poisson variate per element of lam (float32, ≥ 0).
func poisson(s *tensor.Scope, lam tensor.T, seed int64) tensor.T {
	small := s.LessScalar(lam, poissonInversionMax)
	ls := s.ClampRange(lam, 0, poissonInversionMax)
	u := uniform(s, lam, seed)
	// k = #{j < poissonTerms : F(j) < u}, F the CDF at rate ls.
	p := s.Exp(s.Neg(ls))
	cdf := s.Scale(p, 1)
	k := s.Zeros(lam.Shape(), tensor.Float32, lam.Device())
	for j := 1; j <= poissonTerms && s.Err() == nil; j++ {
		below := s.Cast(s.Less(cdf, u), tensor.Float32)
		s.AddInPlace(k, below)
		s.Release(below)
		step := s.Scale(ls, 1/float64(j))
		s.MulInPlace(p, step)
		s.AddInPlace(cdf, p)
		s.Release(step)
	}
	big := s.ClampMin(s.Round(s.Add(lam, s.Mul(s.Sqrt(lam), normal(s, lam, seed+1)))), 0)
	return s.Where(small, k, big)
}

func applyImpulseNoise(s *tensor.Scope, f corrupt.Family, x tensor.T, sev int, seed int64) tensor.T {
	flipped := s.LessScalar(uniform(s, x, seed), f.Param(sev)[0])
	salt := s.Cast(s.LessScalar(uniform(s, x, seed+1), 0.5), tensor.Float32)
	return s.Where(flipped, salt, x)
}

// depthwise convolves every channel of x with the 2-D kernel k (odd sizes,
// row-major kh×kw), the edges padded as mode says (PadEdge), so that the
// output has x's size.
func depthwise(s *tensor.Scope, x tensor.T, k []float32, kh, kw int64, mode string) tensor.T {
	c := x.Shape()[1]
	w := make([]float32, 0, int(c)*len(k))
	for range c {
		w = append(w, k...)
	}
	wt := s.FromFloat32(w, []int64{c, 1, kh, kw}, x.Device())
	ph, pw := kh/2, kw/2
	padded := s.PadEdge(x, mode, pw, pw, ph, ph)
	return s.Conv2d(padded, wt, tensor.T{}, 1, 0, c)
}

// outer is the row-major outer product a·bᵀ in float32.
func outer(a, b []float64) []float32 {
	out := make([]float32, 0, len(a)*len(b))
	for _, u := range a {
		for _, v := range b {
			out = append(out, float32(u*v))
		}
	}
	return out
}

func applyGaussianBlur(s *tensor.Scope, f corrupt.Family, x tensor.T, sev int, seed int64) tensor.T {
	// skimage.filters.gaussian: truncate = 4, mode "nearest".
	sigma := f.Param(sev)[0]
	r := int(4*sigma + 0.5)
	g := corrupt.Gaussian1D(sigma, r)
	n := int64(len(g))
	return depthwise(s, x, outer(g, g), n, n, "replicate")
}

func applyDefocusBlur(s *tensor.Scope, f corrupt.Family, x tensor.T, sev int, seed int64) tensor.T {
	p := f.Param(sev)
	k, side := corrupt.DefocusKernel(p[0], p[1])
	k32 := make([]float32, len(k))
	for i, v := range k {
		k32[i] = float32(v)
	}
	// cv2.filter2D mirrors the edges (BORDER_REFLECT_101); an image not
	// larger than the kernel's half-width repeats them instead.
	mode := "reflect"
	if sh := x.Shape(); int64(side/2) >= min(sh[2], sh[3]) {
		mode = "replicate"
	}
	return depthwise(s, x, k32, int64(side), int64(side), mode)
}

func applyContrast(s *tensor.Scope, f corrupt.Family, x tensor.T, sev int, seed int64) tensor.T {
	m := s.MeanKeep(x, 2, 3)
	return s.Add(s.Scale(s.Sub(x, m), f.Param(sev)[0]), m)
}

// applyBrightness adds c to the HSV value (the largest channel) and keeps
// hue and saturation: every channel scales by V'/V (a black pixel becomes
// the gray V'). For one channel that is x + c.
func applyBrightness(s *tensor.Scope, f corrupt.Family, x tensor.T, sev int, seed int64) tensor.T {
	v := s.AmaxKeep(x, 1)
	v2 := s.ClampRange(s.AddScalar(v, f.Param(sev)[0]), 0, 1)
	scaled := s.Div(s.Mul(x, v2), v)
	return s.Where(s.EqScalar(v, 0), s.Expand(v2, x.Shape()...), scaled)
}

// resize resamples the last two dims of x with the row matrices mh (h'×H)
// and mw (w'×W), quantising to the uint8 grid after each pass like PIL.
func resize(s *tensor.Scope, x tensor.T, mh []float64, h int64, mw []float64, w int64) tensor.T {
	sh := x.Shape()
	d := x.Device()
	f32 := func(v []float64) []float32 {
		out := make([]float32, len(v))
		for i, e := range v {
			out[i] = float32(e)
		}
		return out
	}
	mwT := s.Permute(s.FromFloat32(f32(mw), []int64{w, sh[3]}, d), 1, 0)
	mhT := s.FromFloat32(f32(mh), []int64{h, sh[2]}, d)
	horiz := quantise(s, s.Matmul(x, mwT))
	return quantise(s, s.Matmul(mhT, horiz))
}

// quantise rounds values in [0, 1] to the nearest multiple of 1/255.
func quantise(s *tensor.Scope, x tensor.T) tensor.T {
	return s.Scale(s.Round(s.Scale(s.ClampRange(x, 0, 1), 255)), 1.0/255)
}

func applyPixelate(s *tensor.Scope, f corrupt.Family, x tensor.T, sev int, seed int64) tensor.T {
	sh := x.Shape()
	H, W := int(sh[2]), int(sh[3])
	c := f.Param(sev)[0]
	h, w := max(int(float64(H)*c), 1), max(int(float64(W)*c), 1)
	small := resize(s, x, corrupt.BoxResize(H, h), int64(h), corrupt.BoxResize(W, w), int64(w))
	return resize(s, small, corrupt.BoxResize(h, H), int64(H), corrupt.BoxResize(w, W), int64(W))
}

// rotate and translate draw one transform per image from a PCG stream.
func perImage(seed int64) *rand.Rand {
	return rand.New(rand.NewPCG(uint64(seed), 0x6f70746c6162))
}

func affine(s *tensor.Scope, x tensor.T, theta []float32) tensor.T {
	n := x.Shape()[0]
	return s.AffineSample(x, s.FromFloat32(theta, []int64{n, 2, 3}, x.Device()))
}

func applyRotate(s *tensor.Scope, f corrupt.Family, x tensor.T, sev int, seed int64) tensor.T {
	n := x.Shape()[0]
	rng := perImage(seed)
	deg := f.Param(sev)[0]
	theta := make([]float32, 0, 6*n)
	for range n {
		a := deg * math.Pi / 180
		if rng.IntN(2) == 0 {
			a = -a
		}
		cs, sn := float32(math.Cos(a)), float32(math.Sin(a))
		theta = append(theta, cs, -sn, 0, sn, cs, 0)
	}
	return affine(s, x, theta)
}

func applyTranslate(s *tensor.Scope, f corrupt.Family, x tensor.T, sev int, seed int64) tensor.T {
	sh := x.Shape()
	n := sh[0]
	rng := perImage(seed)
	px := f.Param(sev)[0]
	theta := make([]float32, 0, 6*n)
	for range n {
		a := 2 * math.Pi * rng.Float64()
		// Normalised coordinates span 2 over the image's size; the output
		// pixel p reads the input at p − shift.
		dx := -2 * px * math.Cos(a) / float64(sh[3])
		dy := -2 * px * math.Sin(a) / float64(sh[2])
		theta = append(theta, 1, 0, float32(dx), 0, 1, float32(dy))
	}
	return affine(s, x, theta)
}
