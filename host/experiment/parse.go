package experiment

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"os"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/BurntSushi/toml"
)

// document is the decoding target; it mirrors Experiment, with the method
// parameters kept as raw TOML.
type document struct {
	Name        string      `toml:"name"`
	Description string      `toml:"description"`
	ResultsDir  string      `toml:"results_dir"`
	Data        Data        `toml:"data"`
	Model       Model       `toml:"model"`
	Train       Train       `toml:"train"`
	Eval        Eval        `toml:"eval"`
	Method      []methodDoc `toml:"method"`
}

// methodDoc is one [[method]] table as decoded.
type methodDoc struct {
	Name   string         `toml:"name"`
	Plugin string         `toml:"plugin"`
	Path   string         `toml:"path"`
	Params toml.Primitive `toml:"params"`
}

// Load reads and decodes the experiment file at path; see Parse.
func Load(path string) (*Experiment, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("experiment: %w", err)
	}
	return Parse(data, path)
}

// Parse decodes an experiment file strictly; name is the file name that
// messages cite. It fills in defaults (see Default and the field docs) but
// does not check values: call Validate for that.
//
// It rejects, with the line of the key: syntax errors; unknown keys (with a
// did-you-mean suggestion); keys that match a schema key only when case is
// ignored ("Lr" for "lr"), which the TOML decoder would otherwise accept
// silently; two keys in one table that differ only in case; and values of
// the wrong TOML type (an integer is accepted where a float is expected).
// The [method.params] tables are kept as raw values in Method.Params, with
// their lines in Method.ParamLines, for ValidateParams.
//
// The error is an ErrorList (or, for a syntax error, an *Error wrapping the
// toml.ParseError).
func Parse(data []byte, name string) (*Experiment, error) {
	src := string(data)
	var tree map[string]any
	if _, err := decode(src, &tree); err != nil {
		return nil, syntaxError(name, src, err)
	}
	lines := keyLines(src)

	c := &checker{errs: errs{file: name}, lines: lines}
	c.table(tree, reflect.TypeFor[document](), nil)
	if err := c.err(); err != nil {
		return nil, err
	}

	def := Default()
	doc := document{
		ResultsDir: def.ResultsDir,
		Data:       def.Data,
		Model:      def.Model,
		Train:      def.Train,
		Eval:       def.Eval,
	}
	md, err := decode(src, &doc)
	if err != nil {
		// The checks above should have caught everything the decoder
		// rejects; report whatever slipped through with its position.
		return nil, syntaxError(name, src, err)
	}

	e := &Experiment{
		File:        name,
		Name:        doc.Name,
		Description: doc.Description,
		ResultsDir:  doc.ResultsDir,
		Data:        doc.Data,
		Model:       doc.Model,
		Train:       doc.Train,
		Eval:        doc.Eval,
		Methods:     make([]Method, len(doc.Method)),
		lines:       lines,
		defined:     make(map[string]bool, len(md.Keys())),
	}
	for _, k := range md.Keys() {
		e.defined[k.String()] = true
	}
	for i, m := range doc.Method {
		params := map[string]any{}
		if err := md.PrimitiveDecode(m.Params, &params); err != nil {
			p := keyPath{"method"}.index(i).child("params")
			c.list = append(c.list, &Error{File: name, Line: lines[p.String()], Key: p.String(),
				Msg: fmt.Sprintf("%s: %v", p, err), Err: err})
			continue
		}
		pl := make(map[string]int, len(params))
		for k := range params {
			if l, ok := lines[keyPath{"method"}.index(i).child("params").child(k).String()]; ok {
				pl[k] = l
			}
		}
		e.Methods[i] = Method{
			Name: m.Name, Plugin: m.Plugin, Path: m.Path,
			Params: params, ParamLines: pl,
			File: name, Line: lines[keyPath{"method"}.index(i).String()],
		}
	}
	// Defence in depth: the decoder's own list of keys it had nowhere to
	// put. Values nested inside a parameter are ValidateParams' business.
	for _, k := range md.Undecoded() {
		if len(k) >= 2 && k[0] == "method" && k[1] == "params" {
			continue
		}
		p := keyPath(k)
		c.add(lines[p.String()], p.String(), "unknown key %q", p.String())
	}
	if err := c.err(); err != nil {
		return nil, err
	}

	if !e.has("data.augment") {
		switch e.Data.Dataset {
		case DatasetCIFAR10, DatasetCIFAR100:
			e.Data.Augment = []string{"crop", "flip"}
		default:
			e.Data.Augment = []string{}
		}
	}
	if !e.has("eval.temperature") {
		if e.Data.Validation > 0 {
			e.Eval.Temperature = TemperatureValidation
		} else {
			e.Eval.Temperature = TemperatureTestHalves
			e.Notes = append(e.Notes, "eval.temperature defaults to \"test-halves\" because data.validation = 0")
		}
	}
	return e, nil
}

