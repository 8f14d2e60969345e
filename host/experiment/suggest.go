package experiment

import (
	"fmt"
	"strings"

	"github.com/optlab/optlab/internal/suggest"
)

// suggestion returns "; did you mean "x"?" for the candidate closest to
// name, or " (valid <noun>: a, b, c)" when none is close enough.
func suggestion(name string, candidates []string, noun string) string {
	if best, ok := suggest.Closest(name, candidates); ok {
		return fmt.Sprintf("; did you mean %q?", best)
	}
	if len(candidates) == 0 {
		return fmt.Sprintf(" (there are no %s)", noun)
	}
	return fmt.Sprintf(" (valid %s: %s)", noun, strings.Join(candidates, ", "))
}
