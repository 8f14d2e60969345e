package data

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/optlab/optlab/host/internal/regfile"
)

// numpyPart names the arrays of one part of a NumPy dataset: x (samples)
// and y (labels).
type numpyPart struct {
	x, y     string
	optional bool // both may be absent
}

// numpyParts returns the parts of a NumPy dataset in the order of Split's
// fields: train, test, validation.
func numpyParts() [3]numpyPart {
	return [3]numpyPart{{"x_train", "y_train", false}, {"x_test", "y_test", false}, {"x_val", "y_val", true}}
}

// Axis orders of 4-D image arrays (NumPyOptions.Layout).
const (
	// LayoutNCHW is samples × channels × height × width (PyTorch's).
	LayoutNCHW = "nchw"
	// LayoutNHWC is samples × height × width × channels (TensorFlow's,
	// and that of most image libraries); loading transposes it to C×H×W.
	LayoutNHWC = "nhwc"
)

// NumPyOptions configures LoadNumPy and ReadNumPy.
type NumPyOptions struct {
	// Name is the Sets' name and the prefix of error messages; LoadNumPy
	// defaults it to the base name of the path without ".npz".
	Name string
	// Layout is the axis order of 4-D x arrays: LayoutNCHW (the default
	// when empty) or LayoutNHWC. It does not apply to other ranks, and
	// LayoutNHWC with 2-D x is refused.
	Layout string
	// Classes fixes the number of classes; every label must be below it.
	// 0 means the largest label plus one, provided that leaves at most
	// half of the classes without a training sample.
	Classes int
}

// numpySource is where a NumPy dataset's arrays come from: an NPZ archive
// or a folder of .npy files.
type numpySource interface {
	has(name string) bool
	array(name string) (*NPYArray, error)
	// missing describes an absent array for a message.
	missing(name string) string
}

// LoadNumPy reads a dataset of NumPy arrays from path: an NPZ archive
// (np.savez or np.savez_compressed) or a folder of .npy files (np.save),
// holding the arrays x_train, y_train, x_test, y_test and, optionally, x_val
// and y_val. See ReadNumPy for what they may be.
func LoadNumPy(path string, opts NumPyOptions) (Split, error) {
	if opts.Name == "" {
		opts.Name = strings.TrimSuffix(filepath.Base(path), ".npz")
	}
	st, err := os.Stat(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return Split{}, fmt.Errorf("npz %s: %s does not exist: %w; point data.path at an .npz file or a folder of .npy files", opts.Name, path, ErrMissing)
		}
		return Split{}, fmt.Errorf("npz %s: %w", opts.Name, err)
	}
	if st.IsDir() {
		src := &npyDirIDs{npyDir: npyDir(path), ids: map[string]string{}}
		sp, err := numpySplit(src, opts)
		if err != nil {
			return sp, err
		}
		sp.Content = src.content()
		return sp, nil
	}
	f, err := regfile.Open(path)
	if err != nil {
		return Split{}, fmt.Errorf("npz %s: %w", opts.Name, err)
	}
	defer func() { _ = f.Close() }()
	if st, err = f.Stat(); err != nil {
		return Split{}, fmt.Errorf("npz %s: %w", opts.Name, err)
	}
	sp, err := readNumPy(f, st.Size(), path, opts)
	if err != nil {
		return sp, err
	}
	if sp.Content, err = ContentID(f); err != nil {
		return Split{}, fmt.Errorf("npz %s: %w", opts.Name, err)
	}
	return sp, nil
}

// ReadNumPy reads a dataset of NumPy arrays from the NPZ archive r of size
// bytes. The archive holds x_train, y_train, x_test and y_test, and
// optionally x_val and y_val (both or neither), which become Split.Val;
// every array is read in full (ReadNPY), other members are ignored.
//
// The x arrays hold the samples, all of the same dtype kind: uint8 (raw
// values, kept in X like CIFAR's pixels, scaled by 1/255 on the device) or
// float32 or float64 (kept in F as float32; every value must be finite as a
// float32). Their rank says what a sample is: N×F is a vector of F
// features (shape [F]), N×H×W a one-channel image ([1,H,W]), and N×C×H×W
// or N×H×W×C (opts.Layout) an image of C channels ([C,H,W]). Every part's
// samples have the training samples' shape.
//
// The y arrays hold one integer class label per sample (shape (N,) or
// (N,1)); any integer dtype will do, and floats with integral values.
// Labels must be in 0..Classes-1 (see NumPyOptions.Classes), and the
// training labels must cover at least two classes.
//
// Every part has Mean and Std set to ChannelStats of the training part:
// per channel for images, per feature for vectors.
func ReadNumPy(r io.ReaderAt, size int64, opts NumPyOptions) (Split, error) {
	return readNumPy(r, size, "", opts)
}