// decode runs the TOML decoder, turning a panic inside it into an error so
// that no input can crash the caller.
func decode(src string, v any) (md toml.MetaData, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("toml decoder panicked: %v", r)
		}
	}()
	return toml.Decode(src, v)
}

// syntaxError turns a decoder error into an *Error citing the line, with
// the offending line and a caret as printed by ErrorWithPosition.
func syntaxError(name, src string, err error) error {
	var pe toml.ParseError
	if !errors.As(err, &pe) {
		return &Error{File: name, Msg: err.Error(), Err: err}
	}
	msg := pe.Message
	if ctx := positionContext(pe, src); ctx != "" {
		msg += "\n" + ctx
	}
	line := pe.Position.Line
	if n := strings.Count(src, "\n") + 1; line > n {
		line = n // EOF errors may point past the last line
	}
	return &Error{File: name, Line: line, Msg: msg, Err: err}
}

// positionContext returns the source lines around a parse error with a
// caret under it, from ErrorWithPosition, or "" if it cannot be rendered.
// ErrorWithPosition in toml v1.6.0 panics on positions outside the input
// (BurntSushi/toml#498, #517), which some EOF errors have; those are
// skipped, and any other panic in it is recovered.
func positionContext(pe toml.ParseError, src string) (ctx string) {
	p := pe.Position
	if p.Line < 1 || p.Line > strings.Count(src, "\n")+1 || p.Col < 1 || p.Len < 0 {
		return ""
	}
	defer func() {
		if recover() != nil {
			ctx = ""
		}
	}()
	// ErrorWithPosition is "toml: error: <msg>\n\nAt line …:\n\n<context>".
	parts := strings.SplitN(pe.ErrorWithPosition(), "\n\n", 3)
	if len(parts) != 3 {
		return ""
	}
	return strings.TrimRight(parts[2], "\n")
}

// checker walks the generic decoded tree against the schema types.
type checker struct {
	errs
	lines map[string]int
}

func (c *checker) line(p keyPath) int { return c.lines[p.String()] }

// field is one key of a schema table.
type field struct {
	name string
	typ  reflect.Type
}

// schemaFields lists the toml-tagged fields of struct type t.
func schemaFields(t reflect.Type) []field {
	var out []field
	for i := range t.NumField() {
		f := t.Field(i)
		name := strings.Split(f.Tag.Get("toml"), ",")[0]
		if !f.IsExported() || name == "" || name == "-" {
			continue
		}
		out = append(out, field{name: name, typ: f.Type})
	}
	return out
}

// table checks the keys of table m (at path p) against struct type t.
func (c *checker) table(m map[string]any, t reflect.Type, p keyPath) {
	fields := schemaFields(t)
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b string) int {
		return cmp.Or(cmp.Compare(c.line(p.child(a)), c.line(p.child(b))), cmp.Compare(a, b))
	})
	first := map[string]string{} // lower-case key → first spelling seen
	for _, k := range keys {
		kp := p.child(k)
		line := c.line(kp)
		lower := strings.ToLower(k)
		if prev, dup := first[lower]; dup {
			c.add(line, kp.String(), "duplicate key %q: already written as %q on line %d (keys differing only in case are not allowed)",
				kp.String(), p.child(prev).String(), c.line(p.child(prev)))
			continue
		}
		first[lower] = k

		var exact, folded *field
		for i := range fields {
			if fields[i].name == k {
				exact = &fields[i]
			} else if strings.EqualFold(fields[i].name, k) {
				folded = &fields[i]
			}
		}
		switch {
		case exact != nil:
			c.value(m[k], exact.typ, kp)
		case folded != nil:
			c.add(line, kp.String(), "key %q must be written %q (keys are case-sensitive)",
				kp.String(), p.child(folded.name).String())
		default:
			names := make([]string, len(fields))
			for i, f := range fields {
				names[i] = f.name
			}
			c.add(line, kp.String(), "unknown key %q%s", kp.String(), suggestion(k, names, "keys"))
		}
	}
}

