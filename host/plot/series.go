package plot

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/optlab/optlab/host/curves"
)

// Series is one line of a chart: points (X[i], Y[i]) in order, and
// optionally a shaded band between Lo and Hi.
type Series struct {
	Label string
	X, Y  []float64
	// Lo and Hi, when both have len(X) values, bound a band drawn under the
	// line (mean ± std, for instance).
	Lo, Hi []float64
	// Dashed draws the line dashed.
	Dashed bool
	// Color picks the line's colour from a fixed palette: series with the
	// same Color share their colour across panels.
	Color int
	// Runs is the number of curves averaged into the series
	// (MeanOverSeeds).
	Runs int
}

// MeanOptions says how MeanOverSeeds aggregates curves.
type MeanOptions struct {
	// X is the column of the x axis: epoch (the default), step or seconds.
	// Seeds are matched by epoch; the x value of an epoch is the mean of
	// X over the seeds that measured the metric there.
	X string
	// Band adds mean ± sample standard deviation as Lo/Hi where at least
	// two seeds measured the metric.
	Band bool
}

// MeanOverSeeds groups curves by method (and arch, when the curves cover
// several archs), in the order of their first appearance, and returns one
// series per group: the metric's mean over the group's seeds at every
// epoch where at least one seed measured it. An epoch's missing cells are
// skipped, so a test metric evaluated every few epochs draws a line
// through the evaluated ones.
func MeanOverSeeds(runs []curves.Curve, metric string, opts MeanOptions) ([]Series, error) {
	if opts.X == "" {
		opts.X = curves.ColEpoch
	}
	cols := curves.Columns()
	if !slices.Contains(cols, metric) || metric == curves.ColEpoch {
		return nil, fmt.Errorf("unknown metric %q (curves have %s)", metric, strings.Join(cols[1:], ", "))
	}
	if opts.X != curves.ColEpoch && opts.X != curves.ColStep && opts.X != curves.ColSeconds {
		return nil, fmt.Errorf("x axis %q: want %s, %s or %s", opts.X, curves.ColEpoch, curves.ColStep, curves.ColSeconds)
	}
	archs := map[string]bool{}
	for _, c := range runs {
		archs[c.Arch] = true
	}
	type group struct {
		label string
		runs  []curves.Curve
	}
	var groups []*group
	byLabel := map[string]*group{}
	for _, c := range runs {
		label := c.Method
		if len(archs) > 1 && c.Arch != "" {
			label += " (" + c.Arch + ")"
		}
		g, ok := byLabel[label]
		if !ok {
			g = &group{label: label}
			byLabel[label] = g
			groups = append(groups, g)
		}
		g.runs = append(g.runs, c)
	}
	var out []Series
	for i, g := range groups {
		s := meanSeries(g.runs, metric, opts)
		if len(s.X) == 0 {
			continue
		}
		s.Label, s.Color, s.Runs = g.label, i, len(g.runs)
		out = append(out, s)
	}
	if len(out) == 0 {
		if strings.HasPrefix(metric, "test_") {
			return nil, fmt.Errorf("no curve has a value of %s: test curves are evaluated only on the epochs eval.every_epochs selects (0, the default, means none); set it, e.g. every_epochs = 1, and run again", metric)
		}
		return nil, fmt.Errorf("no curve has a value of %s", metric)
	}
	return out, nil
}

// meanSeries averages one group's curves epoch by epoch.
func meanSeries(runs []curves.Curve, metric string, opts MeanOptions) Series {
	type acc struct{ xs, ys []float64 }
	byEpoch := map[int]*acc{}
	for _, c := range runs {
		for _, r := range c.Rows {
			y, ok := r.Value(metric)
			if !ok {
				continue
			}
			x, ok := r.Value(opts.X)
			if !ok {
				continue
			}
			a := byEpoch[r.Epoch]
			if a == nil {
				a = &acc{}
				byEpoch[r.Epoch] = a
			}
			a.xs = append(a.xs, x)
			a.ys = append(a.ys, y)
		}
	}
	epochs := make([]int, 0, len(byEpoch))
	for e := range byEpoch {
		epochs = append(epochs, e)
	}
	slices.Sort(epochs)
	var s Series
	band := false
	for _, e := range epochs {
		a := byEpoch[e]
		mx, _ := MeanStd(a.xs)
		my, sd := MeanStd(a.ys)
		s.X = append(s.X, mx)
		s.Y = append(s.Y, my)
		s.Lo = append(s.Lo, my-sd)
		s.Hi = append(s.Hi, my+sd)
		band = band || len(a.ys) > 1
	}
	if !opts.Band || !band {
		s.Lo, s.Hi = nil, nil
	}
	return s
}

// MeanStd returns the mean and the sample standard deviation (n−1
// denominator; 0 for fewer than two values) of v.
func MeanStd(v []float64) (mean, std float64) {
	if len(v) == 0 {
		return math.NaN(), math.NaN()
	}
	for _, x := range v {
		mean += x
	}
	mean /= float64(len(v))
	if len(v) < 2 {
		return mean, 0
	}
	var ss float64
	for _, x := range v {
		ss += (x - mean) * (x - mean)
	}
	return mean, math.Sqrt(ss / float64(len(v)-1))
}
