package experiment

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"math"
	"os"
	"path/filepath"
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
	Name      string         `toml:"name"`
	Plugin    string         `toml:"plugin"`
	Path      string         `toml:"path"`
	Params    toml.Primitive `toml:"params"`
	Optimizer Optimizer      `toml:"optimizer"`
	Schedule  Schedule       `toml:"schedule"`
	Train     MethodTrain    `toml:"train"`
}

// Load reads and decodes the experiment file at path, with the --set
// overrides sets applied; see Parse.
//
// Unlike Parse, Load resolves the relative paths written in the file
// against the file's folder, as Cargo and Compose files do: data.dir,
// data.ood_dir, data.path, model.init_from, results_dir and each method's
// path. "data/x.csv" in experiments/e.toml becomes experiments/data/x.csv
// (relative to the current directory when path is relative). Absolute
// paths, blank values and defaults the file does not write are kept as
// they are, so the default results_dir "results" stays relative to the
// current directory.
func Load(path string, sets ...string) (*Experiment, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("experiment: %w", err)
	}
	e, err := Parse(data, path, sets...)
	if err != nil {
		return nil, err
	}
	e.resolvePaths(filepath.Dir(path))
	return e, nil
}

// resolvePaths joins dir to every relative, non-blank path written in the
// file, after expanding a leading "~/" to the user's home (see Load).
func (e *Experiment) resolvePaths(dir string) {
	home, _ := os.UserHomeDir()
	resolve := func(p *string) {
		// "~/x" is the user's home, as in a shell (not a folder named ~).
		if rest, ok := strings.CutPrefix(*p, "~/"); ok && home != "" {
			*p = filepath.Join(home, rest)
		} else if *p == "~" && home != "" {
			*p = home
		}
		if strings.TrimSpace(*p) != "" && !filepath.IsAbs(*p) {
			*p = filepath.Join(dir, *p)
		}
	}
	if e.has("results_dir") {
		resolve(&e.ResultsDir)
	}
	resolve(&e.Data.Dir)
	resolve(&e.Data.OODDir)
	resolve(&e.Data.Path)
	resolve(&e.Model.InitFrom)
	for i := range e.Model.Archs {
		e.Model.Archs[i] = resolveArchSpec(e.Model.Archs[i], resolve)
	}
	for i := range e.Methods {
		resolve(&e.Methods[i].Path)
	}
}

// resolveArchSpec resolves the file of every TorchScript term of an arch
// spec ("torchscript:net.pt*2 + cnn"); other terms are kept as written.
func resolveArchSpec(spec string, resolve func(*string)) string {
	if !strings.Contains(spec, TorchScriptPrefix) {
		return spec
	}
	terms := strings.Split(spec, "+")
	for i, term := range terms {
		name, count, hasCount := strings.Cut(term, "*")
		path, ok := TorchScriptPath(strings.TrimSpace(name))
		if !ok || strings.TrimSpace(path) == "" {
			continue
		}
		resolve(&path)
		terms[i] = TorchScriptPrefix + path
		if hasCount {
			terms[i] += "*" + count
		}
	}
	return strings.Join(terms, "+")
}

// Parse decodes an experiment file strictly; name is the file name that
// messages cite. It fills in defaults (see Default and the field docs) but
// does not check values: call Validate for that. Parse keeps paths as
// written: it does not know where the file lives, so relative paths are
// resolved only by Load.
//
// It rejects, with the line of the key: syntax errors; unknown keys (with a
// did-you-mean suggestion); keys that match a schema key only when case is
// ignored ("Lr" for "lr"), which the TOML decoder would otherwise accept
// silently; two keys in one table that differ only in case; and values of
// the wrong TOML type (an integer is accepted where a float is expected).
// The [method.params] tables are kept as raw values in Method.Params, with
// their lines in Method.ParamLines, for ValidateParams.
//
// Lists of values (sweeps; see SweepKeys) are checked for their shape: not
// empty, values of one type (the key's type for the keys of SweepKeys), no
// value twice. A list of one value is replaced by the value. Lists of two
// values or more in the keys of SweepKeys go to Experiment.Sweeps (Train
// and Data hold their first values); a method's parameter lists stay in
// Method.Params.
//
// sets are --set overrides, KEY=VALUE each (see the package's overrides
// documentation in set.go): they are merged into the decoded file before
// any check, and messages about the keys they set cite them.
//
// The error is an ErrorList (or, for a syntax error, an *Error wrapping the
// toml.ParseError, with Line and Col set; or, for a file that is not UTF-8
// text without control characters, e.g. a binary file, a one-line *Error
// citing the first offending byte). Text quoted from the file is escaped.
func Parse(data []byte, name string, sets ...string) (*Experiment, error) {
	src := string(data)
	if err := textError(name, src); err != nil {
		return nil, err
	}
	c, src, sweeps, err := checkSource(name, src, sets)
	if err != nil {
		return nil, err
	}
	doc, md, err := decodeDocument(name, src)
	if err != nil {
		return nil, err
	}
	e := newExperiment(name, &doc, &md, sweeps, c)
	for i, m := range doc.Method {
		c.decodeMethod(e, i, m, &md)
	}
	c.undecoded(&md)
	if err := c.err(); err != nil {
		return nil, err
	}
	e.applyDerivedDefaults()
	return e, nil
}