func readNumPy(r io.ReaderAt, size int64, path string, opts NumPyOptions) (Split, error) {
	if opts.Name == "" {
		opts.Name = "npz"
	}
	z, err := OpenNPZ(r, size)
	if err != nil {
		if path != "" {
			err = fmt.Errorf("%s: %w", path, err)
		}
		return Split{}, fmt.Errorf("npz %s: %w", opts.Name, err)
	}
	return numpySplit(npzSource{z, path}, opts)
}

// npzSource reads arrays from an NPZ archive.
type npzSource struct {
	z    *NPZ
	path string // "" when unknown
}

func (s npzSource) has(name string) bool { return s.z.Has(name) }

func (s npzSource) array(name string) (*NPYArray, error) { return s.z.Array(name) }

func (s npzSource) missing(name string) string {
	what := "the archive"
	if s.path != "" {
		what = s.path
	}
	return fmt.Sprintf("%s holds no array %s (it holds %s)", what, name, listOrNone(s.z.Names()))
}

// npyDir reads arrays from the .npy files of a folder.
type npyDir string

func (d npyDir) file(name string) string { return filepath.Join(string(d), name+".npy") }

func (d npyDir) has(name string) bool {
	_, err := os.Stat(d.file(name))
	return err == nil
}

func (d npyDir) array(name string) (*NPYArray, error) { return LoadNPY(d.file(name)) }

// npyDirIDs reads a folder's arrays and keeps the identity of each file as
// it was read (ContentID).
type npyDirIDs struct {
	npyDir
	ids map[string]string // by array name
}

func (d *npyDirIDs) array(name string) (*NPYArray, error) {
	a, id, err := loadNPYID(d.file(name))
	if err == nil {
		d.ids[name] = id
	}
	return a, err
}

// content joins the identities of the files read, in NumPyFiles' order:
// "x_train.npy: <id>; y_train.npy: <id>; …".
func (d *npyDirIDs) content() string {
	var out string
	for _, p := range numpyParts() {
		for _, name := range []string{p.x, p.y} {
			if id, ok := d.ids[name]; ok {
				if out != "" {
					out += "; "
				}
				out += name + ".npy: " + id
			}
		}
	}
	return out
}

func (d npyDir) missing(name string) string {
	files, _ := filepath.Glob(filepath.Join(string(d), "*.npy"))
	for i, f := range files {
		files[i] = filepath.Base(f)
	}
	return fmt.Sprintf("folder %s holds no %s.npy (it holds %s)", string(d), name, listOrNone(files))
}

// NumPyFiles returns the files LoadNumPy reads for path: path itself for an
// NPZ archive, the .npy files of the arrays it reads for a folder. A
// run's configuration identifies its data by them.
func NumPyFiles(path string) ([]string, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if !st.IsDir() {
		return []string{path}, nil
	}
	var files []string
	for _, p := range numpyParts() {
		for _, name := range []string{p.x, p.y} {
			if f := npyDir(path).file(name); npyDir(path).has(name) {
				files = append(files, f)
			}
		}
	}
	return files, nil
}

