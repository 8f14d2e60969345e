package tensor

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

func TestVersionFormats(t *testing.T) {
	for v, want := range map[int]string{12080: "12.8", 13000: "13.0", 11070: "11.7", 12040: "12.4", 0: "unknown", -1: "unknown"} {
		if got := CUDAVersion(v); got != want {
			t.Errorf("CUDAVersion(%d) = %s, want %s", v, got, want)
		}
	}
	for v, want := range map[int]string{8907: "8.9.7", 8700: "8.7.0", 90100: "9.1.0", 91002: "9.10.2", 0: "unknown"} {
		if got := CuDNNVersion(v); got != want {
			t.Errorf("CuDNNVersion(%d) = %s, want %s", v, got, want)
		}
	}
}

// TestVersionCUDAProblem feeds Problem and Describe made-up probes: what a
// CUDA build on a machine without a usable GPU must say.
func TestVersionCUDAProblem(t *testing.T) {
	gpu := CUDAStatus{Build: true, Runtime: 12080, RuntimeLib: "/site/nvidia/cuda_runtime/lib/libcudart.so.12",
		DriverLoaded: true, Driver: 12080, DriverRelease: "570.133.20", CuDNN: 91002, CuDNNAvailable: true,
		CountErr: 0, Devices: 1, Available: true}
	noGPU := func(f func(*CUDAStatus)) CUDAStatus {
		s := gpu
		s.Devices, s.Available, s.CuDNNAvailable = 0, false, false
		f(&s)
		return s
	}
	cases := []struct {
		name string
		s    CUDAStatus
		want []string // substrings of Problem; none: usable
		not  []string
	}{
		{"usable", gpu, nil, nil},
		{"usable, older minor driver", func() CUDAStatus { s := gpu; s.Driver = 12020; return s }(), nil, nil},
		{"CPU build", CUDAStatus{CountErr: -1}, []string{"CPU build", "CUDA libtorch"}, nil},
		{"no driver", noGPU(func(s *CUDAStatus) {
			s.DriverLoaded, s.Driver, s.DriverRelease, s.CountErr = false, 0, "", cudaErrorInsufficientDriver
		}),
			[]string{"no NVIDIA driver", "libcuda.so.1"}, []string{"too old"}},
		{"driver too old (major)", noGPU(func(s *CUDAStatus) {
			s.Runtime, s.Driver, s.CountErr, s.CountErrText = 13000, 12040, cudaErrorInsufficientDriver, "CUDA driver version is insufficient for CUDA runtime version"
		}), []string{"driver is too old", "supports CUDA up to 12.4", "runtime is CUDA 13.0", "CUDA 13.0 or newer", "CUDA 12.x", "insufficient"}, []string{"no CUDA device"}},
		{"driver too old, versions unknown", noGPU(func(s *CUDAStatus) { s.Runtime, s.Driver, s.CountErr = 0, 0, cudaErrorInsufficientDriver }),
			[]string{"driver is too old"}, []string{"supports CUDA up to"}},
		{"driver too old, runtime error unknown", noGPU(func(s *CUDAStatus) { s.Runtime, s.Driver, s.CountErr = 12080, 11080, -1 }),
			[]string{"driver is too old", "up to 11.8", "runtime is CUDA 12.8"}, nil},
		{"no device", noGPU(func(s *CUDAStatus) {
			s.CountErr, s.CountErrText = cudaErrorNoDevice, "no CUDA-capable device is detected"
		}),
			[]string{"no CUDA device visible", "driver (CUDA 12.8) is loaded but sees no GPU", "nvidia-smi -L"}, []string{"too old", "CUDA_VISIBLE_DEVICES"}},
		{"no device, older minor driver", noGPU(func(s *CUDAStatus) { s.Driver, s.CountErr = 12020, cudaErrorNoDevice }),
			[]string{"no CUDA device visible", "older than the runtime's 12.8", "minor-version compatibility"}, []string{"too old"}},
		{"hidden by CUDA_VISIBLE_DEVICES", noGPU(func(s *CUDAStatus) { s.CountErr, s.VisibleDevices, s.VisibleDevicesSet = cudaErrorNoDevice, "", true }),
			[]string{"no CUDA device visible", `CUDA_VISIBLE_DEVICES="" hides every GPU`}, nil},
		{"CUDA_VISIBLE_DEVICES names no GPU", noGPU(func(s *CUDAStatus) { s.CountErr, s.VisibleDevices, s.VisibleDevicesSet = cudaErrorNoDevice, "3", true }),
			[]string{`CUDA_VISIBLE_DEVICES="3" names no GPU`}, nil},
		{"no device, runtime not visible", noGPU(func(s *CUDAStatus) { s.Runtime, s.CountErr = 0, -1 }),
			[]string{"no CUDA device visible"}, nil},
		{"other runtime error", noGPU(func(s *CUDAStatus) {
			s.CountErr, s.CountErrText = 46, "CUDA-capable device(s) is/are busy or unavailable"
		}),
			[]string{"cudaGetDeviceCount failed with error 46", "busy or unavailable"}, nil},
		{"runtime sees a device, libtorch does not", noGPU(func(s *CUDAStatus) { s.CountErr, s.Devices = 0, 2 }),
			[]string{"sees 2 device(s)", "libtorch reports CUDA as unavailable"}, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := c.s.Problem()
			if len(c.want) == 0 {
				if p != "" || !c.s.Usable() {
					t.Errorf("usable GPU: Problem %q", p)
				}
			}
			for _, w := range c.want {
				if !strings.Contains(p, w) {
					t.Errorf("Problem lacks %q: %s", w, p)
				}
			}
			for _, w := range c.not {
				if strings.Contains(p, w) {
					t.Errorf("Problem has %q: %s", w, p)
				}
			}
			d := strings.Join(c.s.Describe(), "\n")
			switch {
			case !c.s.Build:
				if !strings.HasPrefix(d, "CPU build") {
					t.Errorf("Describe of a CPU build: %s", d)
				}
			case c.s.Usable():
				for _, w := range []string{"CUDA runtime 12.8 (/site/nvidia/cuda_runtime/lib/libcudart.so.12)", "NVIDIA driver 570.133.20, supports CUDA 12.", "cuDNN 9.10.2 (available)", "CUDA devices: 1"} {
					if !strings.Contains(d, w) {
						t.Errorf("Describe lacks %q:\n%s", w, d)
					}
				}
			default:
				if !strings.Contains(d, "no usable GPU: "+p) || !strings.Contains(d, "CUDA runtime ") || !strings.Contains(d, "cuDNN ") {
					t.Errorf("Describe:\n%s", d)
				}
			}
		})
	}
}

