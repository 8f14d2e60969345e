package experiment

import (
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/BurntSushi/toml"
)

// testArchs mirrors the model package's list of architectures.
func testArchs() []string {
	return []string{"mlp", "cnn", "resnet10", "resnet18", "wrn28-10", "wrn28-10-ref",
		"pyramidnet101", "densenet121", "mobilenet", "efficientnet-b0"}
}

// withMethod wraps body (which starts on line 2) into a file with a name
// and one method at the end.
func withMethod(body string) string {
	return "name = \"t\"\n" + body + "\n[[method]]\nname = \"m\"\nplugin = \"sgd\"\n"
}

func TestParseStrictErrors(t *testing.T) {
	tests := []struct {
		name string
		src  string
		want []string // substrings of the error, each with its line
	}{
		{
			name: "unknown key with line and suggestion",
			src:  withMethod("[train]\nepochs = 3\nbatchsize = 64"),
			want: []string{`t.toml:4: unknown key "train.batchsize"; did you mean "batch_size"?`},
		},
		{
			name: "unknown key lists valid keys",
			src:  withMethod("[eval]\nzzz = 1"),
			want: []string{`t.toml:3: unknown key "eval.zzz" (valid keys: temperature, aac_steps, mc_samples, every_epochs, best_epoch, corruptions, tensorboard, tensorboard_every_steps)`},
		},
		{
			name: "unknown top-level table",
			src:  withMethod("[optimizer]\nlr = 0.1"),
			want: []string{`t.toml:2: unknown key "optimizer"`},
		},
		{
			name: "unknown key in method",
			src:  "name = \"t\"\n[[method]]\nname = \"a\"\nplugin = \"sgd\"\n[[method]]\nname = \"b\"\nplugn = \"sam\"\n",
			want: []string{`t.toml:7: method "b": unknown key "plugn"; did you mean "plugin"?`},
		},
		{
			name: "case variant key",
			src:  withMethod("[train.optimizer]\nLr = 0.1"),
			want: []string{`t.toml:3: key "train.optimizer.Lr" must be written "train.optimizer.lr" (keys are case-sensitive)`},
		},
		{
			name: "case variant table",
			src:  withMethod("[Train]\nepochs = 1"),
			want: []string{`t.toml:2: key "Train" must be written "train"`},
		},
		{
			name: "case variant top-level key",
			src:  "Name = \"t\"\n[[method]]\nname = \"m\"\nplugin = \"sgd\"\n",
			want: []string{`t.toml:1: key "Name" must be written "name"`},
		},
		{
			name: "duplicate keys differing in case",
			src:  withMethod("[train]\nseeds = [1]\nSEEDS = [2]"),
			want: []string{`t.toml:4: duplicate key "train.SEEDS": already written as "train.seeds" on line 3`},
		},
		{
			name: "duplicate keys differing in case, inline table",
			src:  withMethod("data = {dataset = \"csv\", DataSet = \"cifar10\"}"),
			want: []string{`t.toml:2: duplicate key "data.dataset": already written as "data.DataSet" on line 2`},
		},
		{
			name: "wrong type string for int",
			src:  withMethod("[train]\nbatch_size = \"64\""),
			want: []string{`t.toml:3: train.batch_size must be an integer (got string "64")`},
		},
		{
			name: "wrong type float for int",
			src:  withMethod("[train]\nepochs = 10.0"),
			want: []string{`t.toml:3: train.epochs must be an integer (got float 10)`},
		},
		{
			name: "wrong type array element",
			src:  withMethod("[train]\nseeds = [\n  1,\n  \"two\",\n]"),
			want: []string{`t.toml:5: train.seeds[1] must be an integer (got string "two")`},
		},
		{
			name: "wrong type scalar for array",
			src:  withMethod("[model]\narchs = \"cnn\""),
			want: []string{`t.toml:3: model.archs must be an array of strings (got string "cnn")`},
		},
		{
			name: "wrong type table for scalar",
			src:  withMethod("[data.dataset]\nx = 1"),
			want: []string{`t.toml:2: data.dataset must be a string (got a table)`},
		},
		{
			name: "method as plain table",
			src:  "name = \"t\"\n[method]\nname = \"m\"\n",
			want: []string{`t.toml:2: method must be an array of tables (got a table)`},
		},
		{
			name: "params not a table",
			src:  "name = \"t\"\n[[method]]\nname = \"m\"\nplugin = \"sam\"\nparams = 3\n",
			want: []string{`t.toml:5: method "m": params must be a table (got integer 3)`},
		},
		{
			name: "boolean as string",
			src:  withMethod("[data]\nnormalize = \"yes\""),
			want: []string{`t.toml:3: data.normalize must be a boolean (got string "yes")`},
		},
		{
			name: "tensorboard as string",
			src:  withMethod("[eval]\ntensorboard = \"on\""),
			want: []string{`t.toml:3: eval.tensorboard must be a boolean (got string "on")`},
		},
		{
			name: "tensorboard interval as float",
			src:  withMethod("[eval]\ntensorboard_every_steps = 2.5"),
			want: []string{`t.toml:3: eval.tensorboard_every_steps must be an integer (got float 2.5)`},
		},
		{
			name: "datetime",
			src:  withMethod("[data]\ndir = 2024-01-01"),
			want: []string{`t.toml:3: data.dir must be a string (got a datetime)`},
		},
		{
			name: "several problems sorted by line",
			src:  withMethod("[train]\nfoo = 1\nepochs = \"x\"\n[eval]\nbar = 2"),
			want: []string{"t.toml:3: unknown key \"train.foo\"", "\nt.toml:4: train.epochs must be", "\nt.toml:6: unknown key \"eval.bar\""},
		},
		{
			name: "syntax error with position",
			src:  "name = \"t\"\n[train]\nepochs = = 3\n",
			want: []string{"t.toml:3: ", "epochs = = 3", "^"},
		},
		{
			name: "exact duplicate key",
			src:  "name = \"t\"\nname = \"u\"\n",
			want: []string{"t.toml:2: ", "already been defined"},
		},
		{
			name: "quoted key",
			src:  withMethod("[train]\n\"batch size\" = 3"),
			want: []string{`t.toml:3: unknown key "train.\"batch size\""`},
		},
		{
			name: "dotted key",
			src:  withMethod("train.optimizer.lrr = 0.1"),
			want: []string{`t.toml:2: unknown key "train.optimizer.lrr"; did you mean "lr"?`},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.src), "t.toml")
			if err == nil {
				t.Fatalf("Parse succeeded, want error containing %q", tc.want)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error\n%s\ndoes not contain\n%s", err, w)
				}
			}
		})
	}
}

