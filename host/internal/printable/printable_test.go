package printable

import "testing"

func TestEscape(t *testing.T) {
	keepNL := func(r rune) bool { return r == '\n' }
	for _, c := range []struct {
		in   string
		keep func(rune) bool
		want string
	}{
		{"plain \"text\" \\ é", nil, "plain \"text\" \\ é"},
		{"a\x1b[31mb\nc", nil, `a\x1b[31mb\nc`},
		{"a\x1b[31mb\nc", keepNL, "a\\x1b[31mb\nc"},
		{"bad \xff byte", nil, `bad \xff byte`},
		{"rtl \u202e override", nil, `rtl \u202e override`},
	} {
		if got := Escape(c.in, c.keep); got != c.want {
			t.Errorf("Escape(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}
