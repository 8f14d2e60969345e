package plugin

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"
)

// stderrLines is how many lines of a plugin's output a Client keeps for
// crash reports.
const stderrLines = 50

// maxLineBytes caps one kept line (a JSON log line with a stack fits).
const maxLineBytes = 16 << 10

// ring keeps the last lines written to it by several writers (each with its
// own partial-line buffer) and lets a reader wait for a line to arrive.
type ring struct {
	mu      sync.Mutex
	lines   []string
	next    int
	full    bool
	changed chan struct{} // closed and replaced on every new line
}

func newRing(n int) *ring {
	return &ring{lines: make([]string, n), changed: make(chan struct{})}
}

func (r *ring) add(line string) {
	if len(line) > maxLineBytes {
		line = line[:maxLineBytes] + "…"
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lines[r.next] = line
	r.next = (r.next + 1) % len(r.lines)
	if r.next == 0 {
		r.full = true
	}
	close(r.changed)
	r.changed = make(chan struct{})
}

// snapshot returns the kept lines, oldest first.
func (r *ring) snapshot() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.full {
		return append([]string(nil), r.lines[:r.next]...)
	}
	return append(append([]string(nil), r.lines[r.next:]...), r.lines[:r.next]...)
}

// waitFor waits up to d for a kept line that contains substr.
func (r *ring) waitFor(substr string, d time.Duration) bool {
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	for {
		r.mu.Lock()
		ch := r.changed
		r.mu.Unlock()
		for _, l := range r.snapshot() {
			if strings.Contains(l, substr) {
				return true
			}
		}
		select {
		case <-ch:
		case <-deadline.C:
			return false
		}
	}
}

// writer returns an io.Writer that splits what it gets into lines for r.
func (r *ring) writer() *ringWriter { return &ringWriter{r: r} }

// ringWriter is one source of lines for a ring.
type ringWriter struct {
	r       *ring
	mu      sync.Mutex
	partial []byte
}

// Write implements io.Writer.
func (w *ringWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	rest := p
	for {
		i := bytes.IndexByte(rest, '\n')
		if i < 0 {
			if len(w.partial) < maxLineBytes {
				w.partial = append(w.partial, rest...)
			}
			return len(p), nil
		}
		w.partial = append(w.partial, rest[:i]...)
		w.r.add(strings.TrimRight(string(w.partial), "\r"))
		w.partial = w.partial[:0]
		rest = rest[i+1:]
	}
}

// tail renders the kept lines for an error message, indented; go-plugin
// JSON log lines become "[LEVEL] message key=value", with multi-line values
// (stacks) on lines of their own; what the plugin wrote is made printable
// (terminal escapes written as Go escapes, each line bounded).
func (r *ring) tail() string {
	lines := r.snapshot()
	if len(lines) == 0 {
		return "  (none)"
	}
	var b strings.Builder
	for i, l := range lines {
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString("  ")
		b.WriteString(strings.ReplaceAll(printable(renderLine(l), maxEchoed), "\n", "\n  "))
	}
	return b.String()
}

// renderLine turns an hclog JSON line into text; other lines are kept.
func renderLine(line string) string {
	if !strings.HasPrefix(line, "{") {
		return line
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(line), &m); err != nil {
		return line
	}
	level, _ := m["@level"].(string)
	msg, _ := m["@message"].(string)
	for _, k := range []string{"@level", "@message", "@timestamp", "@module", "@caller"} {
		delete(m, k)
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	fmt.Fprintf(&b, "[%s] %s", strings.ToUpper(level), msg)
	var blocks []string
	for _, k := range keys {
		v := fmt.Sprint(m[k])
		if strings.Contains(v, "\n") {
			blocks = append(blocks, k+":\n  "+strings.ReplaceAll(strings.TrimRight(v, "\n"), "\n", "\n  "))
			continue
		}
		fmt.Fprintf(&b, " %s=%s", k, v)
	}
	for _, bl := range blocks {
		b.WriteByte('\n')
		b.WriteString(bl)
	}
	return b.String()
}