func TestParseSyntaxErrorUnwraps(t *testing.T) {
	_, err := Parse([]byte("a = [1,\n"), "t.toml")
	var pe toml.ParseError
	if !errors.As(err, &pe) {
		t.Fatalf("error %v does not wrap toml.ParseError", err)
	}
	var e *Error
	if !errors.As(err, &e) || e.Line == 0 || e.File != "t.toml" {
		t.Fatalf("error %#v has no file/line", err)
	}
}

func TestParseErrorListUnwraps(t *testing.T) {
	_, err := Parse([]byte(withMethod("[train]\nfoo = 1")), "t.toml")
	var list ErrorList
	if !errors.As(err, &list) || len(list) != 1 {
		t.Fatalf("error %v is not a one-element ErrorList", err)
	}
	var e *Error
	if !errors.As(err, &e) || e.Line != 3 || e.Key != "train.foo" {
		t.Fatalf("errors.As gives %#v, want line 3 key train.foo", e)
	}
}

func TestParseDefaults(t *testing.T) {
	e, err := Parse([]byte("name = \"q\"\n[[method]]\nname = \"SGD\"\nplugin = \"sgd\"\n"), "q.toml")
	if err != nil {
		t.Fatal(err)
	}
	want := Default()
	want.Name = "q"
	want.File = "q.toml"
	want.Notes = e.Notes
	want.Methods = e.Methods
	want.lines = e.lines
	want.defined = e.defined
	if !reflect.DeepEqual(e, want) {
		t.Errorf("Parse of a minimal file\n got %+v\nwant %+v", e, want)
	}
	if len(e.Notes) != 1 || !strings.Contains(e.Notes[0], "test-halves") {
		t.Errorf("Notes = %q, want a note about the temperature fallback", e.Notes)
	}
	if err := Validate(e, testArchs()); err != nil {
		t.Errorf("defaults do not validate: %v", err)
	}
	if e.ResultsDir != "results" {
		t.Errorf("ResultsDir = %q, want results", e.ResultsDir)
	}
	// An npz file may hold its own validation split: the note says how to
	// use it.
	e, err = Parse([]byte("name = \"q\"\n[data]\ndataset = \"npz\"\npath = \"d.npz\"\n[[method]]\nname = \"SGD\"\nplugin = \"sgd\"\n"), "q.toml")
	if err != nil {
		t.Fatal(err)
	}
	if len(e.Notes) != 1 || !strings.Contains(e.Notes[0], `write eval.temperature = "validation" to fit it on the x_val and y_val of an npz file`) {
		t.Errorf("npz: Notes = %q", e.Notes)
	}
	if e.Data.Layout != LayoutNCHW {
		t.Errorf("npz: Layout = %q, want %q", e.Data.Layout, LayoutNCHW)
	}
}

