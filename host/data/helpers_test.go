package data

import (
	"archive/zip"
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"math"
	"strings"
	"testing"
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

// npyRaw encodes an NPY file of format version major.0 whose header
// dictionary is header, padded with spaces and a newline as np.save pads
// it (to a multiple of 64 bytes), followed by data.
func npyRaw(major byte, header string, data []byte) []byte {
	pre := 10
	if major > 1 {
		pre = 12
	}
	pad := 64 - (pre+len(header)+1)%64
	if pad == 64 {
		pad = 0
	}
	h := header + strings.Repeat(" ", pad) + "\n"
	out := append([]byte(npyMagic), major, 0)
	if major > 1 {
		out = binary.LittleEndian.AppendUint32(out, uint32(len(h)))
	} else {
		out = binary.LittleEndian.AppendUint16(out, uint16(len(h)))
	}
	out = append(out, h...)
	return append(out, data...)
}

// npyHeader writes the header dictionary np.save writes for a C-order
// array of the given descr and shape.
func npyHeader(descr string, shape ...int) string {
	return fmt.Sprintf("{'descr': '%s', 'fortran_order': False, 'shape': %s, }", descr, shapeString(shape))
}

// npyOf encodes a version 1.0 NPY file of the given descr and shape.
func npyOf(descr string, data []byte, shape ...int) []byte {
	return npyRaw(1, npyHeader(descr, shape...), data)
}

// npyU8 encodes a uint8 array.
func npyU8(v []uint8, shape ...int) []byte { return npyOf("|u1", v, shape...) }

// npyF32 encodes a float32 array.
func npyF32(v []float32, shape ...int) []byte {
	var b []byte
	for _, x := range v {
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(x))
	}
	return npyOf("<f4", b, shape...)
}

// npyF64 encodes a float64 array.
func npyF64(v []float64, shape ...int) []byte {
	var b []byte
	for _, x := range v {
		b = binary.LittleEndian.AppendUint64(b, math.Float64bits(x))
	}
	return npyOf("<f8", b, shape...)
}

// npyI64 encodes an int64 array of shape (len(v),).
func npyI64(v ...int64) []byte {
	var b []byte
	for _, x := range v {
		b = binary.LittleEndian.AppendUint64(b, uint64(x))
	}
	return npyOf("<i8", b, len(v))
}

// npyI32 encodes an int32 array of shape (len(v),).
func npyI32(v ...int32) []byte {
	var b []byte
	for _, x := range v {
		b = binary.LittleEndian.AppendUint32(b, uint32(x))
	}
	return npyOf("<i4", b, len(v))
}

// member is one member of a zip archive built by zipOf.
type member struct {
	name string
	data []byte
}

// zipOf builds a zip archive of the members, compressed with method
// (zip.Store or zip.Deflate), as np.savez (Store) and np.savez_compressed
// (Deflate) do.
func zipOf(t testing.TB, method uint16, members ...member) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for _, m := range members {
		w, err := zw.CreateHeader(&zip.FileHeader{Name: m.name, Method: method})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write(m.data); err != nil {
			t.Fatal(err)
		}
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// npzOf builds an NPZ archive of the named arrays (name, NPY bytes, name,
// NPY bytes, …), stored.
func npzOf(t testing.TB, arrays ...any) []byte {
	t.Helper()
	var ms []member
	for i := 0; i < len(arrays); i += 2 {
		ms = append(ms, member{arrays[i].(string) + ".npy", arrays[i+1].([]byte)})
	}
	return zipOf(t, zip.Store, ms...)
}

// ramp returns n bytes 0, 1, 2, … (mod 256).
func ramp(n int) []uint8 {
	out := make([]uint8, n)
	for i := range out {
		out[i] = uint8(i)
	}
	return out
}
