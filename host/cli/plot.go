package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"text/tabwriter"

	"github.com/optlab/optlab/host/curves"
	"github.com/optlab/optlab/host/plot"
	"github.com/optlab/optlab/host/results"
)

// plotUsage is the synopsis of host plot.
const plotUsage = "usage: host plot results/<experiment> [--metric test_acc[,train_loss…]] [--x epoch|step|seconds] [--band=false] [--out FILE.png]"

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
	pos, err := parseInterleaved(fs, args, stdout)
	if err != nil {
		return err
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