func TestParseResolvedDefaults(t *testing.T) {
	tests := []struct {
		name        string
		body        string
		augment     []string
		temperature string
	}{
		{"digits", "", []string{}, TemperatureTestHalves},
		{"cifar augments", "[data]\ndataset = \"cifar10\"\ndir = \"d\"", []string{"crop", "flip"}, TemperatureTestHalves},
		{"cifar explicit no augment", "[data]\ndataset = \"cifar100\"\ndir = \"d\"\naugment = []", []string{}, TemperatureTestHalves},
		{"validation split", "[data]\nvalidation = 0.1", []string{}, TemperatureValidation},
		{"explicit none", "[data]\nvalidation = 0.1\n[eval]\ntemperature = \"none\"", []string{}, TemperatureNone},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e, err := Parse([]byte(withMethod(tc.body)), "t.toml")
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(e.Data.Augment, tc.augment) {
				t.Errorf("augment = %q, want %q", e.Data.Augment, tc.augment)
			}
			if e.Eval.Temperature != tc.temperature {
				t.Errorf("temperature = %q, want %q", e.Eval.Temperature, tc.temperature)
			}
		})
	}
}

func TestParseOverridesDefaults(t *testing.T) {
	src := `name = "full"
results_dir = "out"
[data]
dataset = "csv"
path = "x.csv"
classes = 3
[model]
archs = ["mlp*2"]
[train]
seeds = [7, 8, 9]
[train.optimizer]
name = "adam"
betas = [0.8, 0.99]
lr = 1
[[method]]
name = "A"
path = "bin/a"
`
	e, err := Parse([]byte(src), "f.toml")
	if err != nil {
		t.Fatal(err)
	}
	if e.ResultsDir != "out" || e.Data.Dataset != "csv" || e.Data.Classes != 3 ||
		!reflect.DeepEqual(e.Train.Seeds, []int64{7, 8, 9}) ||
		!reflect.DeepEqual(e.Train.Optimizer.Betas, []float64{0.8, 0.99}) ||
		e.Train.Optimizer.LR != 1 || e.Train.Optimizer.Eps != 1e-8 ||
		!reflect.DeepEqual(e.Model.Archs, []string{"mlp*2"}) {
		t.Errorf("decoded %+v", e)
	}
	// Decoding must not have written through to a shared default slice.
	if d := Default(); !reflect.DeepEqual(d.Train.Seeds, []int64{1}) || !reflect.DeepEqual(d.Train.Optimizer.Betas, []float64{0.9, 0.999}) {
		t.Errorf("defaults changed: %+v", d.Train)
	}
}