// checkSource decodes src into a generic tree, merges the --set overrides
// sets into it, takes out the sweeps of SweepKeys and checks every key against
// the schema. It returns the checker, which holds the lines of the keys
// and the overrides' origins for later messages; the text to decode (src,
// or the checked tree written back when the overrides or the sweeps
// changed it); and the sweeps.
func checkSource(name, src string, sets []string) (*checker, string, []Sweep, error) {
	var tree map[string]any
	if _, err := decode(src, &tree); err != nil {
		return nil, "", nil, syntaxError(name, src, err)
	}
	lines := keyLines(src)

	c := &checker{errs: errs{file: name}, lines: lines}
	c.sets = c.applySets(tree, sets, lines)
	c.names = treeMethodNames(tree)
	sweeps, changed := c.extractSweeps(tree)
	c.table(tree, reflect.TypeFor[document](), nil)
	if err := c.err(); err != nil {
		return nil, "", nil, err
	}
	c.written = methodTables(tree)
	if len(sets) > 0 || changed {
		// Decode what the checks saw: the file with the overrides merged
		// and the lists of SweepKeys replaced by their first values.
		var err error
		if src, err = encodeTree(tree); err != nil {
			return nil, "", nil, &Error{File: name, Msg: printable(err.Error()), Err: err}
		}
	}
	return c, src, sweeps, nil
}

// decodeDocument decodes src, which checkSource has checked, over the
// defaults of Default.
func decodeDocument(name, src string) (document, toml.MetaData, error) {
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
		return doc, md, syntaxError(name, src, err)
	}
	return doc, md, nil
}

// newExperiment returns the Experiment of the decoded doc, with room for
// its methods (filled by decodeMethod), the sweeps, and the key lines and
// override origins of c.
func newExperiment(name string, doc *document, md *toml.MetaData, sweeps []Sweep, c *checker) *Experiment {
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
		Sweeps:      sweeps,
		lines:       c.lines,
		sets:        c.sets,
		defined:     make(map[string]bool, len(md.Keys())),
	}
	for _, k := range md.Keys() {
		e.defined[k.String()] = true
	}
	return e
}

// decodeMethod fills e.Methods[i] from the [[method]] table m, decoding
// its parameters from raw TOML with md (so that md no longer counts them
// as undecoded) and checking their lists (paramLists). A parameter table
// that does not decode is a problem recorded in c, and leaves
// e.Methods[i] empty.
func (c *checker) decodeMethod(e *Experiment, i int, m methodDoc, md *toml.MetaData) {
	params := map[string]any{}
	if err := md.PrimitiveDecode(m.Params, &params); err != nil {
		p := keyPath{"method"}.index(i).child("params")
		c.list = append(c.list, &Error{File: c.file, Line: c.lines[p.String()], Key: p.String(),
			Msg: c.message("%s: %v", p, err), Err: err})
		return
	}
	pp := keyPath{"method"}.index(i).child("params")
	c.paramLists(params, pp)
	pl, ps := c.paramOrigins(params, pp)
	e.Methods[i] = Method{
		Name: m.Name, Plugin: m.Plugin, Path: m.Path,
		Params: params, ParamLines: pl,
		File: c.file, Line: c.lines[keyPath{"method"}.index(i).String()],
		Optimizer: m.Optimizer, OptimizerKeys: c.written[keyPath{"method"}.index(i).child("optimizer").String()],
		Schedule: m.Schedule, ScheduleKeys: c.written[keyPath{"method"}.index(i).child("schedule").String()],
		TrainTable: m.Train, TrainKeys: c.written[keyPath{"method"}.index(i).child("train").String()],
		sets: ps,
	}
}

// treeMethodNames returns the names of the methods of a decoded tree, by
// index ("" for a method without a name that is a string), for the labels
// of messages (errs.methods).
func treeMethodNames(tree map[string]any) []string {
	list, _ := asArray(tree["method"])
	out := make([]string, len(list))
	for i, x := range list {
		if m, ok := x.(map[string]any); ok {
			out[i], _ = m["name"].(string)
		}
	}
	return out
}

