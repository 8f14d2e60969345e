package data

import (
	"bytes"
	"compress/gzip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestReadCSV(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		opts    CSVOptions
		shape   []int
		classes int
		f       []float32
		y       []int32
	}{
		{
			name: "plain", in: "1,2,0\n3,4.5,2\n",
			shape: []int{2}, classes: 3, f: []float32{1, 2, 3, 4.5}, y: []int32{0, 2},
		},
		{
			name: "header", in: ",b,label\n1,2,1\n3,4,0\n",
			shape: []int{2}, classes: 2, f: []float32{1, 2, 3, 4}, y: []int32{1, 0},
		},
		{
			name: "bom header crlf spaces blanks comments", in: "\ufeffx, y ,class\r\n\r\n# note\r\n 1e-1 , -2 , 3.0 \r\n5,6,1\r\n",
			shape: []int{2}, classes: 4, f: []float32{0.1, -2, 5, 6}, y: []int32{3, 1},
		},
		{
			name: "given classes and shape and scale", in: "16,8,4,0,1\n0,0,0,4,3\n", opts: CSVOptions{Classes: 5, Shape: []int{1, 2, 2}, Scale: 0.25},
			shape: []int{1, 2, 2}, classes: 5, f: []float32{4, 2, 1, 0, 0, 0, 0, 1}, y: []int32{1, 3},
		},
		{
			name: "quoted", in: "\"1\",\"2\",\"0\"\n\"3\",\"4\",\"1\"\n",
			shape: []int{2}, classes: 2, f: []float32{1, 2, 3, 4}, y: []int32{0, 1},
		},
		{
			name: "half the classes empty", in: "1,0\n2,3\n",
			shape: []int{1}, classes: 4, f: []float32{1, 2}, y: []int32{0, 3},
		},
		{
			name: "many classes given", in: "1,0\n2,1\n3,999999\n", opts: CSVOptions{Classes: 1000000},
			shape: []int{1}, classes: 1000000, f: []float32{1, 2, 3}, y: []int32{0, 1, 999999},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, err := ReadCSV(strings.NewReader(tc.in), tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(s.Shape, tc.shape) || s.Classes != tc.classes || !slices.Equal(s.F, tc.f) || !slices.Equal(s.Y, tc.y) {
				t.Errorf("got shape %v classes %d F %v Y %v", s.Shape, s.Classes, s.F, s.Y)
			}
			if s.X != nil || s.Mean != nil || s.Name != "csv" {
				t.Errorf("X %v Mean %v Name %q", s.X, s.Mean, s.Name)
			}
		})
	}
}

func TestReadCSVErrors(t *testing.T) {
	tests := []struct {
		name string
		in   string
		opts CSVOptions
		want []string
	}{
		{"empty", "", CSVOptions{}, []string{"no data lines"}},
		{"header only", "a,b\n", CSVOptions{}, []string{"no data lines"}},
		{"one column", "1\n2\n", CSVOptions{}, []string{"line 1", "at least one feature"}},
		{"ragged", "1,2,0\n1,2,3,0\n", CSVOptions{}, []string{"line 2", "4 fields, want 3"}},
		{"ragged after header", "a,b,c\n1,2,0\n\n1,0\n", CSVOptions{}, []string{"line 4", "2 fields"}},
		{"not a number", "1,2,0\n1,x,0\n", CSVOptions{}, []string{"line 2", "column 3", "field 2", `"x"`}},
		{"empty field first line", "1,,0\n", CSVOptions{}, []string{"line 1", "field 2", `""`}},
		{"nan", "1,2,0\nNaN,2,0\n", CSVOptions{}, []string{"line 2", "not a finite"}},
		{"too big", "1,2,0\n1e39,2,0\n", CSVOptions{}, []string{"line 2", "float32"}},
		{"negative label", "1,2,-1\n", CSVOptions{}, []string{"line 1", "label -1"}},
		{"fractional label", "1,2,1.5\n", CSVOptions{}, []string{"line 1", "not an integer"}},
		{"huge label", "1,2,99999999\n", CSVOptions{}, []string{"line 1", "out of range"}},
		{"label over classes", "1,2,0\n1,2,3\n", CSVOptions{Classes: 3}, []string{"line 2", "label 3 out of range 0..2"}},
		{"typo label over classes", "1,0\n2,1\n3,999999\n", CSVOptions{Classes: 2}, []string{"line 3", "label 999999 out of range 0..1"}},
		{"one class", "1,2,0\n3,4,0\n", CSVOptions{}, []string{"every label is 0", "at least 2 classes"}},
		{"one class of several", "1,2,3\n3,4,3\n", CSVOptions{Classes: 5}, []string{"every label is 3", "at least 2 classes"}},
		{"one given class", "1,2,0\n", CSVOptions{Classes: 1}, []string{"every label is 0", "at least 2 classes"}},
		{"typo label", "1,0\n2,1\n# x\n3,999999\n4,999999\n5,2\n", CSVOptions{}, []string{"csv csv: line 4: label 999999 makes 1000000 classes, 999996 of them without a sample", "set data.classes = 1000000 if that many classes is intended"}},
		{"most classes empty", "1,0\n2,4\n", CSVOptions{}, []string{"line 2", "label 4 makes 5 classes, 3 of them"}},
		{"shape", "1,2,0\n", CSVOptions{Shape: []int{3}}, []string{"shape [3]"}},
		{"bad classes", "1,2,0\n", CSVOptions{Classes: -1}, []string{"classes"}},
		{"quote", "1,\"2,0\n", CSVOptions{}, []string{"quote"}},
		{"overflow scaled", "3e38,0\n", CSVOptions{Scale: 10}, []string{"overflows"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, err := ReadCSV(strings.NewReader(tc.in), tc.opts)
			if err == nil {
				t.Fatalf("ReadCSV = %d samples, want an error", s.Len())
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
}

func TestLoadCSV(t *testing.T) {
	const text = "f1,f2,y\n0.5,1,1\n2,3,0\n"
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write([]byte(text))
	zw.Close()
	tests := []struct {
		file string
		data []byte
		name string
	}{
		{"iris.csv", []byte(text), "iris"},
		{"wine.csv.gz", gz.Bytes(), "wine"},
	}
	for _, tc := range tests {
		t.Run(tc.file, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), tc.file)
			if err := os.WriteFile(path, tc.data, 0o644); err != nil {
				t.Fatal(err)
			}
			s, err := LoadCSV(path, CSVOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if s.Name != tc.name || s.Len() != 2 || !slices.Equal(s.F, []float32{0.5, 1, 2, 3}) || !slices.Equal(s.Y, []int32{1, 0}) {
				t.Errorf("got %q: F %v Y %v", s.Name, s.F, s.Y)
			}
		})
	}
	if _, err := LoadCSV(filepath.Join(t.TempDir(), "absent.csv"), CSVOptions{}); err == nil {
		t.Errorf("missing file: no error")
	}
	bad := filepath.Join(t.TempDir(), "bad.csv.gz")
	if err := os.WriteFile(bad, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadCSV(bad, CSVOptions{}); err == nil || !strings.Contains(err.Error(), "gzip") {
		t.Errorf("non-gzip .gz file: %v", err)
	}
}
