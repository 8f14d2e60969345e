package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// writeHeaders writes files (path relative to a fresh include folder →
// content) and returns the folder.
func writeHeaders(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for rel, src := range files {
		p := filepath.Join(dir, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestCXXStandard(t *testing.T) {
	cases := []struct {
		name  string
		files map[string]string
		want  int
	}{
		{"libtorch 1.13 (C++14 guard): gotch's C++17", map[string]string{
			"torch/csrc/api/include/torch/all.h": "#pragma once\n\n#if !defined(_MSC_VER) && __cplusplus < 201402L\n#error C++14 or later compatible compiler is required to use PyTorch.\n#endif\n",
		}, 17},
		{"libtorch 2.14 (ATen.h and all.h)", map[string]string{
			"ATen/ATen.h":                        "#pragma once\n\n#if !defined(_MSC_VER) && __cplusplus < 202002L\n#error C++20 or later compatible compiler is required to use ATen.\n#endif\n",
			"torch/csrc/api/include/torch/all.h": "#pragma once\n\n#if __cplusplus < 202002L\n#error C++20 or later compatible compiler is required to use PyTorch.\n#endif\n",
		}, 20},
		{"a guard in c10 only, #error two lines down", map[string]string{
			"c10/macros/Macros.h": "#if __cplusplus < 202302L\n// C++23 features below\n#  error \"C++23 or later compatible compiler is required\"\n#endif\n",
		}, 23},
		{"a version test that is not a guard", map[string]string{
			"ATen/ATen.h": "#if __cplusplus < 202002L\n#define OLD_STD 1\n#else\n#error never\n#endif\n",
		}, 17},
		{"#elif guard", map[string]string{
			"ATen/ATen.h": "#if defined(_MSC_VER)\n#elif __cplusplus < 202002L\n#error C++20 or later compatible compiler is required to use ATen.\n#endif\n",
		}, 20},
		{"no headers", map[string]string{}, 17},
	}
	for _, c := range cases {
		if got := cxxStandard(writeHeaders(t, c.files)); got != c.want {
			t.Errorf("%s: cxxStandard = %d, want %d", c.name, got, c.want)
		}
	}
}

// TestCXXStandardInstalled reads the headers of this machine's Debian
// libtorch, when there is one: 1.13 and 2.6 need C++17, 2.13 and later C++20.
func TestCXXStandardInstalled(t *testing.T) {
	v := headerVersion("/usr/include/torch/csrc/api/include/torch/version.h")
	if v == "unknown" {
		t.Skip("no Debian libtorch-dev here")
	}
	want := 17
	var major, minor int
	if _, err := fmt.Sscanf(v, "%d.%d", &major, &minor); err == nil && (major > 2 || major == 2 && minor >= 13) {
		want = 20
	}
	if got := cxxStandard("/usr/include"); got != want {
		t.Errorf("libtorch %s: cxxStandard = %d, want %d", v, got, want)
	}
}

func TestStandardInError(t *testing.T) {
	stderr := "In file included from torch_api.cpp:3:\n" +
		"/usr/include/ATen/ATen.h:4:2: error: #error C++20 or later compatible compiler is required to use ATen.\n" +
		"torch_api_generated.cpp.h:17:5: error: no matching function\n"
	if got := standardInError(stderr); got != 20 {
		t.Errorf("standardInError = %d, want 20", got)
	}
	if got := standardInError("torch_api_generated.cpp.h:17:5: error: x\n"); got != 0 {
		t.Errorf("no requirement: %d", got)
	}
}

// TestStubLoopRaisesStandard: when g++ says the headers need C++20 although
// the header scan found no guard, the loop compiles again with -std=c++20
// (and stubs nothing for it), and lib.go gets that flag.
func TestStubLoopRaisesStandard(t *testing.T) {
	old := syntaxCheck
	defer func() { syntaxCheck = old }()
	var flags []string
	syntaxCheck = func(_ string, lt Libtorch) (string, bool, error) {
		flags = append(flags, lt.stdFlag())
		if lt.stdFlag() == "-std=c++17" {
			return "/x/torch/all.h:4:2: error: #error C++20 or later compatible compiler is required to use PyTorch.\n", false, nil
		}
		return "", true, nil
	}
	lt := Libtorch{Version: "2.14.1", ABI: 1}
	stubbed, err := stubLoop(t.TempDir(), &lt)
	if err != nil {
		t.Fatal(err)
	}
	if len(stubbed) != 0 || strings.Join(flags, " ") != "-std=c++17 -std=c++20" || lt.CXXStd != 20 {
		t.Errorf("stubbed %v, flags %v, CXXStd %d", stubbed, flags, lt.CXXStd)
	}
	if g := libGo(lt); !strings.Contains(g, "#cgo CXXFLAGS: -std=c++20 ") {
		t.Errorf("lib.go:\n%s", g)
	}
	if g := libGo(Libtorch{Version: "1.13.1", ABI: 1}); !strings.Contains(g, "#cgo CXXFLAGS: -std=c++17 ") {
		t.Errorf("lib.go without a standard:\n%s", g)
	}
}
