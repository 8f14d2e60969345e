package table

import (
	"bufio"
	"encoding/csv"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/olekukonko/tablewriter"
	"github.com/olekukonko/tablewriter/renderer"
	"github.com/olekukonko/tablewriter/tw"
)

// missing is the text of an empty cell.
const missing = "–"

// fieldTitle is the header of a leading row column.
func fieldTitle(f string) string {
	switch f {
	case FieldArch:
		return "Arch"
	case FieldNoise:
		return "Label noise"
	}
	return "Dataset"
}

// escapeMarkdown escapes the table-cell separator.
func escapeMarkdown(s string) string {
	return strings.ReplaceAll(s, "|", `\|`)
}

// nSuffix returns the " (n=k)" suffix shown when seed counts differ.
func (g *grid) nSuffix(s stat, latex bool) string {
	if !g.mixedN || s.n == 0 {
		return ""
	}
	if latex {
		return fmt.Sprintf(" ($n{=}%d$)", s.n)
	}
	return fmt.Sprintf(" (n=%d)", s.n)
}

// diffSuffix returns the difference text of cell (ri, gi, mi), or "" when
// there is no baseline.
func (g *grid) diffSuffix(ri, gi, mi int, sp spec, latex bool) string {
	if g.diffs == nil {
		return ""
	}
	return diffText(g.diffs[ri][gi][mi], sp, latex)
}

// writeMarkdown renders g with tablewriter's Markdown renderer.
func writeMarkdown(w io.Writer, g *grid) error {
	if len(g.rows) == 0 {
		return writeEmpty(w, g, g.emptyMessage())
	}
	var header []string
	var align []tw.Align
	for _, f := range g.rowFields {
		header = append(header, fieldTitle(f))
		align = append(align, tw.AlignLeft)
	}
	header = append(header, "Method")
	align = append(align, tw.AlignLeft)
	for gi := range g.groups {
		gl := g.groupLabel(gi)
		for _, m := range g.metrics {
			sp := metricSpec(m)
			h := strings.TrimSpace(strings.Join([]string{gl, sp.label, sp.arrow()}, " "))
			header = append(header, escapeMarkdown(strings.Join(strings.Fields(h), " ")))
			align = append(align, tw.AlignRight)
		}
	}
	t := newMarkdownTable(w, align)
	t.Header(header)
	best := g.best()
	for ri, r := range g.rows {
		var cells []string
		for i, f := range g.rowFields {
			cells = append(cells, escapeMarkdown(displayValue(f, r.fields[i])))
		}
		cells = append(cells, escapeMarkdown(r.method))
		for gi := range g.groups {
			for mi, m := range g.metrics {
				s, sp := g.cells[ri][gi][mi], metricSpec(m)
				text := cellText(s, sp, "±")
				switch {
				case text == "":
					text = missing
				case best[ri][gi][mi]:
					text = "**" + text + "**"
				}
				cells = append(cells, text+g.nSuffix(s, false)+g.diffSuffix(ri, gi, mi, sp, false))
			}
		}
		if err := t.Append(cells); err != nil {
			return fmt.Errorf("markdown row %d: %w", ri, err)
		}
	}
	if err := t.Render(); err != nil {
		return fmt.Errorf("markdown: %w", err)
	}
	for _, n := range g.notes() {
		if _, err := fmt.Fprintf(w, "\n%s\n", escapeMarkdown(n)); err != nil {
			return err
		}
	}
	return nil
}

// writeEmpty writes a table without rows: a message and the notes.
// emptyMessage says why a table has no row: no run succeeded, or (with
// --select) no setting could be chosen for the runs that did.
func (g *grid) emptyMessage() string {
	if g.sel != nil && g.sel.unchosen > 0 {
		return "No row: no setting could be chosen on the validation split (see below)."
	}
	return "No successful runs."
}

func writeEmpty(w io.Writer, g *grid, msg string) error {
	if _, err := fmt.Fprintln(w, msg); err != nil {
		return err
	}
	for _, n := range g.notes() {
		if _, err := fmt.Fprintf(w, "\n%s\n", n); err != nil {
			return err
		}
	}
	return nil
}

