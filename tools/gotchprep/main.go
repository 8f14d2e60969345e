// Command gotchprep prepares a copy of gotch for the libtorch installed on
// this machine, whatever its version: it locates libtorch ($LIBTORCH, the
// libtorch inside an installed PyTorch, or Debian's libtorch-dev, installed
// with apt when running as root and nothing is found), copies gotch from the
// Go module cache into a build folder, writes libtch/lib.go for that libtorch
// (CPU or CUDA, matching C++ ABI, rpath), replaces every generated wrapper
// that does not compile against it with a stub that returns a clear runtime
// error, and patches two memory bugs of the generated Go wrappers. It fails,
// naming the op and the libtorch version, when a stubbed wrapper is one that
// optlab calls: the ops optlab uses are read from the code (host/tensor, the
// only package that imports gotch; uses.go), not from a list kept by hand.
//
// The output depends only on the inputs, byte for byte, so Go's build cache
// keeps the 2-minute C++ compile across runs. A stamp file makes a re-run for
// the same libtorch a no-op.
//
// Usage (from the Makefile): cd tools/gotchprep && go run . -out $(CURDIR)/build/gotch -uses $(CURDIR)
package main

import (
	"bytes"
	_ "embed"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
)

// toolVersion changes whenever the preparation's output would change.
const toolVersion = "optlab-gotchprep-10"

const gotchModule = "github.com/sugarme/gotch"

// optlabAPI is C++ appended to libtch's torch_api.cpp: the TorchScript
// module access optlab needs and gotch does not wrap (host/tensor declares
// and calls it).
//
//go:embed cxx/optlab_api.cpp.in
var optlabAPI string

// packages of gotch that optlab needs (the examples and generator are 90 MB).
var keep = []string{".", "libtch", "ts", "nn"}

func main() {
	var o options
	flag.StringVar(&o.out, "out", "build/gotch", "folder to write the prepared gotch to")
	flag.StringVar(&o.version, "gotch", "v0.9.1", "gotch version")
	install := flag.Bool("install", true, "install Debian's libtorch-dev with apt when no libtorch is found and running as root")
	flag.BoolVar(&o.force, "force", false, "prepare even when the stamp says the copy is up to date")
	flag.StringVar(&o.uses, "uses", "", "optlab's repository root, whose "+usesPkg+" package's gotch calls decide which ops must not be stubbed (default: the nearest folder above this one that has "+usesPkg+")")
	forceStub := flag.String("force-stub", "", "comma-separated generated wrappers (atg_* names, as STUBBED_OPS.txt lists them) to stub even though they compile; for testing the used-op check")
	flag.Parse()
	if *forceStub != "" {
		o.forceStub = strings.Split(*forceStub, ",")
	}
	if err := run(o, *install); err != nil {
		fmt.Fprintln(os.Stderr, "gotchprep:", err)
		os.Exit(1)
	}
}

func logf(format string, a ...any) { fmt.Fprintf(os.Stderr, format+"\n", a...) }

// options are gotchprep's flags, less -install.
type options struct {
	out, version string
	force        bool
	uses         string   // repository root; "" finds it
	forceStub    []string // atg_* wrappers to stub although they compile
}

func run(o options, install bool) error {
	if o.uses == "" {
		root, err := findRepoRoot()
		if err != nil {
			return err
		}
		o.uses = root
	}
	if err := ensureCompiler(install); err != nil {
		return err
	}
	lt, err := locate(install, logf)
	if err != nil {
		return err
	}
	if err := ensureBLAS(lt, install, logf); err != nil {
		return err
	}
	return prepare(o, lt)
}

// findRepoRoot returns the nearest folder at or above the working directory
// that has usesPkg (the Makefile runs gotchprep in tools/gotchprep).
func findRepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for d := dir; ; d = filepath.Dir(d) {
		if st, err := os.Stat(filepath.Join(d, filepath.FromSlash(usesPkg))); err == nil && st.IsDir() {
			return d, nil
		}
		if filepath.Dir(d) == d {
			return "", fmt.Errorf("no %s above %s: pass -uses with optlab's repository root", usesPkg, dir)
		}
	}
}

