package tensor

// The CUDA runtime, driver and cuDNN are reached by symbol lookups in the
// process (dlsym), not by linking: a CPU libtorch has none of them, and a
// CUDA one brings them as its own dependencies. Every lookup degrades to
// "unknown".

// #cgo LDFLAGS: -ldl
// #define _GNU_SOURCE
// #include <dlfcn.h>
// #include <stddef.h>
// #include <stdlib.h>
//
// typedef int (*optlab_int_out_fn)(int *);
//
// // A CUDA runtime function int f(int *) of the process (libtorch_cuda's
// // libcudart): its cudaError_t, or -1000 when the process has none.
// static int optlab_cudart_int(const char *name, int *out) {
//     optlab_int_out_fn f = (optlab_int_out_fn)dlsym(RTLD_DEFAULT, name);
//     if (!f) return -1000;
//     return f(out);
// }
//
// static const char *optlab_cudart_error_string(int e) {
//     const char *(*f)(int) = (const char *(*)(int))dlsym(RTLD_DEFAULT, "cudaGetErrorString");
//     return f ? f(e) : NULL;
// }
//
// // The file of the library that provides a symbol, or NULL.
// static const char *optlab_symbol_file(const char *name) {
//     Dl_info info;
//     void *f = dlsym(RTLD_DEFAULT, name);
//     if (!f || !dladdr(f, &info)) return NULL;
//     return info.dli_fname;
// }
//
// static void *optlab_open(const char *lib) {
//     void *h = dlopen(lib, RTLD_LAZY | RTLD_NOLOAD);
//     return h ? h : dlopen(lib, RTLD_LAZY | RTLD_LOCAL);
// }
//
// // The CUDA version the NVIDIA driver supports (cuDriverGetVersion of
// // libcuda.so.1, the driver's own library): its CUresult, -1 when
// // libcuda.so.1 cannot be loaded, -2 when it lacks the function.
// static int optlab_cuda_driver_version(int *v) {
//     void *h = optlab_open("libcuda.so.1");
//     if (!h) return -1;
//     optlab_int_out_fn f = (optlab_int_out_fn)dlsym(h, "cuDriverGetVersion");
//     if (!f) return -2;
//     return f(v);
// }
//
// // The driver's release ("570.133.20") from NVML, as nvidia-smi shows it.
// static int optlab_nvml_driver(char *buf, unsigned int n) {
//     void *h = optlab_open("libnvidia-ml.so.1");
//     if (!h) return -1;
//     int (*init)(void) = (int (*)(void))dlsym(h, "nvmlInit_v2");
//     int (*get)(char *, unsigned int) = (int (*)(char *, unsigned int))dlsym(h, "nvmlSystemGetDriverVersion");
//     int (*shut)(void) = (int (*)(void))dlsym(h, "nvmlShutdown");
//     if (!init || !get || !shut) return -2;
//     if (init() != 0) return -3;
//     int r = get(buf, n);
//     shut();
//     return r;
// }
//
// static size_t optlab_cudnn_version(void) {
//     size_t (*f)(void) = (size_t (*)(void))dlsym(RTLD_DEFAULT, "cudnnGetVersion");
//     return f ? f() : 0;
// }
import "C"

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"unsafe"

	lib "github.com/sugarme/gotch/libtch"
)

// CUDA runtime error codes (cudaError_t) that CUDAStatus.Problem explains.
const (
	cudaErrorInsufficientDriver = 35
	cudaErrorNoDevice           = 100
)

// CUDAStatus is what the process can tell about CUDA: how libtorch was
// built, the versions of the CUDA runtime, the driver and cuDNN, and what
// the runtime and libtorch see. Versions are 0 when unknown.
type CUDAStatus struct {
	Build bool // libtorch was built with CUDA

	Runtime    int    // CUDA runtime in use (cudaRuntimeGetVersion: 1000·major + 10·minor)
	RuntimeLib string // the file it was loaded from

	DriverLoaded  bool   // libcuda.so.1, the NVIDIA driver's CUDA library, could be loaded
	Driver        int    // the newest CUDA the driver supports (cuDriverGetVersion), same encoding
	DriverRelease string // the driver's release as nvidia-smi shows it ("570.133.20")

	CuDNN          int  // cudnnGetVersion (8907 is 8.9.7, 90100 is 9.1.0)
	CuDNNAvailable bool // torch::cuda::cudnn_is_available

	// CountErr is cudaGetDeviceCount's cudaError_t (0: success; -1: not
	// known, the runtime's symbols are not visible), CountErrText its text.
	CountErr     int
	CountErrText string
	Devices      int  // torch::cuda::device_count
	Available    bool // torch::cuda::is_available

	VisibleDevices    string // $CUDA_VISIBLE_DEVICES
	VisibleDevicesSet bool
}

