package data

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func gz(t testing.TB, b []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	zw.Write(b)
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestLoadMNISTRoundTrip(t *testing.T) {
	dir := t.TempDir()
	if err := WriteMNIST(dir, FashionMNIST, 50, 20, 3); err != nil {
		t.Fatal(err)
	}
	sp, err := LoadMNIST(FashionMNIST, dir)
	if err != nil {
		t.Fatal(err)
	}
	if sp.Train.Len() != 50 || sp.Test.Len() != 20 || sp.Val != nil {
		t.Fatalf("sizes %d/%d", sp.Train.Len(), sp.Test.Len())
	}
	for _, s := range []*Set{sp.Train, sp.Test} {
		if err := s.Validate(); err != nil {
			t.Fatal(err)
		}
		if !s.Raw8() || len(s.Shape) != 3 || s.Shape[0] != 1 || s.Shape[1] != 28 || s.Shape[2] != 28 || s.Classes != 10 {
			t.Fatalf("set %+v", s.Shape)
		}
		if s.ClassNames[0] != "T-shirt/top" || s.ClassNames[9] != "Ankle boot" {
			t.Fatalf("class names %v", s.ClassNames)
		}
	}
	// Normalization statistics are the training pixels' own.
	var sum, sq float64
	for _, v := range sp.Train.X {
		f := float64(v) / 255
		sum += f
		sq += f * f
	}
	n := float64(len(sp.Train.X))
	mean := sum / n
	std := sq/n - mean*mean
	if d := float64(sp.Train.Mean[0]) - mean; d*d > 1e-10 || sp.Test.Mean[0] != sp.Train.Mean[0] {
		t.Fatalf("mean %v, want %v", sp.Train.Mean, mean)
	}
	if d := float64(sp.Train.Std[0]*sp.Train.Std[0]) - std; d*d > 1e-10 {
		t.Fatalf("std² %v, want %v", sp.Train.Std[0]*sp.Train.Std[0], std)
	}

	// The same files uncompressed read identically.
	plain := t.TempDir()
	f, _ := mnistFormatFor(FashionMNIST)
	for _, file := range f.files {
		b, err := readMaybeGzip(filepath.Join(dir, file.name))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(plain, strings.TrimSuffix(file.name, ".gz")), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	sp2, err := LoadMNIST(FashionMNIST, plain)
	if err != nil {
		t.Fatal(err)
	}
	if fingerprint(sp2.Train) != fingerprint(sp.Train) || fingerprint(sp2.Test) != fingerprint(sp.Test) {
		t.Fatal("plain and gzip files differ")
	}
}

// TestLoadMNISTShared reads the real Fashion-MNIST in ../shared when it is
// there: 60,000 + 10,000 images, 6,000 / 1,000 per class.
func TestLoadMNISTShared(t *testing.T) {
	dir := filepath.Join("..", "..", "..", "shared", "data", "fashion-mnist")
	if _, err := os.Stat(dir); err != nil {
		t.Skip("no shared Fashion-MNIST")
	}
	sp, err := LoadMNIST(FashionMNIST, dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		s      *Set
		n, per int
	}{{sp.Train, 60000, 6000}, {sp.Test, 10000, 1000}} {
		if c.s.Len() != c.n {
			t.Fatalf("%d samples, want %d", c.s.Len(), c.n)
		}
		counts := make([]int, 10)
		for _, y := range c.s.Y {
			counts[y]++
		}
		for k, n := range counts {
			if n != c.per {
				t.Fatalf("class %d: %d samples, want %d", k, n, c.per)
			}
		}
	}
	// Fashion-MNIST's published training statistics: mean 0.2860, std 0.3530.
	if m, s := sp.Train.Mean[0], sp.Train.Std[0]; m < 0.28 || m > 0.29 || s < 0.35 || s > 0.356 {
		t.Fatalf("mean %v std %v", m, s)
	}
}

func TestMNISTErrors(t *testing.T) {
	good := t.TempDir()
	if err := WriteMNIST(good, MNIST, 10, 5, 1); err != nil {
		t.Fatal(err)
	}
	f, _ := mnistFormatFor(MNIST)
	read := func(i int) []byte {
		b, err := readMaybeGzip(filepath.Join(good, f.files[i].name))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	img, lab := read(0), read(1)
	cases := []struct {
		name string
		file int // which file to replace
		body []byte
		want string
	}{
		{"truncated images", 0, img[:len(img)-7], "train-images-idx3-ubyte.gz: truncated: the header says [10 28 28] = 7840 bytes of data, the file has 7833"},
		{"trailing bytes", 1, append(bytes.Clone(lab), 1, 2), "train-labels-idx1-ubyte.gz: corrupt: 2 bytes after"},
		{"wrong magic", 0, append([]byte{0x1f, 0x00, 0x08, 0x03}, img[4:]...), "train-images-idx3-ubyte.gz: bad magic number 0x1f000803: not an IDX file"},
		{"float type", 1, append([]byte{0, 0, 0x0d, 1}, lab[4:]...), "train-labels-idx1-ubyte.gz: IDX element type 0x0d is not unsigned byte"},
		{"short header", 0, img[:9], "train-images-idx3-ubyte.gz: truncated: 9 bytes, the header of 3 dimensions needs 16"},
		{"empty", 0, nil, "train-images-idx3-ubyte.gz: 0 bytes is too short for an IDX header"},
		{"labels as images", 0, lab, "train-images-idx3-ubyte.gz: magic number 0x00000801 is that of an IDX labels file (1 dimension), not of an IDX images file (3 dimensions): were the files swapped"},
		{"images as labels", 1, img, "train-labels-idx1-ubyte.gz: magic number 0x00000803 is that of an IDX images file (3 dimensions), not of an IDX labels file (1 dimension): were the files swapped"},
		{"2-D images", 0, EncodeIDX([]int{10, 784}, img[16:]), "train-images-idx3-ubyte.gz: magic number 0x00000802 is that of an IDX file of 2 dimensions, not of an IDX images file"},
		{"count mismatch", 1, EncodeIDX([]int{9}, lab[8:17]), "train-labels-idx1-ubyte.gz has 9 labels but"},
		{"label range", 1, EncodeIDX([]int{10}, append(bytes.Clone(lab[8:17]), 10)), "train-labels-idx1-ubyte.gz: label 10 of item 9 (byte offset 17) out of range 0..9"},
		{"corrupt gzip", 0, gz(t, img)[:200], "train-images-idx3-ubyte.gz: corrupt or truncated gzip data"},
		{"one class", 1, EncodeIDX([]int{10}, bytes.Repeat([]byte{3}, 10)), "train-labels-idx1-ubyte.gz: every label is 3: a classifier needs samples of at least 2 classes"},
		{"huge dims", 0, []byte{0, 0, 8, 3, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 1}, "describe more than"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			for i, file := range f.files {
				b, _ := os.ReadFile(filepath.Join(good, file.name))
				if i == c.file {
					b = c.body
				}
				if err := os.WriteFile(filepath.Join(dir, file.name), b, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			_, err := LoadMNIST(MNIST, dir)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want it to contain %q", err, c.want)
			}
			if !strings.HasPrefix(err.Error(), "mnist: ") || strings.Count(err.Error(), "\n") > 0 {
				t.Fatalf("error %q: want one line naming the dataset", err)
			}
		})
	}

	t.Run("missing", func(t *testing.T) {
		dir := t.TempDir()
		_, err := LoadMNIST(MNIST, dir)
		if !errors.Is(err, ErrMissing) || !strings.Contains(err.Error(), "host data get mnist --dir "+dir) {
			t.Fatalf("error %v", err)
		}
	})
	t.Run("directory", func(t *testing.T) {
		dir := t.TempDir()
		os.Mkdir(filepath.Join(dir, "train-images-idx3-ubyte"), 0o755)
		_, err := LoadMNIST(MNIST, dir)
		if err == nil || !strings.Contains(err.Error(), "train-images-idx3-ubyte is a directory") {
			t.Fatalf("error %v", err)
		}
	})
}

// FuzzIDX feeds arbitrary bytes to ParseMNIST as the image file (the label
// file is valid for as many items as the input claims, when it claims few).
func FuzzIDX(f *testing.F) {
	img := EncodeIDX([]int{2, 28, 28}, make([]byte, 2*784))
	f.Add(img)
	f.Add(img[:20])
	f.Add(gz(f, img))
	f.Add([]byte{0, 0, 8, 1, 0, 0, 0, 1, 5})
	f.Add([]byte{0x1f, 0x8b, 8, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		lab := EncodeIDX([]int{2}, []byte{1, 9})
		s, err := ParseMNIST(FashionMNIST, "fuzz-images", b, "fuzz-labels", lab)
		if err != nil {
			if s != nil {
				t.Fatal("both a set and an error")
			}
			if !strings.Contains(err.Error(), "fuzz-") {
				t.Fatalf("error does not name a file: %v", err)
			}
			return
		}
		if err := s.Validate(); err != nil {
			t.Fatalf("invalid set: %v", err)
		}
		if s.Len() != 2 || len(s.X) != 2*784 {
			t.Fatalf("%d samples, %d bytes", s.Len(), len(s.X))
		}
	})
}

func TestGetMNIST(t *testing.T) {
	src := t.TempDir()
	if err := WriteMNIST(src, FashionMNIST, 12, 6, 2); err != nil {
		t.Fatal(err)
	}
	f, _ := mnistFormatFor(FashionMNIST)
	sums := map[string]string{}
	for _, file := range f.files {
		b, _ := os.ReadFile(filepath.Join(src, file.name))
		sums[file.name] = md5Hex(b)
	}
	var paths []string
	srv := httptest.NewServer(http.FileServer(http.Dir(src)))
	t.Cleanup(srv.Close)
	logged := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		paths = append(paths, r.URL.Path)
		http.Redirect(w, r, srv.URL+r.URL.Path, http.StatusFound)
	}))
	t.Cleanup(logged.Close)

	dir := filepath.Join(t.TempDir(), "fm")
	got, err := Get(context.Background(), FashionMNIST, dir, GetOptions{BaseURL: logged.URL + "/", FileMD5: sums})
	if err != nil {
		t.Fatal(err)
	}
	if got != dir || len(paths) != 4 {
		t.Fatalf("got %s after %v", got, paths)
	}
	if _, err := LoadMNIST(FashionMNIST, dir); err != nil {
		t.Fatal(err)
	}
	// Idempotent: nothing is fetched again.
	if _, err := Get(context.Background(), FashionMNIST, dir, GetOptions{BaseURL: logged.URL, FileMD5: sums}); err != nil || len(paths) != 4 {
		t.Fatalf("second get: %v, %d requests", err, len(paths))
	}

	// The published checksums reject these generated files, and nothing
	// is left behind.
	bad := t.TempDir()
	_, err = Get(context.Background(), FashionMNIST, bad, GetOptions{BaseURL: srv.URL})
	if err == nil || !strings.Contains(err.Error(), "does not match the expected 8d4fb7e6c68d591d4c3dfef9ec88bf0d") {
		t.Fatalf("error %v", err)
	}
	if left := listAll(t, bad); len(left) != 0 {
		t.Fatalf("left %v", left)
	}
	// A server without the files: a clear error naming the URL.
	_, err = Get(context.Background(), MNIST, t.TempDir(), GetOptions{BaseURL: srv.URL + "/nothing"})
	if err == nil || !strings.Contains(err.Error(), "/nothing/train-images-idx3-ubyte.gz: 404") {
		t.Fatalf("error %v", err)
	}
}