// prepare writes the gotch copy for lt (unless the stamp says it is up to
// date) and then checks that no op optlab uses is stubbed. The check runs on
// every call, also when the copy is up to date; it scans the sources again
// only when they changed since the last check that passed (the stamp's third
// line holds their hash).
func prepare(o options, lt Libtorch) error {
	out := o.out
	usesDir := filepath.Join(o.uses, filepath.FromSlash(usesPkg))
	usesHash, err := sourceHash(usesDir)
	if err != nil {
		return fmt.Errorf("reading the sources whose gotch calls decide the required ops: %w", err)
	}
	usesLine := "uses " + usesHash
	forced := append([]string(nil), o.forceStub...)
	sort.Strings(forced)
	stampPath := filepath.Join(out, ".optlab-prepared")
	want := toolVersion + "|" + o.version + "|" + lt.fingerprint()
	if len(forced) > 0 {
		want += "|force-stub:" + strings.Join(forced, ",")
	}
	if lines := readLines(stampPath); !o.force && len(lines) >= 2 && lines[0] == want {
		summary := lines[1]
		if len(lines) >= 3 && lines[2] == usesLine {
			fmt.Println(summary)
			return nil
		}
		stubbed := readLines(filepath.Join(out, "libtch", "STUBBED_OPS.txt"))
		if err := checkUses(out, usesDir, stubbed, lt.Version); err != nil {
			return err
		}
		fmt.Println(summary)
		return os.WriteFile(stampPath, []byte(want+"\n"+summary+"\n"+usesLine+"\n"), 0o644)
	}
	src, err := moduleDir(o.version)
	if err != nil {
		return err
	}
	if err := os.RemoveAll(out); err != nil {
		return err
	}
	for _, pkg := range keep {
		if err := copyPackage(filepath.Join(src, pkg), filepath.Join(out, pkg)); err != nil {
			return err
		}
	}
	for _, f := range []string{"LICENSE"} {
		if err := copyFile(filepath.Join(src, f), filepath.Join(out, f)); err != nil {
			return err
		}
	}
	gomod := "module " + gotchModule + "\n\ngo 1.20\n"
	if err := os.WriteFile(filepath.Join(out, "go.mod"), []byte(gomod), 0o644); err != nil {
		return err
	}
	lib := filepath.Join(out, "libtch")
	if err := os.WriteFile(filepath.Join(lib, "optlab_libtorch.go"), []byte(infoGo(lt)), 0o644); err != nil {
		return err
	}
	if err := appendFile(filepath.Join(lib, "torch_api.cpp"), optlabAPI); err != nil {
		return err
	}
	if err := forceStubs(filepath.Join(lib, "torch_api_generated.cpp.h"), forced, lt.Version); err != nil {
		return err
	}
	stubbed, err := stubLoop(lib, &lt)
	if err != nil {
		return err
	}
	// Written after the stub loop, which may find that the headers need a
	// newer C++ standard than cxxStandard read from them.
	if err := os.WriteFile(filepath.Join(lib, "lib.go"), []byte(libGo(lt)), 0o644); err != nil {
		return err
	}
	stubbed = append(stubbed, forced...)
	sort.Strings(stubbed)
	list := strings.Join(stubbed, "\n")
	if list != "" {
		list += "\n"
	}
	if err := os.WriteFile(filepath.Join(lib, "STUBBED_OPS.txt"), []byte(list), 0o644); err != nil {
		return err
	}
	if err := patchGenerated(filepath.Join(out, "ts", "tensor-generated.go")); err != nil {
		return err
	}
	if err := patchBallast(filepath.Join(out, "ts", "tensor.go")); err != nil {
		return err
	}
	if err := writeExt(lib); err != nil {
		return err
	}
	summary := fmt.Sprintf("%s, %d ops unavailable (listed in %s)", lt, len(stubbed), filepath.Join(lib, "STUBBED_OPS.txt"))
	if len(forced) > 0 {
		summary += fmt.Sprintf(", %d of them stubbed by -force-stub", len(forced))
	}
	fmt.Println(summary)
	// The copy is complete: a re-run only repeats the check below.
	if err := os.WriteFile(stampPath, []byte(want+"\n"+summary+"\n"), 0o644); err != nil {
		return err
	}
	if err := checkUses(out, usesDir, stubbed, lt.Version); err != nil {
		return err
	}
	return os.WriteFile(stampPath, []byte(want+"\n"+summary+"\n"+usesLine+"\n"), 0o644)
}

