package data

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"math"
)

// indexSet returns a Set whose sample i has the single feature i and label
// labels[i], so that tests can trace where every sample went.
func indexSet(labels []int32, classes int) *Set {
	s := &Set{Name: "index", Shape: []int{1}, Classes: classes, F: make([]float32, len(labels)), Y: append([]int32(nil), labels...)}
	for i := range labels {
		s.F[i] = float32(i)
	}
	return s
}

// cyclicLabels returns n labels cycling through 0..classes-1.
func cyclicLabels(n, classes int) []int32 {
	y := make([]int32, n)
	for i := range y {
		y[i] = int32(i % classes)
	}
	return y
}

// fingerprint hashes the samples and labels of s.
func fingerprint(s *Set) string {
	h := sha256.New()
	var b [4]byte
	for _, v := range s.F {
		binary.LittleEndian.PutUint32(b[:], math.Float32bits(v))
		h.Write(b[:])
	}
	h.Write(s.X)
	for _, y := range s.Y {
		binary.LittleEndian.PutUint32(b[:], uint32(y))
		h.Write(b[:])
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}
