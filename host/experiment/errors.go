package experiment

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"

	esc "github.com/optlab/optlab/host/internal/printable"
)

// Error is one problem found in an experiment file. It prints as
// "file:line: message", or "file: message" when the line is unknown (for
// example for a missing required key, or for an Experiment built in code).
// The message is one line, except that a TOML syntax error is followed by
// the lines around it with a caret under the column (and a plugin's own
// error, which grid.Prepare reports as an Error of the method's line, is
// as the plugin wrote it). Text quoted from the
// file is escaped, so that no message holds control characters or bytes
// that are not UTF-8.
type Error struct {
	// File is the name the experiment was loaded under (Experiment.File).
	File string
	// Line is the 1-based line of the offending key, or 0 if unknown.
	Line int
	// Col is the 1-based byte column on Line of a syntax error or of a
	// byte that no TOML file may contain, or 0.
	Col int
	// Key is the dotted key the problem is about (e.g. "train.batch_size",
	// "method[1].params.rho"); it may be empty for file-level problems.
	Key string
	// Set is the --set override (KEY=VALUE) the offending value came from,
	// or "" for a value written in the file. An error with a Set has no
	// Line.
	Set string
	// Msg is the human-readable message; it names the key itself.
	Msg string
	// Err is the underlying error, if any (e.g. a toml.ParseError).
	Err error
}

// Error implements error.
func (e *Error) Error() string {
	var b strings.Builder
	if e.File != "" {
		b.WriteString(e.File)
		if e.Line > 0 && e.Set == "" {
			fmt.Fprintf(&b, ":%d", e.Line)
		}
		b.WriteString(": ")
	} else if e.Line > 0 {
		fmt.Fprintf(&b, "line %d: ", e.Line)
	}
	if e.Set != "" {
		b.WriteString("--set " + printable(e.Set) + ": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

// Unwrap returns the underlying error, if any.
func (e *Error) Unwrap() error { return e.Err }

// ErrorList is a list of problems, printed one per line. Parse and Validate
// return an ErrorList (sorted by line; problems without a line come first)
// so that a user sees every mistake in one go; so do ValidateParams and
// ValidateOwnsUpdate, whose lists grid.Prepare merges with Validate's.
type ErrorList []*Error

// Error implements error.
func (l ErrorList) Error() string {
	parts := make([]string, len(l))
	for i, e := range l {
		parts[i] = e.Error()
	}
	return strings.Join(parts, "\n")
}

// Unwrap returns the individual errors, for errors.Is and errors.As.
func (l ErrorList) Unwrap() []error {
	out := make([]error, len(l))
	for i, e := range l {
		out[i] = e
	}
	return out
}

// Sort sorts l by line, keeping the order of problems on one line;
// problems without a line come first. It is the order of the lists that
// Parse and Validate return, and of a merged list of several checks.
func (l ErrorList) Sort() {
	slices.SortStableFunc(l, func(a, b *Error) int { return cmp.Compare(a.Line, b.Line) })
}

// errs collects problems for one file.
type errs struct {
	file string
	list ErrorList
	// sets maps the keys that --set overrides set to the override (see
	// origin); a problem about such a key cites the override.
	sets map[string]string
	// names are the names of the file's methods by index, for the
	// labels of the problems about their keys (see message); nil when
	// they are not known.
	names []string
}

// add records a problem at line (0 = unknown) about key.
func (c *errs) add(line int, key, format string, args ...any) {
	e := &Error{File: c.file, Line: line, Key: key, Msg: c.message(format, args...)}
	if e.Set = origin(c.sets, key); e.Set == "" && line == 0 {
		// A key the file does not have (no line) that an override made
		// by setting a key below it: "--set nonexistent.key=1".
		e.Set = descendantOrigin(c.sets, key)
	}
	if e.Set != "" {
		e.Line = 0
	}
	c.list = append(c.list, e)
}

// err returns the collected problems sorted by line, or nil if there are none.
func (c *errs) err() error {
	if len(c.list) == 0 {
		return nil
	}
	c.list.Sort()
	return c.list
}

// message formats a problem's message (see printable). Messages are
// written with full keys ("method[1].optimizer.lr must be > 0"); one
// about a method's keys is shown under the method's name, with its keys
// relative to the method: `method "Adam": optimizer.lr must be > 0`, as
// ValidateParams and the plugins' problems name a method. A method whose
// name cannot label it (none, or one that another method has too) keeps
// its full keys.
func (c *errs) message(format string, args ...any) string {
	msg := printable(fmt.Sprintf(format, args...))
	for i := range c.names {
		key := fmt.Sprintf("method[%d].", i)
		if !strings.Contains(msg, key) {
			continue
		}
		if label, ok := methodLabel(c.names, i); ok {
			msg = label + ": " + strings.ReplaceAll(msg, key, "")
		}
		break
	}
	return msg
}

// methodLabel returns `method "<name>"`, the label of method i in
// messages, and whether its name can be one: non-empty, valid, and
// distinct from the other methods' names, ignoring case.
func methodLabel(names []string, i int) (string, bool) {
	name := names[i]
	if name == "" || !validMethodName(name) {
		return "", false
	}
	for j, other := range names {
		if j != i && strings.EqualFold(other, name) {
			return "", false
		}
	}
	return "method " + strconv.Quote(name), true
}

// methodNames returns the names of e's methods, by index (see
// errs.names).
func methodNames(e *Experiment) []string {
	out := make([]string, len(e.Methods))
	for i, m := range e.Methods {
		out[i] = m.Name
	}
	return out
}

// printable returns s with every non-printable rune (control characters,
// newlines, invalid UTF-8 bytes, format characters such as U+202E) written
// as a Go escape (\x1b, \n, \u202e), so that a message quoting file content
// stays on one line and cannot drive the terminal. Printable text, quotes
// and backslashes are kept as they are.
func printable(s string) string { return esc.Escape(s, nil) }
