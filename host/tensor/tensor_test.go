package tensor

import (
	"context"
	"errors"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/sugarme/gotch/ts"
)

// onWorker runs fn with a fresh scope on a shared worker and fails the test
// on a Do error (fn must not call t.Fatal: it runs on the worker's goroutine).
func onWorker(t *testing.T, fn func(s *Scope) error) {
	t.Helper()
	err := testWorker.Do(context.Background(), func() error {
		s := NewScope()
		defer s.Close()
		return fn(s)
	})
	if err != nil {
		t.Fatal(err)
	}
}

var testWorker = NewWorker(1)

func TestScopeErrorsNameTheOp(t *testing.T) {
	tests := []struct {
		name string
		op   func(s *Scope) T
		want string
	}{
		{"linear shape mismatch", func(s *Scope) T {
			x := s.Ones([]int64{2, 3}, Float32, CPU)
			w := s.Ones([]int64{4, 5}, Float32, CPU)
			return s.Linear(x, w, T{})
		}, "linear"},
		{"add shape mismatch", func(s *Scope) T {
			return s.Add(s.Ones([]int64{2, 3}, Float32, CPU), s.Ones([]int64{4}, Float32, CPU))
		}, "add"},
		{"mul shape mismatch", func(s *Scope) T {
			return s.Mul(s.Ones([]int64{3}, Float32, CPU), s.Ones([]int64{5}, Float32, CPU))
		}, "mul"},
		{"conv2d channel mismatch", func(s *Scope) T {
			x := s.Ones([]int64{1, 3, 4, 4}, Float32, CPU)
			w := s.Ones([]int64{2, 2, 3, 3}, Float32, CPU)
			return s.Conv2d(x, w, T{}, 1, 1, 1)
		}, "conv2d"},
		{"view numel mismatch", func(s *Scope) T {
			return s.View(s.Ones([]int64{6}, Float32, CPU), 4)
		}, "view"},
		{"index_select out of range", func(s *Scope) T {
			x := s.Ones([]int64{3, 2}, Float32, CPU)
			return s.IndexSelect(x, 0, s.FromInt64([]int64{0, 7}, []int64{2}, CPU))
		}, "index_select"},
		{"narrow out of range", func(s *Scope) T {
			return s.Narrow(s.Ones([]int64{4}, Float32, CPU), 0, 3, 5)
		}, "narrow"},
		{"cat rank mismatch", func(s *Scope) T {
			return s.Cat(0, s.Ones([]int64{2, 2}, Float32, CPU), s.Ones([]int64{2}, Float32, CPU))
		}, "cat"},
		{"cross_entropy class out of range", func(s *Scope) T {
			logits := s.Ones([]int64{2, 3}, Float32, CPU)
			return s.CrossEntropy(logits, s.FromInt64([]int64{0, 9}, []int64{2}, CPU), 0)
		}, "cross_entropy"},
		{"upload length mismatch", func(s *Scope) T {
			return s.FromFloat32([]float32{1, 2, 3}, []int64{2, 2}, CPU)
		}, "from float32"},
		{"missing tensor", func(s *Scope) T {
			return s.Relu(T{})
		}, "missing tensor"},
		{"gradient without grad", func(s *Scope) T {
			x := s.Ones([]int64{3}, Float32, CPU)
			return s.Gradient(s.Sum(x, Float32), x)
		}, "backward"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			onWorker(t, func(s *Scope) error {
				r := tc.op(s)
				err := s.Err()
				if err == nil {
					t.Errorf("no error (result shape %v)", r.Shape())
					return nil
				}
				if !strings.Contains(err.Error(), tc.want) {
					t.Errorf("error %q does not name %q", err, tc.want)
				}
				if r.Valid() {
					t.Errorf("failing op returned a valid tensor")
				}
				// Sticky: later ops are no-ops returning the zero T, the
				// first error stays.
				later := s.Add(s.Ones([]int64{2}, Float32, CPU), s.Ones([]int64{2}, Float32, CPU))
				if later.Valid() {
					t.Errorf("op after an error returned a valid tensor")
				}
				if s.Scalars(later) != nil || s.Float64s(later) != nil {
					t.Errorf("reads after an error returned values")
				}
				s.Fill(later, 1)
				s.Fail(errors.New("second"))
				if s.Err() != err {
					t.Errorf("error changed from %q to %q", err, s.Err())
				}
				return nil
			})
		})
	}
}

func TestScopeFailNil(t *testing.T) {
	s := NewScope()
	defer s.Close()
	if r := s.Fail(nil); r.Valid() || s.Err() != nil {
		t.Fatalf("Fail(nil) set error %v", s.Err())
	}
}

