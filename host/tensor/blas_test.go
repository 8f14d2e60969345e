package tensor

import (
	"os"
	"testing"
)

func TestClassifyBLAS(t *testing.T) {
	cases := []struct {
		path      string
		kind      BLASKind
		threading string
		ok        bool
	}{
		{"/usr/lib/x86_64-linux-gnu/blas/libblas.so.3.11.0", BLASReference, "", true},
		{"/usr/lib/x86_64-linux-gnu/openblas-pthread/libblas.so.3", BLASOpenBLAS, "pthread", true},
		{"/usr/lib/x86_64-linux-gnu/openblas-openmp/libopenblasp-r0.3.21.so", BLASOpenBLAS, "openmp", true},
		{"/usr/lib/x86_64-linux-gnu/blis-openmp/libblas.so.3", BLASBLIS, "openmp", true},
		{"/usr/lib/x86_64-linux-gnu/blis-serial/libblis.so.4", BLASBLIS, "serial", true},
		{"/usr/lib/x86_64-linux-gnu/atlas/libblas.so.3.10.3", BLASATLAS, "", true},
		{"/opt/intel/oneapi/mkl/lib/libmkl_rt.so.2", BLASMKL, "", true},
		{"/opt/OpenBLAS/lib/libopenblas.so.0", BLASOpenBLAS, "", true},
		{"/home/me/netlib/libblas.so", BLASReference, "", true},
		{"/usr/lib/x86_64-linux-gnu/libtorch_cpu.so.1.13", "", "", false},
	}
	for _, c := range cases {
		b, ok := ClassifyBLAS(c.path)
		if ok != c.ok || b.Kind != c.kind || b.Threading != c.threading {
			t.Errorf("%s: %+v %v, want %s %q %v", c.path, b, ok, c.kind, c.threading, c.ok)
		}
		if ok && b.Slow() != (c.kind == BLASReference) {
			t.Errorf("%s: Slow() = %v", c.path, b.Slow())
		}
	}
}

// TestBLASInUse checks the process's own BLAS is found, the reference BLAS
// draws a warning, and an OpenBLAS with its own thread pool is held to one
// thread (unless OPENBLAS_NUM_THREADS was set).
func TestBLASInUse(t *testing.T) {
	NewWorker(1).Close() // sets threads and tunes the BLAS
	b := BLASInUse()
	t.Logf("BLAS in use: %s", BLASDescription())
	if b.Kind == "" || b.String() == "" {
		t.Fatalf("no description: %+v", b)
	}
	if b.Slow() != (BLASDescription() != b.String()) {
		t.Fatalf("warning only for the reference BLAS: %q", BLASDescription())
	}
	if b.Kind == BLASOpenBLAS && b.Threading == "pthread" && os.Getenv("OPENBLAS_NUM_THREADS") == "" {
		if n := openBLASThreads(); n != 1 {
			t.Fatalf("OpenBLAS (pthread) runs %d threads beside libtorch's, want 1", n)
		}
	}
}
