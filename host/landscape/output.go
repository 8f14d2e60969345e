package landscape

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/optlab/optlab/host/plot"
	"github.com/optlab/optlab/host/results"
	"github.com/optlab/optlab/internal/atomicfile"
)

// CSV columns of a scan.
const (
	ColAlpha     = "alpha"
	ColBeta      = "beta"
	ColTrainLoss = "train_loss"
	ColTestLoss  = "test_loss"
	ColTrainAcc  = "train_acc"
	ColTestAcc   = "test_acc"
)

// EncodeCSV writes points as CSV: alpha[,beta],train_loss,test_loss,
// train_acc,test_acc (beta when plane is set). Non-finite values are
// written as NaN, +Inf or -Inf.
func EncodeCSV(w io.Writer, points []Point, plane bool) error {
	cw := csv.NewWriter(w)
	header := []string{ColAlpha}
	if plane {
		header = append(header, ColBeta)
	}
	header = append(header, ColTrainLoss, ColTestLoss, ColTrainAcc, ColTestAcc)
	if err := cw.Write(header); err != nil {
		return err
	}
	f := func(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }
	for _, p := range points {
		rec := []string{f(p.Alpha)}
		if plane {
			rec = append(rec, f(p.Beta))
		}
		rec = append(rec, f(p.TrainLoss), f(p.TestLoss), f(p.TrainAcc), f(p.TestAcc))
		if err := cw.Write(rec); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}

// WriteCSV writes points to a CSV file at path (see EncodeCSV), replacing
// it atomically.
func WriteCSV(path string, points []Point, plane bool) error {
	var buf bytes.Buffer
	if err := EncodeCSV(&buf, points, plane); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := atomicfile.Write(path, buf.Bytes(), 0o644); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// DecodeCSV reads points written by EncodeCSV, and whether they lie on a
// plane (the file has a beta column). Columns are found by name.
func DecodeCSV(r io.Reader) (points []Point, plane bool, err error) {
	cr := csv.NewReader(r)
	header, err := cr.Read()
	if err != nil {
		return nil, false, fmt.Errorf("header: %w", err)
	}
	idx := map[string]int{}
	for i, h := range header {
		idx[strings.TrimSpace(h)] = i
	}
	for _, c := range []string{ColAlpha, ColTrainLoss, ColTestLoss, ColTrainAcc, ColTestAcc} {
		if _, ok := idx[c]; !ok {
			return nil, false, fmt.Errorf("header %q has no %s column", strings.Join(header, ","), c)
		}
	}
	_, plane = idx[ColBeta]
	for line := 2; ; line++ {
		rec, err := cr.Read()
		if errors.Is(err, io.EOF) {
			return points, plane, nil
		}
		if err != nil {
			return nil, false, err
		}
		get := func(col string) (float64, error) {
			v, err := strconv.ParseFloat(strings.TrimSpace(rec[idx[col]]), 64)
			if err != nil {
				return 0, fmt.Errorf("line %d, column %s: %w", line, col, err)
			}
			return v, nil
		}
		var p Point
		for _, c := range []struct {
			col string
			dst *float64
		}{{ColAlpha, &p.Alpha}, {ColTrainLoss, &p.TrainLoss}, {ColTestLoss, &p.TestLoss}, {ColTrainAcc, &p.TrainAcc}, {ColTestAcc, &p.TestAcc}} {
			if *c.dst, err = get(c.col); err != nil {
				return nil, false, err
			}
		}
		if plane {
			if p.Beta, err = get(ColBeta); err != nil {
				return nil, false, err
			}
		}
		points = append(points, p)
	}
}

// ReadCSV reads a scan CSV file (see DecodeCSV).
func ReadCSV(path string) ([]Point, bool, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, false, fmt.Errorf("read scan: %w", err)
	}
	defer func() { _ = f.Close() }()
	pts, plane, err := DecodeCSV(f)
	if err != nil {
		return nil, false, fmt.Errorf("%s: %w", path, err)
	}
	return pts, plane, nil
}

// Summary is the landscape.json file of a landscape command.
type Summary struct {
	// Experiment names the experiment whose data was evaluated.
	Experiment string `json:"experiment"`
	// Directions describes how the directions were made.
	Directions string `json:"directions"`
	// Loss describes the evaluated loss.
	Loss string `json:"loss"`
	// Seed is the seed of the random directions.
	Seed uint64 `json:"seed"`
	// Steps is the number of points per axis asked for.
	Steps int `json:"steps"`
	// Radius bounds |α| (and |β|) and the sharpness.
	Radius float64 `json:"radius"`
	// Plane says whether the 2-D scan was made.
	Plane bool `json:"plane"`
	// TrainSamples and TestSamples are the numbers of samples evaluated.
	TrainSamples int64 `json:"train_samples"`
	TestSamples  int64 `json:"test_samples"`
	// Metric is the name of the sharpness metric added to runs.jsonl.
	Metric      string              `json:"metric"`
	Checkpoints []CheckpointSummary `json:"checkpoints"`
}

// CheckpointSummary is one checkpoint's entry in Summary.
type CheckpointSummary struct {
	// Label names the checkpoint in plots, tables and file names.
	Label string `json:"label"`
	// Path is the checkpoint file.
	Path string `json:"path"`
	// Arch is the architecture it was loaded as.
	Arch string `json:"arch"`
	// RunKey is the run its metadata names, if any.
	RunKey string `json:"run_key,omitempty"`
	// Centre is the evaluation at θ.
	Centre Metrics `json:"centre"`
	// Sharpness is the train-loss sharpness on the line; TestSharpness
	// the test-loss one; PlaneSharpness the train-loss sharpness on the
	// plane's disk of the same radius (nil without a plane).
	Sharpness      Sharpness  `json:"sharpness"`
	TestSharpness  Sharpness  `json:"test_sharpness"`
	PlaneSharpness *Sharpness `json:"plane_sharpness,omitempty"`
	// Recorded says whether the sharpness was added to the run's record.
	Recorded bool `json:"recorded"`
	// Files are the outputs of this checkpoint, relative to the output
	// folder.
	Files []string `json:"files"`
}

// WriteSummary writes s as indented JSON to path, replacing it atomically.
func WriteSummary(path string, s Summary) error {
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := atomicfile.Write(path, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// MetricName returns the name of the sharpness metric of radius r in
// runs.jsonl: "sharpness_r1", "sharpness_r0.5".
func MetricName(r float64) string {
	return "sharpness_r" + strconv.FormatFloat(r, 'g', -1, 64)
}

// RecordMetric sets metric name to value in the record of run key of
// experiment in the results file at path, by appending an updated copy of
// the record that results.Merge keeps (the newest, and among equally new
// ones the last), waiting for the file's lock as w says. It reports false,
// with no error, when the file has no finished ("ok") record of that run.
func RecordMetric(w results.LockWait, path, experiment, key, name string, value float64) (bool, error) {
	recs, err := results.Read(path)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	cur := -1
	for i, r := range recs {
		if r.Experiment != experiment || r.Key != key {
			continue
		}
		if cur < 0 || !r.Finished.Before(recs[cur].Finished) {
			cur = i
		}
	}
	if cur < 0 || recs[cur].Status != results.StatusOK {
		return false, nil
	}
	rec := recs[cur]
	rec.Metrics = make(map[string]float64, len(recs[cur].Metrics)+1)
	for k, v := range recs[cur].Metrics {
		rec.Metrics[k] = v
	}
	rec.Metrics[name] = value
	rec.Undefined = slices.DeleteFunc(slices.Clone(rec.Undefined), func(s string) bool { return s == name })
	if len(rec.Undefined) == 0 {
		rec.Undefined = nil
	}
	rec.Config = cloneConfig(recs[cur].Config)
	if err := w.Append(path, rec); err != nil {
		return false, err
	}
	return true, nil
}

// cloneConfig copies a record's config map (its values are scalars).
func cloneConfig(c map[string]any) map[string]any {
	if c == nil {
		return nil
	}
	out := make(map[string]any, len(c))
	for k, v := range c {
		out[k] = v
	}
	return out
}

// Line is one checkpoint's line scan, for PlotLines.
type Line struct {
	Label  string
	Points []Point
}

// PlotLines draws the line scans of several checkpoints as a PNG at path:
// training loss (left) and test loss (right) against α, one line per
// checkpoint, in the same colour in both panels.
func PlotLines(path string, lines []Line) error {
	train := plot.Panel{Title: "training loss (subset)", XLabel: "α (filter-normalized direction)", YLabel: "loss", Legend: plot.LegendTopCenter}
	test := plot.Panel{Title: "test loss", XLabel: "α (filter-normalized direction)", YLabel: "loss", Legend: plot.LegendTopCenter}
	for i, l := range lines {
		var xs, tr, te []float64
		for _, p := range l.Points {
			xs = append(xs, p.Alpha)
			tr = append(tr, p.TrainLoss)
			te = append(te, p.TestLoss)
		}
		train.Series = append(train.Series, plot.Series{Label: l.Label, X: xs, Y: tr, Color: i})
		test.Series = append(test.Series, plot.Series{Label: l.Label, X: xs, Y: te, Color: i})
	}
	return plot.Lines(path, []plot.Panel{train, test}, plot.Size{})
}

// PlotPlane draws a checkpoint's plane scan as a PNG at path: heat maps of
// log10 training and test loss over (α, β) with contour lines and one
// colour scale.
func PlotPlane(path, label string, points []Point) error {
	tr, err := PlaneGrid(points, TrainLoss)
	if err != nil {
		return fmt.Errorf("plot %s: %w", path, err)
	}
	te, err := PlaneGrid(points, TestLoss)
	if err != nil {
		return fmt.Errorf("plot %s: %w", path, err)
	}
	return plot.HeatMaps(path, []plot.HeatPanel{
		{Title: label + ": training loss", XLabel: "α", YLabel: "β", Grid: tr},
		{Title: label + ": test loss", XLabel: "α", YLabel: "β", Grid: te},
	}, plot.HeatOptions{Log: true, Contours: 10, Label: "log10 loss"})
}

// PlaneGrid arranges a plane scan's loss on its (α, β) grid. Every grid
// point must have been evaluated.
func PlaneGrid(points []Point, loss func(Metrics) float64) (plot.Grid, error) {
	var g plot.Grid
	for _, p := range points {
		if !slices.Contains(g.X, p.Alpha) {
			g.X = append(g.X, p.Alpha)
		}
		if !slices.Contains(g.Y, p.Beta) {
			g.Y = append(g.Y, p.Beta)
		}
	}
	slices.Sort(g.X)
	slices.Sort(g.Y)
	g.Z = make([][]float64, len(g.Y))
	filled := make([][]bool, len(g.Y))
	for j := range g.Z {
		g.Z[j] = make([]float64, len(g.X))
		filled[j] = make([]bool, len(g.X))
	}
	seen := 0
	for _, p := range points {
		i, _ := slices.BinarySearch(g.X, p.Alpha)
		j, _ := slices.BinarySearch(g.Y, p.Beta)
		if !filled[j][i] {
			filled[j][i] = true
			seen++
		}
		g.Z[j][i] = loss(p.Metrics)
	}
	if seen != len(g.X)*len(g.Y) {
		return plot.Grid{}, fmt.Errorf("the plane scan covers %d of its %d×%d grid points", seen, len(g.X), len(g.Y))
	}
	return g, nil
}