// TestStubbedOp calls an op that gotchprep stubbed for this libtorch: it must
// come back as an error naming the op and the libtorch version, not a crash.
// stubbedCandidates are ops the test can call, by their libtch name, with
// the op's short name: gotchprep stubs whichever of them the libtorch at hand
// lacks (nonzero_static below 2.1).
var stubbedCandidates = []struct {
	atg, name string
	call      func(x *ts.Tensor) (*ts.Tensor, error)
}{
	{"atg_nonzero_static", "nonzero_static", func(x *ts.Tensor) (*ts.Tensor, error) { return x.NonzeroStatic(2, -1, false) }},
}

// stubbedOp returns a candidate op that gotchprep stubbed for this libtorch
// (listed in build/gotch/libtch/STUBBED_OPS.txt), or skips the test.
func stubbedOp(t *testing.T) (string, func(x *ts.Tensor) (*ts.Tensor, error)) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "build", "gotch", "libtch", "STUBBED_OPS.txt"))
	if err != nil {
		t.Skipf("no list of stubbed ops: %v", err)
	}
	stubbed := map[string]bool{}
	for _, l := range strings.Fields(string(b)) {
		stubbed[l] = true
	}
	for _, c := range stubbedCandidates {
		if stubbed[c.atg] {
			return c.name, c.call
		}
	}
	t.Skipf("libtorch %s: none of this test's candidate ops is stubbed (%d ops are)", LibtorchVersion(), len(stubbed))
	return "", nil
}

func TestStubbedOp(t *testing.T) {
	name, call := stubbedOp(t)
	onWorker(t, func(s *Scope) error {
		x := s.Ones([]int64{4}, Float32, CPU)
		r := s.op(name, func() (*ts.Tensor, error) { return call(x.t) })
		err := s.Err()
		switch {
		case err == nil || r.Valid():
			t.Errorf("stubbed op: result valid %v, error %v", r.Valid(), err)
		case !strings.Contains(err.Error(), name):
			t.Errorf("error %q does not name the op", err)
		case !strings.Contains(err.Error(), LibtorchVersion()):
			t.Errorf("error %q does not name libtorch %s", err, LibtorchVersion())
		}
		// The error slot was reset: a fresh scope works.
		s2 := NewScope()
		defer s2.Close()
		v := s2.Float64s(s2.Add(s2.Ones([]int64{2}, Float32, CPU), s2.Ones([]int64{2}, Float32, CPU)))
		if s2.Err() != nil || len(v) != 2 || v[0] != 2 {
			t.Errorf("op after the stubbed op: %v, %v", v, s2.Err())
		}
		return nil
	})
}

func TestParseDevice(t *testing.T) {
	cuda := false
	_ = testWorker.Do(context.Background(), func() error {
		_, err := ParseDevice("cuda")
		cuda = err == nil
		return nil
	})
	tests := []struct {
		spec    string
		want    string // device when no error
		errWith string // substring of the error; "" = no error
		gpu     bool   // expectation only holds without CUDA
	}{
		{"auto", "cpu", "", true},
		{"", "cpu", "", true},
		{"cpu", "cpu", "", false},
		{" CPU ", "cpu", "", false},
		{"cuda", "", "CUDA is not available with libtorch " + LibtorchVersion(), true},
		{"cuda:0", "", "CUDA is not available", true},
		{"cuda:3", "", "CUDA is not available", true},
		{"cuda:x", "", "want auto, cpu, cuda or cuda:N", false},
		{"cuda:-1", "", "want auto, cpu, cuda or cuda:N", false},
		{"cuda:", "", "want auto, cpu, cuda or cuda:N", false},
		{"gpu", "", "want auto, cpu, cuda or cuda:N", false},
		{"garbage", "", `device "garbage"`, false},
	}
	for _, tc := range tests {
		t.Run(strconv.Quote(tc.spec), func(t *testing.T) {
			if tc.gpu && cuda {
				t.Skip("CUDA is available")
			}
			var d Device
			var err error
			_ = testWorker.Do(context.Background(), func() error { d, err = ParseDevice(tc.spec); return nil })
			if tc.errWith != "" {
				if err == nil || !strings.Contains(err.Error(), tc.errWith) {
					t.Fatalf("ParseDevice(%q) = %v, %v; want an error containing %q", tc.spec, d, err, tc.errWith)
				}
				return
			}
			if err != nil || d.String() != tc.want || d.IsCUDA() {
				t.Fatalf("ParseDevice(%q) = %v, %v; want %s", tc.spec, d, err, tc.want)
			}
		})
	}
}

