package data

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestCIFARRoundTrip(t *testing.T) {
	tests := []struct {
		kind          string
		subdir        string
		classes       int
		coarseClasses int
		mean0         float32
		std2          float32
		names         bool
	}{
		{CIFAR10, "cifar-10-batches-bin", 10, 0, 0.4914, 0.2616, true},
		{CIFAR100, "cifar-100-binary", 100, 20, 0.5071, 0.2762, false},
	}
	for _, tc := range tests {
		t.Run(tc.kind, func(t *testing.T) {
			parent := t.TempDir()
			dir := filepath.Join(parent, tc.subdir)
			if err := WriteCIFAR(dir, tc.kind, 7, 5, 1); err != nil {
				t.Fatal(err)
			}
			// Both the folder itself and its parent are accepted.
			for _, d := range []string{dir, parent} {
				sp, err := LoadCIFAR(tc.kind, d)
				if err != nil {
					t.Fatalf("LoadCIFAR(%s): %v", d, err)
				}
				for _, s := range []*Set{sp.Train, sp.Test} {
					if err := s.Validate(); err != nil {
						t.Fatal(err)
					}
					if !s.Raw8() || !slices.Equal(s.Shape, []int{3, 32, 32}) || s.Classes != tc.classes || s.Name != tc.kind {
						t.Fatalf("set %q: raw %v shape %v classes %d", s.Name, s.Raw8(), s.Shape, s.Classes)
					}
					if s.Mean[0] != tc.mean0 || s.Std[2] != tc.std2 {
						t.Errorf("Mean/Std = %v/%v", s.Mean, s.Std)
					}
					if (s.ClassNames != nil) != tc.names {
						t.Errorf("ClassNames = %v", s.ClassNames)
					}
					if s.CoarseClasses != tc.coarseClasses || (s.Coarse != nil) != (tc.coarseClasses > 0) {
						t.Errorf("coarse: %d classes, labels %v", s.CoarseClasses, s.Coarse)
					}
					for i, c := range s.Coarse {
						if int(c) != int(s.Y[i])/5 {
							t.Fatalf("sample %d: coarse %d for fine %d", i, c, s.Y[i])
						}
					}
				}
				if sp.Train.Len() != 35 || sp.Test.Len() != 5 || sp.Val != nil {
					t.Fatalf("train/test = %d/%d", sp.Train.Len(), sp.Test.Len())
				}
			}
			// Deterministic per seed, different across seeds.
			again := filepath.Join(t.TempDir(), "a")
			other := filepath.Join(t.TempDir(), "b")
			if err := WriteCIFAR(again, tc.kind, 7, 5, 1); err != nil {
				t.Fatal(err)
			}
			if err := WriteCIFAR(other, tc.kind, 7, 5, 2); err != nil {
				t.Fatal(err)
			}
			a, _ := LoadCIFAR(tc.kind, dir)
			b, _ := LoadCIFAR(tc.kind, again)
			c, _ := LoadCIFAR(tc.kind, other)
			if fingerprint(a.Train) != fingerprint(b.Train) {
				t.Errorf("WriteCIFAR not deterministic")
			}
			if fingerprint(a.Train) == fingerprint(c.Train) {
				t.Errorf("WriteCIFAR ignores the seed")
			}
		})
	}
}

func TestCIFARRecordLayout(t *testing.T) {
	// One CIFAR-100 record written by hand: coarse, fine, then R, G, B planes.
	rec := make([]byte, 2+3072)
	rec[0], rec[1] = 19, 99
	rec[2] = 1           // R(0,0)
	rec[2+1024] = 2      // G(0,0)
	rec[2+2048+1023] = 3 // B(31,31)
	s, err := ParseCIFAR(CIFAR100, "one.bin", rec)
	if err != nil {
		t.Fatal(err)
	}
	if s.Y[0] != 99 || s.Coarse[0] != 19 || s.X[0] != 1 || s.X[1024] != 2 || s.X[3071] != 3 {
		t.Errorf("decoded Y %d coarse %d pixels %d %d %d", s.Y[0], s.Coarse[0], s.X[0], s.X[1024], s.X[3071])
	}
}

