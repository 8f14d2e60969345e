package tensor

// libtorch keeps its determinism and numerics switches in at::Context, a
// C++ object whose setters libtch does not wrap (except the cuDNN
// benchmark). They are reached here by symbol lookup, as cuda.go reaches
// the CUDA runtime: at::globalContext() and the Context's non-virtual
// member functions, whose Itanium-ABI names are stable across libtorch
// releases (the same from 1.13 to 2.x) and which take the object as their
// first argument. They exist in CPU builds too, where they change nothing
// that runs, so a CPU build applies and reads them back like a CUDA one.

// #cgo LDFLAGS: -ldl
// #define _GNU_SOURCE
// #include <dlfcn.h>
// #include <stdbool.h>
// #include <stddef.h>
// #include <stdlib.h>
//
// static void *optlab_sym(const char *name) { return dlsym(RTLD_DEFAULT, name); }
// static void *optlab_call_ctx(void *f) { return ((void *(*)(void))f)(); }
// static void optlab_call_set(void *f, void *ctx, bool b) { ((void (*)(void *, bool))f)(ctx, b); }
// static void optlab_call_set2(void *f, void *ctx, bool a, bool b) { ((void (*)(void *, bool, bool))f)(ctx, a, b); }
// static bool optlab_call_get(void *f, void *ctx) { return ((bool (*)(void *))f)(ctx); }
// // A getter taking a std::optional<enum> that is left empty: a trivially
// // copyable 8-byte object, passed in a register, all bits 0 (disengaged).
// static bool optlab_call_get_nullopt(void *f, void *ctx) { return ((bool (*)(void *, unsigned long long))f)(ctx, 0ULL); }
import "C"

import (
	"fmt"
	"os"
	"sync"
	"unsafe"
)

// Numerics are libtorch's process-wide determinism and precision switches
// that an experiment chooses (train.deterministic, train.cudnn_benchmark,
// train.tf32). The zero value is optlab's default: nondeterministic
// algorithms allowed, no cuDNN benchmarking, full float32 everywhere (no
// TF32; PyTorch's own default allows TF32 in cuDNN convolutions).
type Numerics struct {
	// Deterministic makes cuDNN use deterministic convolution algorithms
	// and turns on torch's deterministic algorithms: an op without a
	// deterministic implementation on the device then fails, naming
	// itself. It sets CUBLAS_WORKSPACE_CONFIG=:4096:8 (cuBLAS's condition
	// for deterministic results) when the environment does not set it.
	Deterministic bool
	// CudnnBenchmark lets cuDNN time the convolution algorithms for each
	// new input shape and keep the fastest.
	CudnnBenchmark bool
	// TF32 allows TensorFloat-32 (a 10-bit mantissa) in cuBLAS matrix
	// products and cuDNN convolutions on GPUs that have it (Ampere and
	// later).
	TF32 bool
}

// String is "deterministic=… cudnn_benchmark=… tf32=…".
func (n Numerics) String() string {
	return fmt.Sprintf("deterministic=%v cudnn_benchmark=%v tf32=%v", n.Deterministic, n.CudnnBenchmark, n.TF32)
}

// The at::Context members used, by their mangled names.
const (
	symGlobalContext         = "_ZN2at13globalContextEv"
	symSetDeterministicCuDNN = "_ZN2at7Context21setDeterministicCuDNNEb"
	symDeterministicCuDNN    = "_ZNK2at7Context18deterministicCuDNNEv"
	symSetDetAlgorithms      = "_ZN2at7Context26setDeterministicAlgorithmsEbb" // (bool, bool warn_only), libtorch ≥ 1.11
	symSetDetAlgorithmsOld   = "_ZN2at7Context26setDeterministicAlgorithmsEb"  // (bool), older
	symDetAlgorithms         = "_ZNK2at7Context23deterministicAlgorithmsEv"
	symSetBenchmarkCuDNN     = "_ZN2at7Context17setBenchmarkCuDNNEb"
	symBenchmarkCuDNN        = "_ZNK2at7Context14benchmarkCuDNNEv"
	symSetAllowTF32CuBLAS    = "_ZN2at7Context18setAllowTF32CuBLASEb"
	symAllowTF32CuBLAS       = "_ZNK2at7Context15allowTF32CuBLASEv"
	symSetAllowTF32CuDNN     = "_ZN2at7Context17setAllowTF32CuDNNEb"
	symAllowTF32CuDNN        = "_ZNK2at7Context14allowTF32CuDNNEv"
	// allowTF32CuDNN(std::optional<at::Float32Op> op = std::nullopt) const,
	// what newer libtorch (2.14) has instead.
	symAllowTF32CuDNNOpt = "_ZNK2at7Context14allowTF32CuDNNESt8optionalINS_9Float32OpEE"
)

