package data

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// Dataset names understood by the CIFAR functions and by Get.
const (
	CIFAR10  = "cifar10"
	CIFAR100 = "cifar100"
)

// CIFAR image geometry: 3 channels of 32×32 pixels, stored channel-major
// (all red, then all green, then all blue, each row-major), i.e. CHW.
const (
	cifarChannels = 3
	cifarSide     = 32
	cifarPixels   = cifarChannels * cifarSide * cifarSide // 3072
)

// cifarFormat describes one of the two CIFAR binary layouts.
type cifarFormat struct {
	name          string // CIFAR10 or CIFAR100
	title         string // human name
	subdir        string // folder inside the published archive
	archive       string // published archive file name
	md5           string // published MD5 of archive
	labelBytes    int    // label bytes before the pixels of each record
	classes       int
	coarseClasses int
	trainFiles    []string
	testFile      string
	namesFile     string // class-name file inside subdir
	// mean and std are the published per-channel statistics of the
	// training set on pixels scaled to [0,1], the values conventionally used
	// in the literature (e.g. the torchvision examples).
	mean, std [3]float32
}

func (f *cifarFormat) recordSize() int { return f.labelBytes + cifarPixels }

func (f *cifarFormat) files() []string {
	return append(append([]string(nil), f.trainFiles...), f.testFile)
}

// cifarFormatFor returns the layout of the named dataset.
func cifarFormatFor(name string) (*cifarFormat, error) {
	switch name {
	case CIFAR10:
		return &cifarFormat{
			name: CIFAR10, title: "CIFAR-10",
			subdir: "cifar-10-batches-bin", archive: "cifar-10-binary.tar.gz",
			md5:        "c32a1d4ab5d03f1284b67883e8d87530",
			labelBytes: 1, classes: 10,
			trainFiles: []string{"data_batch_1.bin", "data_batch_2.bin", "data_batch_3.bin", "data_batch_4.bin", "data_batch_5.bin"},
			testFile:   "test_batch.bin", namesFile: "batches.meta.txt",
			mean: [3]float32{0.4914, 0.4822, 0.4465},
			std:  [3]float32{0.2471, 0.2435, 0.2616},
		}, nil
	case CIFAR100:
		return &cifarFormat{
			name: CIFAR100, title: "CIFAR-100",
			subdir: "cifar-100-binary", archive: "cifar-100-binary.tar.gz",
			md5:        "03b5dce01913d631647c71ecec9e9cb8",
			labelBytes: 2, classes: 100, coarseClasses: 20,
			trainFiles: []string{"train.bin"},
			testFile:   "test.bin", namesFile: "fine_label_names.txt",
			mean: [3]float32{0.5071, 0.4865, 0.4409},
			std:  [3]float32{0.2673, 0.2564, 0.2762},
		}, nil
	}
	return nil, fmt.Errorf("unknown CIFAR dataset %q (want %q or %q)", name, CIFAR10, CIFAR100)
}

// CIFARDir returns the folder holding the binary files of the named CIFAR
// dataset (CIFAR10 or CIFAR100), given either that folder itself or its
// parent containing the canonical subfolder (cifar-10-batches-bin or
// cifar-100-binary). The error wraps ErrMissing and says how to get the
// data when neither holds the files.
func CIFARDir(name, dir string) (string, error) {
	f, err := cifarFormatFor(name)
	if err != nil {
		return "", err
	}
	return f.locate(dir)
}

func (f *cifarFormat) locate(dir string) (string, error) {
	candidates := []string{dir, filepath.Join(dir, f.subdir)}
	if filepath.Base(filepath.Clean(dir)) == f.subdir {
		candidates = candidates[:1]
	}
	for _, c := range candidates {
		if _, err := os.Stat(filepath.Join(c, f.testFile)); err == nil {
			return c, nil
		}
	}
	return "", fmt.Errorf("%s: no %s binary files in %s or %s: %w; get them with `host data get %s --dir %s` or download %s%s and extract it into %s",
		f.name, f.title, dir, filepath.Join(dir, f.subdir), ErrMissing, f.name, dir, DefaultBaseURL, f.archive, dir)
}

// LoadCIFAR reads the named CIFAR dataset (CIFAR10 or CIFAR100) from dir,
// which is either the folder holding the binary files or its parent (see
// CIFARDir). Train holds all training batches in file order, Test the test
// batch; Val is nil (use HoldOut). Samples are raw pixels in X with Shape
// [3,32,32] and the published Mean and Std set. For CIFAR-100, Y holds the
// 100 fine labels and Coarse the 20 superclass labels. Class names are filled
// in when the archive's name file is present.
func LoadCIFAR(name, dir string) (Split, error) {
	f, err := cifarFormatFor(name)
	if err != nil {
		return Split{}, err
	}
	root, err := f.locate(dir)
	if err != nil {
		return Split{}, err
	}
	train, err := f.readFiles(root, f.trainFiles)
	if err != nil {
		return Split{}, err
	}
	test, err := f.readFiles(root, []string{f.testFile})
	if err != nil {
		return Split{}, err
	}
	names, err := f.readNames(root)
	if err != nil {
		return Split{}, err
	}
	train.ClassNames, test.ClassNames = names, append([]string(nil), names...)
	return Split{Train: train, Test: test}, nil
}

