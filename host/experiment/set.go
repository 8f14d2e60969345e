package experiment

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"

	"github.com/BurntSushi/toml"
)

// Overrides (host run/check --set KEY=VALUE) change keys of an experiment
// file without editing it. KEY is a TOML dotted key: "train.epochs",
// "train.optimizer.lr", "data.validation"; a method's keys are addressed
// by its name, "method.SAM.params.rho" ("method.'SAM big'.params.rho" for
// a name that is not a bare key). VALUE is a TOML value ("3", "0.1",
// "[0.02, 0.05]", "true", "\"cpu\""); a value that is not TOML and does
// not start with a bracket or a quote is taken as a string, so that
// "train.device=cpu" works. A table value is merged into the table it
// names. The overridden file is then decoded and validated exactly as if
// it had been written so; messages about an overridden key cite the
// override instead of a line.

// applySets merges the overrides into the decoded tree of a file. It
// returns, for every key an override set (keyPath strings, methods by
// index: "method[1].params.rho"), the override's text, and deletes the
// lines of those keys from lines. Malformed overrides and methods that do
// not exist are reported into c.
func (c *checker) applySets(tree map[string]any, sets []string, lines map[string]int) map[string]string {
	if len(sets) == 0 {
		return nil
	}
	origins := map[string]string{}
	for _, arg := range sets {
		src, err := parseSet(arg)
		if err != nil {
			c.list = append(c.list, &Error{File: c.file, Set: arg, Msg: printable(err.Error()), Err: err})
			continue
		}
		m := &merger{arg: arg, origins: origins, lines: lines}
		for k, v := range src {
			if k != "method" {
				m.merge(tree, map[string]any{k: v}, nil)
				continue
			}
			if err := m.methods(tree, v); err != nil {
				c.list = append(c.list, &Error{File: c.file, Set: arg, Msg: printable(err.Error()), Err: err})
			}
		}
	}
	return origins
}

// tomlNumber matches what TOML would read as a decimal integer or float.
var tomlNumber = regexp.MustCompile(`^[+-]?[0-9][0-9_]*(\.[0-9][0-9_]*)?([eE][+-]?[0-9][0-9_]*)?$`)

// parseSet decodes one KEY=VALUE override into a tree.
func parseSet(arg string) (map[string]any, error) {
	key, val, ok := strings.Cut(arg, "=")
	if !ok || strings.TrimSpace(key) == "" {
		return nil, fmt.Errorf("want KEY=VALUE, e.g. train.epochs=3 or method.SAM.params.rho=[0.02,0.05]")
	}
	// One line, one key: a newline would make the rest of VALUE further
	// assignments of the file (results_dir, a method's plugin) that KEY
	// does not name.
	if i := strings.IndexAny(arg, "\n\r"); i >= 0 {
		return nil, fmt.Errorf("a line break in the override: KEY=VALUE sets one key to one TOML value on one line (what follows it would set other keys); write a string's line breaks as \"\\n\"")
	}
	var tree map[string]any
	_, err := decode(arg, &tree)
	if err != nil {
		v := strings.TrimSpace(val)
		if v == "" || strings.ContainsAny(v[:1], `["'{`) {
			return nil, fmt.Errorf("not KEY=VALUE with a TOML value: %s", tomlMessage(err))
		}
		var probe map[string]any
		if _, verr := decode("v="+v, &probe); verr == nil {
			// The value is TOML: the key is not (a method by index,
			// method[1].params.rho, say).
			return nil, fmt.Errorf("not KEY=VALUE with a TOML key: %s (a method's key is method.NAME.…, its name quoted when it has spaces: method.\"OT-MDR K2\".params.rho)", tomlMessage(err))
		}
		if tomlNumber.MatchString(v) { // a number TOML cannot hold, not a word
			return nil, fmt.Errorf("%s is out of range: a TOML integer is an int64 (at most 9223372036854775807), a float a float64 (at most about 1.8e308)", v)
		}
		// A bare word: a string.
		var q bytes.Buffer
		if err := toml.NewEncoder(&q).Encode(map[string]any{"v": v}); err != nil {
			return nil, err
		}
		_, qv, _ := strings.Cut(strings.TrimSpace(q.String()), "=")
		tree = nil
		if _, err2 := decode(key+"="+strings.TrimSpace(qv), &tree); err2 != nil {
			return nil, fmt.Errorf("not KEY=VALUE with a TOML value: %s", tomlMessage(err))
		}
	}
	return tree, nil
}

