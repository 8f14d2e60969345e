package data

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"

	"github.com/optlab/optlab/host/internal/regfile"
)

// Dataset names of the MNIST-format (IDX) datasets.
const (
	FashionMNIST = "fashion-mnist"
	MNIST        = "mnist"
)

// MNIST-format geometry: one channel of 28×28 pixels.
const (
	mnistSide   = 28
	mnistPixels = mnistSide * mnistSide
)

// idxFile is one file of an MNIST-format dataset.
type idxFile struct {
	name string // canonical file name (gzip-compressed)
	md5  string // published MD5 of the compressed file
	// debianMD5 is the MD5 of the file as Debian's package ships it,
	// compressed otherwise than the published one ("" when Debian ships
	// none).
	debianMD5 string
	// sha256 is the SHA-256 of the decompressed content, which the
	// published and Debian's files share ("" when not known): a copy
	// compressed in any other way is accepted by it.
	sha256 string
}

// mnistFormat describes one MNIST-format dataset.
type mnistFormat struct {
	name    string // FashionMNIST or MNIST
	title   string
	baseURL string // where the four files are published
	// trainImages, trainLabels, testImages, testLabels.
	files   [4]idxFile
	classes []string
	// debianPackage is Debian's package installing the four files into
	// debianDir ("" when Debian ships none).
	debianPackage, debianDir string
}

func (f *mnistFormat) hint(dir string) string {
	return fmt.Sprintf("get them with `host data get %s --dir %s` or download the four files from %s into %s", f.name, dir, f.baseURL, dir)
}

// mnistFormatFor returns the published layout of the named dataset.
func mnistFormatFor(name string) (*mnistFormat, error) {
	switch name {
	case FashionMNIST:
		// md5: github.com/zalandoresearch/fashion-mnist README, "Get the
		// data". debianMD5: `md5sum` of the files Debian's
		// dataset-fashion-mnist 0.0~git20200523.55506a9-1 installs (the
		// same data, compressed otherwise); sha256: `zcat FILE | sha256sum`
		// of those files, the canonical images and labels in the canonical
		// order (the first test labels are 9 2 1 1 6 1 4 6 5 7).
		return &mnistFormat{
			name: FashionMNIST, title: "Fashion-MNIST",
			baseURL: "https://github.com/zalandoresearch/fashion-mnist/raw/master/data/fashion/",
			files: [4]idxFile{
				{"train-images-idx3-ubyte.gz", "8d4fb7e6c68d591d4c3dfef9ec88bf0d", "cf8536b0aa1a6ac5fa3f23001093305c",
					"c59f468a2f672dc815687fe0f83887768d799fd8a3f3276145d20f83aa44d888"},
				{"train-labels-idx1-ubyte.gz", "25c81989df183df01b3e8a0aad5dffbe", "10bea18fdb374794d4bb42e356e600c9",
					"bad3541b69d912435c50bb6ba87bec294ff4f6a2e1246121d8633921760443d9"},
				{"t10k-images-idx3-ubyte.gz", "bef4ecab320f06d8554ea6380940ec79", "f78720b4224f21cce2f2ccf2d7a94c9a",
					"5b4141f0afbad91edebe8549f8fcffe087ea10ca49f1dbef5c9a5cd8815ce37b"},
				{"t10k-labels-idx1-ubyte.gz", "bb300cfdad3c16e7a12a480ee83cd310", "0d30e22e447f3c33dab9ed536400ac01",
					"0402a96d92fd2663957122ceb108a494c5af83dab82d92729df917d7dec38c34"},
			},
			classes:       []string{"T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt", "Sneaker", "Bag", "Ankle boot"},
			debianPackage: "dataset-fashion-mnist", debianDir: DebianFashionMNISTDir,
		}, nil
	case MNIST:
		// LeCun's page went offline for automated downloads; this is the
		// mirror torchvision uses, serving the same files (same MD5s).
		return &mnistFormat{
			name: MNIST, title: "MNIST",
			baseURL: "https://ossci-datasets.s3.amazonaws.com/mnist/",
			files: [4]idxFile{
				{name: "train-images-idx3-ubyte.gz", md5: "f68b3c2dcbeaaa9fbdd348bbdeb94873"},
				{name: "train-labels-idx1-ubyte.gz", md5: "d53e105ee54ea40749a09fcbcd1e9432"},
				{name: "t10k-images-idx3-ubyte.gz", md5: "9fb629c4189551a2d022fa330f9573f3"},
				{name: "t10k-labels-idx1-ubyte.gz", md5: "ec29112dd5afa0611ce80d1b7f02629c"},
			},
			classes: []string{"0", "1", "2", "3", "4", "5", "6", "7", "8", "9"},
		}, nil
	}
	return nil, fmt.Errorf("unknown MNIST-format dataset %q (want %q or %q)", name, FashionMNIST, MNIST)
}

// DebianFashionMNISTDir is where Debian's package dataset-fashion-mnist
// installs the four Fashion-MNIST files.
const DebianFashionMNISTDir = "/usr/share/datasets/fashion-mnist"