func TestParseMethodParamsAndLines(t *testing.T) {
	src := `name = "p"

[[method]]
name = "SGD"
plugin = "sgd"

[[method]]
name = "SAM"
plugin = "sam"
[method.params]
rho = 0.05
adaptive = true
"odd key" = "x"
n = 3

[[method]]
name = "inline"
path = "bin/x"
params = { a = 1, b = [1, 2] }
`
	e, err := Parse([]byte(src), "p.toml")
	if err != nil {
		t.Fatal(err)
	}
	if len(e.Methods) != 3 {
		t.Fatalf("got %d methods", len(e.Methods))
	}
	sgd, sam, inl := e.Methods[0], e.Methods[1], e.Methods[2]
	if sgd.Line != 3 || sam.Line != 7 || inl.Line != 16 {
		t.Errorf("method lines = %d, %d, %d; want 3, 7, 16", sgd.Line, sam.Line, inl.Line)
	}
	if sgd.Params == nil || len(sgd.Params) != 0 {
		t.Errorf("SGD params = %#v, want empty non-nil map", sgd.Params)
	}
	wantParams := map[string]any{"rho": 0.05, "adaptive": true, "odd key": "x", "n": int64(3)}
	if !reflect.DeepEqual(sam.Params, wantParams) {
		t.Errorf("SAM params = %#v, want %#v", sam.Params, wantParams)
	}
	wantLines := map[string]int{"rho": 11, "adaptive": 12, "odd key": 13, "n": 14}
	if !reflect.DeepEqual(sam.ParamLines, wantLines) {
		t.Errorf("SAM param lines = %v, want %v", sam.ParamLines, wantLines)
	}
	if inl.ParamLines["a"] != 19 || inl.ParamLines["b"] != 19 {
		t.Errorf("inline param lines = %v", inl.ParamLines)
	}
	if sam.File != "p.toml" {
		t.Errorf("File = %q", sam.File)
	}
	for key, line := range map[string]int{"name": 1, "method[1].params.rho": 11, "method[2].path": 18, "method[0]": 3} {
		if got := e.Line(key); got != line {
			t.Errorf("Line(%q) = %d, want %d", key, got, line)
		}
	}
}

func TestLoad(t *testing.T) {
	e, err := Load(filepath.Join("testdata", "quickstart.toml"))
	if err != nil {
		t.Fatal(err)
	}
	if e.File != filepath.Join("testdata", "quickstart.toml") || e.Name != "quickstart" {
		t.Errorf("File, Name = %q, %q", e.File, e.Name)
	}
	if err := Validate(e, testArchs()); err != nil {
		t.Error(err)
	}
	if _, err := Load(filepath.Join("testdata", "missing.toml")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Load(missing) = %v, want ErrNotExist", err)
	}
}

// TestTestdata parses every testdata/valid-*.toml and testdata/invalid-*.toml
// file; the first line of an invalid file is "# want: <substring>".
func TestTestdata(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "*.toml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no testdata: %v", err)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			e, err := Parse(data, filepath.Base(f))
			if err == nil {
				err = Validate(e, testArchs())
			}
			first, _, _ := strings.Cut(string(data), "\n")
			want, invalid := strings.CutPrefix(first, "# want: ")
			switch {
			case invalid && err == nil:
				t.Errorf("no error, want %q", want)
			case invalid && !strings.Contains(err.Error(), want):
				t.Errorf("error\n%v\ndoes not contain %q", err, want)
			case !invalid && err != nil:
				t.Errorf("unexpected error: %v", err)
			}
		})
	}
}

// TestDocsExamples checks that every complete example in
// docs/EXPERIMENTS.md (a toml block with a name and a [[method]]) parses and
// validates.
func TestDocsExamples(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "..", "docs", "EXPERIMENTS.md"))
	if err != nil {
		t.Skipf("docs not found: %v", err)
	}
	blocks := regexp.MustCompile("(?s)```toml\n(.*?)```").FindAllStringSubmatch(string(data), -1)
	n := 0
	for _, b := range blocks {
		if !strings.Contains(b[1], "[[method]]") {
			continue
		}
		n++
		e, err := Parse([]byte(b[1]), "EXPERIMENTS.md example")
		if err == nil {
			err = Validate(e, testArchs())
		}
		if err != nil {
			t.Errorf("docs example %d: %v\n%s", n, err, b[1])
		}
	}
	if n < 2 {
		t.Errorf("found %d complete examples in the docs, want ≥ 2", n)
	}
}

// TestParseSyntaxErrorOutOfRangePosition covers inputs for which toml
// v1.6.0 reports a position past the input, on which its
// ErrorWithPosition panics (BurntSushi/toml#498, #517).
func TestParseSyntaxErrorOutOfRangePosition(t *testing.T) {
	tests := []string{"\"\\", "a = \"\\", "\"\r\n\"", "\"\n", "name = \"x\"\nb = \"\\"}
	for _, src := range tests {
		t.Run(src, func(t *testing.T) {
			_, err := Parse([]byte(src), "t.toml")
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("Parse(%q) = %v, want *Error", src, err)
			}
			if n := strings.Count(src, "\n") + 1; e.Line > n {
				t.Errorf("line %d is past the end of a %d-line input", e.Line, n)
			}
		})
	}
}

