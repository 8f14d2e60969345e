package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"

	"github.com/optlab/optlab/host/curves"
	"github.com/optlab/optlab/host/plot"
	"github.com/optlab/optlab/host/results"
	"github.com/optlab/optlab/host/table"
)

// plotUsage is the synopsis of host plot.
const plotUsage = `usage: host plot results/<experiment> [--metric test_acc[,train_loss…]] [--x epoch|step|seconds] [--band=false] [--out FILE.png]
       host plot results/<experiment> | FILE.jsonl… --corruptions [--where KEY=VALUE …] [--band=false] [--out FILE.png]

--corruptions plots test accuracy against corruption severity from the
records (runs.jsonl and shards): 0 is the clean test set, S the mean over
the corruption families of corr.F.S.acc; one line per method (and label
noise, dataset or arch where they vary), mean ± std over seeds as a band.
Default output: <dir>/corruptions.png`

// plotCmd implements host plot: the training curves of an experiment's
// runs (results/<experiment>/curves/*.csv), averaged over seeds, one line
// per method with a ± std band, as a PNG (one panel per metric).
func plotCmd(_ context.Context, args []string, stdout, _ io.Writer) error {
	fs := flag.NewFlagSet("plot", flag.ContinueOnError)
	metric := fs.String("metric", curves.ColEvalAcc, "curve column(s) to plot, comma-separated: "+strings.Join(curves.Columns()[1:], ", "))
	x := fs.String("x", curves.ColEpoch, "x axis: epoch, step or seconds")
	band := fs.Bool("band", true, "shade mean ± std over seeds")
	out := fs.String("out", "", "PNG file (default <dir>/<metric>.png)")
	title := fs.String("title", "", "figure title prefix (default: the experiment folder's name)")
	corruptions := fs.Bool("corruptions", false, "plot test accuracy against corruption severity (0 = clean) from the records, one line per method")
	var where results.WhereFlag
	fs.Var(&where, "where", "with --corruptions: keep only the records with KEY=VALUE (as host table --where); repeatable")
	pos, err := parseInterleaved(fs, args, stdout)
	if err != nil {
		return err
	}
	if *corruptions {
		return plotCorruptions(stdout, pos, plotOptions{band: *band, out: *out, title: *title, where: where})
	}
	if len(pos) != 1 {
		return errors.New(plotUsage)
	}
	dir := filepath.Clean(pos[0])
	runs, err := curves.ReadDir(dir)
	if err != nil {
		return err
	}
	metrics := strings.Split(*metric, ",")
	name := *title
	if name == "" {
		name = filepath.Base(dir)
		if name == results.CurvesDir {
			name = filepath.Base(filepath.Dir(dir))
		}
	}
	var panels []plot.Panel
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "%s: %d runs\n\nmetric\tmethod\tseeds\tlast %s\tmean\t± std\n", name, len(runs), *x)
	for _, m := range metrics {
		m = strings.TrimSpace(m)
		series, err := plot.MeanOverSeeds(runs, m, plot.MeanOptions{X: *x, Band: *band})
		if err != nil {
			return err
		}
		pn := plot.Panel{Title: name + ": " + m, XLabel: *x, YLabel: m, Series: series}
		if strings.HasSuffix(m, "_acc") {
			pn.Legend = plot.LegendBottomRight
		}
		panels = append(panels, pn)
		for _, s := range series {
			last := len(s.X) - 1
			std := 0.0
			if s.Hi != nil {
				std = s.Hi[last] - s.Y[last]
			}
			fmt.Fprintf(tw, "%s\t%s\t%d\t%g\t%.4g\t%.2g\n", m, s.Label, s.Runs, s.X[last], s.Y[last], std)
		}
	}
	if *out == "" {
		*out = filepath.Join(dir, strings.Join(metrics, "_")+".png")
	}
	if err := plot.Lines(*out, panels, plot.Size{}); err != nil {
		return err
	}
	_ = tw.Flush()
	fmt.Fprintf(stdout, "\nwrote %s\n", *out)
	return nil
}

// plotOptions are the flags of host plot --corruptions.
type plotOptions struct {
	band       bool
	out, title string
	where      []results.Where
}

// plotCorruptions implements host plot --corruptions: test accuracy
// against corruption severity (table.SeverityCurves) of the records in
// pos (an experiment's results folder or records files), as a PNG.
func plotCorruptions(stdout io.Writer, pos []string, o plotOptions) error {
	if len(pos) == 0 {
		return errors.New(plotUsage)
	}
	var files []string
	for _, p := range pos {
		if st, err := os.Stat(p); err == nil && st.IsDir() {
			fs, err := results.Layout{Dir: p}.RecordFiles()
			if err != nil {
				return err
			}
			if len(fs) == 0 {
				return fmt.Errorf("plot: no records files (*.jsonl) in %s", p)
			}
			files = append(files, fs...)
			continue
		}
		files = append(files, p)
	}
	recs, err := results.Read(files...)
	if err == nil {
		recs, err = results.Filter(recs, o.where)
	}
	if err != nil {
		return fmt.Errorf("plot: %w", err)
	}
	curves, err := table.SeverityCurves(recs, table.Options{})
	if err != nil {
		return fmt.Errorf("plot: %w", err)
	}
	dir := filepath.Clean(pos[0])
	if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		dir = filepath.Dir(dir)
	}
	name := o.title
	if name == "" {
		name = filepath.Base(dir)
	}
	if o.out == "" {
		o.out = filepath.Join(dir, "corruptions.png")
	}
	pn := plot.Panel{Title: name + ": corrupted test accuracy", XLabel: "severity (0 = clean)", YLabel: "ACC (%)", Legend: plot.LegendBottomLeft}
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "%s: %d records\n\nmethod\tseeds\tACC %% by severity (0 = clean)\n", name, len(recs))
	for i, c := range curves {
		s := plot.Series{Label: c.Label, Color: i, Runs: c.Runs}
		var pts []string
		for j, sev := range c.Severity {
			m, sd := 100*c.Mean[j], 100*c.Std[j]
			if math.IsNaN(sd) {
				sd = 0
			}
			s.X = append(s.X, float64(sev))
			s.Y = append(s.Y, m)
			s.Lo = append(s.Lo, m-sd)
			s.Hi = append(s.Hi, m+sd)
			pts = append(pts, fmt.Sprintf("%d: %.2f", sev, m))
		}
		if !o.band || c.Runs < 2 {
			s.Lo, s.Hi = nil, nil
		}
		pn.Series = append(pn.Series, s)
		fmt.Fprintf(tw, "%s\t%d\t%s\n", c.Label, c.Runs, strings.Join(pts, ", "))
	}
	if err := plot.Lines(o.out, []plot.Panel{pn}, plot.Size{}); err != nil {
		return err
	}
	_ = tw.Flush()
	fmt.Fprintf(stdout, "\nwrote %s\n", o.out)
	return nil
}