// escapeLaTeX escapes LaTeX special characters in text.
func escapeLaTeX(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch r {
		case '\\':
			b.WriteString(`\textbackslash{}`)
		case '&', '%', '$', '#', '_', '{', '}':
			b.WriteByte('\\')
			b.WriteRune(r)
		case '~':
			b.WriteString(`\textasciitilde{}`)
		case '^':
			b.WriteString(`\textasciicircum{}`)
		case '<':
			b.WriteString(`\textless{}`)
		case '>':
			b.WriteString(`\textgreater{}`)
		case '|':
			b.WriteString(`\textbar{}`)
		case '±':
			b.WriteString(`$\pm$`)
		case 'Δ':
			b.WriteString(`$\Delta$`)
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// latexArrow returns the header arrow in math mode.
func latexArrow(sp spec) string {
	switch sp.dir {
	case up:
		return ` $\uparrow$`
	case down:
		return ` $\downarrow$`
	}
	return ""
}

// writeLaTeX renders g as a booktabs tabular. Leading row fields are
// printed only where they change, with a \midrule between their groups.
func writeLaTeX(w io.Writer, g *grid) error {
	bw := bufio.NewWriter(w)
	p := func(format string, a ...any) { fmt.Fprintf(bw, format, a...) }
	lead := len(g.rowFields) + 1
	if len(g.rows) == 0 {
		p("%% %s\n", g.emptyMessage())
		for _, n := range g.notes() {
			p("%% %s\n", escapeLaTeX(n))
		}
		return bw.Flush()
	}
	nm := len(g.metrics)
	p("%% Requires \\usepackage{booktabs}.\n")
	p("\\begin{tabular}{%s%s}\n", strings.Repeat("l", lead), strings.Repeat("c", nm*len(g.groups)))
	p("\\toprule\n")
	if len(g.groupFields) > 0 {
		cols := make([]string, 0, len(g.groups)+1)
		cols = append(cols, strings.Repeat(" &", lead-1))
		var rules []string
		for gi := range g.groups {
			start := lead + gi*nm + 1
			cols = append(cols, fmt.Sprintf(`\multicolumn{%d}{c}{%s}`, nm, escapeLaTeX(g.groupLabel(gi))))
			rules = append(rules, fmt.Sprintf(`\cmidrule(lr){%d-%d}`, start, start+nm-1))
		}
		p("%s \\\\\n", strings.TrimSpace(strings.Join(cols, " & ")))
		p("%s\n", strings.Join(rules, " "))
	}
	var head []string
	for _, f := range g.rowFields {
		head = append(head, fieldTitle(f))
	}
	head = append(head, "Method")
	for range g.groups {
		for _, m := range g.metrics {
			sp := metricSpec(m)
			head = append(head, escapeLaTeX(sp.label)+latexArrow(sp))
		}
	}
	p("%s \\\\\n\\midrule\n", strings.Join(head, " & "))
	best := g.best()
	var prev []string
	for ri, r := range g.rows {
		var cells []string
		changed := prev == nil
		for i, f := range g.rowFields {
			if prev != nil && r.fields[i] != prev[i] {
				changed = true
			}
			if changed {
				cells = append(cells, escapeLaTeX(displayValue(f, r.fields[i])))
			} else {
				cells = append(cells, "")
			}
		}
		if changed && prev != nil && len(g.rowFields) > 0 {
			p("\\midrule\n")
		}
		prev = r.fields
		cells = append(cells, escapeLaTeX(r.method))
		for gi := range g.groups {
			for mi, m := range g.metrics {
				s, sp := g.cells[ri][gi][mi], metricSpec(m)
				text := cellText(s, sp, `$\pm$`)
				switch {
				case text == "":
					text = "--"
				case best[ri][gi][mi]:
					text = `\textbf{` + text + `}`
				}
				cells = append(cells, text+g.nSuffix(s, true)+g.diffSuffix(ri, gi, mi, sp, true))
			}
		}
		p("%s \\\\\n", strings.Join(cells, " & "))
	}
	p("\\bottomrule\n\\end{tabular}\n")
	for _, n := range g.notes() {
		p("%% %s\n", escapeLaTeX(n))
	}
	return bw.Flush()
}

// writeCSV renders g as tidy rows. Values are as stored (accuracy as a
// fraction), in full precision; std is empty when n < 2. A label_noise
// column after arch names each row's label noise when it varies. With a selection
// (Options.Select), a setting column after method names each cell's chosen
// setting. With a baseline,
// diff, diff_lo, diff_hi and significant follow; they are empty for the
// baseline's rows and cells without a baseline value, and diff_lo and
// diff_hi are empty when no interval can be computed.
func writeCSV(w io.Writer, g *grid) error {
	cw := csv.NewWriter(w)
	head := []string{"method", "dataset", "arch", "metric", "mean", "std", "n"}
	ni := indexOf(g.rowFields, FieldNoise)
	if ni >= 0 {
		head = slices.Insert(head, 3, "label_noise")
	}
	if g.sel != nil {
		head = slices.Insert(head, 1, "setting")
	}
	if g.target > 0 {
		head = append(head, "reached")
	}
	if g.diffs != nil {
		head = append(head, "diff", "diff_lo", "diff_hi", "significant")
	}
	if err := cw.Write(head); err != nil {
		return err
	}
	num := func(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }
	di := indexOf(g.groupFields, FieldDataset)
	ai := indexOf(g.groupFields, FieldArch)
	for ri, r := range g.rows {
		for gi, gv := range g.groups {
			for mi, m := range g.metrics {
				s := g.cells[ri][gi][mi]
				if s.n == 0 {
					continue
				}
				std := ""
				if s.reached > 1 {
					std = num(s.std)
				}
				rec := []string{r.method, gv[di], gv[ai], m, num(s.mean), std, strconv.Itoa(s.n)}
				noise := noClean
				if ni >= 0 {
					noise = r.fields[ni]
					rec = slices.Insert(rec, 3, noise)
				}
				if g.sel != nil {
					rec = slices.Insert(rec, 1, g.sel.cellSetting(workload{r.method, gv[di], gv[ai], noise}))
				}
				if g.target > 0 {
					rec = append(rec, strconv.Itoa(s.reached))
				}
				if g.diffs != nil {
					d, cols := g.diffs[ri][gi][mi], []string{"", "", "", ""}
					switch {
					case d.ci:
						cols = []string{num(d.d), num(d.lo), num(d.hi), strconv.FormatBool(d.significant())}
					case d.has:
						cols = []string{num(d.d), "", "", "false"}
					}
					rec = append(rec, cols...)
				}
				if err := cw.Write(rec); err != nil {
					return err
				}
			}
		}
	}
	cw.Flush()
	return cw.Error()
}

// indexOf returns the index of v in s, or −1.
func indexOf(s []string, v string) int {
	for i, x := range s {
		if x == v {
			return i
		}
	}
	return -1
}

// newMarkdownTable is a Markdown table writer with the given column
// alignments and no automatic formatting or wrapping.
func newMarkdownTable(w io.Writer, align []tw.Align) *tablewriter.Table {
	return tablewriter.NewTable(w,
		tablewriter.WithRenderer(renderer.NewMarkdown()),
		tablewriter.WithHeaderAutoFormat(tw.Off),
		tablewriter.WithHeaderAutoWrap(tw.WrapNone),
		tablewriter.WithRowAutoWrap(tw.WrapNone),
		tablewriter.WithHeaderAlignmentConfig(tw.CellAlignment{PerColumn: align}),
		tablewriter.WithRowAlignmentConfig(tw.CellAlignment{PerColumn: align}),
	)
}

// writeSimpleMarkdown writes a titled Markdown table of text cells: the
// first column left-aligned, the others right-aligned.
func writeSimpleMarkdown(w io.Writer, title string, header []string, rows [][]string) error {
	if _, err := fmt.Fprintf(w, "\n%s\n\n", escapeMarkdown(title)); err != nil {
		return err
	}
	align := make([]tw.Align, len(header))
	for i := range align {
		align[i] = tw.AlignRight
	}
	align[0] = tw.AlignLeft
	t := newMarkdownTable(w, align)
	t.Header(header)
	for i, r := range rows {
		cells := make([]string, len(r))
		for j, c := range r {
			cells[j] = escapeMarkdown(c)
		}
		if err := t.Append(cells); err != nil {
			return fmt.Errorf("markdown row %d: %w", i, err)
		}
	}
	if err := t.Render(); err != nil {
		return fmt.Errorf("markdown: %w", err)
	}
	return nil
}

// writeSimpleLaTeX writes a booktabs tabular of text cells, its title as
// a comment, with a rule above the last row (a total) when there are
// several; a missing value is "--".
func writeSimpleLaTeX(w io.Writer, title string, header []string, rows [][]string) error {
	bw := bufio.NewWriter(w)
	p := func(format string, a ...any) { fmt.Fprintf(bw, format, a...) }
	esc := func(cells []string) string {
		out := make([]string, len(cells))
		for i, c := range cells {
			if c == missing {
				c = "--"
			}
			out[i] = escapeLaTeX(c)
		}
		return strings.Join(out, " & ")
	}
	p("\n%% %s\n", escapeLaTeX(title))
	p("\\begin{tabular}{l%s}\n\\toprule\n", strings.Repeat("c", len(header)-1))
	p("%s \\\\\n\\midrule\n", esc(header))
	for i, r := range rows {
		if i == len(rows)-1 && len(rows) > 1 {
			p("\\midrule\n")
		}
		p("%s \\\\\n", esc(r))
	}
	p("\\bottomrule\n\\end{tabular}\n")
	return bw.Flush()
}
