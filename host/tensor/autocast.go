package tensor

// Autocast (automatic mixed precision) is libtorch's own: the per-thread
// flags of at::autocast that torch.autocast sets in Python. libtch exports
// only CUDA's flag (at_autocast_set_enabled is at::autocast::set_enabled,
// which in libtorch ≥ 1.10 is the CUDA one), and gotch has no wrapper for
// the CPU's, so the C++ functions are looked up in the process by their
// mangled names (dlsym), as cuda.go does for the CUDA runtime: libtorch
// ≥ 2.4's device-generic API (set_autocast_enabled(DeviceType, bool), …)
// first, else the per-device one of 1.10–2.3 (set_cpu_enabled,
// set_autocast_cpu_dtype, …; since 2.4 only inline wrappers of the
// former). Both pass c10's enums (int8_t underneath) and bool by value,
// which the C calling convention passes as signed char and _Bool.

// #cgo LDFLAGS: -ldl
// #define _GNU_SOURCE
// #include <dlfcn.h>
// #include <stdbool.h>
// #include <stddef.h>
//
// typedef struct {
//     // libtorch >= 2.4
//     bool (*is_enabled_dev)(signed char);
//     void (*set_enabled_dev)(signed char, bool);
//     signed char (*get_dtype_dev)(signed char);
//     void (*set_dtype_dev)(signed char, signed char);
//     // libtorch 1.10 - 2.3
//     bool (*is_cpu_enabled)(void);
//     void (*set_cpu_enabled)(bool);
//     signed char (*get_cpu_dtype)(void);
//     void (*set_cpu_dtype)(signed char);
//     bool (*is_gpu_enabled)(void);
//     void (*set_gpu_enabled)(bool);
//     signed char (*get_gpu_dtype)(void);
//     void (*set_gpu_dtype)(signed char);
//     // every version
//     int (*increment_nesting)(void);
//     int (*decrement_nesting)(void);
//     void (*clear_cache)(void);
// } optlab_autocast_api;
//
// static optlab_autocast_api optlab_ac;
//
// // Looks the functions up; returns 2 for the device-generic API, 1 for
// // the per-device one, 0 when neither is complete.
// static int optlab_autocast_load(void) {
//     optlab_autocast_api *a = &optlab_ac;
//     a->is_enabled_dev = dlsym(RTLD_DEFAULT, "_ZN2at8autocast19is_autocast_enabledEN3c1010DeviceTypeE");
//     a->set_enabled_dev = dlsym(RTLD_DEFAULT, "_ZN2at8autocast20set_autocast_enabledEN3c1010DeviceTypeEb");
//     a->get_dtype_dev = dlsym(RTLD_DEFAULT, "_ZN2at8autocast18get_autocast_dtypeEN3c1010DeviceTypeE");
//     a->set_dtype_dev = dlsym(RTLD_DEFAULT, "_ZN2at8autocast18set_autocast_dtypeEN3c1010DeviceTypeENS1_10ScalarTypeE");
//     a->is_cpu_enabled = dlsym(RTLD_DEFAULT, "_ZN2at8autocast14is_cpu_enabledEv");
//     a->set_cpu_enabled = dlsym(RTLD_DEFAULT, "_ZN2at8autocast15set_cpu_enabledEb");
//     a->get_cpu_dtype = dlsym(RTLD_DEFAULT, "_ZN2at8autocast22get_autocast_cpu_dtypeEv");
//     a->set_cpu_dtype = dlsym(RTLD_DEFAULT, "_ZN2at8autocast22set_autocast_cpu_dtypeEN3c1010ScalarTypeE");
//     a->is_gpu_enabled = dlsym(RTLD_DEFAULT, "_ZN2at8autocast10is_enabledEv");
//     a->set_gpu_enabled = dlsym(RTLD_DEFAULT, "_ZN2at8autocast11set_enabledEb");
//     a->get_gpu_dtype = dlsym(RTLD_DEFAULT, "_ZN2at8autocast22get_autocast_gpu_dtypeEv");
//     a->set_gpu_dtype = dlsym(RTLD_DEFAULT, "_ZN2at8autocast22set_autocast_gpu_dtypeEN3c1010ScalarTypeE");
//     a->increment_nesting = dlsym(RTLD_DEFAULT, "_ZN2at8autocast17increment_nestingEv");
//     a->decrement_nesting = dlsym(RTLD_DEFAULT, "_ZN2at8autocast17decrement_nestingEv");
//     a->clear_cache = dlsym(RTLD_DEFAULT, "_ZN2at8autocast11clear_cacheEv");
//     if (!a->increment_nesting || !a->decrement_nesting || !a->clear_cache) return 0;
//     if (a->is_enabled_dev && a->set_enabled_dev && a->get_dtype_dev && a->set_dtype_dev) return 2;
//     if (a->is_cpu_enabled && a->set_cpu_enabled && a->get_cpu_dtype && a->set_cpu_dtype &&
//         a->is_gpu_enabled && a->set_gpu_enabled && a->get_gpu_dtype && a->set_gpu_dtype) return 1;
//     return 0;
// }
//
// // dev: 0 CPU, 1 CUDA (c10::DeviceType).
// static bool optlab_autocast_is_enabled(int api, signed char dev) {
//     optlab_autocast_api *a = &optlab_ac;
//     if (api == 2) return a->is_enabled_dev(dev);
//     return dev == 0 ? a->is_cpu_enabled() : a->is_gpu_enabled();
// }
// static void optlab_autocast_set_enabled(int api, signed char dev, bool on) {
//     optlab_autocast_api *a = &optlab_ac;
//     if (api == 2) { a->set_enabled_dev(dev, on); return; }
//     if (dev == 0) a->set_cpu_enabled(on); else a->set_gpu_enabled(on);
// }
// static signed char optlab_autocast_get_dtype(int api, signed char dev) {
//     optlab_autocast_api *a = &optlab_ac;
//     if (api == 2) return a->get_dtype_dev(dev);
//     return dev == 0 ? a->get_cpu_dtype() : a->get_gpu_dtype();
// }
// static void optlab_autocast_set_dtype(int api, signed char dev, signed char dt) {
//     optlab_autocast_api *a = &optlab_ac;
//     if (api == 2) { a->set_dtype_dev(dev, dt); return; }
//     if (dev == 0) a->set_cpu_dtype(dt); else a->set_gpu_dtype(dt);
// }
// static int optlab_autocast_increment(void) { return optlab_ac.increment_nesting(); }
// static int optlab_autocast_decrement(void) { return optlab_ac.decrement_nesting(); }
// static void optlab_autocast_clear_cache(void) { optlab_ac.clear_cache(); }
import "C"

