package main

import (
	"debug/elf"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// gccLib builds a shared library from C source with gcc, or skips the test.
func gccLib(t *testing.T, out, src string, args ...string) {
	t.Helper()
	if _, err := exec.LookPath("gcc"); err != nil {
		t.Skip("no gcc")
	}
	c := out + ".c"
	if err := os.WriteFile(c, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("gcc", append([]string{"-shared", "-fPIC", "-o", out, "-Wl,-soname," + filepath.Base(out), c}, args...)...)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("gcc %s: %v\n%s", out, err, b)
	}
	os.Remove(c)
}

// fakePipTorch lays out site-packages as a pip CUDA PyTorch does, with
// stand-in libraries: torch/lib/libtorch_cuda.so needs libcublas.so.12 (which
// needs libcublasLt.so.12 beside it), libcudart.so.12 and libcudnn.so.9 from
// site-packages/nvidia/*/lib, and its own run path (DT_RUNPATH) does not
// lead there. torch_cuda_x returns 6 when all three were found.
func fakePipTorch(t *testing.T) (site string) {
	site = t.TempDir()
	mk := func(p string) string {
		p = filepath.Join(site, filepath.FromSlash(p))
		if err := os.MkdirAll(p, 0o755); err != nil {
			t.Fatal(err)
		}
		return p
	}
	api := mk("torch/include/torch/csrc/api/include/torch")
	os.WriteFile(filepath.Join(api, "torch.h"), []byte("// stand-in\n"), 0o644)
	os.WriteFile(filepath.Join(api, "version.h"), []byte("#define TORCH_VERSION_MAJOR 2\n#define TORCH_VERSION_MINOR 11\n#define TORCH_VERSION_PATCH 0\n"), 0o644)
	lib := mk("torch/lib")
	cublas, cudart, cudnn, nccl := mk("nvidia/cublas/lib"), mk("nvidia/cuda_runtime/lib"), mk("nvidia/cudnn/lib"), mk("nvidia/nccl/lib")
	mk("nvidia/empty")       // no lib folder
	mk("nvidia/headers/lib") // a lib folder without libraries
	gccLib(t, filepath.Join(cublas, "libcublasLt.so.12"), "int cublaslt_x(void){return 0;}")
	gccLib(t, filepath.Join(cublas, "libcublas.so.12"), "int cublaslt_x(void); int cublas_x(void){return 1+cublaslt_x();}",
		filepath.Join(cublas, "libcublasLt.so.12"), "-Wl,-rpath,$ORIGIN")
	gccLib(t, filepath.Join(cudart, "libcudart.so.12"), "int cudart_x(void){return 2;}")
	gccLib(t, filepath.Join(cudnn, "libcudnn.so.9"), "int cudnn_x(void){return 3;}")
	gccLib(t, filepath.Join(cudnn, "libcudnn_graph.so.9"), "int cudnn_graph_x(void){return 0;}")
	gccLib(t, filepath.Join(nccl, "libnccl.so.2"), "int nccl_x(void){return 0;}")
	for _, n := range []string{"torch", "torch_cpu", "c10", "c10_cuda"} {
		gccLib(t, filepath.Join(lib, "lib"+n+".so"), "int "+n+"_x(void){return 0;}")
	}
	gccLib(t, filepath.Join(lib, "libtorch_cuda.so"),
		"int cublas_x(void); int cudart_x(void); int cudnn_x(void); int torch_cuda_x(void){return cublas_x()+cudart_x()+cudnn_x();}",
		"-Wl,--no-as-needed", filepath.Join(cublas, "libcublas.so.12"), filepath.Join(cudart, "libcudart.so.12"), filepath.Join(cudnn, "libcudnn.so.9"),
		"-Wl,-rpath,/nonexistent", "-Wl,--enable-new-dtags")
	return site
}

func TestNVIDIALibs(t *testing.T) {
	site := fakePipTorch(t)
	lt, err := fromDir(filepath.Join(site, "torch"), "python (test)")
	if err != nil {
		t.Fatal(err)
	}
	if !lt.CUDA || lt.Version != "2.11.0" {
		t.Fatalf("%v", lt)
	}
	nv := filepath.Join(site, "nvidia")
	wantDirs := []string{filepath.Join(nv, "cublas", "lib"), filepath.Join(nv, "cuda_runtime", "lib"), filepath.Join(nv, "cudnn", "lib"), filepath.Join(nv, "nccl", "lib")}
	if !reflect.DeepEqual(lt.NVIDIALibDirs, wantDirs) {
		t.Errorf("NVIDIA folders %v, want %v", lt.NVIDIALibDirs, wantDirs)
	}
	wantLibs := []string{"libcublas.so.12", "libcublasLt.so.12", "libcudart.so.12", "libcudnn.so.9"}
	if !reflect.DeepEqual(lt.NVIDIALibs, wantLibs) {
		t.Errorf("NVIDIA libraries %v, want %v (what libtorch needs, directly or not; not libnccl or libcudnn_graph)", lt.NVIDIALibs, wantLibs)
	}
	g := libGo(lt)
	for _, d := range wantDirs {
		if !strings.Contains(g, " -L"+d+" -Wl,-rpath,"+d+" ") {
			t.Errorf("lib.go lacks -L and -rpath for %s:\n%s", d, g)
		}
	}
	for _, want := range []string{
		"-L" + lt.LibDir + " -Wl,-rpath," + lt.LibDir + " ",
		"-Wl,--disable-new-dtags -lstdc++",
		"-ltorch_cuda -lc10_cuda -l:libcublas.so.12 -l:libcublasLt.so.12 -l:libcudart.so.12 -l:libcudnn.so.9 -Wl,--as-needed\n",
	} {
		if !strings.Contains(g, want) {
			t.Errorf("lib.go lacks %q:\n%s", want, g)
		}
	}
	if !strings.Contains(lt.fingerprint(), "nvidia:"+strings.Join(wantDirs, ":")) {
		t.Errorf("the fingerprint ignores the NVIDIA libraries: %s", lt.fingerprint())
	}

	// A CUDA libtorch not inside a torch package (the libtorch zip), and a
	// CPU one, get none of it.
	if d, l := nvidiaLibs(filepath.Join(site, "nvidia", "cudnn", "lib")); d != nil || l != nil {
		t.Errorf("a lib folder outside a torch package: %v %v", d, l)
	}
	if g := libGo(Libtorch{IncludeDir: "/usr/include", LibDir: "/usr/lib/x86_64-linux-gnu", ABI: 1}); strings.Contains(g, "dtags") || strings.Contains(g, "-l:") {
		t.Errorf("Debian lib.go changed:\n%s", g)
	}
}

// TestNVIDIALibsRun builds a cgo program with the generated lib.go against
// the fake layout and runs it with no LD_LIBRARY_PATH: it must start (the
// loader finds every NVIDIA library libtorch_cuda needs). Without the NVIDIA
// flags the same program must fail to start, as a pip libtorch did.
func TestNVIDIALibsRun(t *testing.T) {
	if testing.Short() {
		t.Skip("builds two cgo programs")
	}
	goCmd, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command")
	}
	site := fakePipTorch(t)
	lt, err := fromDir(filepath.Join(site, "torch"), "python (test)")
	if err != nil {
		t.Fatal(err)
	}
	run := func(lt Libtorch, env ...string) (string, error) {
		dir := t.TempDir()
		files := map[string]string{
			"go.mod":  "module fakehost\n\ngo 1.21\n",
			"lib.go":  strings.Replace(libGo(lt), "package libtch", "package main", 1),
			"main.go": "package main\n\n// int torch_cuda_x(void);\nimport \"C\"\n\nimport \"fmt\"\n\nfunc main() { fmt.Println(int(C.torch_cuda_x())) }\n",
		}
		writeTree(t, dir, files)
		exe := filepath.Join(dir, "host")
		build := exec.Command(goCmd, "build", "-o", exe, ".")
		build.Dir = dir
		build.Env = append(append(os.Environ(), "CGO_ENABLED=1", "GOFLAGS=-mod=mod", "GOWORK=off"), env...)
		if b, err := build.CombinedOutput(); err != nil {
			t.Fatalf("go build: %v\n%s", err, b)
		}
		if f, err := elf.Open(exe); err == nil {
			rpath, _ := f.DynString(elf.DT_RPATH)
			t.Logf("DT_RPATH %v", rpath)
			f.Close()
		}
		cmd := exec.Command(exe)
		for _, e := range os.Environ() {
			if !strings.HasPrefix(e, "LD_LIBRARY_PATH=") && !strings.HasPrefix(e, "LD_PRELOAD=") {
				cmd.Env = append(cmd.Env, e)
			}
		}
		b, err := cmd.CombinedOutput()
		return string(b), err
	}
	if out, err := run(lt); err != nil || strings.TrimSpace(out) != "6" {
		t.Errorf("with the NVIDIA flags: %v, %q", err, out)
	}
	// The bare build finds the NVIDIA libraries at link time only
	// (-rpath-link), as a real libtorch_cuda's own run path lets it.
	// On a machine with the system's own CUDA libraries (Debian's CUDA
	// libtorch, 2026-11-28) the linker takes /lib's libcublas.so.12 for the
	// bare build, which then does not link: the contrast proves nothing
	// there, and the build with the NVIDIA flags above has passed.
	if out, err := exec.Command("ldconfig", "-p").Output(); err == nil && strings.Contains(string(out), "libcublas.so.12 ") {
		t.Log("this machine has its own libcublas.so.12 (ldconfig -p): the bare build's contrast is skipped")
		return
	}
	bare := lt
	bare.NVIDIALibDirs, bare.NVIDIALibs = nil, nil
	if out, err := run(bare, "CGO_LDFLAGS=-Wl,-rpath-link,"+strings.Join(lt.NVIDIALibDirs, ":")); err == nil || !strings.Contains(out, "error while loading shared libraries") {
		t.Errorf("without them the program should not start (else this test proves nothing): %v, %q", err, out)
	}
}
