package plugin

import (
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
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
	bad := func(r rune) bool { return r == utf8.RuneError || (r != '\n' && r != '\t' && !unicode.IsPrint(r)) }
	if !strings.ContainsFunc(s, bad) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case !bad(r):
			b.WriteString(s[i : i+n])
		default:
			q := strconv.QuoteRune(r)
			b.WriteString(q[1 : len(q)-1])
		}
		i += n
	}
	return b.String()
}
