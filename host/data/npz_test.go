package data

import (
	"archive/zip"
	"bytes"
	"encoding/binary"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestNPZ(t *testing.T) {
	a, b := npyU8([]uint8{1, 2, 3}, 3), npyI64(7, 8)
	for _, method := range []uint16{zip.Store, zip.Deflate} {
		in := zipOf(t, method, member{"a.npy", a}, member{"notes.txt", []byte("hi")}, member{"d/", nil}, member{"b.npy", b})
		z, err := OpenNPZ(bytes.NewReader(in), int64(len(in)))
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(z.Names(), []string{"a", "b"}) || !z.Has("a") || z.Has("notes") {
			t.Errorf("method %d: names %v", method, z.Names())
		}
		arr, err := z.Array("b")
		if err != nil || arr.DType != "int64" || arr.Int(1) != 8 {
			t.Errorf("method %d: b = %+v, %v", method, arr, err)
		}
		if _, err := z.Array("c"); err == nil || err.Error() != "the archive holds no c.npy (it holds a, b)" {
			t.Errorf("method %d: missing array: %v", method, err)
		}
	}
}

// The fixtures were written by NumPy (testdata/numpy/gen.py): np.savez's
// stored zip64 members and np.savez_compressed's deflated ones.
func TestNPZNumPyFixtures(t *testing.T) {
	tests := []struct {
		file  string
		names []string
		check func(t *testing.T, z *NPZ)
	}{
		{"tiny.npz", []string{"x_train", "y_train", "x_test", "y_test"}, func(t *testing.T, z *NPZ) {
			x, err := z.Array("x_train")
			if err != nil || x.DType != "uint8" || !slices.Equal(x.Shape, []int{6, 2, 3, 3}) || !bytes.Equal(x.Data, ramp(108)) {
				t.Errorf("x_train = %+v, %v", x, err)
			}
			y, err := z.Array("y_test")
			if err != nil || y.DType != "int32" || y.Int(0) != 2 || y.Int(2) != 0 {
				t.Errorf("y_test = %+v, %v", y, err)
			}
		}},
		{"tinyc.npz", []string{"x_train", "y_train", "x_test", "y_test", "x_val", "y_val"}, func(t *testing.T, z *NPZ) {
			x, err := z.Array("x_test")
			if err != nil || x.DType != "float64" || !slices.Equal(x.Shape, []int{2, 5}) || x.Float(0) != -1 {
				t.Errorf("x_test = %+v, %v", x, err)
			}
			y, err := z.Array("y_val")
			if err != nil || y.DType != "uint8" || y.Int(1) != 1 {
				t.Errorf("y_val = %+v, %v", y, err)
			}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.file, func(t *testing.T) {
			in, err := os.ReadFile(filepath.Join("testdata", "numpy", tc.file))
			if err != nil {
				t.Fatal(err)
			}
			z, err := OpenNPZ(bytes.NewReader(in), int64(len(in)))
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(z.Names(), tc.names) {
				t.Errorf("names %v, want %v", z.Names(), tc.names)
			}
			tc.check(t, z)
		})
	}
}

// central returns the offset of the first central-directory header of a
// zip archive.
func central(t *testing.T, b []byte) int {
	t.Helper()
	i := bytes.Index(b, []byte("PK\x01\x02"))
	if i < 0 {
		t.Fatal("no central directory")
	}
	return i
}

func TestNPZErrors(t *testing.T) {
	a := npyF32([]float32{1, 2, 3, 4}, 4)
	stored := func() []byte { return zipOf(t, zip.Store, member{"a.npy", a}) }
	tests := []struct {
		name string
		in   func() []byte
		want string // OpenNPZ's error, or else Array("a")'s
	}{
		{"not a zip", func() []byte { return a }, "not an NPZ file (a zip archive, as np.savez writes): zip: not a valid zip file"},
		{"empty", func() []byte { return nil }, "not an NPZ file"},
		{"twice", func() []byte { return zipOf(t, zip.Store, member{"a.npy", a}, member{"a.npy", a}) }, "the archive holds a.npy twice"},
		{"unsupported method", func() []byte {
			b := stored()
			binary.LittleEndian.PutUint16(b[central(t, b)+10:], 12) // bzip2
			return b
		}, "a.npy: compression method 12 is not supported (want stored or deflated"},
		{"stored sizes differ", func() []byte {
			b := stored()
			binary.LittleEndian.PutUint32(b[central(t, b)+24:], 1<<30)
			return b
		}, "a.npy: the archive is corrupt: a stored member of 144 bytes claims 1073741824 uncompressed"},
		{"deflate claims too much", func() []byte {
			b := zipOf(t, zip.Deflate, member{"a.npy", a})
			binary.LittleEndian.PutUint32(b[central(t, b)+24:], 0xfffffff0)
			return b
		}, "more than deflate can produce"},
		{"compressed size past the end", func() []byte {
			b := stored()
			c := central(t, b)
			binary.LittleEndian.PutUint32(b[c+20:], 1<<20)
			binary.LittleEndian.PutUint32(b[c+24:], 1<<20)
			return b
		}, "a.npy: the archive is truncated: the member claims 1048576 bytes"},
		{"corrupt data", func() []byte {
			b := stored()
			b[bytes.Index(b, []byte("NUMPY"))+130]++ // in the float data
			return b
		}, "a.npy: zip: checksum error"},
		{"member not npy", func() []byte { return zipOf(t, zip.Deflate, member{"a.npy", []byte("hello")}) }, "a.npy: not an NPY file"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			in := tc.in()
			z, err := OpenNPZ(bytes.NewReader(in), int64(len(in)))
			if err == nil {
				_, err = z.Array("a")
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want %q", err, tc.want)
			}
		})
	}
}
