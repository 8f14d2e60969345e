package render

import (
	"github.com/optlab/optlab/host/corrupt"
	"github.com/optlab/optlab/host/tensor"
)

// JFIF's YCbCr (ITU-R BT.601, full range): rows Y, Cb, Cr; the chroma
// rows are offset by 128 (on the 0..255 scale).
var (
	rgbToYCbCr = []float32{
		0.299, 0.587, 0.114,
		-0.168736, -0.331264, 0.5,
		0.5, -0.418688, -0.081312,
	}
	yCbCrToRGB = []float32{
		1, 0, 1.402,
		1, -0.344136, -0.714136,
		1, 1.772, 0,
	}
)

// applyJPEG compresses like a baseline JPEG encoder and decodes: on the
// 0..255 scale, colour images go to YCbCr (rounded, as an encoder's
// input is 8-bit), every channel is level-shifted by −128, padded to
// whole 8×8 blocks by repeating its last row and column, transformed by
// the DCT, quantised (rounded) with the IJG-scaled luminance table (Y) or
// chrominance table (Cb, Cr) and dequantised, transformed back and
// rounded; colour goes back to RGB. Entropy coding is lossless and is
// skipped; unlike PIL's default, chroma is not subsampled.
func applyJPEG(s *tensor.Scope, f corrupt.Family, x tensor.T, sev int, seed int64) tensor.T {
	q := int(f.Param(sev)[0])
	sh := x.Shape()
	n, c, h, w := sh[0], sh[1], sh[2], sh[3]
	d := x.Device()
	v := s.Scale(x, 255)
	colour := c == 3
	if colour {
		v = colourMap(s, v, rgbToYCbCr, []float32{0, 128, 128})
		v = s.Round(v)
	}
	// One table per channel: luminance, then chrominance.
	tables := make([]float32, 0, 64*c)
	for ch := range c {
		t := corrupt.QuantTable(corrupt.LumaTable(), q)
		if colour && ch > 0 {
			t = corrupt.QuantTable(corrupt.ChromaTable(), q)
		}
		for _, e := range t {
			tables = append(tables, float32(e))
		}
	}
	qt := s.FromFloat32(tables, []int64{1, c, 1, 1, 8, 8}, d)
	ph, pw := (8-h%8)%8, (8-w%8)%8
	v = s.PadEdge(s.AddScalar(v, -128), "replicate", 0, pw, 0, ph)
	bh, bw := (h+ph)/8, (w+pw)/8
	// (N,C,H,W) → (N,C,bh,bw,8,8) blocks.
	blocks := s.Permute(s.Reshape(v, n, c, bh, 8, bw, 8), 0, 1, 2, 4, 3, 5)
	dm := s.FromFloat32(corrupt.DCTMatrix(), []int64{8, 8}, d)
	dmT := s.Contiguous(s.Permute(dm, 1, 0))
	coef := s.Matmul(s.Matmul(dm, blocks), dmT)
	coef = s.Mul(s.Round(s.Div(coef, qt)), qt)
	back := s.Matmul(s.Matmul(dmT, coef), dm)
	v = s.Reshape(s.Permute(back, 0, 1, 2, 4, 3, 5), n, c, bh*8, bw*8)
	v = s.Narrow(s.Narrow(v, 2, 0, h), 3, 0, w)
	v = s.ClampRange(s.Round(s.AddScalar(v, 128)), 0, 255)
	if colour {
		v = s.ClampRange(s.Round(colourMap(s, s.Sub(v, chromaOffset(s, d)), yCbCrToRGB, nil)), 0, 255)
	}
	return s.Scale(v, 1.0/255)
}

// chromaOffset is (0, 128, 128) shaped to broadcast over (N,3,H,W).
func chromaOffset(s *tensor.Scope, d tensor.Device) tensor.T {
	return s.FromFloat32([]float32{0, 128, 128}, []int64{1, 3, 1, 1}, d)
}

// colourMap applies the 3×3 matrix m (row-major, output channel per row)
// to the channels of v (N,3,H,W) and adds offset (nil for none).
func colourMap(s *tensor.Scope, v tensor.T, m []float32, offset []float32) tensor.T {
	d := v.Device()
	mt := s.FromFloat32(m, []int64{3, 3}, d)
	// (N,H,W,3) · mᵀ → (N,H,W,3) → (N,3,H,W)
	out := s.Permute(s.Matmul(s.Permute(v, 0, 2, 3, 1), s.Permute(mt, 1, 0)), 0, 3, 1, 2)
	if offset != nil {
		out = s.Add(out, s.FromFloat32(offset, []int64{1, 3, 1, 1}, d))
	}
	return out
}
