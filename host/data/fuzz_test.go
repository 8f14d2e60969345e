package data

import (
	"archive/zip"
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// FuzzCIFARReader feeds arbitrary bytes to ParseCIFAR as a batch file.
// Interesting inputs are at least one 3073-byte record long, and Go's
// minimizer can stall on inputs that large (golang/go#48820), so fuzz with
// a bounded minimization, e.g.
//
//	go test -run '^$' -fuzz FuzzCIFARReader -fuzzminimizetime 200x ./host/data
func FuzzCIFARReader(f *testing.F) {
	rec10 := make([]byte, 3073)
	rec10[0] = 9
	rec100 := make([]byte, 3074)
	rec100[0], rec100[1] = 19, 99
	f.Add(false, rec10)
	f.Add(false, append(bytes.Clone(rec10), rec10...))
	f.Add(false, rec10[:3072])
	f.Add(false, []byte{})
	f.Add(false, bytes.Repeat([]byte{0xff}, 3073))
	f.Add(true, rec100)
	f.Add(true, rec10)
	f.Add(true, append(bytes.Clone(rec100), 1))
	f.Fuzz(func(t *testing.T, hundred bool, b []byte) {
		kind, rec, classes := CIFAR10, 3073, 10
		if hundred {
			kind, rec, classes = CIFAR100, 3074, 100
		}
		s, err := ParseCIFAR(kind, "fuzz.bin", b)
		if err != nil {
			if s != nil {
				t.Fatalf("both a set and an error")
			}
			if !strings.Contains(err.Error(), "fuzz.bin") {
				t.Fatalf("error does not name the file: %v", err)
			}
			return
		}
		if len(b) == 0 || len(b)%rec != 0 {
			t.Fatalf("accepted %d bytes", len(b))
		}
		if err := s.Validate(); err != nil {
			t.Fatalf("invalid set: %v", err)
		}
		if s.Len() != len(b)/rec || s.Classes != classes {
			t.Fatalf("%d samples of %d classes from %d bytes", s.Len(), s.Classes, len(b))
		}
		// Pixels are copied through unchanged.
		for i := range s.Len() {
			if !bytes.Equal(s.X[i*3072:(i+1)*3072], b[i*rec+rec-3072:(i+1)*rec]) {
				t.Fatalf("record %d: pixels differ", i)
			}
		}
	})
}

// FuzzCSV feeds arbitrary text to ReadCSV, with and without a fixed number
// of classes.
func FuzzCSV(f *testing.F) {
	for _, seed := range []string{
		"1,2,0\n3,4,1\n",
		"a,b,label\n0.5,1e3,2\n",
		"\ufeffx,y\r\n1,0\r\n",
		"1,2,0\n1,2\n",
		"1,x,0\n",
		"\"1\",\"2\",\"3\"\n",
		"1,\"2,0\n",
		"# c\n\n1,2,3.0\n",
		"NaN,Inf,0\n",
		"1,2,-1\n",
		"1e39,0\n",
		"1,99999999999999999999\n",
		"",
	} {
		f.Add(seed, uint8(0))
		f.Add(seed, uint8(3))
	}
	f.Fuzz(func(t *testing.T, in string, classes uint8) {
		s, err := ReadCSV(strings.NewReader(in), CSVOptions{Classes: int(classes)})
		if err != nil {
			if s != nil {
				t.Fatalf("both a set and an error")
			}
			return
		}
		if err := s.Validate(); err != nil {
			t.Fatalf("invalid set: %v", err)
		}
		if s.Len() == 0 || len(s.Shape) != 1 || s.Shape[0] < 1 {
			t.Fatalf("%d samples of shape %v", s.Len(), s.Shape)
		}
		if classes > 0 && s.Classes != int(classes) {
			t.Fatalf("%d classes, asked for %d", s.Classes, classes)
		}
	})
}

// FuzzNPY feeds arbitrary bytes to ReadNPY: it must return an error or an
// array whose data, of the size its shape and dtype make, ends the input.
func FuzzNPY(f *testing.F) {
	for _, seed := range [][]byte{
		npyU8([]uint8{1, 2, 3, 4, 5, 6}, 2, 3),
		npyF32([]float32{1.5, -2}, 2),
		npyRaw(2, npyHeader("<f8", 1), make([]byte, 8)),
		npyRaw(3, npyHeader("<i8", 0, 3), nil),
		npyOf(">f4", make([]byte, 4), 1),
		npyRaw(1, "{'descr': '<f4', 'fortran_order': True, 'shape': (2, 3), }", make([]byte, 24)),
		npyRaw(1, "{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (1,), }", make([]byte, 4)),
		npyRaw(1, `{"shape":(2L,),"fortran_order":False,"descr":"<u2"}`, []byte{1, 0, 2, 0}),
		npyOf("<f8", make([]byte, 8), 1<<40, 1<<40),
		[]byte(npyMagic),
		{},
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		a, err := ReadNPY(bytes.NewReader(b), int64(len(b)))
		if err != nil {
			if a != nil {
				t.Fatal("both an array and an error")
			}
			return
		}
		if a.ItemSize() == 0 || len(a.Data) != a.Len()*a.ItemSize() || !bytes.HasSuffix(b, a.Data) {
			t.Fatalf("%s %v: %d bytes of data from %d", a.DType, a.Shape, len(a.Data), len(b))
		}
	})
}