// ProbeCUDA reads the CUDA status of this process. On a CPU build it only
// says so (it loads nothing).
func ProbeCUDA() CUDAStatus {
	s := CUDAStatus{Build: lib.LibtorchCUDA, CountErr: -1}
	if !s.Build {
		return s
	}
	s.VisibleDevices, s.VisibleDevicesSet = os.LookupEnv("CUDA_VISIBLE_DEVICES")
	if r, v := cudartInt("cudaRuntimeGetVersion"); r == 0 {
		s.Runtime = v
		s.RuntimeLib = symbolFile("cudaRuntimeGetVersion")
	}
	var v C.int
	switch r := C.optlab_cuda_driver_version(&v); {
	case r == -1:
	case r == 0:
		s.DriverLoaded, s.Driver = true, int(v)
	default:
		s.DriverLoaded = true
	}
	if s.DriverLoaded {
		var buf [96]C.char
		if C.optlab_nvml_driver(&buf[0], C.uint(len(buf))) == 0 {
			s.DriverRelease = C.GoString(&buf[0])
		}
	}
	if r, _ := cudartInt("cudaGetDeviceCount"); r != -1000 {
		s.CountErr = r
		if r != 0 {
			if t := C.optlab_cudart_error_string(C.int(r)); t != nil {
				s.CountErrText = C.GoString(t)
			}
		}
	}
	s.CuDNN = int(C.optlab_cudnn_version())
	s.Available = lib.AtcCudaIsAvailable()
	if n := int(lib.AtcCudaDeviceCount()); n > 0 {
		s.Devices = n
	}
	if s.Available {
		s.CuDNNAvailable = lib.AtcCudnnIsAvailable()
	}
	return s
}

// cudartInt calls the CUDA runtime's int name(int *): its error code and
// result, -1000 when the process has no such function.
func cudartInt(name string) (int, int) {
	c := C.CString(name)
	defer C.free(unsafe.Pointer(c))
	var v C.int
	r := C.optlab_cudart_int(c, &v)
	return int(r), int(v)
}

func symbolFile(name string) string {
	c := C.CString(name)
	defer C.free(unsafe.Pointer(c))
	if f := C.optlab_symbol_file(c); f != nil {
		return C.GoString(f)
	}
	return ""
}

// CUDAVersion renders a CUDA version as the runtime and driver report it
// (1000·major + 10·minor): 12080 is "12.8"; 0 is "unknown".
func CUDAVersion(v int) string {
	if v <= 0 {
		return "unknown"
	}
	return fmt.Sprintf("%d.%d", v/1000, v%1000/10)
}

// CuDNNVersion renders cudnnGetVersion's number: 1000·major + 100·minor +
// patch before cuDNN 9 (8907 is 8.9.7), 10000·major + 100·minor + patch
// since (90100 is 9.1.0); 0 is "unknown".
func CuDNNVersion(v int) string {
	switch {
	case v <= 0:
		return "unknown"
	case v >= 90000:
		return fmt.Sprintf("%d.%d.%d", v/10000, v%10000/100, v%100)
	}
	return fmt.Sprintf("%d.%d.%d", v/1000, v%1000/100, v%100)
}

const cudaHint = "for a GPU, prepare optlab against a CUDA libtorch: a CUDA PyTorch, or LIBTORCH; README, set-up"

// Usable tells whether libtorch can run on a GPU.
func (s CUDAStatus) Usable() bool { return s.Build && s.Available && s.Devices > 0 }

