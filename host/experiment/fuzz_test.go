package experiment

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzParse checks that no input makes Parse, Validate, Grid, Shard or
// ValidateParams panic, that errors print no control characters, and that
// the results keep their invariants.
func FuzzParse(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join("testdata", "*.toml"))
	for _, file := range files {
		if data, err := os.ReadFile(file); err == nil {
			f.Add(data)
		}
	}
	for _, s := range []string{
		"",
		"name = \"x\"\n[[method]]\nname = \"m\"\nplugin = \"sgd\"\n",
		"name = \"x\"\nNAME = \"y\"\n",
		"[train]\nLr = 1\nlr = 2\n",
		"a = [\n1,\n",
		"[[method]]\nparams = { a = { b = [1, {c = 2}] } }\n",
		"method = [{name = \"a\", plugin = \"b\", params = {x = 1}}]\nname = \"n\"\n",
		"name = \"\"\"\nx\"\"\"\n[model]\narchs = [\"cnn*999999\", \"a+\", \"*\"]\n",
		"\"\\u00e9\" = 1\n[\"q.r\".'s']\nt = 2024-01-01T00:00:00Z\n",
		"[train.schedule]\nkind = \"step\"\nmilestones = [nan, inf, -0.0]\n",
		"x = '''\n'''''\n[a]\n[[a.b]]\n",
		"name = \"x\"\n[[method]]\nname = \"m\"\nplugin = \"p\"\n[method.params]\n\"\\u00e9\\t\\\"\" = 1\n'lit\\' = 2\n\"\\x41\" = 3\n",
		"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR",
		"a = 1\n[train\nepochs = 3\n",
		"\"k\u202e\" = = 1\n",
		"name = \"s\"\n[train]\nepochs = [1, 2]\noptimizer.lr = [0.1, 1, 0.1]\n[[method]]\nname = \"m\"\nplugin = \"p\"\n[method.params]\nrho = [1, 2.0, \"x\"]\nk = [[]]\nq = [true]\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		_ = keyLines(string(data))
		e, err := Parse(data, "fuzz.toml")
		if err != nil {
			if e != nil {
				t.Fatal("Parse returned both an experiment and an error")
			}
			var list ErrorList
			if errors.As(err, &list) {
				for _, x := range list {
					if x.Line <= 0 {
						t.Errorf("structural error without a line: %v", x)
					}
				}
			}
			if r, ok := onlyPrintable(err.Error(), "\n"); !ok {
				t.Errorf("error holds non-printable rune %U or invalid UTF-8: %q", r, err)
			}
			var e *Error
			if errors.As(err, &e) && e.Line > strings.Count(string(data), "\n")+1 {
				t.Errorf("error cites line %d of a %d-line input: %v", e.Line, strings.Count(string(data), "\n")+1, err)
			}
			return
		}
		for k := range e.defined {
			if !strings.HasPrefix(k, "method") && e.lines[k] == 0 {
				t.Errorf("key %q has no line", k)
			}
		}
		for _, m := range e.Methods {
			for k := range m.Params {
				if m.ParamLines[k] == 0 {
					t.Errorf("method %q: parameter %q has no line", m.Name, k)
				}
			}
		}
		verr := Validate(e, testArchs())
		_ = Validate(e, nil)
		runs := Grid(e)
		if verr == nil {
			keys := map[string]bool{}
			for _, r := range runs {
				if keys[r.Key] {
					t.Errorf("duplicate run key %q in a validated experiment", r.Key)
				}
				keys[r.Key] = true
			}
		}
		for n := 1; n <= 3; n++ {
			total := 0
			for i := 1; i <= n; i++ {
				s, err := Shard(runs, i, n)
				if err != nil {
					t.Fatal(err)
				}
				total += len(s)
			}
			if total != len(runs) {
				t.Errorf("%d shards hold %d runs, want %d", n, total, len(runs))
			}
		}
		for _, m := range e.Methods {
			_, _ = ValidateParams(m, samSchema())
			_, _ = ValidateParams(m, nil)
		}
	})
}