// tomlMessage returns a decoder error's message without its position
// (which would be a position in the override).
func tomlMessage(err error) string {
	var pe toml.ParseError
	if errors.As(err, &pe) {
		return pe.Message
	}
	return err.Error()
}

// merger merges one override into a tree.
type merger struct {
	arg     string
	origins map[string]string
	lines   map[string]int
}

// merge merges src into dst (at path p): tables into tables, anything
// else replacing what was there.
func (m *merger) merge(dst, src map[string]any, p keyPath) {
	for k, v := range src {
		kp := p.child(k)
		if sub, ok := v.(map[string]any); ok {
			d, ok := dst[k].(map[string]any)
			if !ok {
				if _, exists := dst[k]; exists {
					m.set(kp) // a value replaced by a table
				}
				d = map[string]any{}
				dst[k] = d
			}
			m.merge(d, sub, kp)
			continue
		}
		dst[k] = v
		m.set(kp)
	}
}

// set records that the override set key p: its origin, and no line.
func (m *merger) set(p keyPath) {
	k := p.String()
	m.origins[k] = m.arg
	for l := range m.lines {
		if l == k || strings.HasPrefix(l, k+".") || strings.HasPrefix(l, k+"[") {
			delete(m.lines, l)
		}
	}
}

// methods merges method.<name>.… into the [[method]] table of that name.
func (m *merger) methods(tree map[string]any, v any) error {
	byName, ok := v.(map[string]any)
	if !ok {
		return fmt.Errorf("[[method]] tables cannot be replaced; set a method's key as method.<name>.<key>, e.g. method.SAM.params.rho=0.1")
	}
	list, _ := tree["method"].([]map[string]any)
	var names []string
	for _, t := range list {
		if n, ok := t["name"].(string); ok {
			names = append(names, n)
		}
	}
	for name, body := range byName {
		i := -1
		for j, t := range list {
			if n, _ := t["name"].(string); n == name {
				i = j
				break
			}
		}
		if i < 0 {
			if len(names) == 0 {
				return fmt.Errorf("no [[method]] named %q: the file has no methods", name)
			}
			return fmt.Errorf("no [[method]] named %q%s", name, suggestion(name, names, "methods"))
		}
		t, ok := body.(map[string]any)
		if !ok {
			return fmt.Errorf("a method cannot be replaced by a value; set one of its keys, e.g. method.%s.params.rho=0.1", keyPath{name})
		}
		m.merge(list[i], t, keyPath{"method"}.index(i))
	}
	return nil
}

// origin returns the override that set key or the nearest key above it
// ("train.optimizer.lr" for "train.optimizer.lr[1]"), or "".
func origin(sets map[string]string, key string) string {
	for k := key; k != ""; {
		if a, ok := sets[k]; ok {
			return a
		}
		i := strings.LastIndexAny(k, ".[")
		if i < 0 {
			break
		}
		k = k[:i]
	}
	return ""
}

// descendantOrigin returns the override that set a key below key (the
// first in key order), or "".
func descendantOrigin(sets map[string]string, key string) string {
	for _, k := range slices.Sorted(maps.Keys(sets)) {
		if rest, ok := strings.CutPrefix(k, key); ok && rest != "" && (rest[0] == '.' || rest[0] == '[') {
			return sets[k]
		}
	}
	return ""
}
