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
// to regenerate the blocks after the results files change. Blocks
// introduced by
//
//	<!-- devkit-report ARGS -->
//
// are likewise what scripts/devkit-report.py ARGS prints (run from the
// repository root): the GPU figures in BENCHMARKS.md, from the device kit's
// committed output under docs/devkit.
package docs_test

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"os/exec"
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

var devkitBlock = regexp.MustCompile(`(?s)(<!-- devkit-report ([^\n]*?) -->\n)(.*?)(<!-- end -->)`)

// TestDevkitReports keeps the GPU figures in the docs equal to what
// scripts/devkit-report.py makes of the committed device-kit output.
func TestDevkitReports(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Fatal("python3 is needed to regenerate the device kit's report blocks: ", err)
	}
	regenerate(t, devkitBlock, "devkit-report.py", func(args string) ([]byte, error) {
		cmd := exec.Command(py, append([]string{"scripts/devkit-report.py"}, splitArgs(args)...)...)
		cmd.Dir = ".."
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			return nil, fmt.Errorf("%w: %s", err, stderr.String())
		}
		return out, nil
	})
}

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
	regenerate(t, block, "host table", func(args string) ([]byte, error) {
		a := splitArgs(args)
		for i, v := range a {
			if strings.HasSuffix(v, ".jsonl") {
				a[i] = filepath.Join("..", v)
			}
		}
		var got, stderr bytes.Buffer
		if code := cli.Main(append([]string{"table"}, a...), &got, &stderr); code != 0 {
			return nil, fmt.Errorf("exit code %d: %s", code, stderr.String())
		}
		return got.Bytes(), nil
	})
}

// regenerate checks (or with -update rewrites) every block of docs/*.md
// that re matches (submatches: the opening line, its arguments, the body,
// the closing line) against what gen prints for its arguments; name is the
// generator's name in messages. It fails when no file has such a block.
func regenerate(t *testing.T, re *regexp.Regexp, name string, gen func(args string) ([]byte, error)) {
	t.Helper()
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
		failed := false
		out := re.ReplaceAllFunc(b, func(m []byte) []byte {
			sub := re.FindSubmatch(m)
			n++
			got, err := gen(string(sub[2]))
			if err != nil {
				t.Errorf("%s: %s %s: %v", f, name, sub[2], err)
				failed = true
				return m
			}
			if !*update && !bytes.Equal(sub[3], got) {
				t.Errorf("%s: the block of `%s %s` differs from what it prints (go test ./docs -update):\n--- in the file\n%s\n--- printed\n%s", f, name, sub[2], sub[3], got)
			}
			return append(append(append([]byte{}, sub[1]...), got...), sub[4]...)
		})
		if *update && !failed && !bytes.Equal(out, b) {
			if err := os.WriteFile(f, out, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	if n == 0 {
		t.Fatalf("no %s blocks found in docs/*.md", name)
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

// TestDevkitNCU checks scripts/devkit-ncu.py, which makes the profile
// tables of the GPU section: one step's kernels are the difference of two
// runs' (3 and 8 steps), Nsight Compute's extra lines and thousands
// separators ignored, units converted.
func TestDevkitNCU(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Fatal("python3 is needed: ", err)
	}
	dir := t.TempDir()
	header := `"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size","Grid Size","Device","CC","Section Name","Metric Name","Metric Unit","Metric Value"`
	write := func(name string, kernels map[string]int, unit, value string) string {
		var b strings.Builder
		b.WriteString("==PROF== Connected to process 1\noptlab model=cnn median_ms=1\n" + header + "\n")
		id := 0
		for k, n := range kernels {
			for range n {
				id++
				fmt.Fprintf(&b, "%q,\"1\",\"p\",\"h\",%q,\"1\",\"7\",\"(1, 1, 1)\",\"(1, 1, 1)\",\"0\",\"9.0\",\"Command line profiler metrics\",\"gpu__time_duration.sum\",%q,%q\n", fmt.Sprint(id), k, unit, value)
			}
		}
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	// Set-up launches "init" 5 times in every run; a step launches "conv"
	// twice (1,500 ns each) on optlab's side, "gemm" once (2 µs) on PyTorch's.
	o3 := write("o3.csv", map[string]int{"init": 5, "conv": 6}, "nsecond", "1,500")
	o8 := write("o8.csv", map[string]int{"init": 5, "conv": 16}, "nsecond", "1,500")
	t3 := write("t3.csv", map[string]int{"init": 5, "gemm": 3}, "usecond", "2")
	t8 := write("t8.csv", map[string]int{"init": 5, "gemm": 8}, "usecond", "2")
	out, err := exec.Command(py, "../scripts/devkit-ncu.py", "--label", "cnn sgd", "--steps", "3", "8",
		"--optlab", o3, o8, "--torch", t3, t8).CombinedOutput()
	if err != nil {
		t.Fatalf("devkit-ncu.py: %v\n%s", err, out)
	}
	for _, want := range []string{"| optlab | 2.0 | 3.0 |", "| PyTorch | 1.0 | 2.0 |", "| `conv` | 2.0 | 3.0 | 0.0 | 0.0 |", "| `gemm` | 0.0 | 0.0 | 1.0 | 2.0 |"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("devkit-ncu.py's output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(string(out), "`init`") {
		t.Errorf("the set-up's kernels (in both runs alike) are in the per-step table:\n%s", out)
	}
}