// methodTables returns the keys written in every method's
// [method.optimizer] and [method.schedule] of the checked tree, sorted,
// by the table's key ("method[1].optimizer").
func methodTables(tree map[string]any) map[string][]string {
	out := map[string][]string{}
	list, _ := asArray(tree["method"])
	for i, x := range list {
		m, _ := x.(map[string]any)
		for _, table := range []string{"optimizer", "schedule", "train"} {
			if t, ok := m[table].(map[string]any); ok && len(t) > 0 {
				out[keyPath{"method"}.index(i).child(table).String()] = slices.Sorted(maps.Keys(t))
			}
		}
	}
	return out
}

// paramOrigins returns where the parameters of the method whose params
// table is at pp come from: the line of each one written in the file, and
// the --set override of each one an override set, keyed
// "params.<name>" (nil when no override set one).
func (c *checker) paramOrigins(params map[string]any, pp keyPath) (map[string]int, map[string]string) {
	pl := make(map[string]int, len(params))
	var ps map[string]string
	for k := range params {
		if l, ok := c.lines[pp.child(k).String()]; ok {
			pl[k] = l
		}
		if a := origin(c.sets, pp.child(k).String()); a != "" {
			if ps == nil {
				ps = map[string]string{}
			}
			ps["params."+keyPath{k}.String()] = a
		}
	}
	return pl, ps
}

// undecoded records as unknown every key the decoder had nowhere to put:
// defence in depth behind the schema checks. Values nested inside a
// parameter are ValidateParams' business.
func (c *checker) undecoded(md *toml.MetaData) {
	for _, k := range md.Undecoded() {
		if len(k) >= 2 && k[0] == "method" && k[1] == "params" {
			continue
		}
		p := keyPath(k)
		c.add(c.lines[p.String()], p.String(), "unknown key %q", p.String())
	}
}

// applyDerivedDefaults fills in the defaults that depend on other keys,
// where the file does not write the key: data.augment (crop and flip for
// CIFAR, none otherwise) and eval.temperature (validation when there is a
// validation split, else test-halves, with a note).
func (e *Experiment) applyDerivedDefaults() {
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
			note := "eval.temperature defaults to \"test-halves\" because data.validation = 0"
			if e.Data.Dataset == DatasetNumPy {
				note += " (write eval.temperature = \"validation\" to fit it on the x_val and y_val of an npz file)"
			}
			e.Notes = append(e.Notes, note)
		}
	}
}