// TestVersionProbe checks the real probe: on a CPU build it says so and
// loads nothing; "auto" needs no note there.
func TestVersionProbe(t *testing.T) {
	s := ProbeCUDA()
	d := strings.Join(s.Describe(), "\n")
	t.Logf("%s: %s", LibtorchDescription(), d)
	if s.Build != libtchCUDA() {
		t.Errorf("Build %v", s.Build)
	}
	if !s.Build {
		if !strings.HasPrefix(d, "CPU build: no CUDA") || s.Usable() {
			t.Errorf("CPU build: %s", d)
		}
		if n := AutoDeviceNote("auto", CPU); n != "" {
			t.Errorf("a CPU build needs no note for auto: %q", n)
		}
		return
	}
	if !s.Usable() && !strings.Contains(AutoDeviceNote("auto", CPU), s.Problem()) {
		t.Errorf("auto note on a CUDA build without a GPU: %q", AutoDeviceNote("auto", CPU))
	}
	if AutoDeviceNote("cpu", CPU) != "" {
		t.Error("an explicit cpu needs no note")
	}
}

func libtchCUDA() bool { return strings.Contains(LibtorchDescription(), "(CUDA build") }

// ContextLost tells the CUDA errors after which the process's GPU is
// unusable from those it survives, on libtorch's messages of both kinds.
func TestContextLost(t *testing.T) {
	lostMsgs := []string{
		"add: CUDA error: an illegal memory access was encountered\nCUDA kernel errors might be asynchronously reported at some other API call",
		"conv2d: CUDA error: unspecified launch failure",
		"index_select: CUDA error: device-side assert triggered\nCompile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.",
		"copy_: CUDA error: misaligned address",
		"mm: CUDA error: an illegal instruction was encountered",
		"Exception raised from c10_cuda_check_implementation: cudaErrorIllegalAddress",
		"CUDA driver error: CUDA_ERROR_LAUNCH_FAILED",
		"CUDA error: the launch timed out and was terminated",
		"CUDA error: uncorrectable ECC error encountered",
		"op 7 (Grad): sum: CUDA error: AN ILLEGAL MEMORY ACCESS WAS ENCOUNTERED",
	}
	survivable := []string{
		"zeros: CUDA out of memory. Tried to allocate 2.00 GiB (GPU 0; 79.10 GiB total capacity)",
		"CUDA error: out of memory",
		"linear: mat1 and mat2 shapes cannot be multiplied (8x4 and 5x3)",
		"CUDA error: invalid device ordinal",
		"expected all tensors to be on the same device, but found at least two devices, cuda:0 and cpu",
		"faulty: simulated failure at step 1",
	}
	for _, m := range lostMsgs {
		if !ContextLost(errors.New(m)) {
			t.Errorf("ContextLost(%q) = false", m)
		}
	}
	for _, m := range survivable {
		if ContextLost(errors.New(m)) {
			t.Errorf("ContextLost(%q) = true", m)
		}
	}
	if ContextLost(nil) {
		t.Error("ContextLost(nil)")
	}
}