// refetchHint tells how to replace the incomplete data folder root.
func (f *cifarFormat) refetchHint(root string) string {
	if filepath.Base(filepath.Clean(root)) == f.subdir {
		return fmt.Sprintf("the folder is incomplete: remove %s and run `host data get %s --dir %s`", root, f.name, filepath.Dir(filepath.Clean(root)))
	}
	return fmt.Sprintf("the folder is incomplete: remove its CIFAR files and run `host data get %s --dir %s`", f.name, root)
}

// newSet returns an empty Set of this format with room for n records.
func (f *cifarFormat) newSet(n int) *Set {
	s := &Set{
		Name:    f.name,
		Shape:   []int{cifarChannels, cifarSide, cifarSide},
		Classes: f.classes,
		X:       make([]uint8, 0, n*cifarPixels),
		Y:       make([]int32, 0, n),
		Mean:    append([]float32(nil), f.mean[:]...),
		Std:     append([]float32(nil), f.std[:]...),
	}
	if f.coarseClasses > 0 {
		s.Coarse = make([]int32, 0, n)
		s.CoarseClasses = f.coarseClasses
	}
	return s
}

// readFiles reads and concatenates the named batch files of root.
func (f *cifarFormat) readFiles(root string, names []string) (*Set, error) {
	rec := int64(f.recordSize())
	sizes := make([]int64, len(names))
	total := 0
	for i, name := range names {
		path := filepath.Join(root, name)
		st, err := os.Stat(path)
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("%s: batch file %s is missing: %w; %s", f.name, path, ErrMissing, f.refetchHint(root))
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", f.name, err)
		}
		if err := f.checkSize(path, st.Size()); err != nil {
			return nil, err
		}
		sizes[i] = st.Size()
		total += int(st.Size() / rec)
	}
	s := f.newSet(total)
	for i, name := range names {
		path := filepath.Join(root, name)
		if err := f.readFile(s, path, sizes[i]); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// checkSize rejects a file whose size is not a positive whole number of
// records.
func (f *cifarFormat) checkSize(path string, size int64) error {
	rec := int64(f.recordSize())
	if size == 0 {
		return fmt.Errorf("%s: %s is empty (want records of %d bytes)", f.name, path, rec)
	}
	if size%rec != 0 {
		whole := size / rec
		return fmt.Errorf("%s: %s is truncated or corrupt: %d bytes is not a multiple of the %d-byte record; record %d at byte offset %d is incomplete (%d of %d bytes)",
			f.name, path, size, rec, whole, whole*rec, size-whole*rec, rec)
	}
	return nil
}

func (f *cifarFormat) readFile(s *Set, path string, size int64) error {
	file, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("%s: %w", f.name, err)
	}
	defer file.Close()
	return f.decode(s, path, bufio.NewReaderSize(file, 1<<20), size/int64(f.recordSize()))
}

// decode appends n records read from r to s. name is used in errors.
func (f *cifarFormat) decode(s *Set, name string, r io.Reader, n int64) error {
	rec := int64(f.recordSize())
	var label [2]byte
	for i := range n {
		off := i * rec
		if _, err := io.ReadFull(r, label[:f.labelBytes]); err != nil {
			return fmt.Errorf("%s: %s: record %d at byte offset %d: %w", f.name, name, i, off, err)
		}
		start := len(s.X)
		s.X = s.X[:start+cifarPixels]
		if _, err := io.ReadFull(r, s.X[start:]); err != nil {
			s.X = s.X[:start]
			return fmt.Errorf("%s: %s: record %d at byte offset %d: %w", f.name, name, i, off+int64(f.labelBytes), err)
		}
		fine := int(label[f.labelBytes-1])
		if fine >= f.classes {
			return fmt.Errorf("%s: %s: record %d: label %d at byte offset %d out of range 0..%d",
				f.name, name, i, fine, off+int64(f.labelBytes-1), f.classes-1)
		}
		s.Y = append(s.Y, int32(fine))
		if f.coarseClasses > 0 {
			coarse := int(label[0])
			if coarse >= f.coarseClasses {
				return fmt.Errorf("%s: %s: record %d: coarse label %d at byte offset %d out of range 0..%d",
					f.name, name, i, coarse, off, f.coarseClasses-1)
			}
			s.Coarse = append(s.Coarse, int32(coarse))
		}
	}
	return nil
}

// readNames reads the class-name file of root, if present: one name per
// line, blank lines ignored. It returns nil when the file is absent.
func (f *cifarFormat) readNames(root string) ([]string, error) {
	b, err := os.ReadFile(filepath.Join(root, f.namesFile))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("%s: class names: %w", f.name, err)
	}
	var names []string
	for line := range strings.Lines(string(b)) {
		if line = strings.TrimSpace(line); line != "" {
			names = append(names, line)
		}
	}
	if len(names) != f.classes {
		return nil, fmt.Errorf("%s: %s: %d class names, want %d", f.name, filepath.Join(root, f.namesFile), len(names), f.classes)
	}
	return names, nil
}

// ParseCIFAR decodes one CIFAR batch file held in memory. name is the
// dataset (CIFAR10 or CIFAR100) and file the name used in error messages.
// Malformed input (a length that is not a positive multiple of the record
// size, a label out of range) yields an error naming file and byte offset.
func ParseCIFAR(name, file string, b []byte) (*Set, error) {
	f, err := cifarFormatFor(name)
	if err != nil {
		return nil, err
	}
	if err := f.checkSize(file, int64(len(b))); err != nil {
		return nil, err
	}
	n := int64(len(b) / f.recordSize())
	s := f.newSet(int(n))
	if err := f.decode(s, file, bytes.NewReader(b), n); err != nil {
		return nil, err
	}
	return s, nil
}
