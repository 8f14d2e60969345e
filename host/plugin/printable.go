package plugin

import (
	"fmt"
	"unicode/utf8"

	esc "github.com/optlab/optlab/host/internal/printable"
)

// maxEchoed bounds what a message quotes of a plugin's own output (a line
// it printed before the handshake, its last stderr lines).
const maxEchoed = 4 << 10

// printable returns text that a plugin wrote, fit for a message on a
// terminal: every rune that is not printable (terminal escapes such as
// ESC, carriage returns, invalid UTF-8 bytes, format characters such as
// U+202E) written as a Go escape (\x1b, \r, \u202e), newlines and tabs
// kept, and cut to at most max bytes, saying how much was left out.
func printable(s string, max int) string {
	if len(s) > max {
		cut := max
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = fmt.Sprintf("%s… (%d bytes more)", s[:cut], len(s)-cut)
	}
	return esc.Escape(s, func(r rune) bool { return r == '\n' || r == '\t' })
}