// TestDocsReferenceCoversEveryKey checks that the reference tables of
// docs/EXPERIMENTS.md have a row for every key the decoder accepts, under
// the heading of its table, and no row for a key it does not.
func TestDocsReferenceCoversEveryKey(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "..", "docs", "EXPERIMENTS.md"))
	if err != nil {
		t.Skipf("docs not found: %v", err)
	}
	// The documented keys, by table: "" is "## Top level", "method" is
	// "## `[[method]]`", "train.optimizer" is "### `[train.optimizer]`".
	documented := map[string]map[string]bool{}
	heading := regexp.MustCompile("^#+ (?:Top level|`\\[\\[?([a-z_.]+)\\]\\]?`)\\s*$")
	row := regexp.MustCompile("^\\| `([a-z_0-9]+)` \\|")
	section, inRef := "", false
	for _, line := range strings.Split(string(data), "\n") {
		if m := heading.FindStringSubmatch(line); m != nil {
			section, inRef = m[1], true
			continue
		}
		if strings.HasPrefix(line, "## ") {
			inRef = false
		}
		if m := row.FindStringSubmatch(line); m != nil && inRef {
			if documented[section] == nil {
				documented[section] = map[string]bool{}
			}
			documented[section][m[1]] = true
		}
	}
	accepted := map[string]map[string]bool{}
	var walk func(section string, typ reflect.Type)
	walk = func(section string, typ reflect.Type) {
		for i := range typ.NumField() {
			f := typ.Field(i)
			key := f.Tag.Get("toml")
			if key == "" {
				continue
			}
			ft := f.Type
			if ft.Kind() == reflect.Slice && ft.Elem().Kind() == reflect.Struct {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct && ft != reflect.TypeOf(toml.Primitive{}) {
				walk(strings.TrimPrefix(section+"."+key, "."), ft)
				continue
			}
			if accepted[section] == nil {
				accepted[section] = map[string]bool{}
			}
			accepted[section][key] = true
		}
	}
	walk("", reflect.TypeOf(document{}))
	for section, keys := range accepted {
		for key := range keys {
			if !documented[section][key] {
				t.Errorf("key %q of table %q has no row in docs/EXPERIMENTS.md", key, section)
			}
		}
	}
	for section, keys := range documented {
		for key := range keys {
			if !accepted[section][key] {
				t.Errorf("docs/EXPERIMENTS.md documents %q in table %q, which the decoder does not accept", key, section)
			}
		}
	}
}

// onlyPrintable reports the first rune of s that is neither printable nor
// one of the allowed ones, or -1 and true.
func onlyPrintable(s string, allowed string) (rune, bool) {
	if !utf8.ValidString(s) {
		return utf8.RuneError, false
	}
	for _, r := range s {
		if !unicode.IsPrint(r) && !strings.ContainsRune(allowed, r) {
			return r, false
		}
	}
	return -1, true
}

// TestParseBinaryInput checks that a file that is not UTF-8 text, such as
// a PNG renamed .toml, gives a one-line error citing the first offending
// byte, with the file's bytes escaped rather than echoed to the terminal.
func TestParseBinaryInput(t *testing.T) {
	random := make([]byte, 256)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range random {
		random[i] = byte(rng.Uint32())
	}
	tests := []struct {
		name      string
		src       string
		line, col int
		want      string
	}{
		{"png", "\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x10", 1, 1,
			`t.toml:1: invalid UTF-8 byte 0x89 in "\x89PNG\r": an experiment file must be UTF-8 text (is it a binary file?)`},
		{"random bytes", string(random), 0, 0, "is it a binary"},
		{"utf-16", "\xff\xfen\x00a\x00m\x00e\x00", 1, 1, "invalid UTF-8 byte 0xff"},
		{"nul after text", "name = \"x\"\nx = 1\x00\x00", 2, 6, `t.toml:2: NUL byte in "x = 1\x00\x00"`},
		{"escape sequence in a key", "name = \"x\"\n\x1b[2J\x1b[31mevil = 1\n", 2, 1,
			`t.toml:2: control character U+001B in "\x1b[2J\x1b[31mevil = 1": TOML allows no control characters other than tab and newline`},
		{"control character in a string", "name = \"a\x07b\"\n", 1, 10, `control character U+0007 in "name = \"a\ab\""`},
		{"lone carriage return", "a = 1\rb = 2\n", 1, 6, `control character U+000D in "a = 1\rb = 2"`},
		{"long line is shortened", "x = \"" + strings.Repeat("y", 100) + "\x01\"", 1, 106,
			`control character U+0001 in "…` + strings.Repeat("y", 30) + `\x01\"": `},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.src), "t.toml")
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("Parse = %v, want an *Error", err)
			}
			msg := err.Error()
			if !strings.Contains(msg, tc.want) {
				t.Errorf("error\n%s\ndoes not contain\n%s", msg, tc.want)
			}
			if tc.line > 0 && (e.Line != tc.line || e.Col != tc.col) {
				t.Errorf("line:col = %d:%d, want %d:%d", e.Line, e.Col, tc.line, tc.col)
			}
			if r, ok := onlyPrintable(msg, ""); !ok {
				t.Errorf("error holds non-printable rune %U or invalid UTF-8: %q", r, msg)
			}
		})
	}
}