// numpySplit reads the parts of a NumPy dataset from src.
func numpySplit(src numpySource, opts NumPyOptions) (Split, error) {
	name := opts.Name
	fail := func(err error) (Split, error) { return Split{}, fmt.Errorf("npz %s: %w", name, err) }
	switch opts.Layout {
	case "", LayoutNCHW, LayoutNHWC:
	default:
		return fail(fmt.Errorf("layout %q, want %s or %s", opts.Layout, LayoutNCHW, LayoutNHWC))
	}
	if opts.Classes < 0 || opts.Classes > maxClasses {
		return fail(fmt.Errorf("%d classes, want 0..%d", opts.Classes, maxClasses))
	}
	parts := numpyParts()
	var sets [len(parts)]*Set
	maxLabel, maxAt := int64(-1), "" // the largest label and where it first is
	for i, p := range parts {
		hasX, hasY := src.has(p.x), src.has(p.y)
		if !hasX && !hasY && p.optional {
			continue
		}
		if !hasX || !hasY {
			absent := p.x
			if hasX {
				absent = p.y
			}
			msg := src.missing(absent)
			if p.optional {
				msg += fmt.Sprintf(": %s and %s come together", p.x, p.y)
			}
			return fail(errors.New(msg))
		}
		x, err := src.array(p.x)
		if err != nil {
			return fail(err)
		}
		s, err := numpySamples(x, p.x, opts.Layout)
		if err != nil {
			return fail(err)
		}
		y, err := src.array(p.y)
		if err != nil {
			return fail(err)
		}
		if err := numpyLabelShape(y, p.y, p.x, x.Shape[0]); err != nil {
			return fail(err)
		}
		lab, top, at, err := numpyLabels(y, p.y, opts.Classes)
		if err != nil {
			return fail(err)
		}
		if top > maxLabel {
			maxLabel, maxAt = top, at
		}
		s.Name, s.Y = name, lab
		sets[i] = s
		if i == 0 {
			continue
		}
		tr := sets[0]
		switch {
		case !slices.Equal(s.Shape, tr.Shape):
			return fail(fmt.Errorf("%s holds samples of shape %v, x_train samples of shape %v: every part must have the same", p.x, s.Shape, tr.Shape))
		case s.Raw8() != tr.Raw8():
			return fail(fmt.Errorf("%s is %s but x_train is %s: give every x array the same kind of dtype (uint8 raw values, or floats)", p.x, x.DType, dtypeKind(tr)))
		}
	}
	// The number of classes the labels make.
	classes := opts.Classes
	if classes == 0 {
		classes = int(maxLabel) + 1
	}
	present := make([]bool, classes)
	count := 0
	for _, c := range sets[0].Y {
		if !present[c] {
			present[c] = true
			count++
		}
	}
	if count < 2 {
		return fail(fmt.Errorf("every label in y_train is %d: a classifier needs samples of at least 2 classes", sets[0].Y[0]))
	}
	if empty := classes - count; opts.Classes == 0 && 2*empty > classes {
		return fail(fmt.Errorf("%s = %d makes %d classes, %d of them without a training sample; fix the label, or set data.classes = %d if that many classes is intended",
			maxAt, maxLabel, classes, empty, classes))
	}
	for _, s := range sets {
		if s != nil {
			s.Classes = classes
		}
	}
	mean, std, err := ChannelStats(sets[0])
	if err != nil {
		return fail(err)
	}
	for _, s := range sets {
		if s == nil {
			continue
		}
		s.Mean, s.Std = slices.Clone(mean), slices.Clone(std)
		if err := s.Validate(); err != nil {
			return fail(err)
		}
	}
	return Split{Train: sets[0], Test: sets[1], Val: sets[2]}, nil
}

// dtypeKind names the kind of samples s holds.
func dtypeKind(s *Set) string {
	if s.Raw8() {
		return "uint8"
	}
	return "float"
}

// numpySamples turns the x array named name into a Set without labels:
// X for uint8, F for floats, with the per-sample shape its rank and layout
// give.
func numpySamples(x *NPYArray, name, layout string) (*Set, error) {
	var shape []int
	nhwc := false
	switch len(x.Shape) {
	case 2:
		if layout == LayoutNHWC {
			return nil, fmt.Errorf("%s is 2-D, %s (samples × features), but data.layout = %q is for 4-D images; remove data.layout", name, shapeString(x.Shape), layout)
		}
		shape = []int{x.Shape[1]}
	case 3:
		shape = []int{1, x.Shape[1], x.Shape[2]}
	case 4:
		shape = []int{x.Shape[1], x.Shape[2], x.Shape[3]}
		if layout == LayoutNHWC {
			shape = []int{x.Shape[3], x.Shape[1], x.Shape[2]}
			nhwc = true
		}
	default:
		return nil, fmt.Errorf("%s has shape %s: want N×features, N×H×W or N×C×H×W (N×H×W×C with data.layout = %q)", name, shapeString(x.Shape), LayoutNHWC)
	}
	n := x.Shape[0]
	if n == 0 {
		return nil, fmt.Errorf("%s holds no samples (shape %s)", name, shapeString(x.Shape))
	}
	size := 1
	for _, d := range shape {
		if d == 0 {
			return nil, fmt.Errorf("%s has shape %s: its samples are empty", name, shapeString(x.Shape))
		}
		if size > math.MaxInt32/d {
			return nil, fmt.Errorf("%s has shape %s: samples of more than %d values are not supported", name, shapeString(x.Shape), math.MaxInt32)
		}
		size *= d
	}
	s := &Set{Shape: shape}
	switch x.DType {
	case "uint8":
		s.X = x.Data
		if nhwc {
			s.X = toCHW(x.Data, n, shape)
		}
	case "float32", "float64":
		f := make([]float32, x.Len())
		if x.DType == "float32" {
			for i := range f {
				f[i] = math.Float32frombits(binary.LittleEndian.Uint32(x.Data[4*i:]))
			}
		} else {
			for i := range f {
				f[i] = float32(math.Float64frombits(binary.LittleEndian.Uint64(x.Data[8*i:])))
			}
		}
		bad, first := 0, -1
		for i, v := range f {
			if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
				if bad == 0 {
					first = i
				}
				bad++
			}
		}
		if bad > 0 {
			return nil, fmt.Errorf("%s holds %d values that are not finite float32 numbers (NaN, ±Inf, or beyond ±3.4e38), the first in sample %d", name, bad, first/size)
		}
		s.F = f
		if nhwc {
			s.F = toCHW(f, n, shape)
		}
	default:
		return nil, fmt.Errorf("%s has dtype %s: want uint8 (raw values such as pixels), float32 or float64", name, x.DType)
	}
	return s, nil
}