// Problem says why no GPU is usable, "" when one is: a CPU build, no
// driver, a driver too old for the CUDA runtime, no visible device, or what
// the runtime reported.
func (s CUDAStatus) Problem() string {
	if s.Usable() {
		return ""
	}
	if !s.Build {
		return "this libtorch is a CPU build (no CUDA): " + cudaHint
	}
	if !s.DriverLoaded {
		return "no NVIDIA driver: libcuda.so.1 cannot be loaded (install the NVIDIA driver; in a container, start it with the GPUs, e.g. docker run --gpus all)"
	}
	if s.driverTooOld() || s.CountErr == cudaErrorInsufficientDriver {
		msg := "the NVIDIA driver is too old for libtorch's CUDA runtime"
		if s.Driver > 0 && s.Runtime > 0 {
			msg += fmt.Sprintf(": the driver supports CUDA up to %s, the runtime is CUDA %s; update the driver to one for CUDA %d.0 or newer, or use a PyTorch built for CUDA %d.x",
				CUDAVersion(s.Driver), CUDAVersion(s.Runtime), s.Runtime/1000, s.Driver/1000)
		}
		if s.CountErrText != "" {
			msg += fmt.Sprintf(" (CUDA: %s)", s.CountErrText)
		}
		return msg
	}
	var msg string
	switch {
	case s.CountErr == cudaErrorNoDevice || s.CountErr <= 0 && s.Devices == 0:
		msg = "no CUDA device visible"
		switch v := strings.TrimSpace(s.VisibleDevices); {
		case s.VisibleDevicesSet && (v == "" || v == "-1" || strings.EqualFold(v, "none") || v == "NoDevFiles"):
			msg += fmt.Sprintf(": CUDA_VISIBLE_DEVICES=%q hides every GPU", s.VisibleDevices)
		case s.VisibleDevicesSet:
			msg += fmt.Sprintf(": CUDA_VISIBLE_DEVICES=%q names no GPU the driver sees (nvidia-smi -L lists them)", s.VisibleDevices)
		default:
			msg += fmt.Sprintf(": the driver (CUDA %s) is loaded but sees no GPU (nvidia-smi -L lists them; in a container, start it with the GPUs, e.g. docker run --gpus all)", CUDAVersion(s.Driver))
		}
	case s.CountErr > 0:
		msg = fmt.Sprintf("the CUDA runtime cannot use a GPU: cudaGetDeviceCount failed with error %d", s.CountErr)
		if s.CountErrText != "" {
			msg += " (" + s.CountErrText + ")"
		}
	default:
		msg = fmt.Sprintf("the CUDA runtime sees %d device(s), but libtorch reports CUDA as unavailable", s.Devices)
	}
	if s.driverOlderMinor() {
		msg += fmt.Sprintf("; note: the driver supports CUDA %s, older than the runtime's %s (CUDA's minor-version compatibility usually covers this)", CUDAVersion(s.Driver), CUDAVersion(s.Runtime))
	}
	return msg
}

// driverTooOld: the driver's CUDA major version is below the runtime's,
// which CUDA's minor-version compatibility does not cover.
func (s CUDAStatus) driverTooOld() bool {
	return s.Driver > 0 && s.Runtime > 0 && s.Driver/1000 < s.Runtime/1000
}

// driverOlderMinor: same major version, older minor one.
func (s CUDAStatus) driverOlderMinor() bool {
	return s.Driver > 0 && s.Runtime > 0 && s.Driver/1000 == s.Runtime/1000 && s.Driver < s.Runtime
}

// Versions is what `host version` prints, a line each: libtorch
// (LibtorchDescription), the CUDA status (ProbeCUDA, on a worker of its
// own; CUDAStatus.Describe) and the BLAS in use (BLASDescription).
func Versions(ctx context.Context) []string {
	w := NewWorker(1)
	defer w.Close()
	var cuda CUDAStatus
	_ = w.Do(ctx, func() error { cuda = ProbeCUDA(); return nil })
	lines := append([]string{LibtorchDescription()}, cuda.Describe()...)
	return append(lines, BLASDescription())
}

