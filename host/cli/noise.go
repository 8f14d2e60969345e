package cli

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/optlab/optlab/host/data"
	"github.com/optlab/optlab/host/experiment"
)

// maxMatrixClasses is the largest number of classes whose transition
// matrix noiseSummary prints whole; for more it lists the largest flips.
const maxMatrixClasses = 20

// noiseSummary describes, for host check, what the label noise n did (st):
// the realised flip fraction and the transition matrix (rows the clean
// label, columns the noisy one), or for many classes the largest flips.
func noiseSummary(n experiment.LabelNoise, st *data.NoiseStats) string {
	var b strings.Builder
	fmt.Fprintf(&b, "label noise: %s, rate %g, seed %d", n.Kind, n.Rate, n.Seed)
	if m := n.MapString(); m != "" {
		fmt.Fprintf(&b, ", map %s", m)
	}
	fmt.Fprintf(&b, ": %d of %d training labels flipped (%.2f%%)\n", st.Flipped, st.Samples, 100*st.Fraction())
	k := len(st.Transition)
	if k <= maxMatrixClasses {
		width := len(strconv.Itoa(k - 1))
		for _, row := range st.Transition {
			for _, v := range row {
				width = max(width, len(strconv.Itoa(v)))
			}
		}
		b.WriteString("  transition (rows: clean label, columns: noisy label):\n")
		fmt.Fprintf(&b, "    %*s", width, "")
		for c := range k {
			fmt.Fprintf(&b, " %*d", width, c)
		}
		b.WriteByte('\n')
		for c, row := range st.Transition {
			fmt.Fprintf(&b, "    %*d", width, c)
			for _, v := range row {
				fmt.Fprintf(&b, " %*d", width, v)
			}
			b.WriteByte('\n')
		}
		return b.String()
	}
	type flip struct{ from, to, n int }
	var flips []flip
	for c, row := range st.Transition {
		for d, v := range row {
			if c != d && v > 0 {
				flips = append(flips, flip{c, d, v})
			}
		}
	}
	slices.SortStableFunc(flips, func(a, b flip) int { return cmp.Compare(b.n, a.n) })
	fmt.Fprintf(&b, "  transition: %d×%d, %d class pairs flipped (the matrix is in each run's record)", k, k, len(flips))
	if len(flips) > 0 {
		b.WriteString("; largest:")
		for _, f := range flips[:min(len(flips), 5)] {
			fmt.Fprintf(&b, " %d→%d ×%d", f.from, f.to, f.n)
		}
	}
	b.WriteByte('\n')
	return b.String()
}