// IsMNISTFormat reports whether name is an MNIST-format (IDX) dataset.
func IsMNISTFormat(name string) bool { return name == FashionMNIST || name == MNIST }

// find returns the path of file i in dir: the canonical gzip name, or the
// same name without ".gz" (an uncompressed copy).
func (f *mnistFormat) find(dir string, i int) (string, error) {
	gz := filepath.Join(dir, f.files[i].name)
	plain := gz[:len(gz)-len(".gz")]
	for _, p := range []string{gz, plain} {
		st, err := os.Stat(p)
		if err == nil {
			if st.IsDir() {
				return "", fmt.Errorf("%s: %s is a directory, not an IDX file", f.name, p)
			}
			return p, nil
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return "", fmt.Errorf("%s: %w", f.name, err)
		}
	}
	return "", fmt.Errorf("%s: %s (or %s) is missing: %w; %s", f.name, gz, filepath.Base(plain), ErrMissing, f.hint(dir))
}

// LoadMNIST reads an MNIST-format dataset (FashionMNIST or MNIST) from dir,
// which holds the four IDX files under their canonical names, gzip-compressed
// or not. Train and Test hold raw pixels in X with Shape [1,28,28]; Mean and
// Std are computed from the training images (pixels scaled to [0,1]) and set
// on both. Val is nil (use HoldOut).
func LoadMNIST(name, dir string) (Split, error) {
	f, err := mnistFormatFor(name)
	if err != nil {
		return Split{}, err
	}
	var parts [2]*Set
	for k := range parts {
		img, err := f.find(dir, 2*k)
		if err != nil {
			return Split{}, err
		}
		lab, err := f.find(dir, 2*k+1)
		if err != nil {
			return Split{}, err
		}
		if parts[k], err = f.readPair(img, lab); err != nil {
			return Split{}, err
		}
	}
	train, test := parts[0], parts[1]
	mean, std := pixelStats(train.X)
	for _, s := range parts {
		s.Mean, s.Std = []float32{mean}, []float32{std}
	}
	return Split{Train: train, Test: test}, nil
}

// readPair reads an image file and its label file into one Set.
func (f *mnistFormat) readPair(imgPath, labPath string) (*Set, error) {
	img, err := readMaybeGzip(imgPath)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", f.name, err)
	}
	lab, err := readMaybeGzip(labPath)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", f.name, err)
	}
	return f.parsePair(imgPath, img, labPath, lab)
}

func (f *mnistFormat) parsePair(imgName string, img []byte, labName string, lab []byte) (*Set, error) {
	dims, pix, err := parseIDXKind(imgName, img, 3)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", f.name, err)
	}
	if len(dims) != 3 || dims[1] != mnistSide || dims[2] != mnistSide {
		return nil, fmt.Errorf("%s: %s: images of shape %v, want N×%d×%d", f.name, imgName, dims, mnistSide, mnistSide)
	}
	ldims, labels, err := parseIDXKind(labName, lab, 1)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", f.name, err)
	}
	if len(ldims) != 1 {
		return nil, fmt.Errorf("%s: %s: labels of shape %v, want one dimension", f.name, labName, ldims)
	}
	if ldims[0] != dims[0] {
		return nil, fmt.Errorf("%s: %s has %d labels but %s has %d images", f.name, labName, ldims[0], imgName, dims[0])
	}
	if dims[0] == 0 {
		return nil, fmt.Errorf("%s: %s holds no images", f.name, imgName)
	}
	s := &Set{Name: f.name, Shape: []int{1, mnistSide, mnistSide}, Classes: len(f.classes),
		X: pix, Y: make([]int32, len(labels)), ClassNames: append([]string(nil), f.classes...)}
	for i, l := range labels {
		if int(l) >= len(f.classes) {
			return nil, fmt.Errorf("%s: %s: label %d of item %d (byte offset %d) out of range 0..%d",
				f.name, labName, l, i, idxHeader(1)+i, len(f.classes)-1)
		}
		s.Y[i] = int32(l)
	}
	if slices.Min(labels) == slices.Max(labels) {
		return nil, fmt.Errorf("%s: %s: every label is %d: a classifier needs samples of at least 2 classes (a file of another subset?)",
			f.name, labName, labels[0])
	}
	return s, nil
}

// maxIDXBytes bounds what one IDX file may decompress to (the largest
// canonical file holds 47 MB), so a corrupt or hostile gzip stream cannot
// fill memory.
const maxIDXBytes = 1 << 30

