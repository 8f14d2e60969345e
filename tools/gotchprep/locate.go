package main

import (
	"bufio"
	"bytes"
	"debug/elf"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
)

// Libtorch describes one libtorch installation.
type Libtorch struct {
	Source     string // "$LIBTORCH", "python", "debian"
	IncludeDir string // contains torch/ and ATen/
	LibDir     string // contains libtorch_cpu.so
	Version    string
	CUDA       bool
	ABI        int // _GLIBCXX_USE_CXX11_ABI
	// CXXStd is the C++ standard its headers need (17, 20, …; cxxStandard);
	// 0 means minCXX.
	CXXStd int
	// NVIDIALibDirs are the CUDA library folders of a pip PyTorch (also
	// one pip-installed into a conda environment): site-packages/nvidia/
	// <package>/lib next to site-packages/torch. NVIDIALibs are the files
	// there that the libtorch libraries need, directly or through each
	// other (libcublas.so.12, libcudnn.so.9, …), by file name.
	NVIDIALibDirs []string
	NVIDIALibs    []string
}

func (l Libtorch) String() string {
	kind := "CPU"
	if l.CUDA {
		kind = "CUDA"
	}
	return fmt.Sprintf("libtorch %s %s at %s (%s, C++ ABI %d)", l.Version, kind, l.LibDir, l.Source, l.ABI)
}

const debianInclude = "/usr/include"

var debianLib = "/usr/lib/" + multiarch()

func multiarch() string {
	out, err := exec.Command("gcc", "-print-multiarch").Output()
	if err == nil && len(bytes.TrimSpace(out)) > 0 {
		return string(bytes.TrimSpace(out))
	}
	return "x86_64-linux-gnu"
}

// locate finds a libtorch: $LIBTORCH, then an installed PyTorch with its
// headers, then Debian's libtorch-dev (installed with apt when allowed).
func locate(install bool, log func(string, ...any)) (Libtorch, error) {
	if dir := os.Getenv("LIBTORCH"); dir != "" {
		l, err := fromDir(dir, "$LIBTORCH")
		if err != nil {
			return l, fmt.Errorf("LIBTORCH=%s: %w", dir, err)
		}
		return l, nil
	}
	for _, py := range pythons() {
		dir, err := pythonTorchDir(py)
		if err != nil {
			continue
		}
		l, err := fromDir(dir, "python ("+py+")")
		if real, rerr := filepath.EvalSymlinks(filepath.Join(l.LibDir, "libtorch_cpu.so")); rerr == nil && filepath.Dir(real) == debianLib {
			// Debian's python3-torch links to libtorch-dev's libraries.
			if d, derr := debian(); derr == nil {
				return d, nil
			}
		}
		if err == nil {
			return l, nil
		}
		log("note: %s has torch at %s but no usable headers/libraries (%v); looking further", py, dir, err)
	}
	if l, err := debian(); err == nil {
		return l, nil
	}
	if !install {
		return Libtorch{}, errors.New("no libtorch found: set LIBTORCH=/path/to/libtorch, install PyTorch, or `apt-get install libtorch-dev`")
	}
	if os.Geteuid() != 0 {
		return Libtorch{}, errors.New("no libtorch found and not root: run `sudo apt-get install libtorch-dev`, or set LIBTORCH")
	}
	log("no libtorch found: installing Debian's libtorch-dev and %s with apt-get …", blasPackage)
	if err := aptInstall("libtorch-dev", blasPackage); err != nil {
		return Libtorch{}, err
	}
	return debian()
}

func pythons() []string {
	var out []string
	seen := map[string]bool{}
	for _, name := range []string{"python3", "/usr/bin/python3"} {
		p, err := exec.LookPath(name)
		if err != nil {
			continue
		}
		if r, err := filepath.EvalSymlinks(p); err == nil && seen[r] {
			continue
		} else if err == nil {
			seen[r] = true
		}
		out = append(out, p)
	}
	return out
}

func pythonTorchDir(py string) (string, error) {
	cmd := exec.Command(py, "-c", "import os, torch; print(os.path.dirname(torch.__file__))")
	cmd.Stderr = nil
	out, err := cmd.Output()
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(out)), nil
}

// fromDir reads a libtorch laid out as <dir>/include and <dir>/lib (the
// libtorch zip and the torch Python package share this layout).
func fromDir(dir, source string) (Libtorch, error) {
	l := Libtorch{Source: source, IncludeDir: filepath.Join(dir, "include"), LibDir: filepath.Join(dir, "lib")}
	return l, l.fill()
}

func debian() (Libtorch, error) {
	l := Libtorch{Source: "debian", IncludeDir: debianInclude, LibDir: debianLib}
	if err := l.fill(); err != nil {
		return l, err
	}
	if out, err := exec.Command("dpkg-query", "-W", "-f=${Version}", "libtorch-dev").Output(); err == nil {
		if v := strings.SplitN(string(out), "+", 2)[0]; v != "" {
			l.Version = v
		}
	}
	return l, nil
}

