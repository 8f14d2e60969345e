package experiment

import (
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"
)

// A sweep is a key written as a list of values: any method parameter
// (rho = [0.02, 0.05, 0.1]), the numbers of [train], [train.optimizer]
// and [train.schedule], and the rate and seed of [data.label_noise], as
// SweepKeys lists them (lr = [0.05, 0.1], rate = [0, 0.2, 0.4]). Each list
// is a grid dimension: the runs of a method are its settings (every
// combination of the values of its own parameter lists and of the lists
// of SweepKeys) × archs × seeds. A list of one value is the value itself.

// MaxSettings bounds the number of settings (combinations of swept values)
// of one method.
const MaxSettings = 10000

// Sweep is one swept key of SweepKeys.
type Sweep struct {
	// Key is the dotted key, e.g. "train.optimizer.lr".
	Key string
	// Values are the values in file order, at least two and all distinct:
	// int64 for integer keys, float64 for number keys.
	Values []any
}

// Setting is one swept key's value in one run.
type Setting struct {
	// Key is the swept key: "params.<name>" for a method parameter (as in
	// ValidateParams' messages), the dotted key for the keys of SweepKeys
	// ("train.optimizer.lr", "data.label_noise.rate").
	Key string
	// Name is how run labels and keys name the key: the parameter's name;
	// for a key of SweepKeys its last element ("lr", "rate"), or the whole
	// key when the method sweeps a parameter of that name too, and
	// "label_noise.seed" for data.label_noise.seed (which "seed" would
	// confuse with the run's seed).
	Name string
	// Value is the value: as decoded from TOML for a parameter (string,
	// int64, float64, bool), int64 or float64 for a key of SweepKeys.
	Value any
}

// String returns "name=value", the value as FormatValue writes it.
func (s Setting) String() string { return s.Name + "=" + FormatValue(s.Value) }

// SweepKeys returns the keys outside [[method]] that may be lists of
// values (sweeps): the numbers of [train] except eval_batch_size, threads
// and dump_params_every (which do not change what is trained), of
// [train.optimizer] and of [train.schedule], and the rate and seed of
// [data.label_noise].
func SweepKeys() []string {
	return []string{
		"train.epochs", "train.batch_size", "train.label_smoothing", "train.max_steps",
		"train.optimizer.lr", "train.optimizer.momentum", "train.optimizer.weight_decay", "train.optimizer.eps",
		"train.schedule.gamma", "train.schedule.warmup_epochs", "train.schedule.patience", "train.schedule.factor",
		"train.schedule.min_lr", "train.schedule.cycle_epochs", "train.schedule.lr_max", "train.schedule.lr_min",
		"data.label_noise.rate", "data.label_noise.seed",
	}
}

// sweepName is how run labels name the swept key (of SweepKeys) when no
// parameter of the method has that name: its last element, except for
// data.label_noise.seed, which "seed" would confuse with the run's seed
// (method=SGD seed=3/arch=cnn/seed=1).
func sweepName(key string) string {
	if key == "data.label_noise.seed" {
		return "label_noise.seed"
	}
	return key[strings.LastIndexByte(key, '.')+1:]
}

// FormatValue writes a swept value the way run labels and keys show it:
// numbers as a TOML file would (shortest form that reads back, 1 for 1.0),
// booleans as true/false, strings bare when made of letters, digits and
// ._+- and quoted otherwise.
func FormatValue(v any) string {
	switch x := v.(type) {
	case int64:
		return strconv.FormatInt(x, 10)
	case float64:
		return formatFloat(x)
	case bool:
		return strconv.FormatBool(x)
	case string:
		bare := x != ""
		for i := 0; i < len(x); i++ {
			if c := x[i]; !isBareByte(c) && c != '.' && c != '+' {
				bare = false
			}
		}
		if bare {
			return x
		}
		return strconv.Quote(x)
	case time.Time:
		return x.Format(time.RFC3339Nano)
	}
	return fmt.Sprint(v)
}

// sweepField returns the field of t (a struct) at the toml path (tags), or
// false.
func sweepField(t reflect.Value, path []string) (reflect.Value, bool) {
	for _, name := range path {
		if t.Kind() != reflect.Struct {
			return reflect.Value{}, false
		}
		found := false
		for i := range t.NumField() {
			if tag, _, _ := strings.Cut(t.Type().Field(i).Tag.Get("toml"), ","); tag == name {
				t, found = t.Field(i), true
				break
			}
		}
		if !found {
			return reflect.Value{}, false
		}
	}
	return t, true
}

// sweepTarget returns the field of e that the key of SweepKeys (dotted,
// "train.optimizer.lr", "data.label_noise.rate") names, or false.
func sweepTarget(e *Experiment, key string) (reflect.Value, bool) {
	root, path, _ := strings.Cut(key, ".")
	var t reflect.Value
	switch root {
	case "train":
		t = reflect.ValueOf(&e.Train).Elem()
	case "data":
		t = reflect.ValueOf(&e.Data).Elem()
	default:
		return reflect.Value{}, false
	}
	return sweepField(t, strings.Split(path, "."))
}