// readMaybeGzip reads a file, decompressing it when it starts with the gzip
// magic bytes (whatever its name).
func readMaybeGzip(path string) ([]byte, error) {
	file, err := regfile.Open(path)
	if err != nil {
		return nil, err
	}
	defer func() { _ = file.Close() }()
	b, err := io.ReadAll(io.LimitReader(file, maxIDXBytes+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return gunzipBytes(path, b)
}

// idxHeader is the size of an IDX header with n dimensions.
func idxHeader(n int) int { return 4 + 4*n }

// parseIDXKind is ParseIDX of a file that must have dims dimensions (MNIST
// images 3, labels 1): a file of the other kind (the two swapped or
// misnamed) is named as such, before its dimensions are read as sizes.
func parseIDXKind(file string, b []byte, dims int) ([]int, []byte, error) {
	if len(b) >= 4 && b[0] == 0 && b[1] == 0 && b[2] == 0x08 && int(b[3]) != dims {
		describe := func(n int) string {
			switch n {
			case 1:
				return "an IDX labels file (1 dimension)"
			case 3:
				return "an IDX images file (3 dimensions)"
			}
			return fmt.Sprintf("an IDX file of %d dimensions", n)
		}
		return nil, nil, fmt.Errorf("%s: magic number %#08x is that of %s, not of %s: were the files swapped or misnamed?",
			file, binary.BigEndian.Uint32(b), describe(int(b[3])), describe(dims))
	}
	return ParseIDX(file, b)
}

// ParseIDX decodes an unsigned-byte IDX file held in memory (the format of
// MNIST and Fashion-MNIST: two zero bytes, the type 0x08, the number of
// dimensions, each dimension as a big-endian uint32, then the data). It
// returns the dimensions and the data, which must be exactly as long as the
// dimensions say. file names the file in errors.
func ParseIDX(file string, b []byte) ([]int, []byte, error) {
	if len(b) < 4 {
		return nil, nil, fmt.Errorf("%s: %d bytes is too short for an IDX header", file, len(b))
	}
	if b[0] != 0 || b[1] != 0 {
		return nil, nil, fmt.Errorf("%s: bad magic number %#08x: not an IDX file (want 0x00000801 for labels or 0x00000803 for images)", file, binary.BigEndian.Uint32(b))
	}
	if b[2] != 0x08 {
		return nil, nil, fmt.Errorf("%s: IDX element type %#02x is not unsigned byte (0x08)", file, b[2])
	}
	n := int(b[3])
	if n == 0 || n > 4 {
		return nil, nil, fmt.Errorf("%s: IDX file with %d dimensions (want 1 to 4)", file, n)
	}
	if len(b) < idxHeader(n) {
		return nil, nil, fmt.Errorf("%s: truncated: %d bytes, the header of %d dimensions needs %d", file, len(b), n, idxHeader(n))
	}
	dims := make([]int, n)
	size := int64(1)
	for i := range dims {
		d := binary.BigEndian.Uint32(b[4+4*i:])
		dims[i] = int(d)
		size *= int64(d)
		if size > maxIDXBytes {
			return nil, nil, fmt.Errorf("%s: dimensions %v describe more than %d bytes", file, dims[:i+1], maxIDXBytes)
		}
	}
	data := b[idxHeader(n):]
	switch {
	case int64(len(data)) < size:
		return nil, nil, fmt.Errorf("%s: truncated: the header says %v = %d bytes of data, the file has %d", file, dims, size, len(data))
	case int64(len(data)) > size:
		return nil, nil, fmt.Errorf("%s: corrupt: %d bytes after the %v = %d bytes of data the header describes", file, int64(len(data))-size, dims, size)
	}
	return dims, data, nil
}

// ParseMNIST decodes an MNIST-format image file and label file held in
// memory into one Set (without normalization statistics). name is the
// dataset (FashionMNIST or MNIST); the files may be gzip-compressed.
func ParseMNIST(name, imgFile string, img []byte, labFile string, lab []byte) (*Set, error) {
	f, err := mnistFormatFor(name)
	if err != nil {
		return nil, err
	}
	if img, err = gunzipBytes(imgFile, img); err != nil {
		return nil, err
	}
	if lab, err = gunzipBytes(labFile, lab); err != nil {
		return nil, err
	}
	return f.parsePair(imgFile, img, labFile, lab)
}

func gunzipBytes(file string, b []byte) ([]byte, error) {
	if len(b) < 2 || b[0] != 0x1f || b[1] != 0x8b {
		return b, nil
	}
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		return nil, fmt.Errorf("%s: corrupt gzip data: %w", file, err)
	}
	out, err := io.ReadAll(io.LimitReader(zr, maxIDXBytes+1))
	if err != nil {
		return nil, fmt.Errorf("%s: corrupt or truncated gzip data: %w", file, err)
	}
	if len(out) > maxIDXBytes {
		return nil, fmt.Errorf("%s: more than %d bytes of data; not an MNIST-format file", file, maxIDXBytes)
	}
	return out, nil
}

// pixelStats returns the mean and standard deviation of 8-bit pixels
// scaled to [0,1].
func pixelStats(x []uint8) (mean, std float32) {
	var hist [256]int64
	for _, v := range x {
		hist[v]++
	}
	n := float64(len(x))
	var s, ss float64
	for v, c := range hist {
		f := float64(v) / 255
		s += f * float64(c)
		ss += f * f * float64(c)
	}
	m := s / n
	return float32(m), float32(math.Sqrt(max(ss/n-m*m, 0)))
}
