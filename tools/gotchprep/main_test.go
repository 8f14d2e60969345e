package main

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestErrorLines(t *testing.T) {
	stderr := strings.Join([]string{
		"In file included from torch_api.cpp:12:",
		"torch_api_generated.cpp.h:17:5: error: no matching function for call to 'foo'",
		"torch_api_generated.cpp.h:17:9: error: something else on the same line",
		"/usr/include/c++/12/tuple:1234:7: error: static assertion failed",
		"torch_api_generated.cpp.h:1458:21:   required from here",
		"torch_api_generated.cpp.h:3:1: note: candidate",
	}, "\n")
	got := errorLines(stderr)
	if want := []int{17, 1458}; !reflect.DeepEqual(got, want) {
		t.Errorf("errorLines = %v, want %v", got, want)
	}
}

const generated = `void atg_ok(tensor *out__, tensor self) {
  PROTECT(
    auto outputs__ = torch::ok(*self);
    out__[0] = new torch::Tensor(outputs__);
  )
}

void atg_bad(tensor *out__, tensor self, int64_t dim) {
  PROTECT(
    auto outputs__ = torch::bad(*self, dim);
    out__[0] = new torch::Tensor(outputs__);
  )
}

tensor *atg_many(tensor self) {
  PROTECT(
    auto outputs__ = torch::many(*self);
    return nullptr;
  )
  return nullptr;
}
`

func TestStubFunctions(t *testing.T) {
	path := filepath.Join(t.TempDir(), "torch_api_generated.cpp.h")
	if err := os.WriteFile(path, []byte(generated), 0o644); err != nil {
		t.Fatal(err)
	}
	// line 10 is inside atg_bad's body, line 17 inside atg_many's
	names, err := stubFunctions(path, []int{10, 17, 10}, "1.13.1")
	if err != nil {
		t.Fatal(err)
	}
	if len(names) != 2 || !contains(names, "atg_bad") || !contains(names, "atg_many") {
		t.Fatalf("stubbed %v, want atg_bad and atg_many", names)
	}
	b, _ := os.ReadFile(path)
	out := string(b)
	for _, want := range []string{
		`torch_last_err = strdup("atg_bad is not available in the installed libtorch (libtorch 1.13.1); stubbed by optlab's gotchprep");`,
		"#if 0 // original body\n  PROTECT(\n    auto outputs__ = torch::bad(*self, dim);",
		"  )\n#endif\n}",
		"  return nullptr;\n}", // atg_many keeps its trailing return
	} {
		if !strings.Contains(out, want) {
			t.Errorf("stubbed file lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "atg_ok is not available") {
		t.Error("a compiling function was stubbed")
	}
	if strings.Count(out, "#if 0") != 2 {
		t.Errorf("want 2 stubs:\n%s", out)
	}
}

func contains(xs []string, x string) bool {
	for _, v := range xs {
		if v == x {
			return true
		}
	}
	return false
}

func TestHeaderVersion(t *testing.T) {
	dir := t.TempDir()
	cases := map[string]string{
		"#define TORCH_VERSION_MAJOR 2\n#define TORCH_VERSION_MINOR 11\n#define TORCH_VERSION_PATCH 0\n": "2.11.0",
		"#define TORCH_VERSION \\\n  \"1.13.1\"\n":                                                       "1.13.1",
		"nothing here": "unknown",
	}
	i := 0
	for src, want := range cases {
		p := filepath.Join(dir, "v"+string(rune('a'+i))+".h")
		i++
		if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
		if got := headerVersion(p); got != want {
			t.Errorf("headerVersion(%q) = %q, want %q", src, got, want)
		}
	}
	if got := headerVersion(filepath.Join(dir, "missing.h")); got != "unknown" {
		t.Errorf("missing header: %q", got)
	}
}

func TestLibGo(t *testing.T) {
	debian := libGo(Libtorch{IncludeDir: "/usr/include", LibDir: "/usr/lib/x86_64-linux-gnu", Version: "1.13.1", ABI: 1})
	for _, want := range []string{
		"#cgo CPPFLAGS: -I${SRCDIR} -I/usr/include/torch/csrc/api/include -D_GLIBCXX_USE_CXX11_ABI=1\n",
		"-Wl,--no-as-needed -ltorch -ltorch_cpu -lc10 -Wl,--as-needed",
	} {
		if !strings.Contains(debian, want) {
			t.Errorf("Debian lib.go lacks %q:\n%s", want, debian)
		}
	}
	if strings.Contains(debian, "rpath") || strings.Contains(debian, "-I/usr/include ") {
		t.Errorf("Debian lib.go must not add system dirs:\n%s", debian)
	}
	pip := libGo(Libtorch{IncludeDir: "/opt/torch/include", LibDir: "/opt/torch/lib", Version: "2.11.0", CUDA: true, ABI: 0})
	for _, want := range []string{
		"-I/opt/torch/include -I/opt/torch/include/torch/csrc/api/include -D_GLIBCXX_USE_CXX11_ABI=0",
		"-L/opt/torch/lib -Wl,-rpath,/opt/torch/lib",
		"-ltorch_cuda -lc10_cuda -Wl,--as-needed",
	} {
		if !strings.Contains(pip, want) {
			t.Errorf("PyTorch CUDA lib.go lacks %q:\n%s", want, pip)
		}
	}
}

func TestPatchGenerated(t *testing.T) {
	alloc := "  ptr := (*lib.Ctensor)(unsafe.Pointer(C.malloc(0)))\n"
	src := strings.Repeat("func f() {\n"+alloc+"  ts.ctensor = *ptr\n}\n", 1000)
	path := filepath.Join(t.TempDir(), "tensor-generated.go")
	if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := patchGenerated(path); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(path)
	out := string(b)
	if strings.Contains(out, "C.malloc(0)") || strings.Contains(out, "ts.ctensor = *ptr") {
		t.Error("unpatched patterns remain")
	}
	if strings.Count(out, "defer C.free(unsafe.Pointer(ptr))") != 1000 || strings.Count(out, "lib.AtFree(*ptr)") != 1000 {
		t.Error("patch counts differ")
	}
	if err := os.WriteFile(path, []byte("package ts\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := patchGenerated(path); err == nil {
		t.Error("a file without the generated pattern must be an error")
	}
}
