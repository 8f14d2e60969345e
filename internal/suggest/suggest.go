// Package suggest finds the likely intended word for a mistyped one, for
// "did you mean" hints in error messages.
package suggest

import (
	"fmt"
	"strings"
)

// Closest returns the candidate with the smallest edit distance to name
// (ignoring case), if it is close enough to be a plausible typo: at most
// max(2, len/3) edits, and fewer edits than the longer string has runes.
// Ties go to the earlier candidate.
func Closest(name string, candidates []string) (string, bool) {
	best, bestD := "", -1
	for _, c := range candidates {
		d := EditDistance(strings.ToLower(name), strings.ToLower(c))
		if bestD < 0 || d < bestD {
			best, bestD = c, d
		}
	}
	if bestD < 0 {
		return "", false
	}
	n := max(len([]rune(name)), len([]rune(best)))
	limit := max(2, n/3)
	return best, bestD <= limit && bestD < n
}

// DidYouMean returns `; did you mean "x"?` for the closest candidate when
// there is a plausible one (see Closest), else "".
func DidYouMean(name string, candidates []string) string {
	if best, ok := Closest(name, candidates); ok && name != "" {
		return fmt.Sprintf("; did you mean %q?", best)
	}
	return ""
}

// EditDistance is the Levenshtein distance between a and b, in runes.
func EditDistance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(rb)]
}