func TestManualSeedRandn(t *testing.T) {
	onWorker(t, func(s *Scope) error {
		draw := func(seed int64) []float64 {
			ManualSeed(seed)
			return s.Float64s(s.Randn([]int64{64}, Float32, CPU))
		}
		a, b, c := draw(42), draw(42), draw(43)
		if err := s.Err(); err != nil {
			return err
		}
		same := func(x, y []float64) bool {
			for i := range x {
				if x[i] != y[i] {
					return false
				}
			}
			return len(x) == len(y)
		}
		if !same(a, b) {
			t.Error("Randn after ManualSeed(42) twice differs")
		}
		if same(a, c) {
			t.Error("Randn with seeds 42 and 43 is identical")
		}
		// Normal_ on a kept tensor is reproducible too.
		k := s.Zeros([]int64{16}, Float32, CPU)
		ManualSeed(7)
		s.NormalInPlace(k, 0, 2)
		n1 := s.Float64s(k)
		ManualSeed(7)
		s.NormalInPlace(k, 0, 2)
		n2 := s.Float64s(k)
		if !same(n1, n2) {
			t.Error("NormalInPlace after ManualSeed(7) twice differs")
		}
		return s.Err()
	})
}

func TestSetGradEnabled(t *testing.T) {
	onWorker(t, func(s *Scope) error {
		steps := []struct {
			on, wantPrev bool
		}{
			{true, true}, // torch starts with grad mode on
			{false, true},
			{false, false},
			{true, false},
			{true, true},
		}
		for i, st := range steps {
			prev, err := SetGradEnabled(st.on)
			if err != nil {
				return err
			}
			if prev != st.wantPrev {
				t.Errorf("step %d: SetGradEnabled(%v) returned %v, want %v", i, st.on, prev, st.wantPrev)
			}
		}
		// Grad mode off really stops recording.
		prev, _ := SetGradEnabled(false)
		x := s.RequiresGrad(s.Ones([]int64{3}, Float32, CPU))
		g := s.Gradient(s.Sum(s.Square(x), Float32), x)
		_, _ = SetGradEnabled(prev)
		if s.Err() == nil || g.Valid() {
			t.Errorf("gradient with grad mode off: no error")
		}
		s2 := NewScope()
		defer s2.Close()
		x = s2.RequiresGrad(s2.FromFloat32([]float32{1, 2, 3}, []int64{3}, CPU))
		v := s2.Float64s(s2.Gradient(s2.Sum(s2.Square(x), Float32), x))
		if err := s2.Err(); err != nil {
			return err
		}
		for i, want := range []float64{2, 4, 6} {
			if v[i] != want {
				t.Errorf("gradient of Σx² = %v, want [2 4 6]", v)
				break
			}
		}
		return nil
	})
}

func liveTensors() int { return len(ts.ExistingTensors) }

func TestScopeCloseFrees(t *testing.T) {
	onWorker(t, func(*Scope) error {
		before := liveTensors()
		s := NewScope()
		a := s.Randn([]int64{8, 8}, Float32, CPU)
		b := s.Relu(s.Add(a, s.Scale(a, 2)))
		kept := s.Keep(s.Sum(b, Float64))
		_ = s.Scalars(s.Norm(b), s.Mean(a))
		if err := s.Err(); err != nil {
			return err
		}
		if liveTensors() <= before+3 {
			t.Errorf("live tensors %d → %d: the scope's temporaries were not counted", before, liveTensors())
		}
		s.Close()
		s.Close() // idempotent
		if got := liveTensors(); got != before+1 {
			t.Errorf("after Close: %d live tensors, want %d (the kept one)", got, before+1)
		}
		// The kept tensor is intact after the scope closed.
		s2 := NewScope()
		v := s2.Scalars(kept)
		if s2.Err() != nil || len(v) != 1 || math.IsNaN(v[0]) {
			t.Errorf("kept tensor after Close: %v, %v", v, s2.Err())
		}
		s2.Close()
		kept.Drop()
		kept.Drop() // no-op
		if kept.Valid() {
			t.Error("Drop left the handle valid")
		}
		if got := liveTensors(); got != before {
			t.Errorf("after Drop: %d live tensors, want %d", got, before)
		}
		// Adopt hands a kept tensor back to a scope.
		s3 := NewScope()
		k := s3.Keep(s3.Ones([]int64{2}, Float32, CPU))
		s4 := NewScope()
		s4.Adopt(k)
		s3.Close()
		if got := liveTensors(); got != before+1 {
			t.Errorf("adopted tensor: %d live, want %d", got, before+1)
		}
		s4.Close()
		if got := liveTensors(); got != before {
			t.Errorf("after closing the adopting scope: %d live, want %d", got, before)
		}
		// A failing op leaves nothing behind.
		s5 := NewScope()
		s5.Linear(s5.Ones([]int64{2, 3}, Float32, CPU), s5.Ones([]int64{4, 5}, Float32, CPU), T{})
		s5.Close()
		if got := liveTensors(); got != before {
			t.Errorf("after a failed op: %d live, want %d", got, before)
		}
		return nil
	})
}