var numericsMu sync.Mutex

// lookup finds a libtorch function by its mangled name.
func lookup(name string) unsafe.Pointer {
	cs := C.CString(name)
	defer C.free(unsafe.Pointer(cs))
	return C.optlab_sym(cs)
}

// contextFuncs resolves at::globalContext() and the named members, or says
// which one this libtorch lacks.
func contextFuncs(names ...string) (unsafe.Pointer, []unsafe.Pointer, error) {
	g := lookup(symGlobalContext)
	if g == nil {
		return nil, nil, fmt.Errorf("%s has no at::globalContext() (%s)", LibtorchDescription(), symGlobalContext)
	}
	fs := make([]unsafe.Pointer, len(names))
	for i, n := range names {
		if fs[i] = lookup(n); fs[i] == nil {
			return nil, nil, fmt.Errorf("%s has no at::Context member %s", LibtorchDescription(), n)
		}
	}
	return C.optlab_call_ctx(g), fs, nil
}

// SetNumerics applies n to libtorch's global context: process-wide, for
// every thread, until the next call. Every switch is set, also those at
// their defaults, so a run is not affected by the one before it.
func SetNumerics(n Numerics) error {
	numericsMu.Lock()
	defer numericsMu.Unlock()
	det, twoArgs := symSetDetAlgorithms, true
	if lookup(det) == nil {
		det, twoArgs = symSetDetAlgorithmsOld, false
	}
	ctx, fs, err := contextFuncs(symSetDeterministicCuDNN, det, symSetBenchmarkCuDNN, symSetAllowTF32CuBLAS, symSetAllowTF32CuDNN)
	if err != nil {
		return fmt.Errorf("numerics (%v): %w", n, err)
	}
	if n.Deterministic {
		if _, ok := os.LookupEnv("CUBLAS_WORKSPACE_CONFIG"); !ok {
			// Read by cuBLAS when it creates a handle, and checked by
			// torch's deterministic mode at every cuBLAS call.
			_ = os.Setenv("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
		}
	}
	C.optlab_call_set(fs[0], ctx, C.bool(n.Deterministic))
	if twoArgs {
		C.optlab_call_set2(fs[1], ctx, C.bool(n.Deterministic), C.bool(false))
	} else {
		C.optlab_call_set(fs[1], ctx, C.bool(n.Deterministic))
	}
	C.optlab_call_set(fs[2], ctx, C.bool(n.CudnnBenchmark))
	C.optlab_call_set(fs[3], ctx, C.bool(n.TF32))
	C.optlab_call_set(fs[4], ctx, C.bool(n.TF32))
	return nil
}

// CurrentNumerics reads the switches back from libtorch's global context.
// Deterministic and TF32 are reported true only when both of their
// switches are on (cuDNN's and the algorithms', cuBLAS's and cuDNN's).
func CurrentNumerics() (Numerics, error) {
	numericsMu.Lock()
	defer numericsMu.Unlock()
	tf32CuDNN, opt := symAllowTF32CuDNN, false
	if lookup(tf32CuDNN) == nil && lookup(symAllowTF32CuDNNOpt) != nil {
		tf32CuDNN, opt = symAllowTF32CuDNNOpt, true
	}
	ctx, fs, err := contextFuncs(symDeterministicCuDNN, symDetAlgorithms, symBenchmarkCuDNN, symAllowTF32CuBLAS, tf32CuDNN)
	if err != nil {
		return Numerics{}, err
	}
	get := func(i int) bool {
		if i == 4 && opt {
			return bool(C.optlab_call_get_nullopt(fs[i], ctx))
		}
		return bool(C.optlab_call_get(fs[i], ctx))
	}
	return Numerics{
		Deterministic:  get(0) && get(1),
		CudnnBenchmark: get(2),
		TF32:           get(3) && get(4),
	}, nil
}