// toCHW returns the n samples of src, each H×W×C, transposed to C×H×W
// (chw = [C, H, W]).
func toCHW[T any](src []T, n int, chw []int) []T {
	c, h, w := chw[0], chw[1], chw[2]
	out := make([]T, len(src))
	size := c * h * w
	for i := range n {
		in, to := src[i*size:(i+1)*size], out[i*size:(i+1)*size]
		for y := range h {
			for x := range w {
				for k := range c {
					to[(k*h+y)*w+x] = in[(y*w+x)*c+k]
				}
			}
		}
	}
	return out
}

// numpyLabelShape checks that the y array named name holds one label per
// sample of the n samples of the x array xName.
func numpyLabelShape(y *NPYArray, name, xName string, n int) error {
	switch {
	case len(y.Shape) == 2 && y.Shape[1] > 1:
		return fmt.Errorf("%s has shape %s: want one class index per sample, shape (%d,) (for one-hot labels, save y.argmax(axis=1))", name, shapeString(y.Shape), n)
	case len(y.Shape) != 1 && len(y.Shape) != 2:
		return fmt.Errorf("%s has shape %s: want one class index per sample, shape (%d,)", name, shapeString(y.Shape), n)
	case y.Shape[0] != n:
		return fmt.Errorf("%s holds %d labels but %s holds %d samples", name, y.Shape[0], xName, n)
	}
	return nil
}

// numpyLabels converts the y array named name to labels, each in
// 0..classes-1 (below maxClasses when classes is 0). It returns the
// largest label and where it first is ("y_train[12]").
func numpyLabels(y *NPYArray, name string, classes int) (labels []int32, top int64, at string, err error) {
	isFloat := y.IsFloat()
	if !isFloat && !y.IsInt() {
		return nil, 0, "", fmt.Errorf("%s has dtype %s: want integer class labels", name, y.DType)
	}
	limit := int64(maxClasses)
	if classes > 0 {
		limit = int64(classes)
	}
	labels = make([]int32, y.Len())
	top = -1
	for i := range labels {
		var v int64
		if isFloat {
			f := y.Float(i)
			if f != math.Trunc(f) || math.IsInf(f, 0) {
				return nil, 0, "", fmt.Errorf("%s[%d] = %v is not an integer class label", name, i, f)
			}
			if f < 0 || f >= float64(limit) {
				return nil, 0, "", labelRange(name, i, fmt.Sprint(f), classes)
			}
			v = int64(f)
		} else {
			v = y.Int(i)
			if v < 0 || v >= limit {
				s := fmt.Sprint(v)
				if y.DType == "uint64" {
					s = fmt.Sprint(uint64(v))
				}
				return nil, 0, "", labelRange(name, i, s, classes)
			}
		}
		labels[i] = int32(v)
		if v > top {
			top, at = v, fmt.Sprintf("%s[%d]", name, i)
		}
	}
	return labels, top, at, nil
}

// labelRange describes label i of the array name, v, as out of range.
func labelRange(name string, i int, v string, classes int) error {
	if classes > 0 {
		return fmt.Errorf("%s[%d] = %s is out of range 0..%d (data.classes = %d)", name, i, v, classes-1, classes)
	}
	return fmt.Errorf("%s[%d] = %s is out of range: class labels are 0..%d", name, i, v, maxClasses-1)
}