// A scope that fails with a lost-context error records it for DeviceLost
// (the first one), and one that fails otherwise does not.
func TestDeviceLostLatch(t *testing.T) {
	defer lost.Store(nil)
	lost.Store(nil)
	s := NewScope()
	s.Fail(errors.New("linear: shapes cannot be multiplied"))
	if err := DeviceLost(); err != nil {
		t.Fatalf("DeviceLost after a shape error: %v", err)
	}
	first := errors.New("add: CUDA error: an illegal memory access was encountered")
	for _, err := range []error{first, errors.New("mul: CUDA error: unspecified launch failure")} {
		s := NewScope()
		s.Fail(err)
		s.Close()
	}
	if err := DeviceLost(); err != first {
		t.Errorf("DeviceLost() = %v, want the first lost-context error", err)
	}
}

// ParseDevice makes the GPU it names the thread's current CUDA device;
// the CUDA calls are fakes here (a CPU build has no GPU).
func TestParseDeviceSetsCurrentDevice(t *testing.T) {
	avail, count, set := cudaAvailable, cudaDeviceCount, setCUDADevice
	defer func() { cudaAvailable, cudaDeviceCount, setCUDADevice = avail, count, set }()
	var calls []int
	cudaAvailable = func() bool { return true }
	cudaDeviceCount = func() int { return 2 }
	setCUDADevice = func(n int) error { calls = append(calls, n); return nil }
	for _, c := range []struct {
		spec  string
		want  string
		calls []int
		err   string
	}{
		{"cuda:1", "cuda:1", []int{1}, ""},
		{" CUDA:0 ", "cuda:0", []int{0}, ""},
		{"cuda", "cuda:0", []int{0}, ""},
		{"auto", "cuda:0", []int{0}, ""},
		{"cpu", "cpu", nil, ""},
		{"cuda:2", "cpu", nil, "only 2 CUDA device(s)"},
		{"cuda:-1", "cpu", nil, "want auto, cpu, cuda or cuda:N"},
		{"cuda:x", "cpu", nil, "want auto, cpu, cuda or cuda:N"},
		{"gpu", "cpu", nil, "want auto, cpu, cuda or cuda:N"},
	} {
		calls = nil
		d, err := ParseDevice(c.spec)
		if d.String() != c.want || !slices.Equal(calls, c.calls) || (err == nil) != (c.err == "") ||
			(err != nil && !strings.Contains(err.Error(), c.err)) {
			t.Errorf("ParseDevice(%q) = %v, %v, set device %v; want %s, %q, %v", c.spec, d, err, calls, c.want, c.err, c.calls)
		}
	}
	setCUDADevice = func(n int) error { return errors.New("CUDA error: invalid device ordinal") }
	if _, err := ParseDevice("cuda:1"); err == nil || !strings.Contains(err.Error(), "making cuda:1 the current device") {
		t.Errorf("a failing cudaSetDevice: %v", err)
	}
}