func (l *Libtorch) fill() error {
	hdr := filepath.Join(l.IncludeDir, "torch", "csrc", "api", "include", "torch", "torch.h")
	if _, err := os.Stat(hdr); err != nil {
		return fmt.Errorf("no headers (%s missing)", hdr)
	}
	cpu := filepath.Join(l.LibDir, "libtorch_cpu.so")
	if _, err := os.Stat(cpu); err != nil {
		return fmt.Errorf("no libraries (%s missing)", cpu)
	}
	_, err := os.Stat(filepath.Join(l.LibDir, "libtorch_cuda.so"))
	l.CUDA = err == nil
	l.Version = headerVersion(filepath.Join(l.IncludeDir, "torch", "csrc", "api", "include", "torch", "version.h"))
	abi, err := cxx11ABI(filepath.Join(l.LibDir, "libc10.so"))
	if err != nil {
		return err
	}
	l.ABI = abi
	l.CXXStd = cxxStandard(l.IncludeDir)
	if l.CUDA {
		l.NVIDIALibDirs, l.NVIDIALibs = nvidiaLibs(l.LibDir)
	}
	return nil
}

// torchLibs are the libtorch libraries gotch links (libGo), CUDA ones last.
var torchLibs = []string{"torch", "torch_cpu", "c10", "torch_cuda", "c10_cuda"}

// nvidiaLibs finds the CUDA libraries that a pip PyTorch carries beside the
// torch package (site-packages/nvidia/*/lib, libDir being
// site-packages/torch/lib), and which of their files libtorch needs: the
// shared-library dependencies (DT_NEEDED) of the libraries in torchLibs,
// followed through the NVIDIA libraries themselves. Python's torch finds
// them because importing it loads them first; a Go binary must link them.
func nvidiaLibs(libDir string) (dirs, libs []string) {
	torchDir := filepath.Dir(libDir)
	if filepath.Base(torchDir) != "torch" {
		return nil, nil
	}
	cands, _ := filepath.Glob(filepath.Join(filepath.Dir(torchDir), "nvidia", "*", "lib"))
	sort.Strings(cands)
	where := map[string]string{} // file name → its folder (the first folder wins)
	for _, d := range cands {
		entries, err := os.ReadDir(d)
		if err != nil {
			continue
		}
		has := false
		for _, e := range entries {
			if name := e.Name(); strings.HasPrefix(name, "lib") && strings.Contains(name, ".so") && !e.IsDir() {
				has = true
				if _, ok := where[name]; !ok {
					where[name] = d
				}
			}
		}
		if has {
			dirs = append(dirs, d)
		}
	}
	if len(dirs) == 0 {
		return nil, nil
	}
	var queue []string
	for _, n := range torchLibs {
		queue = append(queue, filepath.Join(libDir, "lib"+n+".so"))
	}
	seen := map[string]bool{}
	for len(queue) > 0 {
		f := queue[0]
		queue = queue[1:]
		needed, err := neededLibs(f)
		if err != nil {
			continue
		}
		for _, n := range needed {
			d, ok := where[n]
			if !ok || seen[n] {
				continue
			}
			seen[n] = true
			libs = append(libs, n)
			queue = append(queue, filepath.Join(d, n))
		}
	}
	sort.Strings(libs)
	return dirs, libs
}

// neededLibs returns a shared library's DT_NEEDED entries.
func neededLibs(path string) ([]string, error) {
	f, err := elf.Open(path)
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	return f.ImportedLibraries()
}

var versionRE = regexp.MustCompile(`TORCH_VERSION\s*\\?\s*"([^"]+)"|TORCH_VERSION_(MAJOR|MINOR|PATCH)\s+(\d+)`)

func headerVersion(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return "unknown"
	}
	parts := map[string]string{}
	for _, m := range versionRE.FindAllStringSubmatch(string(b), -1) {
		if m[1] != "" {
			return m[1]
		}
		parts[m[2]] = m[3]
	}
	if parts["MAJOR"] == "" {
		return "unknown"
	}
	return parts["MAJOR"] + "." + parts["MINOR"] + "." + parts["PATCH"]
}

// cxx11ABI tells from libc10's exported symbols which libstdc++ string ABI
// the library was built with: the new ABI mangles std::string as
// std::__cxx11::basic_string ("B5cxx11" / "__cxx11").
func cxx11ABI(lib string) (int, error) {
	f, err := elf.Open(lib)
	if err != nil {
		return 0, fmt.Errorf("reading %s: %w", lib, err)
	}
	defer func() { _ = f.Close() }()
	syms, err := f.DynamicSymbols()
	if err != nil {
		return 0, fmt.Errorf("symbols of %s: %w", lib, err)
	}
	for _, s := range syms {
		if s.Section != elf.SHN_UNDEF && strings.Contains(s.Name, "__cxx11") {
			return 1, nil
		}
	}
	return 0, nil
}

// fingerprint identifies a libtorch build for the up-to-date check.
func (l Libtorch) fingerprint() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s|%s|%s|%v|%d|%s", l.IncludeDir, l.LibDir, l.Version, l.CUDA, l.ABI, l.stdFlag())
	if len(l.NVIDIALibDirs) > 0 {
		fmt.Fprintf(&b, "|nvidia:%s|%s", strings.Join(l.NVIDIALibDirs, ":"), strings.Join(l.NVIDIALibs, ":"))
	}
	for _, name := range []string{"libtorch_cpu.so", "libc10.so", "libtorch_cuda.so"} {
		if st, err := os.Stat(filepath.Join(l.LibDir, name)); err == nil {
			fmt.Fprintf(&b, "|%s:%d:%d", name, st.Size(), st.ModTime().Unix())
		}
	}
	return b.String()
}

// readLines returns a file's lines, or nil.
func readLines(path string) []string {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer func() { _ = f.Close() }()
	var lines []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	return lines
}