// checkUses fails when an op that usesDir's package reaches through the
// gotch copy in out is in the stubbed list.
func checkUses(out, usesDir string, stubbed []string, version string) error {
	used, err := usedOps(out, usesDir, usesPkg)
	if err != nil {
		return fmt.Errorf("finding the ops optlab uses: %w", err)
	}
	if err := writeUsedOps(filepath.Join(out, "libtch"), used); err != nil {
		return err
	}
	return checkStubbed(used, stubbed, version)
}

// forceStubs stubs the named generated wrappers although they compile (the
// -force-stub flag), the way stubLoop stubs those that do not.
func forceStubs(gen string, names []string, version string) error {
	if len(names) == 0 {
		return nil
	}
	b, err := os.ReadFile(gen)
	if err != nil {
		return err
	}
	lines := strings.Split(string(b), "\n")
	var at []int
	for _, name := range names {
		n := headerLine(lines, name)
		if n < 0 {
			return fmt.Errorf("-force-stub: %s is not a generated wrapper in %s", name, gen)
		}
		at = append(at, n+1)
	}
	logf("stubbing %s as -force-stub asks …", strings.Join(names, ", "))
	_, err = stubFunctions(gen, at, version)
	return err
}

// headerLine returns the 0-based line of the generated function name's
// header, or -1.
func headerLine(lines []string, name string) int {
	for i, l := range lines {
		if (strings.HasPrefix(l, "void atg_") || isHeader(l)) &&
			(strings.Contains(l, " "+name+"(") || strings.Contains(l, "*"+name+"(")) {
			return i
		}
	}
	return -1
}

// moduleDir finds gotch in the module cache, downloading it if needed.
func moduleDir(version string) (string, error) {
	cache, err := exec.Command("go", "env", "GOMODCACHE").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMODCACHE: %w", err)
	}
	dir := filepath.Join(strings.TrimSpace(string(cache)), "github.com", "sugarme", "gotch@"+version)
	if _, err := os.Stat(filepath.Join(dir, "libtch", "torch_api.cpp")); err == nil {
		return dir, nil
	}
	tmp, err := os.MkdirTemp("", "gotchprep")
	if err != nil {
		return "", err
	}
	defer func() { _ = os.RemoveAll(tmp) }()
	cmd := exec.Command("go", "mod", "download", gotchModule+"@"+version)
	cmd.Dir = tmp
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GO111MODULE=on")
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go mod download %s@%s: %w\n%s", gotchModule, version, err, b)
	}
	return dir, nil
}

// copyPackage copies the regular non-test files of one directory.
func copyPackage(src, dst string) error {
	entries, err := os.ReadDir(src)
	if err != nil {
		return err
	}
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || strings.HasSuffix(name, "_test.go") || !e.Type().IsRegular() {
			continue
		}
		switch filepath.Ext(name) {
		case ".go", ".h", ".cpp", ".hpp", ".c":
		default:
			if name != "LICENSE" {
				continue
			}
		}
		if name == "lib.go" {
			continue // written for this libtorch
		}
		if err := copyFile(filepath.Join(src, name), filepath.Join(dst, name)); err != nil {
			return err
		}
	}
	return nil
}

// appendFile adds text at the end of the file at path.
func appendFile(path, text string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, text...), 0o644)
}

func copyFile(src, dst string) error {
	b, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	return os.WriteFile(dst, b, 0o644)
}

