package tensor

import (
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
