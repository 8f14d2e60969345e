package experiment

import (
	"strconv"
	"strings"
	"unicode/utf8"
)

// BurntSushi/toml v1.6.0 records key positions internally but does not
// export them (MetaData has no position accessor), and for arrays of tables
// it keeps only the last element's position. So the lines of keys are
// recovered here by a small scanner over the source text. It runs only on
// text the TOML parser has already accepted, so it does not validate; it
// must merely never panic or loop on any input.

// keyPath is a key path. An array element is written as its own segment
// holding indexPrefix followed by the decimal index.
type keyPath []string

// indexPrefix marks an array-index segment of a keyPath.
const indexPrefix = "\x00"

// child returns a copy of p with segment s appended.
func (p keyPath) child(s string) keyPath {
	out := make(keyPath, len(p), len(p)+1)
	copy(out, p)
	return append(out, s)
}

// index returns a copy of p with array index i appended.
func (p keyPath) index(i int) keyPath { return p.child(indexPrefix + strconv.Itoa(i)) }

// String renders p the way messages show keys: "train.batch_size",
// "method[1].params.rho"; segments that are not bare keys are quoted.
func (p keyPath) String() string {
	var b strings.Builder
	for i, s := range p {
		if idx, ok := strings.CutPrefix(s, indexPrefix); ok {
			b.WriteString("[" + idx + "]")
			continue
		}
		if i > 0 {
			b.WriteByte('.')
		}
		if isBareKey(s) {
			b.WriteString(s)
		} else {
			b.WriteString(strconv.Quote(s))
		}
	}
	return b.String()
}

// isBareKey reports whether s can be written unquoted as a TOML key.
func isBareKey(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !isBareByte(s[i]) {
			return false
		}
	}
	return true
}

func isBareByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-'
}

// keyLines returns the 1-based line on which every key of src is first
// written, keyed by keyPath.String(). Tables opened by a header map to the
// header's line, elements of arrays of tables to their [[header]] line, and
// implicit tables (the "a" of "a.b = 1") to the first line that names them.
func keyLines(src string) map[string]int {
	s := &scanner{src: src, line: 1, lines: map[string]int{}, aot: map[string]int{}}
	s.document()
	return s.lines
}

type scanner struct {
	src   string
	pos   int
	line  int
	lines map[string]int
	aot   map[string]int // number of [[elements]] seen per array-of-tables path
}

func (s *scanner) eof() bool { return s.pos >= len(s.src) }

func (s *scanner) peek() byte {
	if s.eof() {
		return 0
	}
	return s.src[s.pos]
}

func (s *scanner) hasPrefix(p string) bool { return strings.HasPrefix(s.src[s.pos:], p) }

// advance consumes n bytes, counting newlines.
func (s *scanner) advance(n int) {
	for ; n > 0 && !s.eof(); n-- {
		if s.src[s.pos] == '\n' {
			s.line++
		}
		s.pos++
	}
}

func (s *scanner) record(p keyPath, line int) {
	k := p.String()
	if _, ok := s.lines[k]; !ok {
		s.lines[k] = line
	}
}

// skipSpace skips blanks, and also newlines and comments if multiline.
func (s *scanner) skipSpace(multiline bool) {
	for !s.eof() {
		switch c := s.peek(); {
		case c == ' ' || c == '\t' || c == '\r':
			s.advance(1)
		case c == '\n' && multiline:
			s.advance(1)
		case c == '#' && multiline:
			s.skipComment()
		default:
			return
		}
	}
}

func (s *scanner) skipComment() {
	for !s.eof() && s.peek() != '\n' {
		s.advance(1)
	}
}

// document scans the whole input.
func (s *scanner) document() {
	var table keyPath
	for !s.eof() {
		start := s.pos
		s.skipSpace(true)
		switch {
		case s.eof():
		case s.peek() == '[':
			table = s.header()
		default:
			s.keyValue(table)
		}
		// Rest of the line: blanks and a comment. Anything else is garbage
		// the parser would have rejected; skip it.
		s.skipSpace(false)
		if s.peek() == '#' {
			s.skipComment()
		}
		if s.pos == start {
			s.advance(1)
		}
	}
}

// header scans [a.b] or [[a.b]] and returns the table it opens.
func (s *scanner) header() keyPath {
	line := s.line
	array := s.hasPrefix("[[")
	if array {
		s.advance(2)
	} else {
		s.advance(1)
	}
	keys := s.dottedKey()
	s.skipSpace(false)
	if array && s.hasPrefix("]]") {
		s.advance(2)
	} else if s.peek() == ']' {
		s.advance(1)
	}
	if len(keys) == 0 {
		return nil
	}
	var p keyPath
	for i, k := range keys {
		p = p.child(k)
		s.record(p, line)
		if array && i == len(keys)-1 {
			n := s.aot[p.String()]
			s.aot[p.String()] = n + 1
			p = p.index(n)
			s.record(p, line)
			break
		}
		if n, ok := s.aot[p.String()]; ok && n > 0 {
			p = p.index(n - 1)
		}
	}
	return p
}