func isSystemDir(d string) bool {
	return d == "/usr/include" || d == "/usr/lib" || strings.HasPrefix(d, "/usr/lib/") && !strings.Contains(d[len("/usr/lib/"):], "/")
}

func cppFlags(lt Libtorch) []string {
	flags := []string{"-I${SRCDIR}"}
	if !isSystemDir(lt.IncludeDir) {
		flags = append(flags, "-I"+lt.IncludeDir)
	}
	return append(flags, "-I"+filepath.Join(lt.IncludeDir, "torch", "csrc", "api", "include"),
		fmt.Sprintf("-D_GLIBCXX_USE_CXX11_ABI=%d", lt.ABI))
}

func libGo(lt Libtorch) string {
	var ld []string
	if !isSystemDir(lt.LibDir) {
		ld = append(ld, "-L"+lt.LibDir, "-Wl,-rpath,"+lt.LibDir)
	}
	if len(lt.NVIDIALibDirs) > 0 {
		// A pip PyTorch's CUDA libraries (site-packages/nvidia/*/lib):
		// searched at link time and run time, the run path written as
		// DT_RPATH (--disable-new-dtags), which unlike the default
		// DT_RUNPATH also applies to the libraries that libtorch_cuda
		// itself needs and opens.
		for _, d := range lt.NVIDIALibDirs {
			ld = append(ld, "-L"+d, "-Wl,-rpath,"+d)
		}
		ld = append(ld, "-Wl,--disable-new-dtags")
	}
	// --no-as-needed: libtorch_cuda registers CUDA from static initializers
	// although no symbol of it is referenced.
	ld = append(ld, "-lstdc++", "-Wl,--no-as-needed", "-ltorch", "-ltorch_cpu", "-lc10")
	if lt.CUDA {
		ld = append(ld, "-ltorch_cuda", "-lc10_cuda")
	}
	// The NVIDIA libraries libtorch needs are linked directly, so the
	// binary loads them first from its own run path (as importing torch
	// in Python preloads them): that holds even when libtorch_cuda's own
	// run path (DT_RUNPATH) would hide the binary's from its lookups.
	for _, l := range lt.NVIDIALibs {
		ld = append(ld, "-l:"+l)
	}
	ld = append(ld, "-Wl,--as-needed")
	var b strings.Builder
	fmt.Fprintf(&b, "%s// Code generated by optlab's tools/gotchprep for %s; DO NOT EDIT.\n\npackage libtch\n\n", notExt, lt)
	fmt.Fprintf(&b, "// #cgo CPPFLAGS: %s\n", strings.Join(cppFlags(lt), " "))
	b.WriteString("// #cgo CFLAGS: -Wall -Wno-unused-variable -Wno-deprecated-declarations -Wno-sign-compare -Wno-unused-function\n")
	fmt.Fprintf(&b, "// #cgo CXXFLAGS: %s -Wno-deprecated-declarations -Wno-unused-variable -Wno-sign-compare\n", lt.stdFlag())
	fmt.Fprintf(&b, "// #cgo LDFLAGS: %s\nimport \"C\"\n", strings.Join(ld, " "))
	return b.String()
}

func infoGo(lt Libtorch) string {
	return fmt.Sprintf(notExt+`// Code generated by optlab's tools/gotchprep; DO NOT EDIT.

package libtch

// LibtorchVersion is the version of the libtorch this copy was prepared for.
const LibtorchVersion = %q

// LibtorchCUDA tells whether that libtorch was built with CUDA.
const LibtorchCUDA = %v

// LibtorchDir is the folder of that libtorch's shared libraries.
const LibtorchDir = %q
`, lt.Version, lt.CUDA, lt.LibDir)
}