// Describe is the CUDA part of `host version`: a CPU build says so; a CUDA
// build names the runtime, driver and cuDNN versions, and the devices or
// why there is no usable one.
func (s CUDAStatus) Describe() []string {
	if !s.Build {
		return []string{"CPU build: no CUDA (" + cudaHint + ")"}
	}
	rt := "CUDA runtime " + CUDAVersion(s.Runtime)
	if s.RuntimeLib != "" {
		rt += " (" + s.RuntimeLib + ")"
	}
	drv := "NVIDIA driver: none loaded"
	if s.DriverLoaded {
		drv = "NVIDIA driver"
		if s.DriverRelease != "" {
			drv += " " + s.DriverRelease
		}
		drv += ", supports CUDA " + CUDAVersion(s.Driver)
	}
	dnn := "cuDNN " + CuDNNVersion(s.CuDNN)
	if s.Available {
		if s.CuDNNAvailable {
			dnn += " (available)"
		} else {
			dnn += " (not available to libtorch)"
		}
	}
	out := []string{rt + "; " + drv + "; " + dnn}
	if s.Usable() {
		dev := fmt.Sprintf("CUDA devices: %d", s.Devices)
		if s.driverOlderMinor() {
			dev += fmt.Sprintf(" (the driver's CUDA %s is older than the runtime's %s: CUDA's minor-version compatibility covers this)", CUDAVersion(s.Driver), CUDAVersion(s.Runtime))
		}
		return append(out, dev)
	}
	return append(out, "no usable GPU: "+s.Problem())
}

// contextLostErrors identify the CUDA errors after which the process's CUDA
// context is unusable ("sticky" errors of the CUDA runtime: every later
// CUDA call of the process fails too, and only a new process can use the
// GPU again): the texts cudaGetErrorString gives them, which libtorch's
// "CUDA error: …" messages carry, their cudaError_t names, and the driver
// API's names of the same errors.
var contextLostErrors = []string{
	"an illegal memory access was encountered", "cudaErrorIllegalAddress", "CUDA_ERROR_ILLEGAL_ADDRESS",
	"unspecified launch failure", "cudaErrorLaunchFailure", "CUDA_ERROR_LAUNCH_FAILED",
	"device-side assert triggered", "cudaErrorAssert", "CUDA_ERROR_ASSERT",
	"an illegal instruction was encountered", "cudaErrorIllegalInstruction", "CUDA_ERROR_ILLEGAL_INSTRUCTION",
	"misaligned address", "cudaErrorMisalignedAddress", "CUDA_ERROR_MISALIGNED_ADDRESS",
	"invalid program counter", "cudaErrorInvalidPc", "CUDA_ERROR_INVALID_PC",
	"hardware stack error", "cudaErrorHardwareStackError", "CUDA_ERROR_HARDWARE_STACK_ERROR",
	"the launch timed out and was terminated", "cudaErrorLaunchTimeout", "CUDA_ERROR_LAUNCH_TIMEOUT",
	"uncorrectable ECC error encountered", "cudaErrorECCUncorrectable", "CUDA_ERROR_ECC_UNCORRECTABLE",
	"operation not supported on global/shared address space", "cudaErrorInvalidAddressSpace",
	"context is destroyed", "cudaErrorContextIsDestroyed",
}

// ContextLost tells whether err is a CUDA error after which this process
// can run nothing more on its GPU (an illegal memory access, a kernel
// launch failure, a device-side assert, …), as opposed to one that leaves
// the GPU usable (out of memory, a bad argument). Pure string matching on
// the error's text: it needs no GPU.
func ContextLost(err error) bool {
	if err == nil {
		return false
	}
	msg := strings.ToLower(err.Error())
	for _, s := range contextLostErrors {
		if strings.Contains(msg, strings.ToLower(s)) {
			return true
		}
	}
	return false
}

// lost is the first error of a tensor op that ContextLost recognized.
var lost atomic.Pointer[error]

// DeviceLost returns the first error of an op of this process (on any
// Scope) after which its CUDA context is unusable, nil if there was none.
// A grid of runs stops on it: every later run would fail the same way.
func DeviceLost() error {
	if p := lost.Load(); p != nil {
		return *p
	}
	return nil
}

// noteLost records err when it is the first lost-context error.
func noteLost(err error) {
	if ContextLost(err) {
		lost.CompareAndSwap(nil, &err)
	}
}
