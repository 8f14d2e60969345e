package data

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
)

func TestReadNPY(t *testing.T) {
	f32 := func(v ...float32) []byte {
		var b []byte
		for _, x := range v {
			b = binary.LittleEndian.AppendUint32(b, math.Float32bits(x))
		}
		return b
	}
	tests := []struct {
		name  string
		in    []byte
		dtype string
		shape []int
		data  []byte
	}{
		{"uint8 matrix", npyU8([]uint8{1, 2, 3, 4, 5, 6}, 2, 3), "uint8", []int{2, 3}, []byte{1, 2, 3, 4, 5, 6}},
		{"float32 version 2", npyRaw(2, npyHeader("<f4", 2), f32(1.5, -2)), "float32", []int{2}, f32(1.5, -2)},
		{"int64 version 3", npyRaw(3, npyHeader("<i8", 1), []byte{7, 0, 0, 0, 0, 0, 0, 0}), "int64", []int{1}, []byte{7, 0, 0, 0, 0, 0, 0, 0}},
		{"scalar", npyOf("<f8", make([]byte, 8)), "float64", []int{}, make([]byte, 8)},
		{"empty", npyOf("<f4", nil, 0, 5), "float32", []int{0, 5}, []byte{}},
		{"empty, zero last", npyOf("<f4", nil, 5, 0), "float32", []int{5, 0}, []byte{}},
		{"one-byte types in any byte order", npyOf(">i1", []byte{0xff}, 1), "int8", []int{1}, []byte{0xff}},
		{"uint8 written '<'", npyOf("<u1", []byte{9}, 1), "uint8", []int{1}, []byte{9}},
		{"written by hand", npyRaw(1, `{"shape":(2L,),"fortran_order":False,"descr":"<u2"}`, []byte{1, 0, 2, 0}), "uint16", []int{2}, []byte{1, 0, 2, 0}},
		{"unpadded header", append([]byte("\x93NUMPY\x01\x00\x3c\x00{'descr': '<i4', 'fortran_order': False, 'shape': (1,), }   "), 5, 0, 0, 0), "int32", []int{1}, []byte{5, 0, 0, 0}},
		{"fortran order immaterial", npyRaw(1, "{'descr': '|u1', 'fortran_order': True, 'shape': (1, 3, 1), }", []byte{1, 2, 3}), "uint8", []int{1, 3, 1}, []byte{1, 2, 3}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a, err := ReadNPY(bytes.NewReader(tc.in), int64(len(tc.in)))
			if err != nil {
				t.Fatal(err)
			}
			if a.DType != tc.dtype || !slices.Equal(a.Shape, tc.shape) || !bytes.Equal(a.Data, tc.data) {
				t.Errorf("got %s %v %v, want %s %v %v", a.DType, a.Shape, a.Data, tc.dtype, tc.shape, tc.data)
			}
			if a.Len()*a.ItemSize() != len(a.Data) {
				t.Errorf("Len %d × ItemSize %d != %d bytes", a.Len(), a.ItemSize(), len(a.Data))
			}
		})
	}
}