func TestParseCIFARErrors(t *testing.T) {
	rec10 := func(label byte) []byte { r := make([]byte, 3073); r[0] = label; return r }
	rec100 := func(coarse, fine byte) []byte { r := make([]byte, 3074); r[0], r[1] = coarse, fine; return r }
	tests := []struct {
		name string
		kind string
		data []byte
		want []string
	}{
		{"empty", CIFAR10, nil, []string{"b.bin", "empty"}},
		{"truncated", CIFAR10, append(rec10(1), 0, 0, 0), []string{"b.bin", "truncated", "record 1 at byte offset 3073"}},
		{"short", CIFAR10, rec10(1)[:100], []string{"not a multiple", "byte offset 0"}},
		{"label", CIFAR10, append(rec10(9), rec10(10)...), []string{"b.bin", "record 1", "label 10", "byte offset 3073", "0..9"}},
		{"fine", CIFAR100, rec100(0, 100), []string{"label 100", "byte offset 1"}},
		{"coarse", CIFAR100, append(rec100(0, 0), rec100(20, 0)...), []string{"coarse label 20", "byte offset 3074"}},
		{"cifar100 of a cifar10 size", CIFAR100, rec10(0), []string{"3074-byte record"}},
		{"kind", "mnist", rec10(0), []string{"unknown CIFAR dataset"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, err := ParseCIFAR(tc.kind, "b.bin", tc.data)
			if err == nil {
				t.Fatalf("ParseCIFAR = %d samples, want an error", s.Len())
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
}

func TestLoadCIFARErrors(t *testing.T) {
	tests := []struct {
		name  string
		kind  string
		setup func(t *testing.T, dir string) // dir is the data folder
		want  []string
		not   string // a substring the error must not have
		miss  bool   // wraps ErrMissing
	}{
		{
			name:  "missing folder",
			kind:  CIFAR10,
			setup: func(t *testing.T, dir string) {},
			want:  []string{"host data get cifar10 --dir", "https://www.cs.toronto.edu/~kriz/cifar-10-binary.tar.gz"},
			miss:  true,
		},
		{
			name:  "missing cifar100 folder",
			kind:  CIFAR100,
			setup: func(t *testing.T, dir string) {},
			want:  []string{"host data get cifar100 --dir", "https://www.cs.toronto.edu/~kriz/cifar-100-binary.tar.gz"},
			miss:  true,
		},
		{
			name: "missing batch",
			kind: CIFAR10,
			setup: func(t *testing.T, dir string) {
				write(t, dir, CIFAR10)
				if err := os.Remove(filepath.Join(dir, "data_batch_3.bin")); err != nil {
					t.Fatal(err)
				}
			},
			want: []string{"data_batch_3.bin", "missing"},
			miss: true,
		},
		{
			name: "truncated batch",
			kind: CIFAR10,
			setup: func(t *testing.T, dir string) {
				write(t, dir, CIFAR10)
				if err := os.Truncate(filepath.Join(dir, "data_batch_2.bin"), 2*3073+10); err != nil {
					t.Fatal(err)
				}
			},
			want: []string{"data_batch_2.bin", "truncated", "byte offset 6146"},
		},
		{
			name: "cut at a record without marker",
			kind: CIFAR10,
			setup: func(t *testing.T, dir string) {
				write(t, dir, CIFAR10)
				remove(t, filepath.Join(dir, "optlab-generated.txt"))
			},
			want: []string{string(filepath.Separator) + filepath.Join("d", "data_batch_1.bin") + " has 3 records, the published file has 10000: truncated?"},
		},
		{
			name: "cifar100 cut at a record without marker",
			kind: CIFAR100,
			setup: func(t *testing.T, dir string) {
				write(t, dir, CIFAR100)
				remove(t, filepath.Join(dir, "optlab-generated.txt"))
			},
			want: []string{"train.bin has 15 records, the published file has 50000: truncated?"},
		},
		{
			name: "generated batch cut at a record",
			kind: CIFAR10,
			setup: func(t *testing.T, dir string) {
				write(t, dir, CIFAR10)
				if err := os.Truncate(filepath.Join(dir, "data_batch_2.bin"), 2*3073); err != nil {
					t.Fatal(err)
				}
			},
			want: []string{"data_batch_2.bin has 2 records, ", "optlab-generated.txt lists 3: truncated?"},
		},
		{
			name: "batch is a directory",
			kind: CIFAR10,
			setup: func(t *testing.T, dir string) {
				write(t, dir, CIFAR10)
				remove(t, filepath.Join(dir, "data_batch_4.bin"))
				if err := os.Mkdir(filepath.Join(dir, "data_batch_4.bin"), 0o755); err != nil {
					t.Fatal(err)
				}
			},
			want: []string{"batch file ", "data_batch_4.bin is a directory"},
			not:  "truncated",
		},
		{
			name: "bad marker count",
			kind: CIFAR10,
			setup: func(t *testing.T, dir string) {
				write(t, dir, CIFAR10)
				writeFile(t, filepath.Join(dir, "optlab-generated.txt"), "test_batch.bin many\n")
			},
			want: []string{"optlab-generated.txt", `"many" is not a positive record count for test_batch.bin`},
		},
		{
			name: "marker without counts",
			kind: CIFAR100,
			setup: func(t *testing.T, dir string) {
				write(t, dir, CIFAR100)
				writeFile(t, filepath.Join(dir, "optlab-generated.txt"), "generated\n")
			},
			want: []string{"optlab-generated.txt lists no record count for train.bin"},
		},
		{
			name: "bad label",
			kind: CIFAR100,
			setup: func(t *testing.T, dir string) {
				write(t, dir, CIFAR100)
				path := filepath.Join(dir, "test.bin")
				b, err := os.ReadFile(path)
				if err != nil {
					t.Fatal(err)
				}
				b[3074+1] = 200 // fine label of record 1
				if err := os.WriteFile(path, b, 0o644); err != nil {
					t.Fatal(err)
				}
			},
			want: []string{"test.bin", "record 1", "label 200", "byte offset 3075"},
		},
		{
			name: "bad names",
			kind: CIFAR10,
			setup: func(t *testing.T, dir string) {
				write(t, dir, CIFAR10)
				if err := os.WriteFile(filepath.Join(dir, "batches.meta.txt"), []byte("cat\n"), 0o644); err != nil {
					t.Fatal(err)
				}
			},
			want: []string{"batches.meta.txt", "1 class names"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "d")
			tc.setup(t, dir)
			_, err := LoadCIFAR(tc.kind, dir)
			if err == nil {
				t.Fatal("LoadCIFAR: no error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
			if tc.not != "" && strings.Contains(err.Error(), tc.not) {
				t.Errorf("error %q has %q", err, tc.not)
			}
			if got := errors.Is(err, ErrMissing); got != tc.miss {
				t.Errorf("errors.Is(err, ErrMissing) = %v, want %v", got, tc.miss)
			}
		})
	}
	if _, err := LoadCIFAR("cifar5", t.TempDir()); err == nil {
		t.Errorf("unknown dataset: no error")
	}
}

func write(t *testing.T, dir, kind string) {
	t.Helper()
	if err := WriteCIFAR(dir, kind, 3, 4, 9); err != nil {
		t.Fatal(err)
	}
}

func remove(t *testing.T, path string) {
	t.Helper()
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
}

func writeFile(t *testing.T, path, text string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestCIFARPublishedCounts checks folders without the generated-data marker
// against the published record counts, with sparse files of zero records
// (label 0, black images).
func TestCIFARPublishedCounts(t *testing.T) {
	tests := []struct {
		kind    string
		records map[string]int64
		short   string // the file made one record short
	}{
		{CIFAR10, map[string]int64{"data_batch_1.bin": 10000, "data_batch_2.bin": 10000, "data_batch_3.bin": 10000, "data_batch_4.bin": 10000, "data_batch_5.bin": 10000, "test_batch.bin": 10000}, "data_batch_5.bin"},
		{CIFAR100, map[string]int64{"train.bin": 50000, "test.bin": 10000}, "test.bin"},
	}
	for _, tc := range tests {
		t.Run(tc.kind, func(t *testing.T) {
			f, err := cifarFormatFor(tc.kind)
			if err != nil {
				t.Fatal(err)
			}
			dir := t.TempDir()
			for name, n := range tc.records {
				path := filepath.Join(dir, name)
				writeFile(t, path, "")
				if err := os.Truncate(path, n*int64(f.recordSize())); err != nil {
					t.Fatal(err)
				}
			}
			if err := f.complete(dir); err != nil {
				t.Fatalf("published sizes: %v", err)
			}
			if !testing.Short() {
				sp, err := LoadCIFAR(tc.kind, dir)
				if err != nil {
					t.Fatal(err)
				}
				if sp.Test.Len() != 10000 || sp.Train.Len() != 50000 {
					t.Errorf("train/test = %d/%d", sp.Train.Len(), sp.Test.Len())
				}
			}
			short := filepath.Join(dir, tc.short)
			if err := os.Truncate(short, (tc.records[tc.short]-1)*int64(f.recordSize())); err != nil {
				t.Fatal(err)
			}
			want := fmt.Sprintf("%s: %s has %d records, the published file has %d: truncated?", tc.kind, short, tc.records[tc.short]-1, tc.records[tc.short])
			for name, err := range map[string]error{"complete": f.complete(dir), "LoadCIFAR": func() error { _, err := LoadCIFAR(tc.kind, dir); return err }()} {
				if err == nil || !strings.Contains(err.Error(), want) {
					t.Errorf("%s = %v, want an error containing %q", name, err, want)
				}
			}
		})
	}
}

func TestWriteCIFARMarker(t *testing.T) {
	dir := t.TempDir()
	if err := WriteCIFAR(dir, CIFAR100, 3, 4, 1); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "optlab-generated.txt"))
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{"synthetic CIFAR-100 data", "not the\npublished dataset", "\ntrain.bin 15\ntest.bin 4\n"} {
		if !strings.Contains(string(b), w) {
			t.Errorf("marker lacks %q:\n%s", w, b)
		}
	}
}

func TestWriteCIFARErrors(t *testing.T) {
	tests := []struct {
		name        string
		kind        string
		train, test int
	}{
		{"kind", "svhn", 1, 1},
		{"no train", CIFAR10, 0, 1},
		{"no test", CIFAR100, 1, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if err := WriteCIFAR(t.TempDir(), tc.kind, tc.train, tc.test, 1); err == nil {
				t.Fatal("WriteCIFAR: no error")
			}
		})
	}
}

// TestWriteCIFARLearnable checks that the generated classes are separable:
// a nearest-class-mean classifier fitted on train does well on test.
func TestWriteCIFARLearnable(t *testing.T) {
	dir := t.TempDir()
	if err := WriteCIFAR(dir, CIFAR10, 40, 200, 5); err != nil {
		t.Fatal(err)
	}
	sp, err := LoadCIFAR(CIFAR10, dir)
	if err != nil {
		t.Fatal(err)
	}
	toFloat := func(s *Set) *Set {
		f := &Set{Shape: s.Shape, Classes: s.Classes, Y: s.Y, F: make([]float32, len(s.X))}
		for i, v := range s.X {
			f.F[i] = float32(v) / 255
		}
		return f
	}
	if acc := nearestMeanAccuracy(toFloat(sp.Train), toFloat(sp.Test)); acc < 0.9 {
		t.Errorf("nearest-mean accuracy %.2f, want ≥ 0.9", acc)
	}
}

// nearestMeanAccuracy fits class means on train and returns the accuracy of
// assigning every test sample to the nearest mean.
func nearestMeanAccuracy(train, test *Set) float64 {
	d := train.SampleSize()
	means := make([]float64, train.Classes*d)
	counts := make([]int, train.Classes)
	for i, y := range train.Y {
		counts[y]++
		for k := range d {
			means[int(y)*d+k] += float64(train.F[i*d+k])
		}
	}
	for c := range train.Classes {
		for k := range d {
			means[c*d+k] /= float64(max(counts[c], 1))
		}
	}
	correct := 0
	for i, y := range test.Y {
		best, bestDist := -1, 0.0
		for c := range train.Classes {
			dist := 0.0
			for k := range d {
				diff := float64(test.F[i*d+k]) - means[c*d+k]
				dist += diff * diff
			}
			if best < 0 || dist < bestDist {
				best, bestDist = c, dist
			}
		}
		if best == int(y) {
			correct++
		}
	}
	return float64(correct) / float64(test.Len())
}