import (
	"fmt"
	"sync"

	"github.com/sugarme/gotch"
)

// BFloat16 is the 16-bit brain floating-point type (8 exponent bits, as
// float32).
var BFloat16 = gotch.BFloat16

// Float16 is IEEE half precision.
var Float16 = gotch.Half

var autocastAPI = sync.OnceValue(func() int { return int(C.optlab_autocast_load()) })

// AutocastAvailable tells which of libtorch's autocast APIs this process
// reaches ("device-generic" for libtorch ≥ 2.4, "per-device" for
// 1.10–2.3), or why none.
func AutocastAvailable() (string, error) {
	switch autocastAPI() {
	case 2:
		return "device-generic", nil
	case 1:
		return "per-device", nil
	}
	return "", errNoAutocast()
}

func autocastDevice(d Device) C.schar {
	if d.IsCUDA() {
		return 1
	}
	return 0
}

// AutocastState is the autocast setting of the worker's thread for one
// device type.
type AutocastState struct {
	Enabled bool
	DType   DType
}

// AutocastStatus returns the autocast setting of the calling thread (the
// worker's) for d's device type.
func AutocastStatus(d Device) (AutocastState, error) {
	api := autocastAPI()
	if api == 0 {
		return AutocastState{}, errNoAutocast()
	}
	dev := autocastDevice(d)
	on := bool(C.optlab_autocast_is_enabled(C.int(api), dev))
	// gotch's DType values are c10::ScalarType's.
	dt := DType(C.optlab_autocast_get_dtype(C.int(api), dev))
	return AutocastState{Enabled: on, DType: dt}, nil
}

func errNoAutocast() error {
	return fmt.Errorf("mixed precision: %s exports no at::autocast functions this host knows (looked up by name: set_autocast_enabled(DeviceType, bool) of libtorch ≥ 2.4, or set_cpu_enabled/set_enabled of 1.10–2.3)", LibtorchDescription())
}

// Autocast turns on libtorch's automatic mixed precision on the calling
// thread (the worker's) for d's device type (CPU or CUDA), with dt as the
// lower precision (BFloat16, or Float16 on CUDA), as Python's
// `with torch.autocast(device_type, dtype):` does: the ops autocast lists
// run in dt (convolutions, linear layers, matrix products), those it
// lists as needing float32 run in float32 (losses, softmax, norms), the
// rest in their inputs' widest type; autograd records the casts, so a
// backward pass of a graph built under it runs each op in the forward's
// precision. restore puts back the previous setting and, when this was the
// outermost scope, frees autocast's cache of cast weights; call it on the
// same thread, in reverse order of nesting. Must run on the worker.
func Autocast(d Device, dt DType) (restore func(), err error) {
	api := autocastAPI()
	if api == 0 {
		return nil, errNoAutocast()
	}
	if dt != BFloat16 && dt != Float16 {
		return nil, fmt.Errorf("autocast to %v: want bfloat16 or float16", dt)
	}
	prev, err := AutocastStatus(d)
	if err != nil {
		return nil, err
	}
	dev, a := autocastDevice(d), C.int(api)
	C.optlab_autocast_set_enabled(a, dev, true)
	C.optlab_autocast_set_dtype(a, dev, C.schar(dt))
	C.optlab_autocast_increment()
	return func() {
		if C.optlab_autocast_decrement() == 0 {
			C.optlab_autocast_clear_cache()
		}
		C.optlab_autocast_set_dtype(a, dev, C.schar(prev.DType))
		C.optlab_autocast_set_enabled(a, dev, C.bool(prev.Enabled))
	}, nil
}