// maxExactFloatInt is the largest integer magnitude a float64 holds exactly.
const maxExactFloatInt = 1 << 53

// value checks that v (at path p) has a TOML type that decodes into t.
func (c *checker) value(v any, t reflect.Type, p keyPath) {
	if t == reflect.TypeFor[toml.Primitive]() {
		if _, ok := v.(map[string]any); !ok {
			c.mismatch(p, "a table", v)
		}
		return
	}
	switch t.Kind() {
	case reflect.Struct:
		m, ok := v.(map[string]any)
		if !ok {
			c.mismatch(p, "a table", v)
			return
		}
		c.table(m, t, p)
	case reflect.Slice:
		elems, ok := asArray(v)
		if !ok || (t.Elem().Kind() == reflect.Struct && !isTableArray(elems)) {
			c.mismatch(p, arrayOf(t.Elem()), v)
			return
		}
		for i, x := range elems {
			c.value(x, t.Elem(), p.index(i))
		}
	case reflect.String:
		if _, ok := v.(string); !ok {
			c.mismatch(p, "a string", v)
		}
	case reflect.Bool:
		if _, ok := v.(bool); !ok {
			c.mismatch(p, "a boolean", v)
		}
	case reflect.Int, reflect.Int64:
		n, ok := v.(int64)
		if !ok {
			c.mismatch(p, "an integer", v)
			return
		}
		if reflect.New(t).Elem().OverflowInt(n) {
			c.add(c.line(p), p.String(), "%s is out of range (got %d)", p, n)
		}
	case reflect.Float64:
		switch x := v.(type) {
		case float64:
		case int64:
			if x > maxExactFloatInt || x < -maxExactFloatInt {
				c.add(c.line(p), p.String(), "%s: integer %d is too large to be represented exactly as a float", p, x)
			}
		default:
			c.mismatch(p, "a number", v)
		}
	default:
		// Not reached for the schema types of this package.
		c.add(c.line(p), p.String(), "%s: unsupported schema type %s", p, t)
	}
}

func (c *checker) mismatch(p keyPath, want string, got any) {
	c.add(c.line(p), p.String(), "%s must be %s (got %s)", p, want, describe(got))
}

// asArray returns the elements of a decoded TOML array.
func asArray(v any) ([]any, bool) {
	switch a := v.(type) {
	case []any:
		return a, true
	case []map[string]any:
		out := make([]any, len(a))
		for i, m := range a {
			out[i] = m
		}
		return out, true
	}
	return nil, false
}

func isTableArray(elems []any) bool {
	for _, x := range elems {
		if _, ok := x.(map[string]any); !ok {
			return false
		}
	}
	return true
}

func arrayOf(elem reflect.Type) string {
	switch elem.Kind() {
	case reflect.Struct:
		return "an array of tables"
	case reflect.String:
		return "an array of strings"
	case reflect.Int, reflect.Int64:
		return "an array of integers"
	case reflect.Float64:
		return "an array of numbers"
	}
	return "an array"
}

// describe names the TOML type of a decoded value, with the value if short.
func describe(v any) string {
	switch x := v.(type) {
	case string:
		if utf8.RuneCountInString(x) > 40 {
			x = string([]rune(x)[:40]) + "…"
		}
		return "string " + strconv.Quote(x)
	case int64:
		return "integer " + strconv.FormatInt(x, 10)
	case float64:
		return "float " + formatFloat(x)
	case bool:
		return "boolean " + strconv.FormatBool(x)
	case map[string]any:
		return "a table"
	case []any, []map[string]any:
		return "an array"
	case time.Time:
		return "a datetime"
	case nil:
		return "nothing"
	}
	return fmt.Sprintf("%T", v)
}

// formatFloat prints x the way a TOML file would.
func formatFloat(x float64) string {
	switch {
	case math.IsNaN(x):
		return "nan"
	case math.IsInf(x, 1):
		return "inf"
	case math.IsInf(x, -1):
		return "-inf"
	}
	return strconv.FormatFloat(x, 'g', -1, 64)
}
