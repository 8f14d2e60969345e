package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/optlab/optlab/host/results"
	"github.com/optlab/optlab/host/table"
)

// tableUsage is the synopsis of host table.
const tableUsage = `usage: table FILE.jsonl [FILE2.jsonl ...] [--by dataset,arch,noise] [--metrics acc,nll,ece] [--format markdown|csv|latex] [--time] [--corruptions] [--baseline METHOD] [--select val_acc] [--target ACC] [--where KEY=VALUE …]

Renders mean ± std over seeds per method from results files. Several files
are merged (duplicates collapse; mixed configurations are refused). Flags
may come before or after the files.

--metrics takes metric keys (acc, nll, brier, ece, aac, auroc, auroc_ood,
temperature, cal_*, *_loss, seconds_per_epoch, wall_seconds, or any key in
the records, such as best_acc, best_epoch, corr_acc or corr.contrast.3.acc);
an unknown key, or one that no successful run has, is an error.

Runs trained with different label noise (data.label_noise.rate and kind)
are never pooled: each gets its own row, with a "Label noise" column
("0.2 symmetric"; 0 = clean labels), or its own columns with --by noise.

--corruptions shows the corrupted test sets instead of --metrics: a
summary per row (ACC, corrupted ACC = corr_acc, retained = corr_acc / acc
and, only with --baseline, mCE and relative mCE against the baseline at
the same dataset, arch and label noise, all in %), then per row a table of
corrupted ACC by family (rows) and severity (columns, and mean). CSV writes
it all as tidy rows. Records without corr.F.S.acc keys are an error.

--where KEY=VALUE keeps only the records whose configuration has KEY =
VALUE (numbers compare by value; a key a record lacks has its default, so
data.label_noise.rate=0 keeps the clean-label runs) or whose method (the
[[method]] name), arch, dataset, plugin or seed is VALUE; VALUE may list
alternatives as A|B ("method=SAM|SWA-SAM"). Repeat it for several
conditions (all must hold); no matching record is an error.

--baseline METHOD adds to every other row's cells the difference of means
to METHOD in the same column group and at the same label noise, with a
95 % Welch t interval over seeds, as "Δ +0.25 [0.01, 0.49]*" (* = the
interval excludes 0; no interval with fewer than 2 seeds on a side or zero
variance on both; no Δ, and a note, where METHOD has no run). Bold then
marks the best cell only if it is significantly better than METHOD. CSV
gets diff, diff_lo, diff_hi and significant columns.

--target ACC (a fraction, 0.9, or a percentage, 90%) adds time-to-target
columns, AlgoPerf style: for each run, the first evaluation during
training (eval.every_epochs; on the validation split when the experiment
holds one out) whose accuracy reaches ACC, in training seconds
(evaluations not counted: ttt_seconds) and gradient evaluations (millions
of samples of forward-backward passes: ttt_grad_evals); ttt_epochs, the
epochs, on request. A cell is the mean over the seeds that reached it, with
k/n when not all did, or "not reached". With --metrics, name the columns
(acc,ttt_seconds,ttt_grad_evals,grad_evals). Runs that did not evaluate
during training have no value.

--select VAL_METRIC (val_acc, val_nll, val_brier, val_ece, val_aac or
val_auroc) picks, for each method of a sweep and each dataset × arch, the
setting whose runs all succeeded with the best mean of that validation
metric over seeds (label-noise settings never compete), shows that
setting's test metrics as the method's row and names the chosen values
under the table (CSV: a setting column). The choice is never made on test
data: a test metric is refused, and so are runs trained without a
validation split (data.validation = 0).
`

// tableCmd implements host table: the result tables of results files
// (host/table renders them). args are the arguments after the command name:
// results files and flags, in any order (a "--" ends the flags). The table
// is written to w; -h prints the usage to w.
func tableCmd(w io.Writer, args []string) error {
	fs := flag.NewFlagSet("table", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	by := fs.String("by", table.FieldDataset, "comma-separated column grouping fields: dataset, arch, noise, or none")
	metricList := fs.String("metrics", "", "comma-separated metric keys (default: acc,nll,ece as present; all for csv)")
	format := fs.String("format", string(table.Markdown), "output format: markdown, csv or latex")
	timeTable := fs.Bool("time", false, "render the training-time table (seconds per epoch per method × arch)")
	baseline := fs.String("baseline", "", "method to compare every other row with (difference and 95 % Welch t interval)")
	sel := fs.String("select", "", "per method, keep the setting of a sweep with the best mean of this validation metric (val_acc, val_nll, …)")
	target := fs.String("target", "", "target accuracy for the time-to-target columns: a fraction (0.9) or a percentage (90%)")
	corruptions := fs.Bool("corruptions", false, "show accuracy on corrupted test sets: summary (with mCE given --baseline) and family × severity tables")
	var where results.WhereFlag
	fs.Var(&where, "where", "keep only the records with KEY=VALUE (a configuration key such as data.label_noise.rate, or method, arch, dataset, plugin, seed); repeatable")

	var files []string
	for {
		err := fs.Parse(args)
		if errors.Is(err, flag.ErrHelp) {
			_, werr := io.WriteString(w, tableUsage)
			return werr
		}
		if err != nil {
			return fmt.Errorf("table: %w", err)
		}
		rest := fs.Args()
		if len(rest) == 0 {
			break
		}
		if consumed := len(args) - len(rest); consumed > 0 && args[consumed-1] == "--" {
			files = append(files, rest...)
			break
		}
		files = append(files, rest[0])
		args = rest[1:]
	}
	if len(files) == 0 {
		//lint:ignore ST1005 the message is followed by the command's usage, on its own lines
		return errors.New("table: no results files given\n" + tableUsage)
	}
	acc, err := parseTarget(*target)
	if err != nil {
		return fmt.Errorf("table: %w", err)
	}
	opts := table.Options{By: splitList(*by), Metrics: splitList(*metricList), Format: table.Format(*format), Baseline: *baseline, Select: *sel,
		Corruptions: *corruptions, Target: acc}
	recs, err := results.Read(files...)
	if err == nil {
		recs, err = results.Filter(recs, where)
	}
	if err != nil {
		return fmt.Errorf("table: %w", err)
	}
	if *timeTable {
		if *corruptions {
			return errors.New("table: --time and --corruptions are different tables: give one of them")
		}
		return table.RenderTime(w, recs, opts)
	}
	return table.Render(w, recs, opts)
}

// parseTarget parses --target: "" (none), a fraction in (0, 1] or a
// percentage in (0, 100] followed by "%".
func parseTarget(s string) (float64, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return 0, nil
	}
	num, pct := strings.CutSuffix(s, "%")
	v, err := strconv.ParseFloat(strings.TrimSpace(num), 64)
	if err == nil && pct {
		v /= 100
	}
	if err != nil || !(v > 0 && v <= 1) {
		return 0, fmt.Errorf("--target %q: want an accuracy, a fraction in (0, 1] (0.9) or a percentage (90%%)", s)
	}
	return v, nil
}

// splitList splits a comma-separated flag value, dropping empty items.
func splitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}