// setSwept sets the key of SweepKeys (dotted) of e to v (int64 or
// float64). It reports false for a key that is not a number of e.
func setSwept(e *Experiment, key string, v any) bool {
	f, ok := sweepTarget(e, key)
	if !ok {
		return false
	}
	switch f.Kind() {
	case reflect.Int, reflect.Int64:
		n, ok := v.(int64)
		if !ok || f.OverflowInt(n) {
			return false
		}
		f.SetInt(n)
	case reflect.Float64:
		switch x := v.(type) {
		case float64:
			f.SetFloat(x)
		case int64:
			f.SetFloat(float64(x))
		default:
			return false
		}
	default:
		return false
	}
	return true
}

// withSettings returns a copy of e that holds the values the settings give
// the keys of SweepKeys (method parameters are left to withParams); e
// itself when they give none. The copy shares everything else with e.
func withSettings(e *Experiment, settings []Setting) *Experiment {
	c := *e
	changed := false
	for _, s := range settings {
		if !strings.HasPrefix(s.Key, "params.") {
			changed = setSwept(&c, s.Key, s.Value) || changed
		}
	}
	if !changed {
		return e
	}
	return &c
}

// extractSweeps finds the lists written in the sweepable keys of the
// decoded tree (see SweepKeys), checks them (non-empty, elements of the
// key's type, distinct), replaces each by its first value so that the
// schema check and the decoder see a scalar, and returns the lists of two
// values or more, and whether it changed the tree.
func (c *checker) extractSweeps(tree map[string]any) (out []Sweep, changed bool) {
	for _, key := range SweepKeys() {
		path := strings.Split(key, ".")
		parent := tree
		for _, seg := range path[:len(path)-1] {
			m, ok := parent[seg].(map[string]any)
			if !ok {
				parent = nil
				break
			}
			parent = m
		}
		last := path[len(path)-1]
		if parent == nil {
			continue
		}
		list, ok := parent[last].([]any)
		if !ok {
			continue
		}
		p := keyPath(path)
		f, _ := sweepTarget(&Experiment{}, key)
		changed = true
		values, ok := c.sweepList(list, f.Type(), p)
		if !ok {
			delete(parent, last) // reported; keep the checker quiet about it
			continue
		}
		parent[last] = values[0]
		if len(values) > 1 {
			out = append(out, Sweep{Key: key, Values: values})
		}
	}
	slices.SortStableFunc(out, func(a, b Sweep) int {
		return c.line(keyPath(strings.Split(a.Key, "."))) - c.line(keyPath(strings.Split(b.Key, ".")))
	})
	return out, changed
}

// sweepList checks the list written at p for a key of type t and returns
// its values (int64 for integer keys, float64 for number keys).
func (c *checker) sweepList(list []any, t reflect.Type, p keyPath) ([]any, bool) {
	if len(list) == 0 {
		c.add(c.line(p), p.String(), "%s is an empty list; a sweep needs at least one value", p)
		return nil, false
	}
	before := len(c.list)
	values := make([]any, len(list))
	seen := map[string]int{}
	for i, x := range list {
		c.value(x, t, p.index(i))
		if len(c.list) > before {
			continue
		}
		if t.Kind() == reflect.Float64 {
			if n, ok := x.(int64); ok {
				x = float64(n)
			}
		}
		values[i] = x
		s := sameValueKey(x)
		if j, dup := seen[s]; dup {
			c.add(c.elemLine(p, i), p.index(i).String(), "%s lists %s twice (elements %d and %d)", p, s, j, i)
		}
		seen[s] = i
	}
	return values, len(c.list) == before
}

// elemLine returns the line of element i of the list at p, or the list's.
func (c *checker) elemLine(p keyPath, i int) int {
	if l := c.line(p.index(i)); l > 0 {
		return l
	}
	return c.line(p)
}

// paramLists checks the lists among a method's decoded parameters (at
// path p, "method[0].params"): non-empty, scalar elements of one kind
// (integers and floats count as numbers), distinct as FormatValue writes
// them. A list of one value is replaced by the value. It reports whether
// all lists are valid.
func (c *checker) paramLists(params map[string]any, p keyPath) bool {
	before := len(c.list)
	for _, k := range slices.Sorted(maps.Keys(params)) {
		list, ok := params[k].([]any)
		if !ok {
			continue
		}
		kp := p.child(k)
		if len(list) == 0 {
			c.add(c.line(kp), kp.String(), "%s is an empty list; a sweep needs at least one value", kp)
			continue
		}
		seen := map[string]int{}
		good := true
		first, firstKind := -1, ""
		for i, x := range list {
			switch kind := valueKind(x); {
			case kind == "":
				c.add(c.elemLine(kp, i), kp.index(i).String(), "%s must be a value: a list of values is a sweep, and a sweep cannot hold %s", kp.index(i), describe(x))
				good = false
				continue
			case first < 0:
				first, firstKind = i, kind
			case kind != firstKind:
				c.add(c.elemLine(kp, i), kp.index(i).String(), "%s mixes a %s (element %d) with a %s (element %d); a sweep's values have one type",
					kp, kind, i, firstKind, first)
				good = false
				continue
			}
			s := sameValueKey(x)
			if j, dup := seen[s]; dup && good {
				c.add(c.elemLine(kp, i), kp.index(i).String(), "%s lists %s twice (elements %d and %d)", kp, s, j, i)
				good = false
			}
			seen[s] = i
		}
		if good && len(list) == 1 {
			params[k] = list[0]
		}
	}
	return len(c.list) == before
}

