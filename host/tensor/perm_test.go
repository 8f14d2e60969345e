package tensor

import (
	"slices"
	"testing"
)

// The device's SplitMix keys and permutation are the host's, bit for bit,
// and the host's keys are SplitMix64's outputs.
func TestSplitMixPermutation(t *testing.T) {
	// SplitMix64 seeded with 1234567: its first five outputs, the test
	// vector of Rosetta Code's "Pseudo-random numbers/Splitmix64" (the
	// algorithm of prng.di.unimi.it/splitmix64.c).
	want := []uint64{6457827717110365317, 3203168211198807973, 9817491932198370423, 4593380528125082431, 16408922859458223821}
	for i, k := range SplitMixKeys(5, 1234567) {
		if uint64(k) != want[i] {
			t.Fatalf("key %d = %d, want %d", i, uint64(k), want[i])
		}
	}
	w := NewWorker(1)
	defer w.Close()
	err := w.Do(t.Context(), func() error {
		for _, n := range []int64{1, 2, 7, 64, 128, 1000} {
			for _, seed := range []int64{1, -3, 17, 1 << 62, -1 << 63, 0x7fffffffffffffff} {
				s := NewScope()
				keys := s.SplitMixKeys(n, seed, CPU)
				perm := s.SplitMixPermutation(n, seed, CPU)
				gk, gp := int64s(t, s, keys), int64s(t, s, perm)
				if err := s.Err(); err != nil {
					s.Close()
					return err
				}
				s.Close()
				if !slices.Equal(gk, SplitMixKeys(n, seed)) {
					t.Errorf("n %d seed %d: device keys differ from the host's", n, seed)
				}
				hp := SplitMixPermutation(n, seed)
				if !slices.Equal(gp, hp) {
					t.Errorf("n %d seed %d: device permutation %v, host %v", n, seed, gp[:min(n, 8)], hp[:min(n, 8)])
				}
				sorted := slices.Clone(hp)
				slices.Sort(sorted)
				for i, v := range sorted {
					if v != int64(i) {
						t.Fatalf("n %d seed %d: %v is not a permutation", n, seed, hp)
					}
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// int64s reads an int64 tensor exactly (its values are not float64-exact).
func int64s(t *testing.T, s *Scope, x T) []int64 {
	t.Helper()
	c := s.Contiguous(x)
	if s.Err() != nil {
		return nil
	}
	out := make([]int64, c.Numel())
	if err := c.t.CopyData(out, uint(len(out))); err != nil {
		t.Fatal(err)
	}
	return out
}
