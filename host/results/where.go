package results

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/optlab/optlab/host/identity"
)

// Where is a condition on records: KEY=VALUE, where KEY is a key of the
// record's configuration (data.label_noise.rate, train.optimizer.lr,
// params.rho, …) or one of the record's own fields method (the [[method]]
// name, without a sweep's values), arch, dataset, plugin and seed. A
// configuration key the record lacks has its identity.Defaults value (so
// data.label_noise.rate=0 matches the runs without label noise), or none.
// The keys are those of this optlab's identity version
// (Record.MigratedConfig).
type Where struct {
	Key, Value string
}

// ParseWhere parses "KEY=VALUE".
func ParseWhere(s string) (Where, error) {
	k, v, ok := strings.Cut(s, "=")
	k, v = strings.TrimSpace(k), strings.TrimSpace(v)
	if !ok || k == "" {
		return Where{}, fmt.Errorf("--where %q: want KEY=VALUE, e.g. data.label_noise.rate=0 or method=SGD", s)
	}
	return Where{Key: k, Value: v}, nil
}

// String returns "KEY=VALUE".
func (w Where) String() string { return w.Key + "=" + w.Value }

// Match reports whether r satisfies the condition: VALUE, or one of the
// alternatives of a VALUE written A|B|…. Numbers compare by value (0.20
// matches 0.2), everything else as written.
func (w Where) Match(r Record) bool {
	var got any
	var ok bool
	switch w.Key {
	case "method":
		// The [[method]] name: a sweep's row label without its values.
		got, ok = r.Method, true
		if r.Base != "" {
			got = r.Base
		}
	case "arch":
		got, ok = r.Arch, true
	case "dataset":
		got, ok = r.Dataset, true
	case "plugin":
		got, ok = r.Plugin, true
	case "seed":
		got, ok = r.Seed, true
	default:
		cfg, err := r.MigratedConfig()
		if err != nil {
			cfg = r.Config // a newer optlab's record: its keys as they are
		}
		got, ok = cfg[w.Key]
		if !ok {
			got, ok = identity.Defaults()[w.Key]
		}
	}
	if !ok {
		return false
	}
	for _, v := range strings.Split(w.Value, "|") {
		if matchValue(got, strings.TrimSpace(v)) {
			return true
		}
	}
	return false
}

// matchValue reports whether got is v: by value for numbers, else as
// written.
func matchValue(got any, v string) bool {
	if want, err := strconv.ParseFloat(v, 64); err == nil {
		if f, isNum := number(got); isNum {
			return f == want
		}
	}
	return fmt.Sprint(got) == v
}

// number returns v as a float64 when it is a number.
func number(v any) (float64, bool) {
	switch x := v.(type) {
	case float64:
		return x, true
	case int64:
		return float64(x), true
	case int:
		return float64(x), true
	}
	return 0, false
}

// Filter returns the records that satisfy every condition, and an error
// when none does (naming the conditions).
func Filter(recs []Record, where []Where) ([]Record, error) {
	if len(where) == 0 {
		return recs, nil
	}
	var out []Record
	for _, r := range recs {
		keep := true
		for _, w := range where {
			keep = keep && w.Match(r)
		}
		if keep {
			out = append(out, r)
		}
	}
	if len(out) == 0 {
		conds := make([]string, len(where))
		for i, w := range where {
			conds[i] = w.String()
		}
		return nil, fmt.Errorf("no record of the %d matches --where %s", len(recs), strings.Join(conds, " and "))
	}
	return out, nil
}

// WhereFlag is a repeatable --where flag (flag.Value).
type WhereFlag []Where

// String returns the conditions, space-separated.
func (f *WhereFlag) String() string {
	var out []string
	for _, w := range *f {
		out = append(out, w.String())
	}
	return strings.Join(out, " ")
}

// Set parses and adds one condition.
func (f *WhereFlag) Set(s string) error {
	w, err := ParseWhere(s)
	if err != nil {
		return err
	}
	*f = append(*f, w)
	return nil
}
