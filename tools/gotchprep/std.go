package main

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
)

// The C++ standard gotch's wrapper is compiled with: the least that both
// gotch (C++17) and the libtorch headers accept. libtorch's entry headers
// refuse older standards with a guard such as (PyTorch 2.14's ATen/ATen.h
// and torch/all.h)
//
//	#if !defined(_MSC_VER) && __cplusplus < 202002L
//	#error C++20 or later compatible compiler is required to use ATen.
//	#endif
//
// which cxxStandard reads; stubLoop also recognises the #error's message
// in case a guard sits in a header not scanned here.

// minCXX is the standard gotch v0.9.1's wrapper itself needs.
const minCXX = 17

// stdHeaders are the libtorch headers (relative to the include folder) whose
// __cplusplus guards decide the standard: the entry points that
// torch_api.cpp includes and the c10 headers every libtorch header includes.
var stdHeaders = []string{
	"torch/csrc/api/include/torch/all.h",
	"torch/csrc/api/include/torch/torch.h",
	"torch/all.h",
	"torch/torch.h",
	"ATen/ATen.h",
	"ATen/core/Tensor.h",
	"c10/macros/Macros.h",
	"c10/util/C++17.h",
	"torch/script.h",
	"torch/csrc/jit/api/module.h",
}

var (
	cplusplusGuard = regexp.MustCompile(`^\s*#\s*(?:el)?if\b.*__cplusplus\s*<\s*(\d{6})L?\b`)
	stdErrorText   = regexp.MustCompile(`C\+\+(\d\d) or later compatible compiler is required`)
)

// standardOf maps the __cplusplus value a guard compares with to the
// standard that value needs (GCC's C++20 draft
// value 201709 is below 202002, so a guard on 202002 needs the final
// standard; -std=c++20 gives 202002 on GCC 11 and later).
func standardOf(cplusplus int) int {
	switch {
	case cplusplus > 202302:
		return 26
	case cplusplus > 202002:
		return 23
	case cplusplus > 201703:
		return 20
	case cplusplus > 201402:
		return 17
	case cplusplus > 201103:
		return 14
	default:
		return 11
	}
}

// cxxStandard returns the C++ standard (17, 20, 23, …) that the libtorch
// headers under includeDir require, at least minCXX: the highest standard
// named by a "#if … __cplusplus < N" guard followed, within the next three
// lines, by an #error.
func cxxStandard(includeDir string) int {
	std := minCXX
	for _, rel := range stdHeaders {
		if s := guardStandard(filepath.Join(includeDir, filepath.FromSlash(rel))); s > std {
			std = s
		}
	}
	return std
}

// guardStandard returns the standard that one header's #error guards
// require, or 0.
func guardStandard(path string) int {
	f, err := os.Open(path)
	if err != nil {
		return 0
	}
	defer func() { _ = f.Close() }()
	var lines []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<16), 1<<22)
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	best := 0
	for i, l := range lines {
		m := cplusplusGuard.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		v, _ := strconv.Atoi(m[1])
		for j := i + 1; j < len(lines) && j <= i+3; j++ {
			t := strings.TrimSpace(lines[j])
			if strings.HasPrefix(t, "#") && strings.HasPrefix(strings.TrimSpace(strings.TrimPrefix(t, "#")), "error") {
				// "< 202002L" means anything below C++20 is refused.
				if s := standardOf(v); s > best {
					best = s
				}
				break
			}
			if strings.HasPrefix(t, "#") {
				break // another directive: not an #error guard
			}
		}
	}
	return best
}

// standardInError returns the standard that a compiler's messages say the
// headers require ("C++20 or later compatible compiler is required"), or 0.
func standardInError(stderr string) int {
	best := 0
	for _, m := range stdErrorText.FindAllStringSubmatch(stderr, -1) {
		if v, _ := strconv.Atoi(m[1]); v > best {
			best = v
		}
	}
	return best
}

// stdFlag is the -std flag for lt.
func (l Libtorch) stdFlag() string {
	s := l.CXXStd
	if s < minCXX {
		s = minCXX
	}
	return fmt.Sprintf("-std=c++%d", s)
}