// stubLoop compiles the C++ wrapper for syntax only, replaces each generated
// function that fails with a stub, and repeats until it compiles. When g++
// says the headers need a newer C++ standard than lt's (a guard that
// cxxStandard did not see), it raises lt.CXXStd and compiles again.
func stubLoop(lib string, lt *Libtorch) ([]string, error) {
	gen := filepath.Join(lib, "torch_api_generated.cpp.h")
	var all []string
	for pass := 1; pass <= 6; pass++ {
		stderr, ok, err := syntaxCheck(lib, *lt)
		if err != nil {
			return nil, err
		}
		if ok {
			sort.Strings(all)
			return all, nil
		}
		if need := standardInError(stderr); need > lt.CXXStd && need > minCXX {
			logf("the libtorch headers need C++%d (%s was used); compiling again with -std=c++%d …", need, lt.stdFlag(), need)
			lt.CXXStd = need
			continue
		}
		lines := errorLines(stderr)
		if len(lines) == 0 {
			return nil, fmt.Errorf("the C++ wrapper does not compile, and not because of generated ops:\n%s", tail(stderr, 40))
		}
		logf("pass %d: %d error sites in the generated wrappers; stubbing …", pass, len(lines))
		names, err := stubFunctions(gen, lines, lt.Version)
		if err != nil {
			return nil, err
		}
		all = append(all, names...)
	}
	return nil, errors.New("the C++ wrapper still does not compile after 6 stub passes")
}

