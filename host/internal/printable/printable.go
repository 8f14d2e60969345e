// Package printable makes text from files and plugins fit for a message on
// a terminal.
package printable

import (
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Escape returns s with every rune that is not printable (control
// characters, invalid UTF-8 bytes, format characters such as U+202E)
// written as a Go escape (\x1b, \n, \u202e), but for those keep accepts
// (keep may be nil). Printable text, quotes and backslashes are kept as
// they are, so that a message quoting such text cannot drive the terminal.
func Escape(s string, keep func(rune) bool) string {
	bad := func(r rune) bool {
		return r == utf8.RuneError || (!unicode.IsPrint(r) && (keep == nil || !keep(r)))
	}
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
