package data

import (
	"bytes"
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