// syntaxCheck runs g++ -fsyntax-only on the C++ wrapper in lib; ok is false
// (with g++'s messages) when it does not compile. A variable for tests,
// which check the rest of the preparation without g++ and libtorch's headers.
var syntaxCheck = func(lib string, lt Libtorch) (stderr string, ok bool, err error) {
	args := append([]string{"-fsyntax-only", "-fmax-errors=0", lt.stdFlag(), "-w"}, cppFlags(lt)...)
	for i, a := range args {
		args[i] = strings.ReplaceAll(a, "${SRCDIR}", ".")
	}
	args = append(args, "torch_api.cpp")
	cmd := exec.Command("g++", args...)
	cmd.Dir = lib
	var buf bytes.Buffer
	cmd.Stderr = &buf
	err = cmd.Run()
	if err == nil {
		return "", true, nil
	}
	var exit *exec.ExitError
	if !errors.As(err, &exit) {
		return "", false, fmt.Errorf("running g++: %w", err)
	}
	return buf.String(), false, nil
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// errorLines returns the line numbers in the generated header that g++
// blames, directly or as "required from here" of a template error.
func errorLines(stderr string) []int {
	seen := map[int]bool{}
	var out []int
	for _, l := range strings.Split(stderr, "\n") {
		i := strings.Index(l, "torch_api_generated.cpp.h:")
		if i < 0 || !(strings.Contains(l, ": error") || strings.Contains(l, "required from here")) {
			continue
		}
		var n int
		if _, err := fmt.Sscanf(l[i+len("torch_api_generated.cpp.h:"):], "%d", &n); err == nil && !seen[n] {
			seen[n] = true
			out = append(out, n)
		}
	}
	sort.Ints(out)
	return out
}

// stubFunctions replaces the PROTECT block of each function that contains
// one of the given (1-based) lines.
func stubFunctions(path string, lines []int, version string) ([]string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	src := strings.Split(string(b), "\n")
	type span struct {
		name       string
		from, to   int // PROTECT( … ) lines, 0-based inclusive
		headerLine int
	}
	found := map[int]span{}
	for _, ln := range lines {
		h := ln - 1
		for h >= 0 && !(strings.HasPrefix(src[h], "void atg_") || isHeader(src[h])) {
			h--
		}
		if h < 0 {
			return nil, fmt.Errorf("%s:%d: no enclosing generated function", path, ln)
		}
		if _, ok := found[h]; ok {
			continue
		}
		name := src[h][strings.Index(src[h], "atg_"):]
		name = name[:strings.Index(name, "(")]
		from := -1
		for i := h + 1; i < len(src) && !strings.HasPrefix(src[i], "}"); i++ {
			if strings.TrimSpace(src[i]) == "PROTECT(" {
				from = i
				break
			}
		}
		if from < 0 {
			return nil, fmt.Errorf("%s:%d: %s has no PROTECT block", path, h+1, name)
		}
		to := from + 1
		for to < len(src) && src[to] != "  )" {
			to++
		}
		if to == len(src) {
			return nil, fmt.Errorf("%s: unterminated PROTECT block in %s", path, name)
		}
		found[h] = span{name: name, from: from, to: to, headerLine: h}
	}
	spans := make([]span, 0, len(found))
	for _, s := range found {
		spans = append(spans, s)
	}
	sort.Slice(spans, func(i, j int) bool { return spans[i].from > spans[j].from }) // bottom-up
	var names []string
	for _, s := range spans {
		msg := fmt.Sprintf("%s is not available in the installed libtorch (libtorch %s); stubbed by optlab's gotchprep", s.name, version)
		stub := []string{
			"  // OPTLAB_STUB: the generated call does not compile against libtorch " + version + ".",
			"  if (torch_last_err) free(torch_last_err);",
			"  torch_last_err = strdup(\"" + msg + "\");",
			"#if 0 // original body",
		}
		stub = append(stub, src[s.from:s.to+1]...)
		stub = append(stub, "#endif")
		src = append(src[:s.from], append(stub, src[s.to+1:]...)...)
		names = append(names, s.name)
	}
	return names, os.WriteFile(path, []byte(strings.Join(src, "\n")), 0o644)
}

func isHeader(l string) bool {
	if l == "" || l[0] == ' ' || !strings.Contains(l, "atg_") || !strings.HasSuffix(l, "{") {
		return false
	}
	for _, p := range []string{"int ", "int64_t ", "double ", "bool ", "tensor ", "tensor *", "scalar ", "void "} {
		if strings.HasPrefix(l, p) {
			return true
		}
	}
	return false
}

// patchGenerated fixes two memory bugs of gotch's generated Go wrappers:
// output-pointer buffers allocated with malloc(0) (a heap overflow for ops
// returning ≥4 tensors, and a leak for every op), and in-place ops replacing
// the tensor's handle with a new one without freeing the old (a leak of the
// whole storage for temporaries). In-place ops now keep their handle, which
// points to the same tensor, and free the new one.
func patchGenerated(path string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	s := string(b)
	const alloc = "ptr := (*lib.Ctensor)(unsafe.Pointer(C.malloc(0)))"
	if n := strings.Count(s, alloc); n < 1000 {
		return fmt.Errorf("%s: expected the generated malloc(0) pattern, found it %d times; was gotch's generator changed?", path, n)
	}
	s = strings.ReplaceAll(s, alloc,
		"ptr := (*lib.Ctensor)(unsafe.Pointer(C.malloc(C.size_t(16 * 8))))\n  defer C.free(unsafe.Pointer(ptr))")
	s = strings.ReplaceAll(s, "  ts.ctensor = *ptr\n", "  lib.AtFree(*ptr)\n")
	return os.WriteFile(path, []byte(s), 0o644)
}

// patchBallast removes the 100 KB Go-heap "ballast" that gotch attaches to
// every tensor so that the garbage collector runs often enough to finalize
// tensors nobody dropped. optlab's tensor layer drops every tensor
// explicitly, and the ballast costs a 100 KB allocation per op.
func patchBallast(path string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	const line = "\tx.d = new(bigStruct)\n"
	if !bytes.Contains(b, []byte(line)) {
		return fmt.Errorf("%s: the ballast allocation was not found; was gotch changed?", path)
	}
	return os.WriteFile(path, bytes.Replace(b, []byte(line), nil, 1), 0o644)
}

// ensureCompiler makes sure g++ (which cgo needs for gotch's C++ wrapper)
// is installed, installing Debian's g++ with apt when allowed.
func ensureCompiler(install bool) error {
	if _, err := exec.LookPath("g++"); err == nil {
		return nil
	}
	if !install || os.Geteuid() != 0 {
		return errors.New("g++ is not installed: run `sudo apt-get install g++` (cgo compiles gotch's C++ wrapper with it)")
	}
	logf("g++ is not installed: installing Debian's g++ with apt-get …")
	return aptInstall("g++")
}