// TestParseSyntaxErrorEscapes checks that the source lines shown with a
// syntax error escape characters that could drive the terminal.
func TestParseSyntaxErrorEscapes(t *testing.T) {
	src := "a = 1\n\"k\u202eey\" = = 2\n"
	_, err := Parse([]byte(src), "t.toml")
	if err == nil {
		t.Fatal("no error")
	}
	msg := err.Error()
	if r, ok := onlyPrintable(msg, "\n"); !ok {
		t.Errorf("error holds non-printable rune %U: %q", r, msg)
	}
	if want := `2 | "k\u202eey" = = 2`; !strings.Contains(msg, want) {
		t.Errorf("error\n%s\ndoes not contain %s", msg, want)
	}
}

// TestParseUnterminatedHeader checks that a table header missing its "]"
// is reported on its own line, not on the next one (toml v1.6.0 cites the
// line after the newline it stopped at).
func TestParseUnterminatedHeader(t *testing.T) {
	tests := []struct {
		name, header string
	}{
		{"table", "[train"},
		{"dotted table", "[train."},
		{"array of tables", "[[method"},
		{"array of tables, one bracket", "[[method]"},
		{"crlf", "[train\r"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			src := "name = \"t\"\n# comment\n\nresults_dir = \"r\"\n" + tc.header + "\nepochs = 3\nbatch_size = 8\n"
			_, err := Parse([]byte(src), "t.toml")
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("Parse = %v, want an *Error", err)
			}
			if e.Line != 5 {
				t.Errorf("line %d, want 5:\n%v", e.Line, err)
			}
			if want := "5 | " + strings.TrimSuffix(tc.header, "\r") + "\n"; !strings.Contains(err.Error(), want) {
				t.Errorf("error\n%v\ndoes not show %q", err, want)
			}
			if strings.Contains(err.Error(), "6 | ") {
				t.Errorf("error shows line 6:\n%v", err)
			}
		})
	}
}