// encodeTree writes a decoded tree back as TOML text.
func encodeTree(tree map[string]any) (string, error) {
	var b strings.Builder
	if err := toml.NewEncoder(&b).Encode(tree); err != nil {
		return "", fmt.Errorf("encoding the overridden file: %w", err)
	}
	return b.String(), nil
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

// syntaxError turns a decoder error into an *Error citing the line and
// column, followed by the source lines around it with a caret under the
// column (see sourceContext).
//
// The line is recomputed from the error's byte offset rather than taken
// from the decoder: toml v1.6.0 reports the NEXT line when the offending
// character is the newline that ends a line (an unterminated table header
// "[train", a key without "=", a string ending in a backslash), and some
// errors at the end of the input carry line 0 or the previous line.
func syntaxError(name, src string, err error) error {
	var pe toml.ParseError
	if !errors.As(err, &pe) {
		return &Error{File: name, Msg: printable(err.Error()), Err: err}
	}
	// The decoder drops a leading byte-order mark before lexing, so its
	// offsets are relative to the text after it.
	src = strings.TrimPrefix(src, "\uFEFF")
	at := min(max(pe.Position.Start, 0), len(src))
	line := strings.Count(src[:at], "\n") + 1
	col := at - (strings.LastIndexByte(src[:at], '\n') + 1)
	msg := printable(pe.Message) + "\n" + sourceContext(src, line, col)
	return &Error{File: name, Line: line, Col: col + 1, Msg: msg, Err: err}
}

// sourceContext renders line n of src (1-based) and up to two lines before
// it, numbered, and a caret under byte offset col of line n. Tabs are
// expanded and non-printable characters escaped (see printable), and long
// lines are shortened around the caret, so that the context cannot drive
// the terminal.
func sourceContext(src string, n, col int) string {
	lines := strings.Split(src, "\n")
	var b strings.Builder
	for i := max(n-2, 1); i <= n && i <= len(lines); i++ {
		text := strings.TrimSuffix(lines[i-1], "\r")
		at := len(text)
		if i == n {
			at = min(col, len(text))
		}
		before, after := displayAround(text, at)
		fmt.Fprintf(&b, "%7d | %s%s\n", i, before, after)
		if i == n {
			fmt.Fprintf(&b, "%s^", strings.Repeat(" ", 10+utf8.RuneCountInString(before)))
		}
	}
	return b.String()
}

// displayAround returns the display forms of text before and after byte
// offset at, each cut to about snippetContext runes away from at with "…".
func displayAround(text string, at int) (before, after string) {
	before = printable(strings.ReplaceAll(text[:at], "\t", "    "))
	after = printable(strings.ReplaceAll(text[at:], "\t", "    "))
	if r := []rune(before); len(r) > 2*snippetContext {
		before = "…" + string(r[len(r)-2*snippetContext:])
	}
	if r := []rune(after); len(r) > 2*snippetContext {
		after = string(r[:2*snippetContext]) + "…"
	}
	return before, after
}

// snippetContext is how many runes of a line snippet shows on either side
// of the column it is about.
const snippetContext = 30

// snippet returns line quoted as by strconv.Quote (so that control
// characters and bytes that are not UTF-8 print as escapes), shortened to
// at most snippetContext runes before and after byte offset col, with "…"
// where it was cut.
func snippet(line string, col int) string {
	var starts []int // byte offset of every rune (or invalid byte)
	for i := 0; i < len(line); {
		starts = append(starts, i)
		_, n := utf8.DecodeRuneInString(line[i:])
		i += n
	}
	k, _ := slices.BinarySearch(starts, col)
	lo, hi := max(k-snippetContext, 0), min(k+snippetContext, len(starts))
	start, end := 0, len(line)
	if lo > 0 {
		start = starts[lo]
	}
	if hi < len(starts) {
		end = starts[hi]
	}
	s := line[start:end]
	if start > 0 {
		s = "…" + s
	}
	if end < len(line) {
		s += "…"
	}
	return strconv.Quote(s)
}

// textError reports the first byte of src that no TOML file may contain,
// the same ones the decoder rejects, with its exact line and column (the
// decoder cites the byte before a control character) and a one-line
// message that shows it escaped: a byte that is not UTF-8, a control
// character other than tab, or a carriage return not followed by a
// newline. A leading byte-order mark is allowed. It returns nil if there
// is none.
func textError(name, src string) *Error {
	line, lineStart := 1, 0
	for i := 0; i < len(src); {
		r, n := utf8.DecodeRuneInString(src[i:])
		var what, why string
		switch {
		case r == utf8.RuneError && n == 1:
			what = fmt.Sprintf("invalid UTF-8 byte 0x%02x", src[i])
			why = "an experiment file must be UTF-8 text (is it a binary file?)"
		case r == '\n':
			line, lineStart = line+1, i+1
		case r == '\r' && strings.HasPrefix(src[i+1:], "\n"), r == '\t':
		case r == 0:
			what = "NUL byte"
			why = "an experiment file must be UTF-8 text (is it a binary or UTF-16 file?)"
		case r < 0x20 || r == 0x7f:
			what = fmt.Sprintf("control character %U", r)
			why = "TOML allows no control characters other than tab and newline"
		}
		if what != "" {
			text := src[lineStart:]
			if j := strings.IndexByte(text, '\n'); j >= 0 {
				text = text[:j]
			}
			return &Error{File: name, Line: line, Col: i - lineStart + 1,
				Msg: fmt.Sprintf("%s in %s: %s", what, snippet(text, i-lineStart), why)}
		}
		i += n
	}
	return nil
}

// checker walks the generic decoded tree against the schema types.
type checker struct {
	errs
	lines map[string]int
	// written lists the keys written in each method's [method.optimizer]
	// and [method.schedule] (methodTables).
	written map[string][]string
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
	case reflect.Map:
		// Tables with free keys (data.label_noise.map): Validate checks the
		// keys, the decoder their values' types.
		m, ok := v.(map[string]any)
		if !ok {
			c.add(c.line(p), p.String(), "%s must be a table (got %s)", p, describe(v))
			return
		}
		for k, x := range m {
			c.value(x, t.Elem(), p.child(k))
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
	hint := ""
	if _, isArray := asArray(got); isArray && !strings.HasPrefix(want, "an array") &&
		len(p) > 0 && !strings.HasPrefix(p[len(p)-1], indexPrefix) {
		hint = "; a list of values (a sweep) may be written only for method parameters, the numbers of [train], [train.optimizer] and [train.schedule] other than eval_batch_size, threads and dump_params_every, and data.label_noise.rate and seed"
		if len(p) > 2 && p[0] == "method" && (p[2] == "optimizer" || p[2] == "schedule" || p[2] == "train") {
			table := "train." + p[2]
			if p[2] == "train" {
				table = "train"
			}
			hint = fmt.Sprintf("; [method.%s] takes one value per key, not a sweep: sweep the key in [%s] (for the methods that do not set it), or write one [[method]] per value", p[2], table)
		}
	}
	c.add(c.line(p), p.String(), "%s must be %s (got %s)%s", p, want, describe(got), hint)
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
