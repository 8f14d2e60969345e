package data

import (
	"archive/zip"
	"bytes"
	"errors"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// readNumPyBytes runs ReadNumPy on an in-memory archive.
func readNumPyBytes(in []byte, opts NumPyOptions) (Split, error) {
	return ReadNumPy(bytes.NewReader(in), int64(len(in)), opts)
}

func TestReadNumPy(t *testing.T) {
	// Two 2×2×3 NHWC images: pixel (y, x) of channel k of image i is
	// 100i + 10k + 2y + x.
	var nhwc []uint8
	for i := range 2 {
		for y := range 2 {
			for x := range 2 {
				for k := range 3 {
					nhwc = append(nhwc, uint8(100*i+10*k+2*y+x))
				}
			}
		}
	}
	var nchw []uint8
	for i := range 2 {
		for k := range 3 {
			for p := range 4 {
				nchw = append(nchw, uint8(100*i+10*k+p))
			}
		}
	}
	labels := npyI64(0, 1)
	tests := []struct {
		name    string
		in      []byte
		opts    NumPyOptions
		shape   []int
		classes int
		x       []uint8   // training X, when raw
		f       []float32 // training F, when float
		y       []int32   // training labels
		test    int       // test samples
		val     int       // validation samples
	}{
		{
			name: "nchw uint8",
			in:   npzOf(t, "x_train", npyU8(nchw, 2, 3, 2, 2), "y_train", labels, "x_test", npyU8(nchw[:12], 1, 3, 2, 2), "y_test", npyI32(1)),
			// The default layout.
			shape: []int{3, 2, 2}, classes: 2, x: nchw, y: []int32{0, 1}, test: 1,
		},
		{
			name: "nhwc uint8",
			in:   npzOf(t, "x_train", npyU8(nhwc, 2, 2, 2, 3), "y_train", labels, "x_test", npyU8(nhwc, 2, 2, 2, 3), "y_test", npyI64(1, 1)),
			opts: NumPyOptions{Layout: LayoutNHWC}, shape: []int{3, 2, 2}, classes: 2, x: nchw, y: []int32{0, 1}, test: 2,
		},
		{
			name: "nchw written explicitly",
			in:   npzOf(t, "x_train", npyU8(nchw, 2, 3, 2, 2), "y_train", labels, "x_test", npyU8(nchw, 2, 3, 2, 2), "y_test", labels),
			opts: NumPyOptions{Layout: LayoutNCHW}, shape: []int{3, 2, 2}, classes: 2, x: nchw, y: []int32{0, 1}, test: 2,
		},
		{
			name: "grayscale N×H×W, layout ignored",
			in:   npzOf(t, "x_train", npyU8(ramp(12), 3, 2, 2), "y_train", npyI64(2, 0, 1), "x_test", npyU8(ramp(4), 1, 2, 2), "y_test", npyI64(2)),
			opts: NumPyOptions{Layout: LayoutNHWC}, shape: []int{1, 2, 2}, classes: 3, x: ramp(12), y: []int32{2, 0, 1}, test: 1,
		},
		{
			name: "float features with a validation split",
			in: npzOf(t, "x_train", npyF32([]float32{1, 2, 3, 4, 5, 6}, 3, 2), "y_train", npyOf("|u1", []byte{0, 1, 0}, 3),
				"x_test", npyF64([]float64{0.5, 1.5}, 1, 2), "y_test", npyF64([]float64{1}, 1),
				"x_val", npyF32([]float32{7, 8, 9, 10}, 2, 2), "y_val", npyOf("<i4", []byte{1, 0, 0, 0, 0, 0, 0, 0}, 2, 1)),
			shape: []int{2}, classes: 2, f: []float32{1, 2, 3, 4, 5, 6}, y: []int32{0, 1, 0}, test: 1, val: 2,
		},
		{
			name: "classes given, labels float",
			in:   npzOf(t, "x_train", npyF32([]float32{1, 2}, 2, 1), "y_train", npyF32([]float32{0, 1}, 2), "x_test", npyF32([]float32{3}, 1, 1), "y_test", npyF32([]float32{4}, 1)),
			opts: NumPyOptions{Classes: 5}, shape: []int{1}, classes: 5, f: []float32{1, 2}, y: []int32{0, 1}, test: 1,
		},
		{
			name:  "half the classes without a training sample",
			in:    npzOf(t, "x_train", npyF32([]float32{1, 2}, 2, 1), "y_train", npyI64(0, 3), "x_test", npyF32([]float32{3}, 1, 1), "y_test", npyI64(0)),
			shape: []int{1}, classes: 4, f: []float32{1, 2}, y: []int32{0, 3}, test: 1,
		},
		{
			name: "other members ignored, deflated",
			in: zipOf(t, zip.Deflate, member{"meta.json", []byte("{}")}, member{"x_train.npy", npyF32([]float32{1, 2}, 2, 1)}, member{"y_train.npy", npyI64(0, 1)},
				member{"x_test.npy", npyF32([]float32{3}, 1, 1)}, member{"y_test.npy", npyI64(0)}, member{"names.npy", npyU8([]byte{1}, 1)}),
			shape: []int{1}, classes: 2, f: []float32{1, 2}, y: []int32{0, 1}, test: 1,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			sp, err := readNumPyBytes(tc.in, tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			tr := sp.Train
			if !slices.Equal(tr.Shape, tc.shape) || tr.Classes != tc.classes || !slices.Equal(tr.Y, tc.y) || tr.Name != "npz" {
				t.Errorf("train: %q shape %v, %d classes, Y %v", tr.Name, tr.Shape, tr.Classes, tr.Y)
			}
			if !bytes.Equal(tr.X, tc.x) || !slices.Equal(tr.F, tc.f) || (tr.X == nil) == (tr.F == nil) {
				t.Errorf("train X %v F %v, want %v %v", tr.X, tr.F, tc.x, tc.f)
			}
			if sp.Test.Len() != tc.test || !slices.Equal(sp.Test.Shape, tc.shape) || sp.Test.Classes != tc.classes {
				t.Errorf("test: %d samples of shape %v, %d classes", sp.Test.Len(), sp.Test.Shape, sp.Test.Classes)
			}
			if got := 0; sp.Val != nil {
				got = sp.Val.Len()
				if got != tc.val || sp.Val.Classes != tc.classes {
					t.Errorf("validation: %d samples, %d classes", got, sp.Val.Classes)
				}
			} else if tc.val != 0 {
				t.Errorf("no validation split, want %d samples", tc.val)
			}
			mean, std, err := ChannelStats(tr)
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range []*Set{sp.Train, sp.Test, sp.Val} {
				if s != nil && (!slices.Equal(s.Mean, mean) || !slices.Equal(s.Std, std)) {
					t.Errorf("Mean/Std %v %v, want the training set's %v %v", s.Mean, s.Std, mean, std)
				}
			}
		})
	}
}

func TestReadNumPyValues(t *testing.T) {
	// float64 values are rounded to float32; the test set's samples keep
	// their order; the statistics are per feature.
	in := npzOf(t, "x_train", npyF64([]float64{0.1, 10, 0.3, 30}, 2, 2), "y_train", npyI64(0, 1),
		"x_test", npyF32([]float32{5, 6, 7, 8}, 2, 2), "y_test", npyI64(1, 0))
	sp, err := readNumPyBytes(in, NumPyOptions{Name: "mine"})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(sp.Train.F, []float32{0.1, 10, 0.3, 30}) || !slices.Equal(sp.Test.F, []float32{5, 6, 7, 8}) || !slices.Equal(sp.Test.Y, []int32{1, 0}) {
		t.Errorf("train F %v, test F %v Y %v", sp.Train.F, sp.Test.F, sp.Test.Y)
	}
	if sp.Train.Name != "mine" || sp.Test.Name != "mine" {
		t.Errorf("names %q %q", sp.Train.Name, sp.Test.Name)
	}
	if math.Abs(float64(sp.Train.Mean[0])-0.2) > 1e-6 || math.Abs(float64(sp.Train.Mean[1])-20) > 1e-5 || math.Abs(float64(sp.Train.Std[1])-10) > 1e-5 {
		t.Errorf("Mean %v Std %v", sp.Train.Mean, sp.Train.Std)
	}
}

func TestReadNumPyErrors(t *testing.T) {
	x := npyF32([]float32{1, 2, 3, 4}, 2, 2)
	y := npyI64(0, 1)
	// full returns the four required arrays, with the named ones replaced
	// (nil: left out) and extra ones added.
	full := func(over ...any) []byte {
		arrays := map[string][]byte{"x_train": x, "y_train": y, "x_test": x, "y_test": y}
		order := []string{"x_train", "y_train", "x_test", "y_test"}
		for i := 0; i < len(over); i += 2 {
			name := over[i].(string)
			if _, ok := arrays[name]; !ok {
				order = append(order, name)
			}
			b, _ := over[i+1].([]byte)
			arrays[name] = b
		}
		var args []any
		for _, name := range order {
			if arrays[name] != nil {
				args = append(args, name, arrays[name])
			}
		}
		return npzOf(t, args...)
	}
	tests := []struct {
		name string
		in   []byte
		opts NumPyOptions
		want []string
	}{
		{"missing array", full("x_test", nil), NumPyOptions{}, []string{"npz npz: the archive holds no array x_test (it holds x_train, y_train, y_test)"}},
		{"empty archive", npzOf(t), NumPyOptions{}, []string{"holds no array x_train (it holds nothing)"}},
		{"x_val alone", full("x_val", x), NumPyOptions{}, []string{"holds no array y_val", "x_val and y_val come together"}},
		{"y_val alone", full("y_val", y), NumPyOptions{}, []string{"holds no array x_val", "x_val and y_val come together"}},
		{"not an npz", x, NumPyOptions{}, []string{"npz npz: not an NPZ file"}},
		{"corrupt member", full("y_test", npyOf(">i8", make([]byte, 16), 2)), NumPyOptions{}, []string{"npz npz: y_test.npy: the array is big-endian"}},
		{"labels and samples", full("y_train", npyI64(0, 1, 1)), NumPyOptions{}, []string{"y_train holds 3 labels but x_train holds 2 samples"}},
		{"x 1-D", full("x_train", npyF32([]float32{1, 2}, 2)), NumPyOptions{}, []string{"x_train has shape (2,): want N×features, N×H×W or N×C×H×W (N×H×W×C with data.layout = \"nhwc\")"}},
		{"x 5-D", full("x_test", npyU8(make([]uint8, 2), 2, 1, 1, 1, 1)), NumPyOptions{}, []string{"x_test has shape (2, 1, 1, 1, 1)"}},
		{"one-hot labels", full("y_train", npyF32([]float32{1, 0, 0, 1}, 2, 2)), NumPyOptions{}, []string{"y_train has shape (2, 2): want one class index per sample, shape (2,) (for one-hot labels, save y.argmax(axis=1))"}},
		{"labels 3-D", full("y_test", npyOf("<i8", make([]byte, 16), 2, 1, 1)), NumPyOptions{}, []string{"y_test has shape (2, 1, 1)"}},
		{"no samples", full("x_test", npyF32(nil, 0, 2), "y_test", npyI64()), NumPyOptions{}, []string{"x_test holds no samples (shape (0, 2))"}},
		{"empty samples", full("x_train", npyF32(nil, 2, 0)), NumPyOptions{}, []string{"x_train has shape (2, 0): its samples are empty"}},
		{"non-finite", full("x_train", npyF32([]float32{1, float32(math.NaN()), float32(math.Inf(-1)), 4}, 2, 2)), NumPyOptions{},
			[]string{"x_train holds 2 values that are not finite float32 numbers (NaN, ±Inf, or beyond ±3.4e38), the first in sample 0"}},
		{"beyond float32", full("x_test", npyF64([]float64{1, 2, 3, 1e39}, 2, 2)), NumPyOptions{}, []string{"x_test holds 1 values that are not finite float32", "the first in sample 1"}},
		{"integer samples", full("x_train", npyOf("<i8", make([]byte, 32), 2, 2)), NumPyOptions{}, []string{"x_train has dtype int64: want uint8 (raw values such as pixels), float32 or float64"}},
		{"sample shapes differ", full("x_test", npyF32([]float32{1, 2, 3}, 1, 3), "y_test", npyI64(0)), NumPyOptions{}, []string{"x_test holds samples of shape [3], x_train samples of shape [2]: every part must have the same"}},
		{"layouts make shapes differ", full("x_train", npyU8(make([]uint8, 12), 1, 3, 2, 2), "y_train", npyI64(0), "x_test", npyU8(make([]uint8, 12), 1, 2, 2, 3), "y_test", npyI64(1)), NumPyOptions{},
			[]string{"x_test holds samples of shape [2 2 3], x_train samples of shape [3 2 2]"}},
		{"dtype kinds differ", full("x_val", npyU8([]uint8{1, 2}, 1, 2), "y_val", npyI64(0)), NumPyOptions{}, []string{"x_val is uint8 but x_train is float: give every x array the same kind of dtype"}},
		{"label over classes", full("y_test", npyI64(0, 3)), NumPyOptions{Classes: 3}, []string{"y_test[1] = 3 is out of range 0..2 (data.classes = 3)"}},
		{"negative label", full("y_train", npyI32(0, -1)), NumPyOptions{}, []string{"y_train[1] = -1 is out of range: class labels are 0..1048575"}},
		{"huge label", full("y_train", npyOf("<u8", bytes.Repeat([]byte{0xff}, 16), 2)), NumPyOptions{}, []string{"y_train[0] = 18446744073709551615 is out of range"}},
		{"fractional label", full("y_test", npyF64([]float64{0, 1.5}, 2)), NumPyOptions{}, []string{"y_test[1] = 1.5 is not an integer class label"}},
		{"NaN label", full("y_test", npyF64([]float64{math.NaN(), 1}, 2)), NumPyOptions{}, []string{"y_test[0] = NaN is not an integer class label"}},
		{"float label over classes", full("y_test", npyF64([]float64{0, 7}, 2)), NumPyOptions{Classes: 2}, []string{"y_test[1] = 7 is out of range 0..1 (data.classes = 2)"}},
		{"one class", full("y_train", npyI64(1, 1)), NumPyOptions{}, []string{"every label in y_train is 1: a classifier needs samples of at least 2 classes"}},
		{"typo label", full("y_test", npyI64(0, 99)), NumPyOptions{}, []string{"y_test[1] = 99 makes 100 classes, 98 of them without a training sample; fix the label, or set data.classes = 100"}},
		{"nhwc with vectors", full(), NumPyOptions{Layout: LayoutNHWC}, []string{"x_train is 2-D, (2, 2) (samples × features), but data.layout = \"nhwc\" is for 4-D images"}},
		{"bad layout", full(), NumPyOptions{Layout: "chw"}, []string{`layout "chw", want nchw or nhwc`}},
		{"bad classes", full(), NumPyOptions{Classes: -2}, []string{"-2 classes"}},
		{"string labels", full("y_train", npyOf("<U1", make([]byte, 8), 2)), NumPyOptions{}, []string{`y_train.npy: dtype "<U1" is not supported`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			sp, err := readNumPyBytes(tc.in, tc.opts)
			if err == nil {
				t.Fatalf("ReadNumPy = %d training samples, want an error", sp.Train.Len())
			}
			if sp.Train != nil {
				t.Errorf("a split and an error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
}

func TestLoadNumPy(t *testing.T) {
	dir := t.TempDir()
	x, y := npyU8(ramp(8), 2, 2, 2), npyI64(1, 0)
	npz := filepath.Join(dir, "digits.npz")
	if err := os.WriteFile(npz, npzOf(t, "x_train", x, "y_train", y, "x_test", x, "y_test", y), 0o644); err != nil {
		t.Fatal(err)
	}
	folder := filepath.Join(dir, "arrays")
	if err := os.Mkdir(folder, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, b := range map[string][]byte{"x_train": x, "y_train": y, "x_test": x, "y_test": y, "x_val": x, "y_val": y} {
		if err := os.WriteFile(filepath.Join(folder, name+".npy"), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		path  string
		name  string
		val   bool
		shape []int
	}{
		{npz, "digits", false, []int{1, 2, 2}},
		{folder, "arrays", true, []int{1, 2, 2}},
		{folder + "/", "arrays", true, []int{1, 2, 2}},
		{filepath.Join("testdata", "numpy", "tiny.npz"), "tiny", false, []int{2, 3, 3}},
		{filepath.Join("testdata", "numpy", "tinyc.npz"), "tinyc", true, []int{5}},
	}
	for _, tc := range tests {
		t.Run(tc.path, func(t *testing.T) {
			sp, err := LoadNumPy(tc.path, NumPyOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if sp.Train.Name != tc.name || (sp.Val != nil) != tc.val || !slices.Equal(sp.Train.Shape, tc.shape) {
				t.Errorf("%q: validation %v, shape %v", sp.Train.Name, sp.Val != nil, sp.Train.Shape)
			}
		})
	}
	// The NumPy-made fixture's values (testdata/numpy/gen.py).
	sp, err := LoadNumPy(filepath.Join("testdata", "numpy", "tiny.npz"), NumPyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(sp.Train.X, ramp(108)) || !slices.Equal(sp.Train.Y, []int32{0, 1, 2, 0, 1, 2}) || sp.Train.Classes != 3 ||
		!bytes.Equal(sp.Test.X[:18], ramp(54)[36:]) || !slices.Equal(sp.Test.Y, []int32{2, 1, 0}) {
		t.Errorf("tiny.npz: train X %v Y %v, test X %v Y %v", sp.Train.X, sp.Train.Y, sp.Test.X, sp.Test.Y)
	}

	t.Run("errors", func(t *testing.T) {
		if _, err := LoadNumPy(filepath.Join(dir, "absent.npz"), NumPyOptions{}); !errors.Is(err, ErrMissing) || !strings.Contains(err.Error(), "npz absent: ") {
			t.Errorf("missing file: %v", err)
		}
		if err := os.Remove(filepath.Join(folder, "y_test.npy")); err != nil {
			t.Fatal(err)
		}
		want := "npz arrays: folder " + folder + " holds no y_test.npy (it holds x_test.npy, x_train.npy, x_val.npy, y_train.npy, y_val.npy)"
		if _, err := LoadNumPy(folder, NumPyOptions{}); err == nil || err.Error() != want {
			t.Errorf("missing .npy file: %v, want %q", err, want)
		}
		npy := filepath.Join(folder, "x_train.npy")
		if _, err := LoadNumPy(npy, NumPyOptions{}); err == nil || !strings.Contains(err.Error(), npy+": not an NPZ file") {
			t.Errorf(".npy file for path: %v", err)
		}
		if err := os.WriteFile(filepath.Join(folder, "y_test.npy"), npyI64(0, 1, 2), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := LoadNumPy(folder, NumPyOptions{}); err == nil || !strings.Contains(err.Error(), "y_test holds 3 labels but x_test holds 2 samples") {
			t.Errorf("bad .npy file: %v", err)
		}
		if err := os.WriteFile(filepath.Join(folder, "y_test.npy"), []byte("junk"), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := LoadNumPy(folder, NumPyOptions{}); err == nil || !strings.Contains(err.Error(), filepath.Join(folder, "y_test.npy")+": not an NPY file") {
			t.Errorf("junk .npy file: %v", err)
		}
	})
}

func TestNumPyFiles(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"x_train.npy", "y_train.npy", "x_test.npy", "y_test.npy", "other.npy"} {
		if err := os.WriteFile(filepath.Join(dir, name), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := NumPyFiles(dir)
	want := []string{filepath.Join(dir, "x_train.npy"), filepath.Join(dir, "y_train.npy"), filepath.Join(dir, "x_test.npy"), filepath.Join(dir, "y_test.npy")}
	if err != nil || !slices.Equal(got, want) {
		t.Errorf("NumPyFiles(folder) = %v, %v", got, err)
	}
	file := filepath.Join(dir, "x_train.npy")
	if got, err := NumPyFiles(file); err != nil || !slices.Equal(got, []string{file}) {
		t.Errorf("NumPyFiles(file) = %v, %v", got, err)
	}
	if _, err := NumPyFiles(filepath.Join(dir, "absent")); err == nil {
		t.Error("NumPyFiles(absent): no error")
	}
}

func TestLoadExperimentNumPy(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, arrays ...any) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, npzOf(t, arrays...), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	labels := cyclicLabels(20, 2)
	y := make([]int64, len(labels))
	for i, v := range labels {
		y[i] = int64(v)
	}
	images := write("images.npz", "x_train", npyU8(ramp(20*3*4*4), 20, 4, 4, 3), "y_train", npyI64(y...), "x_test", npyU8(ramp(2*48), 2, 4, 4, 3), "y_test", npyI64(0, 1))
	vectors := write("vectors.npz", "x_train", npyF32(make([]float32, 40), 20, 2), "y_train", npyI64(y...), "x_test", npyF32(make([]float32, 4), 2, 2), "y_test", npyI64(0, 1),
		"x_val", npyF32(make([]float32, 4), 2, 2), "y_val", npyI64(1, 1))
	base := Spec{Dataset: NumPyName, Layout: LayoutNCHW, Normalize: true}
	tests := []struct {
		name    string
		edit    func(d *Spec)
		train   int
		val     int
		shape   []int
		flipped bool
		want    string // an error, or ""
	}{
		{name: "images nhwc", edit: func(d *Spec) {
			d.Path, d.Layout, d.Augment = images, LayoutNHWC, []string{"crop", "flip"}
		}, train: 20, shape: []int{3, 4, 4}},
		{name: "held out", edit: func(d *Spec) { d.Path, d.Validation = images, 0.25 }, train: 15, val: 5, shape: []int{4, 4, 3}},
		{name: "the file's validation split", edit: func(d *Spec) { d.Path = vectors }, train: 20, val: 2, shape: []int{2}},
		{name: "label noise leaves the file's validation split alone", edit: func(d *Spec) {
			d.Path, d.LabelNoise = vectors, NoiseOptions{Kind: NoisePairflip, Rate: 0.9}
		}, train: 20, val: 2, shape: []int{2}, flipped: true},
		{name: "validation with the file's own", edit: func(d *Spec) { d.Path, d.Validation = vectors, 0.1 },
			want: "npz vectors: data.validation = 0.1, but the file holds its own validation split (x_val, y_val): set data.validation = 0 to use it, or remove x_val and y_val"},
		{name: "augment vectors", edit: func(d *Spec) { d.Path, d.Augment = vectors, []string{"flip"} },
			want: `npz vectors: data.augment = ["flip"] needs images (C×H×W samples), but the samples are vectors of 2 features; set data.augment = []`},
		{name: "classes", edit: func(d *Spec) { d.Path, d.Classes = images, 1 }, want: "npz images: y_train[1] = 1 is out of range 0..0 (data.classes = 1)"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := base
			tc.edit(&d)
			sp, err := Load(d)
			if tc.want != "" {
				if err == nil || !strings.Contains(err.Error(), tc.want) {
					t.Fatalf("error %v, want %q", err, tc.want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if sp.Train.Len() != tc.train || !slices.Equal(sp.Train.Shape, tc.shape) {
				t.Errorf("train: %d samples of shape %v", sp.Train.Len(), sp.Train.Shape)
			}
			if got := 0; sp.Val != nil {
				if got = sp.Val.Len(); got != tc.val {
					t.Errorf("validation: %d samples, want %d", got, tc.val)
				}
			} else if tc.val > 0 {
				t.Errorf("no validation split")
			}
			if tc.flipped {
				if sp.Noise == nil || sp.Noise.Flipped == 0 || !slices.Equal(sp.Val.Y, []int32{1, 1}) {
					t.Errorf("noise %+v, validation labels %v", sp.Noise, sp.Val.Y)
				}
			}
		})
	}
}
