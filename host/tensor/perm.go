package tensor

import (
	"slices"

	"github.com/sugarme/gotch/ts"
)

// ---- seeded permutations, the same on the host and on every device ----
//
// SplitMixPermutation(n, seed) orders 0..n−1 by the first n outputs of
// SplitMix64 seeded with seed (Steele, Lea & Flood 2014; the generator of
// java.util.SplittableRandom): key i is mix(seed + (i+1)·γ), and the
// permutation is the argsort of the keys as signed 64-bit integers, ties
// (never seen: keys are 64-bit) broken by i. Output i depends on i alone, so
// the device computes every key at once with a dozen elementwise integer
// ops and one sort, from the seed alone: no host→device copy. Scope's
// SplitMixPermutation and the Go function give the same permutation, bit
// for bit (int64 multiplication and addition wrap modulo 2⁶⁴ in Go and in
// libtorch's kernels alike; the right shifts are made logical by a mask).

const (
	smGamma = 0x9e3779b97f4a7c15
	smMul1  = 0xbf58476d1ce4e5b9
	smMul2  = 0x94d049bb133111eb
)

// s64 reinterprets u's bits as an int64 (what the device's int64 ops see).
func s64(u uint64) int64 { return int64(u) }

// splitMix returns SplitMix64's mixing function of z.
func splitMix(z uint64) uint64 {
	z = (z ^ (z >> 30)) * smMul1
	z = (z ^ (z >> 27)) * smMul2
	return z ^ (z >> 31)
}

// SplitMixKeys returns the n keys that order SplitMixPermutation(n, seed).
func SplitMixKeys(n, seed int64) []int64 {
	k := make([]int64, n)
	for i := range k {
		k[i] = int64(splitMix(uint64(seed) + uint64(i+1)*smGamma))
	}
	return k
}

// SplitMixPermutation is the seeded permutation of 0..n−1 described above,
// computed on the host.
func SplitMixPermutation(n, seed int64) []int64 {
	keys := SplitMixKeys(n, seed)
	p := make([]int64, n)
	for i := range p {
		p[i] = int64(i)
	}
	slices.SortStableFunc(p, func(a, b int64) int {
		switch ka, kb := keys[a], keys[b]; {
		case ka < kb:
			return -1
		case ka > kb:
			return 1
		}
		return 0
	})
	return p
}

// SplitMixKeys computes SplitMixKeys(n, seed) on device d, as an int64
// tensor, without a copy from the host.
func (s *Scope) SplitMixKeys(n, seed int64, d Device) T {
	if s.err != nil {
		return T{}
	}
	// z = (i+1)·γ + seed, i = 0..n−1
	z := s.op("arange", func() (*ts.Tensor, error) {
		lo, hi := ts.IntScalar(1), ts.IntScalar(n+1)
		defer lo.MustDrop()
		defer hi.MustDrop()
		return ts.ArangeStart(lo, hi, Int64, d.d)
	})
	z = s.intScalarOp("mul_scalar", z, s64(smGamma), (*ts.Tensor).MulScalar)
	z = s.intScalarOp("add_scalar", z, seed, (*ts.Tensor).AddScalar)
	z = s.intScalarOp("mul_scalar", s.xorShift(z, 30), s64(smMul1), (*ts.Tensor).MulScalar)
	z = s.intScalarOp("mul_scalar", s.xorShift(z, 27), s64(smMul2), (*ts.Tensor).MulScalar)
	return s.xorShift(z, 31)
}

// SplitMixPermutation computes SplitMixPermutation(n, seed) on device d:
// an int64 tensor of n indices.
func (s *Scope) SplitMixPermutation(n, seed int64, d Device) T {
	return s.unary("argsort", s.SplitMixKeys(n, seed, d), func(t *ts.Tensor) (*ts.Tensor, error) {
		return t.ArgsortStable(true, 0, false, false)
	})
}

// xorShift returns z ^ (z >>> k), >>> the logical right shift of int64 z.
func (s *Scope) xorShift(z T, k int64) T {
	sh := s.intScalarOp("bitwise_right_shift", z, k, (*ts.Tensor).BitwiseRightShiftTensorScalar)
	sh = s.intScalarOp("bitwise_and", sh, int64(^uint64(0)>>k), (*ts.Tensor).BitwiseAnd)
	return s.binary("bitwise_xor", z, sh, func(a, b *ts.Tensor) (*ts.Tensor, error) { return a.BitwiseXorTensor(b, false) })
}

// intScalarOp applies a gotch op with an int64 scalar operand.
func (s *Scope) intScalarOp(name string, t T, v int64, f func(*ts.Tensor, *ts.Scalar, bool) (*ts.Tensor, error)) T {
	return s.unary(name, t, func(t *ts.Tensor) (*ts.Tensor, error) {
		sc := ts.IntScalar(v)
		defer sc.MustDrop()
		return f(t, sc, false)
	})
}

// Arange returns 0, 1, …, n−1 of dtype dt, made on device d (a kernel, not
// a copy).
func (s *Scope) Arange(n int64, dt DType, d Device) T {
	return s.op("arange", func() (*ts.Tensor, error) {
		end := ts.IntScalar(n)
		defer end.MustDrop()
		return ts.Arange(end, dt, d.d)
	})
}
