package tensor

// #cgo LDFLAGS: -ldl
// #define _GNU_SOURCE
// #include <dlfcn.h>
// #include <stdlib.h>
//
// typedef char *(*cfg_fn)(void);
// typedef void (*threads_fn)(int);
//
// // The file of the library that provides sgemm_ to the process's global
// // lookup, which is where libtorch's BLAS calls land; NULL when no shared
// // library exports it (a BLAS linked statically into libtorch).
// static const char *optlab_blas_file(void) {
//     Dl_info info;
//     void *f = dlsym(RTLD_DEFAULT, "sgemm_");
//     if (!f || !dladdr(f, &info)) return NULL;
//     return info.dli_fname;
// }
//
// static const char *optlab_openblas_config(void) {
//     cfg_fn f = (cfg_fn)dlsym(RTLD_DEFAULT, "openblas_get_config");
//     return f ? f() : NULL;
// }
//
// static int optlab_openblas_get_threads(void) {
//     int (*f)(void) = (int (*)(void))dlsym(RTLD_DEFAULT, "openblas_get_num_threads");
//     return f ? f() : -1;
// }
//
// static int optlab_openblas_set_threads(int n) {
//     threads_fn f = (threads_fn)dlsym(RTLD_DEFAULT, "openblas_set_num_threads");
//     if (!f) return 0;
//     f(n);
//     return 1;
// }
import "C"

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// BLASKind classifies the BLAS library that libtorch's BLAS calls reach.
type BLASKind string

// BLAS kinds.
const (
	BLASOpenBLAS  BLASKind = "OpenBLAS"
	BLASBLIS      BLASKind = "BLIS"
	BLASMKL       BLASKind = "MKL"
	BLASATLAS     BLASKind = "ATLAS"
	BLASReference BLASKind = "reference"
	// BLASBuiltin: no BLAS library is loaded separately; libtorch carries
	// its own (PyTorch's builds link MKL or OpenBLAS statically).
	BLASBuiltin BLASKind = "built-in"
)

// BLAS describes the BLAS library in use in this process.
type BLAS struct {
	Kind BLASKind
	// Threading is "openmp", "pthread" or "serial" when the library's
	// folder tells (Debian's alternatives: openblas-openmp, blis-serial, …).
	Threading string
	// Path is the loaded library file, "" for BLASBuiltin.
	Path string
	// Config is OpenBLAS's own description (version, core, threads).
	Config string
}

// Slow reports whether this BLAS is the unoptimized reference
// implementation.
func (b BLAS) Slow() bool { return b.Kind == BLASReference }

func (b BLAS) String() string {
	switch b.Kind {
	case BLASBuiltin:
		return "BLAS built into libtorch"
	case BLASReference:
		return "reference BLAS (netlib, unoptimized) at " + b.Path
	}
	s := string(b.Kind)
	if b.Config != "" {
		s = b.Config
	}
	if b.Threading != "" {
		s += " (" + b.Threading + ")"
	}
	return s
}

// ClassifyBLAS names the BLAS implementation of a library file from its
// real path (symbolic links resolved). Debian's alternatives keep each
// implementation in its own folder of /usr/lib/<arch>, which decides:
// blas/ is netlib's reference BLAS, openblas-{openmp,pthread,serial}/ is
// OpenBLAS (its libblas.so.3 a thin layer over libopenblas.so.0),
// blis-{openmp,pthread,serial}/ BLIS and atlas/ ATLAS. Elsewhere the file
// name decides (libopenblas*, libblis*, libmkl*; a plain libblas.so is taken
// for netlib's). ok is false for a file that is not a BLAS.
func ClassifyBLAS(path string) (b BLAS, ok bool) {
	base := strings.ToLower(filepath.Base(path))
	dir := strings.ToLower(filepath.Base(filepath.Dir(path)))
	family, threading, _ := strings.Cut(dir, "-")
	switch threading {
	case "openmp", "pthread", "serial":
	default:
		family, threading = dir, ""
	}
	b = BLAS{Path: path, Threading: threading}
	switch {
	case family == "openblas" || strings.HasPrefix(base, "libopenblas"):
		b.Kind = BLASOpenBLAS
	case family == "blis" || strings.HasPrefix(base, "libblis"):
		b.Kind = BLASBLIS
	case family == "atlas" || strings.HasPrefix(base, "libatlas") || strings.HasPrefix(base, "libtatlas") || strings.HasPrefix(base, "libsatlas"):
		b.Kind = BLASATLAS
	case strings.HasPrefix(base, "libmkl"):
		b.Kind = BLASMKL
	case strings.HasPrefix(base, "libblas.so"), strings.HasPrefix(base, "libcblas.so"):
		b.Kind = BLASReference
	default:
		return BLAS{}, false
	}
	return b, true
}

// BLASInUse describes the BLAS library of this process: the library that
// provides sgemm_ (not merely one that is loaded: Debian's liblapack.so.3
// may be OpenBLAS while libblas.so.3 is the reference BLAS, and the BLAS
// calls go to the latter). It is a symbol lookup, cheap to repeat.
func BLASInUse() BLAS {
	c := C.optlab_blas_file()
	if c == nil {
		return BLAS{Kind: BLASBuiltin}
	}
	path := C.GoString(c)
	if real, err := filepath.EvalSymlinks(path); err == nil {
		path = real
	}
	b, ok := ClassifyBLAS(path)
	if !ok {
		return BLAS{Kind: BLASBuiltin, Path: path}
	}
	if b.Kind == BLASOpenBLAS {
		if cfg := C.optlab_openblas_config(); cfg != nil {
			b.Config = strings.TrimSpace(C.GoString(cfg))
		}
	}
	return b
}

// tuneBLAS sets what the BLAS in use needs to share the CPU with libtorch's
// own threads: OpenBLAS built with pthreads runs its own thread pool beside
// libtorch's OpenMP one, and the two oversubscribe the cores (docs/
// BENCHMARKS.md, "BLAS"), so it is held to one thread unless the user set
// OPENBLAS_NUM_THREADS. OpenBLAS built with OpenMP shares libgomp's pool
// with libtorch and needs nothing.
func tuneBLAS() {
	if _, set := os.LookupEnv("OPENBLAS_NUM_THREADS"); set {
		return
	}
	// An OpenBLAS may be loaded as LAPACK even when another library is
	// the BLAS: look at whichever OpenBLAS the process has.
	cfg := C.optlab_openblas_config()
	if cfg == nil || strings.Contains(C.GoString(cfg), "USE_OPENMP") {
		return
	}
	C.optlab_openblas_set_threads(1)
}

// BLASDescription is a one-line description of the BLAS in use for start-up
// banners, with a warning when it is the slow reference BLAS.
func BLASDescription() string {
	b := BLASInUse()
	if b.Slow() {
		return fmt.Sprintf("%s — WARNING: linear layers run many times slower than with an optimized BLAS; install one: apt-get install libopenblas0-openmp", b)
	}
	return b.String()
}

// openBLASThreads is OpenBLAS's own thread count, -1 without OpenBLAS.
func openBLASThreads() int { return int(C.optlab_openblas_get_threads()) }