// rssBytes reads the resident set size from /proc.
func rssBytes() (int64, bool) {
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return 0, false
	}
	f := strings.Fields(string(b))
	if len(f) < 2 {
		return 0, false
	}
	pages, err := strconv.ParseInt(f[1], 10, 64)
	if err != nil {
		return 0, false
	}
	return pages * int64(os.Getpagesize()), true
}

// TestScopeCloseReleasesMemory allocates and frees 8 MiB tensors many
// times: the resident set must stay flat.
func TestScopeCloseReleasesMemory(t *testing.T) {
	if _, ok := rssBytes(); !ok {
		t.Skip("no /proc/self/statm")
	}
	const n = 2 << 20 // float32 elements: 8 MiB
	iter := func() error {
		return testWorker.Do(context.Background(), func() error {
			s := NewScope()
			defer s.Close()
			x := s.Ones([]int64{n}, Float32, CPU)
			y := s.Scale(x, 2)
			v := s.Scalars(s.Sum(y, Float64))
			if err := s.Err(); err != nil {
				return err
			}
			if v[0] != 2*n {
				return errors.New("wrong sum")
			}
			return nil
		})
	}
	// glibc's allocator settles (mmap threshold, arenas) over the first
	// iterations; measure after that.
	for range 12 {
		if err := iter(); err != nil {
			t.Fatal(err)
		}
	}
	runtime.GC()
	start, _ := rssBytes()
	for range 20 {
		if err := iter(); err != nil {
			t.Fatal(err)
		}
	}
	runtime.GC()
	end, _ := rssBytes()
	// 20 leaked iterations would hold 320 MiB; allow allocator slack.
	if grow := end - start; grow > 64<<20 {
		t.Errorf("resident set grew by %d MiB over 20 alloc/free iterations", grow>>20)
	}
}

func TestScalarsAndCopies(t *testing.T) {
	onWorker(t, func(s *Scope) error {
		a := s.FromFloat32([]float32{1, -2, 3, 0.5}, []int64{4}, CPU)
		b := s.FromFloat32([]float32{4, 5, -6, 8}, []int64{4}, CPU)
		v := s.Scalars(s.Dot(a, b), s.Norm(a), s.Sum(a, Float32), s.Mean(b))
		if err := s.Err(); err != nil {
			return err
		}
		want := []float64{4 - 10 - 18 + 4, math.Sqrt(1 + 4 + 9 + 0.25), 2.5, 11.0 / 4}
		for i := range want {
			if math.Abs(v[i]-want[i]) > 1e-6 {
				t.Errorf("scalar %d = %v, want %v", i, v[i], want[i])
			}
		}
		// Dot accumulates in float64 whatever the operands' types.
		a64, b64 := s.Cast(a, Float64), s.Cast(b, Float64)
		dv := s.Scalars(s.Dot(a64, b), s.Dot(a, b64), s.Dot(a64, b64))
		if err := s.Err(); err != nil {
			return err
		}
		for i := range dv {
			if dv[i] != want[0] {
				t.Errorf("mixed-type dot %d = %v, want %v", i, dv[i], want[0])
			}
		}
		// Norm is global whatever the shape.
		m := s.FromFloat32([]float32{3, 4, 0, 12}, []int64{2, 2}, CPU)
		nv := s.Scalars(s.Norm(m), s.Norm(s.View(m, 2, 1, 2)), s.Norm(s.Sum(m, Float32)))
		if err := s.Err(); err != nil {
			return err
		}
		for i, want := range []float64{13, 13, 19} {
			if nv[i] != want {
				t.Errorf("norm %d = %v, want %v", i, nv[i], want)
			}
		}
		// In-place ops on a kept tensor.
		k := s.Zeros([]int64{4}, Float32, CPU)
		s.CopyFrom(k, a)
		s.ScaleInPlace(k, 2)
		s.AddScalarInPlace(k, 1)
		s.Axpy(k, -1, b)
		s.MulInPlace(k, a)
		got := s.Float64s(k)
		if err := s.Err(); err != nil {
			return err
		}
		av, bv := []float64{1, -2, 3, 0.5}, []float64{4, 5, -6, 8}
		for i := range av {
			if w := (2*av[i] + 1 - bv[i]) * av[i]; got[i] != w {
				t.Errorf("in-place chain [%d] = %v, want %v", i, got[i], w)
			}
		}
		// A shape mismatch in an in-place copy is an error naming copy_.
		s.CopyFrom(k, s.Ones([]int64{3}, Float32, CPU))
		if err := s.Err(); err == nil || !strings.Contains(err.Error(), "copy_") {
			t.Errorf("copy_ of 3 values into 4: %v", err)
		}
		return nil
	})
}
