package data

import (
	"bufio"
	"compress/gzip"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"math"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/optlab/optlab/host/internal/regfile"
)

// CSVOptions configures ReadCSV and LoadCSV.
type CSVOptions struct {
	// Name is the Set's name and the prefix of error messages; LoadCSV
	// defaults it to the file name without its extensions.
	Name string
	// Classes fixes the number of classes; labels must then be below it.
	// 0 means the largest label plus one, provided that leaves at most
	// half of the classes without a sample (a larger label is taken for a
	// typo and refused).
	Classes int
	// Shape is the per-sample shape; its product must equal the number of
	// feature columns. Nil means [number of features].
	Shape []int
	// Scale, when non-zero, multiplies every feature (e.g. 1/16 or 1/255).
	Scale float32
}

// LoadCSV reads a tabular dataset from the CSV file at path, transparently
// decompressing it when the name ends in ".gz". See ReadCSV for the format.
func LoadCSV(path string, opts CSVOptions) (*Set, error) {
	s, _, err := loadCSV(path, opts)
	return s, err
}

// loadCSV is LoadCSV that also identifies the file as it was read
// (ContentID).
func loadCSV(path string, opts CSVOptions) (*Set, string, error) {
	if opts.Name == "" {
		base := filepath.Base(path)
		base = strings.TrimSuffix(base, ".gz")
		opts.Name = strings.TrimSuffix(base, filepath.Ext(base))
	}
	file, err := regfile.Open(path)
	if err != nil {
		return nil, "", fmt.Errorf("csv %s: %w", opts.Name, err)
	}
	defer func() { _ = file.Close() }()
	var r io.Reader = bufio.NewReaderSize(file, 1<<20)
	if strings.HasSuffix(path, ".gz") {
		zr, err := gzip.NewReader(r)
		if err != nil {
			return nil, "", fmt.Errorf("csv %s: %s: %w", opts.Name, path, err)
		}
		defer func() { _ = zr.Close() }()
		r = zr
	}
	set, err := ReadCSV(r, opts)
	if err != nil {
		return nil, "", err
	}
	id, err := ContentID(file)
	if err != nil {
		return nil, "", fmt.Errorf("csv %s: %w", opts.Name, err)
	}
	return set, id, nil
}

// ReadCSV reads a tabular classification dataset: one sample per line,
// comma-separated, the features first and the integer class label last.
// Features are parsed as float32 and must be finite; labels must be
// non-negative integers (an integral value written as "3.0" is accepted).
// When a field of the first line is neither empty nor a number, that line is
// taken as a header and skipped. Blank lines and lines starting with '#' are ignored.
// Every line must have as many fields as the first. The labels must cover
// at least 2 classes; see CSVOptions.Classes for when the number of classes
// is inferred. Errors name the line (and column) at fault. The result has F set, X nil and no normalization.
func ReadCSV(r io.Reader, opts CSVOptions) (*Set, error) {
	name := opts.Name
	if name == "" {
		name = "csv"
	}
	if opts.Classes < 0 || opts.Classes > maxClasses {
		return nil, fmt.Errorf("csv %s: %d classes, want 0..%d", name, opts.Classes, maxClasses)
	}
	cr := csv.NewReader(r)
	cr.FieldsPerRecord = -1 // checked below, with a clearer message
	cr.TrimLeadingSpace = true
	cr.Comment = '#'
	cr.ReuseRecord = true

	s := &Set{Name: name, F: []float32{}, Y: []int32{}}
	columns := 0
	first := true
	maxLabel, maxLine := -1, 0 // the largest label and the line it first appears on
	for {
		rec, err := cr.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("csv %s: %w", name, err)
		}
		line, _ := cr.FieldPos(0)
		if first {
			first = false
			rec[0] = strings.TrimPrefix(rec[0], "\ufeff")
			columns = len(rec)
			if columns < 2 {
				return nil, fmt.Errorf("csv %s: line %d: %d field(s), want at least one feature and a label", name, line, columns)
			}
			if isHeader(rec) {
				continue
			}
		}
		if len(rec) != columns {
			return nil, fmt.Errorf("csv %s: line %d: %d fields, want %d like the first line", name, line, len(rec), columns)
		}
		for i, field := range rec[:columns-1] {
			v, err := parseFeature(field)
			if err != nil {
				_, col := cr.FieldPos(i)
				return nil, fmt.Errorf("csv %s: line %d, column %d (field %d): %w", name, line, col, i+1, err)
			}
			if opts.Scale != 0 {
				v *= opts.Scale
				if math.IsInf(float64(v), 0) || math.IsNaN(float64(v)) {
					_, col := cr.FieldPos(i)
					return nil, fmt.Errorf("csv %s: line %d, column %d (field %d): %q overflows when scaled by %v", name, line, col, i+1, field, opts.Scale)
				}
			}
			s.F = append(s.F, v)
		}
		label, err := parseLabel(rec[columns-1])
		if err != nil {
			_, col := cr.FieldPos(columns - 1)
			return nil, fmt.Errorf("csv %s: line %d, column %d (label): %w", name, line, col, err)
		}
		if opts.Classes > 0 && label >= opts.Classes {
			return nil, fmt.Errorf("csv %s: line %d: label %d out of range 0..%d", name, line, label, opts.Classes-1)
		}
		if label > maxLabel {
			maxLabel, maxLine = label, line
		}
		s.Y = append(s.Y, int32(label))
	}
	if len(s.Y) == 0 {
		return nil, fmt.Errorf("csv %s: no data lines", name)
	}
	features := columns - 1
	s.Shape = []int{features}
	if opts.Shape != nil {
		prod := 1
		for _, d := range opts.Shape {
			if d <= 0 {
				prod = -1
				break
			}
			prod *= d
		}
		if prod != features {
			return nil, fmt.Errorf("csv %s: shape %v does not hold the %d features per line", name, opts.Shape, features)
		}
		s.Shape = slices.Clone(opts.Shape)
	}
	s.Classes = opts.Classes
	if s.Classes == 0 {
		s.Classes = maxLabel + 1
	}
	if err := checkLabels(s, opts.Classes == 0, maxLabel, maxLine); err != nil {
		return nil, err
	}
	if err := s.Validate(); err != nil {
		return nil, fmt.Errorf("csv %s: %w", name, err)
	}
	return s, nil
}