// valueKind names the kind of a sweep element ("number", "string",
// "boolean", "datetime"), or "" for arrays and tables.
func valueKind(v any) string {
	switch v.(type) {
	case int64, float64:
		return "number"
	case string:
		return "string"
	case bool:
		return "boolean"
	case time.Time:
		return "datetime"
	}
	return ""
}

// settings returns the settings of method m in e, in grid order: every
// combination of the values of m's parameter lists (in line order) and of
// e.Sweeps (in file order; but for the keys m's [method.optimizer] and
// [method.schedule] decide, see Method.Train), the last dimension varying
// fastest. A method
// that sweeps nothing has one empty setting. At most MaxSettings are
// returned; n is the number there would be (capped to avoid overflow).
func settings(e *Experiment, m Method) (out [][]Setting, n int) {
	type dim struct {
		key, name string
		values    []any
	}
	var dims []dim
	var params []string
	for k, v := range m.Params {
		if l, ok := v.([]any); ok && len(l) > 1 {
			params = append(params, k)
		}
	}
	slices.SortFunc(params, func(a, b string) int {
		if d := m.ParamLines[a] - m.ParamLines[b]; d != 0 {
			return d
		}
		return strings.Compare(a, b)
	})
	for _, k := range params {
		dims = append(dims, dim{"params." + k, keyPath{k}.String(), m.Params[k].([]any)})
	}
	for _, s := range e.Sweeps {
		if m.overrides(s.Key, e.Train) {
			continue // the method's own value applies, not the sweep
		}
		name := sweepName(s.Key)
		if l, ok := m.Params[name].([]any); ok && len(l) > 1 {
			name = s.Key
		}
		dims = append(dims, dim{s.Key, name, s.Values})
	}
	if len(dims) == 0 {
		return [][]Setting{nil}, 1
	}
	n = 1
	for _, d := range dims {
		if len(d.values) == 0 {
			return nil, 0
		}
		n = min(n*len(d.values), MaxSettings+1)
	}
	if n > MaxSettings {
		return nil, n
	}
	out = make([][]Setting, 0, n)
	idx := make([]int, len(dims))
	for {
		s := make([]Setting, len(dims))
		for i, d := range dims {
			s[i] = Setting{Key: d.key, Name: d.name, Value: d.values[idx[i]]}
		}
		out = append(out, s)
		i := len(dims) - 1
		for ; i >= 0; i-- {
			idx[i]++
			if idx[i] < len(dims[i].values) {
				break
			}
			idx[i] = 0
		}
		if i < 0 {
			return out, n
		}
	}
}

// sweepCombos returns every combination of the values of e.Sweeps, as
// settings (at most MaxSettings; nil when e sweeps no key of SweepKeys).
func sweepCombos(e *Experiment) [][]Setting {
	if len(e.Sweeps) == 0 {
		return nil
	}
	s, _ := settings(e, Method{})
	return s
}

// label returns a run's label: the method name followed by its settings,
// "SAM rho=0.05 lr=0.1" (just the name without settings).
func label(name string, s []Setting) string {
	if len(s) == 0 {
		return name
	}
	parts := make([]string, len(s)+1)
	parts[0] = name
	for i, x := range s {
		parts[i+1] = x.String()
	}
	return strings.Join(parts, " ")
}

// methodView returns e as method m's runs see it: e itself when m writes
// neither [method.optimizer] nor [method.schedule], else a copy whose
// Train holds m's optimizer and schedule (Method.Train).
func methodView(e *Experiment, m Method) *Experiment {
	if !m.Overrides() {
		return e
	}
	c := *e
	c.Train = m.Train(e.Train)
	return &c
}

// withParams returns m with the parameter values of setting s (a copy of
// its Params; m itself when s sets no parameter).
func withParams(m Method, s []Setting) Method {
	var params map[string]any
	for _, x := range s {
		name, ok := strings.CutPrefix(x.Key, "params.")
		if !ok {
			continue
		}
		if params == nil {
			params = make(map[string]any, len(m.Params))
			for k, v := range m.Params {
				params[k] = v
			}
		}
		params[name] = x.Value
	}
	if params != nil {
		m.Params = params
	}
	return m
}

// sameValueKey is a sweep value's text for finding values listed twice:
// its FormatValue, with −0 read as 0 (numerically equal, the same run).
func sameValueKey(x any) string {
	if f, ok := x.(float64); ok && f == 0 {
		x = 0.0
	}
	return FormatValue(x)
}