// FuzzNPZ feeds arbitrary bytes to OpenNPZ and reads every array of what
// it accepts.
func FuzzNPZ(f *testing.F) {
	a := npyF32([]float32{1, 2, 3, 4}, 2, 2)
	f.Add(zipOf(f, zip.Store, member{"a.npy", a}, member{"b.npy", npyI64(1, 2)}))
	f.Add(zipOf(f, zip.Deflate, member{"a.npy", a}, member{"x.txt", []byte("x")}))
	f.Add(zipOf(f, zip.Deflate, member{"a.npy", make([]byte, 4096)}))
	for _, name := range []string{"tiny.npz", "tinyc.npz"} {
		if b, err := os.ReadFile(filepath.Join("testdata", "numpy", name)); err == nil {
			f.Add(b)
		}
	}
	f.Add([]byte("PK\x05\x06" + strings.Repeat("\x00", 18)))
	f.Fuzz(func(t *testing.T, b []byte) {
		z, err := OpenNPZ(bytes.NewReader(b), int64(len(b)))
		if err != nil {
			if z != nil {
				t.Fatal("both an archive and an error")
			}
			return
		}
		for _, name := range z.Names() {
			a, err := z.Array(name)
			if err != nil {
				if a != nil {
					t.Fatal("both an array and an error")
				}
				continue
			}
			if len(a.Data) != a.Len()*a.ItemSize() {
				t.Fatalf("%s: %s %v with %d bytes of data", name, a.DType, a.Shape, len(a.Data))
			}
		}
	})
}

// FuzzNumPy feeds arbitrary bytes to ReadNumPy as an NPZ archive, with
// either layout and with and without a fixed number of classes.
func FuzzNumPy(f *testing.F) {
	x, y := npyU8(ramp(2*3*2*2), 2, 3, 2, 2), npyI64(0, 1)
	seeds := [][]byte{
		npzOf(f, "x_train", x, "y_train", y, "x_test", x, "y_test", npyI32(1, 0)),
		npzOf(f, "x_train", npyF32([]float32{1, 2, 3, 4}, 2, 2), "y_train", npyF64([]float64{1, 0}, 2), "x_test", npyF64([]float64{1, 2}, 1, 2), "y_test", npyI64(1),
			"x_val", npyF32([]float32{5, 6}, 1, 2), "y_val", npyOf("|u1", []byte{0}, 1, 1)),
		npzOf(f, "x_train", npyU8(ramp(8), 2, 2, 2), "y_train", y, "x_test", npyU8(ramp(4), 1, 2, 2), "y_test", npyI64(7)),
		npzOf(f, "x_train", x, "y_train", y),
	}
	for _, name := range []string{"tiny.npz", "tinyc.npz"} {
		if b, err := os.ReadFile(filepath.Join("testdata", "numpy", name)); err == nil {
			seeds = append(seeds, b)
		}
	}
	for _, s := range seeds {
		f.Add(s, false, uint8(0))
		f.Add(s, true, uint8(3))
	}
	f.Fuzz(func(t *testing.T, b []byte, nhwc bool, classes uint8) {
		opts := NumPyOptions{Layout: LayoutNCHW, Classes: int(classes)}
		if nhwc {
			opts.Layout = LayoutNHWC
		}
		sp, err := ReadNumPy(bytes.NewReader(b), int64(len(b)), opts)
		if err != nil {
			if sp.Train != nil || sp.Test != nil || sp.Val != nil {
				t.Fatal("both a split and an error")
			}
			if !strings.HasPrefix(err.Error(), "npz npz: ") {
				t.Fatalf("error without the dataset's name: %v", err)
			}
			return
		}
		for _, s := range []*Set{sp.Train, sp.Test, sp.Val} {
			if s == nil {
				continue
			}
			if err := s.Validate(); err != nil {
				t.Fatalf("invalid set: %v", err)
			}
			if s.Len() == 0 || !slices.Equal(s.Shape, sp.Train.Shape) || s.Classes != sp.Train.Classes || s.Raw8() != sp.Train.Raw8() || len(s.Mean) != s.Shape[0] {
				t.Fatalf("part of %d samples of shape %v, %d classes, raw %v, mean %v; train %v, %d classes", s.Len(), s.Shape, s.Classes, s.Raw8(), s.Mean, sp.Train.Shape, sp.Train.Classes)
			}
		}
		if classes > 0 && sp.Train.Classes != int(classes) {
			t.Fatalf("%d classes, asked for %d", sp.Train.Classes, classes)
		}
	})
}
