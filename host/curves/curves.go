// Package curves writes and reads training curves: a training curve is a
// CSV file with one row per epoch, written while the run trains (host/train)
// by a Writer to results/<experiment>/curves/<KeyFileName(run key)>, and
// read back by host plot (host/plot draws them):
//
//	epoch,step,lr,train_loss,train_acc,test_loss,test_acc,seconds
//	1,22,0.05,1.93,0.41,,,0.8
//	2,44,0.049,0.71,0.83,0.52,0.88,1.6
//
// Cells of values that were not measured (test_* in an epoch without
// evaluation) are empty.
package curves

import (
	"bufio"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/optlab/optlab/host/results"
)

// Column names of a curve file, in the order Writer writes them.
const (
	ColEpoch     = "epoch"
	ColStep      = "step"
	ColLR        = "lr"
	ColTrainLoss = "train_loss"
	ColTrainAcc  = "train_acc"
	ColEvalLoss  = "test_loss"
	ColEvalAcc   = "test_acc"
	ColSeconds   = "seconds"
)

// Columns returns the columns of a curve file in order.
func Columns() []string {
	return []string{ColEpoch, ColStep, ColLR, ColTrainLoss, ColTrainAcc, ColEvalLoss, ColEvalAcc, ColSeconds}
}

// Row is one epoch of a training curve. A NaN float means "not measured"
// and is written as an empty cell (NaNRow returns a row with every float
// unset).
type Row struct {
	// Epoch is the 1-based epoch that just ended.
	Epoch int
	// Step is the number of optimizer steps taken so far.
	Step int64
	// LR is the learning rate of the epoch's last step.
	LR float64
	// TrainLoss and TrainAcc are the means over the epoch's minibatches.
	TrainLoss, TrainAcc float64
	// EvalLoss and EvalAcc are measured on the held-out set at the end of
	// the epoch: the validation split when the experiment has one, else
	// the test set; NaN when the run did not evaluate that epoch. (Their
	// columns keep the names test_loss and test_acc of the first curve
	// files.)
	EvalLoss, EvalAcc float64
	// Seconds is the wall-clock time since the run started.
	Seconds float64
}

// NaNRow returns a row of epoch and step with every float NaN (unset).
func NaNRow(epoch int, step int64) Row {
	n := math.NaN()
	return Row{Epoch: epoch, Step: step, LR: n, TrainLoss: n, TrainAcc: n, EvalLoss: n, EvalAcc: n, Seconds: n}
}

// Value returns the value of column col in r and whether it is measured
// (not NaN). Unknown columns report false.
func (r Row) Value(col string) (float64, bool) {
	var v float64
	switch col {
	case ColEpoch:
		v = float64(r.Epoch)
	case ColStep:
		v = float64(r.Step)
	case ColLR:
		v = r.LR
	case ColTrainLoss:
		v = r.TrainLoss
	case ColTrainAcc:
		v = r.TrainAcc
	case ColEvalLoss:
		v = r.EvalLoss
	case ColEvalAcc:
		v = r.EvalAcc
	case ColSeconds:
		v = r.Seconds
	default:
		return 0, false
	}
	return v, !math.IsNaN(v)
}

// set stores v in column col of r.
func (r *Row) set(col string, v float64) {
	switch col {
	case ColEpoch:
		r.Epoch = int(v)
	case ColStep:
		r.Step = int64(v)
	case ColLR:
		r.LR = v
	case ColTrainLoss:
		r.TrainLoss = v
	case ColTrainAcc:
		r.TrainAcc = v
	case ColEvalLoss:
		r.EvalLoss = v
	case ColEvalAcc:
		r.EvalAcc = v
	case ColSeconds:
		r.Seconds = v
	}
}

// record renders r as CSV cells in Columns order.
func (r Row) record() []string {
	return []string{strconv.Itoa(r.Epoch), strconv.FormatInt(r.Step, 10), cell(r.LR), cell(r.TrainLoss), cell(r.TrainAcc),
		cell(r.EvalLoss), cell(r.EvalAcc), cell(r.Seconds)}
}

// cell formats a float as the shortest decimal that reads back exactly; NaN
// is the empty cell.
func cell(v float64) string {
	if math.IsNaN(v) {
		return ""
	}
	return strconv.FormatFloat(v, 'g', -1, 64)
}

// Writer writes one run's training curve, one row per Append, each
// row with a single write so that a reader (or a crash) sees whole rows.
// It is not safe for concurrent use.
type Writer struct {
	f    *os.File
	path string
	buf  []byte
}

// Create creates (or truncates: a run that starts again starts a new
// curve) the curve file at path, making its directories, and writes the
// header.
func Create(path string) (*Writer, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("curve %s: %w", path, err)
	}
	f, err := results.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, fmt.Errorf("curve %s: %w", path, err)
	}
	w := &Writer{f: f, path: path}
	if err := w.write(Columns()); err != nil {
		_ = f.Close()
		return nil, err
	}
	return w, nil
}

// Path returns the file the writer writes.
func (w *Writer) Path() string { return w.path }

// Append writes row as one line.
func (w *Writer) Append(row Row) error {
	if w == nil || w.f == nil {
		return errors.New("curve: append to a closed writer")
	}
	return w.write(row.record())
}

func (w *Writer) write(cells []string) error {
	var sb strings.Builder
	cw := csv.NewWriter(&sb)
	if err := cw.Write(cells); err != nil {
		return fmt.Errorf("curve %s: %w", w.path, err)
	}
	cw.Flush()
	w.buf = append(w.buf[:0], sb.String()...)
	if _, err := w.f.Write(w.buf); err != nil {
		return fmt.Errorf("curve %s: %w", w.path, err)
	}
	return nil
}

