// Package docs_test keeps the tables in the documentation honest: every
// block of a markdown file under docs/ that is introduced by
//
//	<!-- host table ARGS -->
//
// and closed by <!-- end --> must be exactly what `host table ARGS` prints
// (paths in ARGS relative to the repository root; an argument with spaces
// is written in double quotes, as in a shell). Run
//
//	go test ./docs -update
//
// to regenerate the blocks after the results files change.
package docs_test

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/optlab/optlab/host/cli"
	"github.com/optlab/optlab/host/model"
	"github.com/optlab/optlab/sdk/optim"
)

var update = flag.Bool("update", false, "rewrite the generated tables in the docs")

var block = regexp.MustCompile(`(?s)(<!-- host table ([^\n]*?) -->\n)(.*?)(<!-- end -->)`)

// splitArgs splits a block's arguments at spaces, keeping what double
// quotes enclose together (without the quotes).
func splitArgs(s string) []string {
	var out []string
	var cur strings.Builder
	inQuote, started := false, false
	for _, r := range s {
		switch {
		case r == '"':
			inQuote, started = !inQuote, true
		case r == ' ' && !inQuote:
			if started {
				out = append(out, cur.String())
				cur.Reset()
				started = false
			}
		default:
			cur.WriteRune(r)
			started = true
		}
	}
	if started {
		out = append(out, cur.String())
	}
	return out
}

func TestSplitArgs(t *testing.T) {
	got := splitArgs(`a.jsonl  --baseline "OT-MDR σ 0" --where "method=SAM|SWA-SAM" ""`)
	want := []string{"a.jsonl", "--baseline", "OT-MDR σ 0", "--where", "method=SAM|SWA-SAM", ""}
	if fmt.Sprint(got) != fmt.Sprint(want) || len(got) != len(want) {
		t.Errorf("splitArgs = %q, want %q", got, want)
	}
}

func TestGeneratedTables(t *testing.T) {
	files, err := filepath.Glob("*.md")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var failed bool
		out := block.ReplaceAllFunc(b, func(m []byte) []byte {
			sub := block.FindSubmatch(m)
			n++
			args := splitArgs(string(sub[2]))
			for i, a := range args {
				if strings.HasSuffix(a, ".jsonl") {
					args[i] = filepath.Join("..", a)
				}
			}
			var got, stderr bytes.Buffer
			if code := cli.Main(append([]string{"table"}, args...), &got, &stderr); code != 0 {
				t.Errorf("%s: host table %s: exit code %d: %s", f, sub[2], code, stderr.String())
				failed = true
				return m
			}
			want := got.String()
			if !*update && string(sub[3]) != want {
				t.Errorf("%s: the block of `host table %s` differs from what it prints (go test ./docs -update):\n--- in the file\n%s\n--- printed\n%s", f, sub[2], sub[3], want)
			}
			return append(append(append([]byte{}, sub[1]...), want...), sub[4]...)
		})
		if *update && !failed && !bytes.Equal(out, b) {
			if err := os.WriteFile(f, out, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	if n == 0 {
		t.Fatal("no generated table blocks found in docs/*.md")
	}
}

var opBlock = regexp.MustCompile(`(?s)(<!-- op table -->\n)(.*?)(<!-- end -->)`)

// TestOpTable keeps docs/PLUGINS.md's op table equal to the op set's one
// source, optim.OpSet: every op with its protocol minor, the registers it
// sets, its listing (the fields in its listing format) and what it does.
func TestOpTable(t *testing.T) {
	var b strings.Builder
	b.WriteString("| op | minor | sets | listing | effect |\n|---|---|---|---|---|\n")
	field := regexp.MustCompile(`\{(\w+)(:\w+)?\??\}`)
	for _, s := range optim.OpSet() {
		listing := strings.NewReplacer("[[", "⟦", "]]", "⟧").Replace(s.Format)
		listing = field.ReplaceAllStringFunc(listing, func(m string) string {
			if strings.HasSuffix(m, "?}") {
				return ""
			}
			return strings.ToLower(field.FindStringSubmatch(m)[1])
		})
		listing = strings.NewReplacer("⟦", "[", "⟧", "]", "|", `\|`).Replace(listing)
		sets := strings.Join(s.Regs, ", ")
		if s.Segs || s.Arith {
			sets += " (segment register" + map[bool]string{true: " when an operand is one", false: ""}[s.Arith] + ")"
		}
		fmt.Fprintf(&b, "| `%s` | %d | %s | `%s` | %s |\n", s.Name, s.Since, sets, listing, strings.ReplaceAll(s.Doc, "|", `\|`))
	}
	const f = "PLUGINS.md"
	doc, err := os.ReadFile(f)
	if err != nil {
		t.Fatal(err)
	}
	m := opBlock.FindSubmatchIndex(doc)
	if m == nil {
		t.Fatalf("%s has no <!-- op table --> block", f)
	}
	want := b.String()
	if got := string(doc[m[4]:m[5]]); got != want {
		if !*update {
			t.Fatalf("%s's op table is not optim.OpSet's (go test ./docs -update):\n--- in the file\n%s\n--- from the op set\n%s", f, got, want)
		}
		out := append(append(append([]byte{}, doc[:m[4]]...), want...), doc[m[5]:]...)
		if err := os.WriteFile(f, out, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// The architecture lists of docs/EXPERIMENTS.md and README.md, and the
// PyTorch twins of bench/torch_models.py (its ZOO), name every built-in
// architecture of the model package (a list that omitted cnn-small and
// lenet5, and a README arch the twins could not build, were found by a
// user).
func TestArchLists(t *testing.T) {
	names := model.Builtin().Names()
	for _, f := range []string{"EXPERIMENTS.md", "../README.md"} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range names {
			if !bytes.Contains(b, []byte("`"+n+"`")) {
				t.Errorf("%s does not list the architecture `%s`", f, n)
			}
		}
	}
	zoo, err := os.ReadFile("../bench/torch_models.py")
	if err != nil {
		t.Fatal(err)
	}
	i := bytes.Index(zoo, []byte("\nZOO = {"))
	if i < 0 {
		t.Fatal("bench/torch_models.py has no ZOO")
	}
	body := zoo[i : i+bytes.Index(zoo[i:], []byte("\n}"))]
	for _, n := range names {
		if !bytes.Contains(body, []byte(fmt.Sprintf("%q:", n))) {
			t.Errorf("bench/torch_models.py's ZOO cannot build `%s`", n)
		}
	}
}