// TestLoadResolvesRelativePaths checks that Load resolves the relative
// paths written in a file against the file's folder, not the current
// directory, and leaves absolute paths, blank values and unwritten
// defaults alone. The current directory (the package folder) is never
// the file's folder here.
func TestLoadResolvesRelativePaths(t *testing.T) {
	tmp := t.TempDir()
	sub := filepath.Join(tmp, "exps", "sub")
	abs := filepath.Join(tmp, "abs", "cifar100")
	home, err := os.UserHomeDir()
	if err != nil {
		t.Skip("no home folder:", err)
	}
	type paths struct {
		results, dir, oodDir, path, initFrom string
		methods, archs                       []string
	}
	tests := []struct {
		name string
		file string // path to Load; written with src when src is set
		src  string
		want paths
	}{
		{
			name: "file named relative to the current directory",
			file: filepath.Join("testdata", "paths", "sub", "relative.toml"),
			want: paths{
				results:  filepath.Join("testdata", "paths", "out"),
				path:     filepath.Join("testdata", "paths", "sub", "data", "x.csv"),
				initFrom: filepath.Join("testdata", "paths", "sub", "weights", "w.safetensors"),
				methods:  []string{filepath.Join("testdata", "paths", "sub", "bin", "my-optimizer")},
			},
		},
		{
			name: "absolute, parent and dot paths; default results_dir",
			file: filepath.Join(sub, "cifar.toml"),
			src: "name = \"c\"\n[data]\ndataset = \"cifar10\"\ndir = \"../../data/cifar\"\nood = \"cifar100\"\nood_dir = " +
				strconv.Quote(abs) + "\n[[method]]\nname = \"SGD\"\nplugin = \"sgd\"\n[[method]]\nname = \"A\"\npath = \"./bin/a\"\n" +
				"[[method]]\nname = \"B\"\npath = " + strconv.Quote(filepath.Join(tmp, "b")) + "\n",
			want: paths{
				results: "results",
				dir:     filepath.Join(tmp, "data", "cifar"),
				oodDir:  abs,
				methods: []string{"", filepath.Join(sub, "bin", "a"), filepath.Join(tmp, "b")},
			},
		},
		{
			name: "results_dir written as the default is still relative to the file",
			file: filepath.Join(sub, "written.toml"),
			src:  "name = \"w\"\nresults_dir = \"results\"\n[model]\ninit_from = \"\"\n[[method]]\nname = \"SGD\"\nplugin = \"sgd\"\n",
			want: paths{results: filepath.Join(sub, "results"), methods: []string{""}},
		},
		{
			name: "~/ is the home folder",
			file: filepath.Join(sub, "home.toml"),
			src:  "name = \"h\"\nresults_dir = \"~/optlab-results\"\n[model]\ninit_from = \"~/w.safetensors\"\n[[method]]\nname = \"SGD\"\nplugin = \"sgd\"\n",
			want: paths{results: filepath.Join(home, "optlab-results"), initFrom: filepath.Join(home, "w.safetensors"), methods: []string{""}},
		},
		{
			name: "an npz folder of .npy files",
			file: filepath.Join(sub, "npz.toml"),
			src:  "name = \"n\"\n[data]\ndataset = \"npz\"\npath = \"arrays/\"\n[[method]]\nname = \"SGD\"\nplugin = \"sgd\"\n",
			want: paths{results: "results", path: filepath.Join(sub, "arrays"), methods: []string{""}},
		},
		{
			name: "TorchScript archs, alone, counted and combined; built-in archs as written",
			file: filepath.Join(sub, "script.toml"),
			src:  "name = \"s\"\n[model]\narchs = [\"torchscript:net.pt\", \" torchscript:../m/a.pt * 2 + cnn\", \"cnn\", \"torchscript:" + filepath.Join(tmp, "x.pt") + "\"]\n[[method]]\nname = \"SGD\"\nplugin = \"sgd\"\n",
			want: paths{results: "results", methods: []string{""}, archs: []string{
				"torchscript:" + filepath.Join(sub, "net.pt"),
				"torchscript:" + filepath.Join(tmp, "exps", "m", "a.pt") + "* 2 + cnn",
				"cnn",
				"torchscript:" + filepath.Join(tmp, "x.pt"),
			}},
		},
		{
			name: "blank values are kept for Validate to report",
			file: filepath.Join(sub, "blank.toml"),
			src:  "name = \"b\"\nresults_dir = \" \"\n[data]\ndataset = \"csv\"\npath = \"  \"\n[model]\ninit_from = \" \"\n[[method]]\nname = \"A\"\npath = \" \"\n",
			want: paths{results: " ", path: "  ", initFrom: " ", methods: []string{" "}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if tc.src != "" {
				if err := os.MkdirAll(filepath.Dir(tc.file), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(tc.file, []byte(tc.src), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			e, err := Load(tc.file)
			if err != nil {
				t.Fatal(err)
			}
			got := paths{results: e.ResultsDir, dir: e.Data.Dir, oodDir: e.Data.OODDir, path: e.Data.Path, initFrom: e.Model.InitFrom}
			for _, m := range e.Methods {
				got.methods = append(got.methods, m.Path)
			}
			if tc.want.archs != nil {
				got.archs = e.Model.Archs
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("Load resolved\n %+v\nwant\n %+v", got, tc.want)
			}
		})
	}

	// Parse has no file location and keeps the paths as written.
	data, err := os.ReadFile(tests[0].file)
	if err != nil {
		t.Fatal(err)
	}
	e, err := Parse(data, tests[0].file)
	if err != nil {
		t.Fatal(err)
	}
	if e.ResultsDir != "../out" || e.Data.Path != "data/x.csv" || e.Model.InitFrom != "weights/w.safetensors" || e.Methods[0].Path != "bin/my-optimizer" {
		t.Errorf("Parse changed the paths: %q, %q, %q, %q", e.ResultsDir, e.Data.Path, e.Model.InitFrom, e.Methods[0].Path)
	}
}