// checkLabels refuses labels a classifier cannot learn from: a single class,
// and, when the number of classes was inferred, a largest label (maxLabel,
// first on line maxLine) that leaves more than half of the classes
// 0..maxLabel without a sample, which is most likely a typo.
func checkLabels(s *Set, inferred bool, maxLabel, maxLine int) error {
	seen := make([]bool, maxLabel+1)
	present := 0
	for _, y := range s.Y {
		if !seen[y] {
			seen[y] = true
			present++
		}
	}
	if present < 2 {
		return fmt.Errorf("csv %s: every label is %d: a classifier needs samples of at least 2 classes", s.Name, maxLabel)
	}
	if empty := s.Classes - present; inferred && 2*empty > s.Classes {
		return fmt.Errorf("csv %s: line %d: label %d makes %d classes, %d of them without a sample; fix the label, or set data.classes = %d if that many classes is intended",
			s.Name, maxLine, maxLabel, s.Classes, empty, s.Classes)
	}
	return nil
}

// isHeader reports whether some field of rec is neither empty nor a number.
// (An empty field alone does not make a header: it is a data line with a
// missing value, reported as such.)
func isHeader(rec []string) bool {
	for _, f := range rec {
		f = strings.TrimSpace(f)
		if _, err := strconv.ParseFloat(f, 64); err != nil && f != "" {
			return true
		}
	}
	return false
}

func parseFeature(field string) (float32, error) {
	field = strings.TrimSpace(field)
	v, err := strconv.ParseFloat(field, 32)
	if err != nil {
		return 0, fmt.Errorf("%q is not a float32 number", field)
	}
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return 0, fmt.Errorf("%q is not a finite number", field)
	}
	return float32(v), nil
}

func parseLabel(field string) (int, error) {
	field = strings.TrimSpace(field)
	v, err := strconv.ParseInt(field, 10, 64)
	if err != nil {
		f, ferr := strconv.ParseFloat(field, 64)
		if ferr != nil || f != math.Trunc(f) || math.Abs(f) > maxClasses {
			return 0, fmt.Errorf("label %q is not an integer in 0..%d", field, maxClasses-1)
		}
		v = int64(f)
	}
	if v < 0 || v >= maxClasses {
		return 0, fmt.Errorf("label %d out of range 0..%d", v, maxClasses-1)
	}
	return int(v), nil
}
