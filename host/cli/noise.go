package cli

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/optlab/optlab/host/corrupt"
	"github.com/optlab/optlab/host/data"
	"github.com/optlab/optlab/host/experiment"
	"github.com/optlab/optlab/host/grid"
)

// maxMatrixClasses is the largest number of classes whose transition
// matrix noiseSummary prints whole; for more it lists the largest flips.
const maxMatrixClasses = 20

// noiseSummaries describes, for host check, what the label noise of each
// data setting of the runs does (as grid.Check.LabelNoise found it): a
// noiseSummary for each setting with noise (a sweep of
// data.label_noise.rate or seed has several), and, among several, a line
// for the runs without (rate 0). "" when no run has label noise.
func noiseSummaries(noise []grid.NoiseEffect) string {
	var b strings.Builder
	for _, n := range noise {
		if !n.Noise.Active() {
			if len(noise) > 1 {
				b.WriteString("label noise: none for the runs with rate 0 (clean training labels)\n")
			}
			continue
		}
		b.WriteString(noiseSummary(n.Noise, n.Stats))
	}
	return b.String()
}

// noiseSummary describes, for host check, what the label noise n did (st):
// the realised flip fraction and the transition matrix (rows the clean
// label, columns the noisy one), or for many classes the largest flips.
func noiseSummary(n experiment.LabelNoise, st *data.NoiseStats) string {
	var b strings.Builder
	fmt.Fprintf(&b, "label noise: %s: %d of %d training labels flipped (%.2f%%)\n", n, st.Flipped, st.Samples, 100*st.Fraction())
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

// evalSummary says what a run is scored on besides the final clean test
// set: the best epoch's test metrics and the corrupted test sets; "" for
// neither.
func evalSummary(e experiment.Eval) string {
	var b strings.Builder
	if e.BestEpoch != "" {
		fmt.Fprintf(&b, "best epoch: the test metrics of the epoch with the best validation %s are recorded as best_* (evaluated every %d epochs)\n", e.BestEpoch, e.EveryEpochs)
	}
	if c := e.Corruptions; c.Active() {
		fams, err := corrupt.Select(c.Families)
		if err != nil {
			return b.String()
		}
		names := make([]string, len(fams))
		for i, f := range fams {
			names[i] = f.Name
		}
		fmt.Fprintf(&b, "corrupted test sets: %d families × %d severities %v = %d sets, seed %d: %s\n",
			len(fams), len(c.Severities), c.Severities, len(fams)*len(c.Severities), c.Seed, strings.Join(names, ", "))
	}
	return b.String()
}