// keyValue scans "a.b = value" relative to table.
func (s *scanner) keyValue(table keyPath) {
	line := s.line
	keys := s.dottedKey()
	if len(keys) == 0 {
		return
	}
	p := table
	for _, k := range keys {
		p = p.child(k)
		s.record(p, line)
	}
	s.skipSpace(false)
	if s.peek() != '=' {
		return
	}
	s.advance(1)
	s.skipSpace(false)
	s.value(p)
}

// dottedKey scans a key such as a."b c".'d' and returns its segments.
func (s *scanner) dottedKey() []string {
	var keys []string
	for {
		s.skipSpace(false)
		k, ok := s.simpleKey()
		if !ok {
			return keys
		}
		keys = append(keys, k)
		s.skipSpace(false)
		if s.peek() != '.' {
			return keys
		}
		s.advance(1)
	}
}

// simpleKey scans one bare or quoted key.
func (s *scanner) simpleKey() (string, bool) {
	switch s.peek() {
	case '"':
		raw := s.quoted('"')
		return unescapeBasic(raw), true
	case '\'':
		return s.quoted('\''), true
	}
	start := s.pos
	for !s.eof() && isBareByte(s.peek()) {
		s.advance(1)
	}
	return s.src[start:s.pos], s.pos > start
}

// quoted scans a single-line string delimited by q and returns its raw
// contents (escapes are kept for basic strings).
func (s *scanner) quoted(q byte) string {
	s.advance(1)
	start := s.pos
	for !s.eof() {
		c := s.peek()
		switch {
		case c == '\\' && q == '"':
			s.advance(2)
			continue
		case c == q:
			raw := s.src[start:s.pos]
			s.advance(1)
			return raw
		case c == '\n':
			return s.src[start:s.pos]
		}
		s.advance(1)
	}
	return s.src[start:]
}

// multiline scans a """ or ”' string.
func (s *scanner) multiline(delim string) {
	s.advance(3)
	for !s.eof() {
		if delim == `"""` && s.peek() == '\\' {
			s.advance(2)
			continue
		}
		if s.hasPrefix(delim) {
			s.advance(3)
			// Up to two quotes may directly precede the closing delimiter.
			for i := 0; i < 2 && s.peek() == delim[0]; i++ {
				s.advance(1)
			}
			return
		}
		s.advance(1)
	}
}

// value scans the value of key p.
func (s *scanner) value(p keyPath) {
	switch {
	case s.hasPrefix(`"""`):
		s.multiline(`"""`)
	case s.hasPrefix(`'''`):
		s.multiline(`'''`)
	case s.peek() == '"' || s.peek() == '\'':
		s.quoted(s.peek())
	case s.peek() == '[':
		s.array(p)
	case s.peek() == '{':
		s.inlineTable(p)
	default:
		for !s.eof() && !strings.ContainsRune(",]}\n#", rune(s.peek())) {
			s.advance(1)
		}
	}
}

// array scans [v, v, ...]; elements are indexed under p.
func (s *scanner) array(p keyPath) {
	s.advance(1)
	for i := 0; !s.eof(); {
		s.skipSpace(true)
		switch s.peek() {
		case ']':
			s.advance(1)
			return
		case ',':
			s.advance(1)
			continue
		case 0:
			return
		}
		start := s.pos
		line := s.line
		s.record(p.index(i), line)
		s.value(p.index(i))
		i++
		if s.pos == start {
			s.advance(1)
		}
	}
}

// inlineTable scans { k = v, ... } (newlines allowed, as in TOML 1.1).
func (s *scanner) inlineTable(p keyPath) {
	s.advance(1)
	for !s.eof() {
		s.skipSpace(true)
		switch s.peek() {
		case '}':
			s.advance(1)
			return
		case ',':
			s.advance(1)
			continue
		case 0:
			return
		}
		start := s.pos
		s.keyValue(p)
		if s.pos == start {
			s.advance(1)
		}
	}
}

// unescapeBasic decodes the escapes of a TOML basic string; malformed
// escapes are kept verbatim (the parser has rejected them already).
func unescapeBasic(raw string) string {
	if !strings.Contains(raw, `\`) {
		return raw
	}
	var b strings.Builder
	for i := 0; i < len(raw); i++ {
		c := raw[i]
		if c != '\\' || i+1 >= len(raw) {
			b.WriteByte(c)
			continue
		}
		i++
		switch raw[i] {
		case 'b':
			b.WriteByte('\b')
		case 't':
			b.WriteByte('\t')
		case 'n':
			b.WriteByte('\n')
		case 'f':
			b.WriteByte('\f')
		case 'r':
			b.WriteByte('\r')
		case 'e':
			b.WriteByte(0x1b)
		case '"':
			b.WriteByte('"')
		case '\\':
			b.WriteByte('\\')
		case 'x', 'u', 'U':
			n := map[byte]int{'x': 2, 'u': 4, 'U': 8}[raw[i]]
			if i+n < len(raw) {
				if r, err := strconv.ParseUint(raw[i+1:i+1+n], 16, 32); err == nil && utf8.ValidRune(rune(r)) {
					b.WriteRune(rune(r))
					i += n
					continue
				}
			}
			b.WriteByte('\\')
			b.WriteByte(raw[i])
		default:
			b.WriteByte('\\')
			b.WriteByte(raw[i])
		}
	}
	return b.String()
}
