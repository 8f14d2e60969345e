package data

import "math"

// rng is a small SplitMix64 generator. The package uses its own generator,
// rather than math/rand, so that a seed names the same split and the same
// synthetic data on every Go version and platform.
type rng struct {
	state uint64
}

// newRNG returns a generator for seed. Distinct streams for the same seed are
// obtained by passing a distinct stream number.
func newRNG(seed int64, stream uint64) *rng {
	r := &rng{state: uint64(seed) ^ (stream * 0xd1342543de82ef95)}
	r.next() // decorrelate nearby seeds
	return r
}

func (r *rng) next() uint64 {
	r.state += 0x9e3779b97f4a7c15
	z := r.state
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// intN returns a uniform integer in [0, n); n must be positive.
func (r *rng) intN(n int) int {
	bound := uint64(n)
	// Rejection sampling removes the modulo bias.
	limit := math.MaxUint64 - math.MaxUint64%bound
	for {
		v := r.next()
		if v < limit {
			return int(v % bound)
		}
	}
}

// float64 returns a uniform value in [0, 1).
func (r *rng) float64() float64 {
	return float64(r.next()>>11) / (1 << 53)
}

// norm returns a standard normal value (Box–Muller).
func (r *rng) norm() float64 {
	u := 1 - r.float64() // (0, 1]
	v := r.float64()
	return math.Sqrt(-2*math.Log(u)) * math.Cos(2*math.Pi*v)
}

// shuffle permutes idx uniformly (Fisher–Yates).
func (r *rng) shuffle(idx []int) {
	for i := len(idx) - 1; i > 0; i-- {
		j := r.intN(i + 1)
		idx[i], idx[j] = idx[j], idx[i]
	}
}
