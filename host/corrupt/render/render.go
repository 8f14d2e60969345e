// Package render computes the corruptions of host/corrupt on the device:
// Apply turns a batch of uint8 images into their corrupted copy with
// tensor ops, in chunks, deterministically.
package render

import (
	"fmt"

	"github.com/optlab/optlab/host/corrupt"
	"github.com/optlab/optlab/host/tensor"
)

// family corrupts x (N,C,H,W float32 in [0,1]) by f at severity sev
// (1-based); the result need not be clamped.
type family func(s *tensor.Scope, f corrupt.Family, x tensor.T, sev int, seed int64) tensor.T

// families maps every corrupt.Families name to its implementation.
func families() map[string]family {
	return map[string]family{
		"gaussian_noise": applyGaussianNoise,
		"shot_noise":     applyShotNoise,
		"impulse_noise":  applyImpulseNoise,
		"speckle_noise":  applySpeckleNoise,
		"gaussian_blur":  applyGaussianBlur,
		"defocus_blur":   applyDefocusBlur,
		"contrast":       applyContrast,
		"brightness":     applyBrightness,
		"pixelate":       applyPixelate,
		"jpeg":           applyJPEG,
		"rotate":         applyRotate,
		"translate":      applyTranslate,
	}
}

// Chunk is the number of images corrupted at once: it bounds the memory
// of the intermediate tensors. Every chunk draws from its own seed, so a
// corrupted set depends on it; it is a constant for that reason.
const Chunk = 1024

// Apply returns the corruption of x (uint8 images, N×C×H×W) by f at
// severity sev (1..corrupt.Severities), uint8 again: the corrupted values in
// [0, 1], times 255, truncated. seed is the set's seed (see Seed). Call on
// the worker's thread.
func Apply(s *tensor.Scope, f corrupt.Family, x tensor.T, sev int, seed int64) tensor.T {
	if sev < 1 || sev > corrupt.Severities {
		return s.Fail(fmt.Errorf("corruption %s: severity %d is not in 1..%d", f.Name, sev, corrupt.Severities))
	}
	sh := x.Shape()
	if len(sh) != 4 {
		return s.Fail(fmt.Errorf("corruption %s: images must be N×C×H×W, not %v", f.Name, sh))
	}
	if x.DType() != tensor.Uint8 {
		return s.Fail(fmt.Errorf("corruption %s: images must be uint8", f.Name))
	}
	apply, ok := families()[f.Name]
	if !ok {
		return s.Fail(fmt.Errorf("corruption %s: not implemented on the device", f.Name))
	}
	var parts []tensor.T
	for i, start := 0, int64(0); start < sh[0]; i, start = i+1, start+Chunk {
		sub := tensor.NewScope()
		xf := sub.Scale(sub.Cast(sub.Narrow(x, 0, start, min(Chunk, sh[0]-start)), tensor.Float32), 1.0/255)
		y := apply(sub, f, xf, sev, corrupt.Seed(seed, f.Name, sev)+int64(i)*0x9e3779b9)
		y = sub.Cast(sub.Floor(sub.Scale(sub.ClampRange(y, 0, 1), 255)), tensor.Uint8)
		if err := sub.Err(); err != nil {
			sub.Close()
			return s.Fail(err)
		}
		parts = append(parts, s.Adopt(sub.Keep(y)))
		sub.Close()
	}
	if len(parts) == 1 {
		return parts[0]
	}
	return s.Cat(0, parts...)
}