// Close closes the file. Closing twice is an error-free no-op.
func (w *Writer) Close() error {
	if w == nil || w.f == nil {
		return nil
	}
	err := w.f.Close()
	w.f = nil
	if err != nil {
		return fmt.Errorf("curve %s: %w", w.path, err)
	}
	return nil
}

// Read reads a curve file. Columns are found by the header's names, so
// their order does not matter and unknown columns are ignored; the epoch
// column is required. Empty cells read as NaN.
func Read(path string) ([]Row, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read curve: %w", err)
	}
	defer func() { _ = f.Close() }()
	rows, err := Decode(bufio.NewReader(f))
	if err != nil {
		return nil, fmt.Errorf("curve %s: %w", path, err)
	}
	return rows, nil
}

// Decode reads curve rows in CSV from r (see Read).
func Decode(r io.Reader) ([]Row, error) {
	cr := csv.NewReader(r)
	cr.FieldsPerRecord = -1
	cr.ReuseRecord = true
	header, err := cr.Read()
	if errors.Is(err, io.EOF) {
		return nil, errors.New("empty file (no header)")
	}
	if err != nil {
		return nil, err
	}
	header = slices.Clone(header) // the reader reuses its record
	known := Columns()
	cols := make([]string, len(header))
	for i, h := range header {
		h = strings.TrimSpace(h)
		if slices.Contains(known, h) {
			cols[i] = h
		}
	}
	if !slices.Contains(cols, ColEpoch) {
		return nil, fmt.Errorf("header %q has no %s column", strings.Join(header, ","), ColEpoch)
	}
	var rows []Row
	for line := 2; ; line++ {
		rec, err := cr.Read()
		if errors.Is(err, io.EOF) {
			return rows, nil
		}
		if err != nil {
			return nil, err
		}
		if len(rec) == 1 && strings.TrimSpace(rec[0]) == "" {
			continue
		}
		if len(rec) != len(header) {
			return nil, fmt.Errorf("line %d: %d cells, the header has %d", line, len(rec), len(header))
		}
		row := NaNRow(0, 0)
		for i, c := range rec {
			if cols[i] == "" {
				continue
			}
			c = strings.TrimSpace(c)
			if c == "" {
				if cols[i] == ColEpoch || cols[i] == ColStep {
					return nil, fmt.Errorf("line %d: empty %s", line, cols[i])
				}
				continue
			}
			v, err := strconv.ParseFloat(c, 64)
			if err != nil {
				return nil, fmt.Errorf("line %d, column %s: %w", line, cols[i], err)
			}
			row.set(cols[i], v)
		}
		rows = append(rows, row)
	}
}

// Curve is the training curve of one run.
type Curve struct {
	// Key is the run key recovered from the file name.
	Key string
	// Method, Arch and Seed are parsed from Key ("method=<m>/arch=<a>/seed=<s>");
	// when Key has another form, Method is the whole key, Arch is empty
	// and Seed 0.
	Method, Arch string
	Seed         int64
	// Path is the file the curve was read from.
	Path string
	Rows []Row
}

// ParseKey splits a run key "method=<m>/arch=<a>/seed=<s>" into its parts
// (the method name may itself contain '/').
func ParseKey(key string) (method, arch string, seed int64, err error) {
	rest, ok := strings.CutPrefix(key, "method=")
	i := strings.LastIndex(rest, "/seed=")
	j := strings.LastIndex(rest, "/arch=")
	if !ok || i < 0 || j < 0 || j > i {
		return "", "", 0, fmt.Errorf("run key %q: want method=<m>/arch=<a>/seed=<s>", key)
	}
	seed, err = strconv.ParseInt(rest[i+len("/seed="):], 10, 64)
	if err != nil {
		return "", "", 0, fmt.Errorf("run key %q: seed: %w", key, err)
	}
	return rest[:j], rest[j+len("/arch=") : i], seed, nil
}

// ReadDir reads every curve file (*.csv) in dir, sorted by file name.
// dir may be an experiment's results folder (its curves/ subfolder is
// read) or the curves folder itself.
func ReadDir(dir string) ([]Curve, error) {
	if st, err := os.Stat(filepath.Join(dir, results.CurvesDir)); err == nil && st.IsDir() {
		dir = filepath.Join(dir, results.CurvesDir)
	}
	paths, err := filepath.Glob(filepath.Join(dir, "*"+results.CurveExt))
	if err != nil {
		return nil, fmt.Errorf("curves in %s: %w", dir, err)
	}
	if len(paths) == 0 {
		return nil, fmt.Errorf("no curve files (*%s) in %s", results.CurveExt, dir)
	}
	slices.Sort(paths)
	out := make([]Curve, 0, len(paths))
	for _, p := range paths {
		key, err := results.CurveKey(p)
		if err != nil {
			return nil, err
		}
		rows, err := Read(p)
		if err != nil {
			return nil, err
		}
		c := Curve{Key: key, Method: key, Path: p, Rows: rows}
		if m, a, s, err := ParseKey(key); err == nil {
			c.Method, c.Arch, c.Seed = m, a, s
		}
		out = append(out, c)
	}
	return out, nil
}

// Continue reopens the curve of a resumed run: rows of epochs after
// epoch (those of the interrupted epoch, if any were written) are dropped,
// the others kept, and new rows are appended.
func Continue(path string, epoch int) (*Writer, error) {
	rows, err := Read(path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	w, err := Create(path)
	if err != nil {
		return nil, err
	}
	for _, r := range rows {
		if r.Epoch > epoch {
			break
		}
		if err := w.Append(r); err != nil {
			_ = w.Close()
			return nil, err
		}
	}
	return w, nil
}