func TestReadNPYErrors(t *testing.T) {
	ok := npyF32([]float32{1, 2}, 2)
	tests := []struct {
		name string
		in   []byte
		want []string
	}{
		{"empty", nil, []string{"not an NPY file", `"\x93NUMPY"`}},
		{"not npy", []byte("PK\x03\x04 a zip file"), []string{"not an NPY file"}},
		{"version 4", append([]byte("\x93NUMPY\x04\x00"), ok[8:]...), []string{"NPY format version 4.0 is not supported (want 1.0, 2.0 or 3.0)"}},
		{"version 1.1", append([]byte("\x93NUMPY\x01\x01"), ok[8:]...), []string{"version 1.1"}},
		{"no header length", []byte("\x93NUMPY\x01\x00\x10"), []string{"ends inside its header length"}},
		{"header longer than file", ok[:40], []string{"NPY header of 118 bytes: the file holds 40 bytes in all"}},
		{"huge header", npyRaw(2, strings.Repeat(" ", maxNPYHeader+1), nil), []string{"over 1048576 bytes is refused"}},
		{"malformed", npyRaw(1, "{'descr': '<f4', 'shape': (2,)", nil), []string{"malformed NPY header", "want ',' or '}'"}},
		{"not a dict", npyRaw(1, "['<f4']", nil), []string{"malformed NPY header", "want '{'"}},
		{"after the dict", npyRaw(1, npyHeader("<f4", 1)+" x", nil), []string{"malformed NPY header", `unexpected "x`}},
		{"duplicate key", npyRaw(1, "{'shape': (1,), 'shape': (1,)}", nil), []string{`key "shape" twice`}},
		{"escape", npyRaw(1, `{'descr': '<f\x34'}`, nil), []string{"escapes"}},
		{"unexpected key", npyRaw(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (1,), 'x': 1}", nil), []string{`unexpected key "x"`}},
		{"missing descr", npyRaw(1, "{'fortran_order': False, 'shape': (1,)}", nil), []string{"descr is missing"}},
		{"structured", npyRaw(1, "{'descr': [('a', '<f4'), ('b', '<i8')], 'fortran_order': False, 'shape': (1,)}", nil), []string{"structured dtype"}},
		{"fortran", npyRaw(1, "{'descr': '<f4', 'fortran_order': True, 'shape': (2, 3), }", make([]byte, 24)), []string{"Fortran (column-major) order", "np.ascontiguousarray"}},
		{"fortran not bool", npyRaw(1, "{'descr': '<f4', 'fortran_order': 0, 'shape': (1,), }", nil), []string{"fortran_order is an integer, want True or False"}},
		{"big-endian", npyOf(">f4", make([]byte, 4), 1), []string{`big-endian (dtype ">f4")`, "newbyteorder"}},
		{"no byte order", npyOf("f8", make([]byte, 8), 1), []string{`dtype "f8" has no explicit byte order`}},
		{"native byte order", npyOf("=i4", make([]byte, 4), 1), []string{`dtype "=i4" has no explicit byte order`}},
		{"not applicable byte order", npyOf("|f4", make([]byte, 4), 1), []string{`dtype "|f4": byte order '|'`}},
		{"complex", npyOf("<c8", make([]byte, 8), 1), []string{`dtype "<c8" is not supported (want one of uint8, int8`}},
		{"bool", npyOf("|b1", []byte{1}, 1), []string{`dtype "|b1" is not supported`}},
		{"object", npyOf("|O", make([]byte, 8), 1), []string{`dtype "|O" is not supported`}},
		{"shape list", npyRaw(1, "{'descr': '<f4', 'fortran_order': False, 'shape': [1], }", make([]byte, 4)), []string{"shape is a list, want a tuple"}},
		{"shape negative", npyRaw(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (-1,), }", nil), []string{"shape element 0 is -1"}},
		{"shape of strings", npyRaw(1, "{'descr': '<f4', 'fortran_order': False, 'shape': ('a',), }", nil), []string{`shape element 0 is "a"`}},
		{"shape too long", npyRaw(1, npyHeader("<f4", make([]int, 33)...), nil), []string{"33 dimensions, more than 32"}},
		{"integer overflow", npyRaw(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,), }", nil), []string{"out of range"}},
		{"claims more than the file", npyOf("<f8", make([]byte, 8), 1<<40, 1<<40), []string{"shape (1099511627776, 1099511627776) of float64 (more than 2^63 bytes), more data than the 8 bytes"}},
		{"claims a little more", npyOf("<f8", make([]byte, 8), 2), []string{"shape (2,) of float64 (16 bytes), more data than the 8 bytes"}},
		{"trailing bytes", append(bytes.Clone(ok), 0), []string{"bytes follow the 8 bytes of data"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a, err := ReadNPY(bytes.NewReader(tc.in), int64(len(tc.in)))
			if err == nil {
				t.Fatalf("ReadNPY = %v %v, want an error", a.DType, a.Shape)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
}

// A stream shorter than its header declares is reported as such, and the
// buffer for the data grows only with what arrives.
func TestReadNPYShortStream(t *testing.T) {
	in := npyF32(make([]float32, 1<<20), 1<<20)
	short := in[:len(in)-100]
	_, err := readNPY(bytes.NewReader(short), int64(len(in)), 0)
	if err == nil || !strings.Contains(err.Error(), "the data ends after 4194204 of the 4194304 bytes of shape (1048576,) of float32") {
		t.Errorf("short stream: %v", err)
	}
	// A limit that allows the claim but a tiny stream: no 4 MiB buffer.
	head := in[:200]
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err = readNPY(bytes.NewReader(head), int64(len(in)), 0)
	runtime.ReadMemStats(&after)
	if err == nil {
		t.Error("truncated stream: no error")
	}
	if n := after.TotalAlloc - before.TotalAlloc; n > 1<<20 {
		t.Errorf("%d bytes allocated for a stream of 200 bytes", n)
	}
}

func TestNPYArrayValues(t *testing.T) {
	tests := []struct {
		in     []byte
		ints   []int64
		floats []float64
	}{
		{npyU8([]uint8{0, 255}, 2), []int64{0, 255}, []float64{0, 255}},
		{npyOf("|i1", []byte{0x80, 1}, 2), []int64{-128, 1}, []float64{-128, 1}},
		{npyOf("<u2", []byte{0xff, 0xff}, 1), []int64{65535}, []float64{65535}},
		{npyOf("<i2", []byte{0xfe, 0xff}, 1), []int64{-2}, []float64{-2}},
		{npyOf("<u4", []byte{0xff, 0xff, 0xff, 0xff}, 1), []int64{1<<32 - 1}, []float64{1<<32 - 1}},
		{npyI32(-3, 7), []int64{-3, 7}, []float64{-3, 7}},
		{npyI64(-1<<40, 3), []int64{-1 << 40, 3}, []float64{-1 << 40, 3}},
		{npyOf("<u8", bytes.Repeat([]byte{0xff}, 8), 1), []int64{-1}, []float64{1 << 64}},
		{npyF32([]float32{2.5, -1}, 2), []int64{2, -1}, []float64{2.5, -1}},
		{npyF64([]float64{1e300, 0.25}, 2), []int64{math.MinInt64, 0}, []float64{1e300, 0.25}},
	}
	for _, tc := range tests {
		a, err := ReadNPY(bytes.NewReader(tc.in), int64(len(tc.in)))
		if err != nil {
			t.Fatal(err)
		}
		for i := range tc.ints {
			if got := a.Int(i); got != tc.ints[i] && !(a.DType == "float64" && i == 0) {
				t.Errorf("%s: Int(%d) = %d, want %d", a.DType, i, got, tc.ints[i])
			}
			if got := a.Float(i); got != tc.floats[i] {
				t.Errorf("%s: Float(%d) = %v, want %v", a.DType, i, got, tc.floats[i])
			}
		}
		if a.IsInt() == a.IsFloat() {
			t.Errorf("%s: IsInt %v, IsFloat %v", a.DType, a.IsInt(), a.IsFloat())
		}
	}
}

func TestLoadNPY(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "a.npy")
	if err := os.WriteFile(path, npyI64(4, 5), 0o644); err != nil {
		t.Fatal(err)
	}
	a, err := LoadNPY(path)
	if err != nil || a.Int(1) != 5 {
		t.Fatalf("LoadNPY = %v, %v", a, err)
	}
	bad := filepath.Join(dir, "bad.npy")
	if err := os.WriteFile(bad, npyOf(">f4", make([]byte, 4), 1), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadNPY(bad); err == nil || !strings.HasPrefix(err.Error(), bad+": the array is big-endian") {
		t.Errorf("LoadNPY(big-endian) = %v", err)
	}
	if _, err := LoadNPY(dir); err == nil || !strings.Contains(err.Error(), "is a folder") {
		t.Errorf("LoadNPY(folder) = %v", err)
	}
}

// An array that the file can hold but the memory cannot (a sparse .npy, a
// deflated NPZ member of zeros) is refused before its buffer is
// allocated, with one line naming its shape and the memory it needs
// (hardening4/05: Go's "fatal error: out of memory" before).
func TestReadNPYMoreThanMemory(t *testing.T) {
	avail := availableMemory()
	n := int(avail/4 + 1) // uint8: stored n bytes, plus 4n as float32
	hdr := npyRaw(1, npyHeader("|u1", n, 1), nil)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err := ReadNPY(bytes.NewReader(hdr), int64(len(hdr))+int64(n))
	runtime.ReadMemStats(&after)
	if err == nil {
		t.Fatal("an array larger than the memory available was not refused")
	}
	for _, w := range []string{fmt.Sprintf("an array of shape (%d, 1) of uint8 need", n), "more than the", "available"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q lacks %q", err, w)
		}
	}
	if a := after.TotalAlloc - before.TotalAlloc; a > 1<<20 {
		t.Errorf("%d bytes allocated before the refusal", a)
	}
}
