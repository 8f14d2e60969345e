package model

import (
	"context"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/optlab/optlab/host/tensor"
)

// vmKB reads a "Vm…:  N kB" line of /proc/self/status.
func vmKB(t *testing.T, key string) int64 {
	t.Helper()
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Skip("no /proc/self/status:", err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(l, key+":"); ok {
			n, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Skipf("no %s in /proc/self/status", key)
	return 0
}

// TestForwardReleasesActivations: a forward pass without autograd (an
// evaluation) keeps only a few activations alive at a time, not every one
// until the caller's scope closes. resnet10 on 256 CIFAR-shaped samples:
// one activation of the first stage is 64 MiB and the pass makes 25 of
// them and more (4 blocks; the earlier release peaked at ≈ 1.3 GiB above
// the baseline); the peak resident set above the baseline must stay under
// 6 of them. The peak is measured by the kernel's high-water mark (VmHWM),
// reset through /proc/self/clear_refs.
func TestForwardReleasesActivations(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("measures /proc/self/status")
	}
	if testing.Short() {
		t.Skip("a resnet10 forward of 256 samples")
	}
	const n = 256
	act := int64(n * 64 * 32 * 32 * 4 / 1024) // kB of one first-stage activation
	w := tensor.NewWorker(0)
	defer w.Close()
	var logits []float32
	err := w.Do(context.Background(), func() error {
		restore, err := tensor.NoGrad()
		if err != nil {
			return err
		}
		defer restore()
		s := tensor.NewScope()
		defer s.Close()
		tensor.ManualSeed(1)
		m, err := Builtin().New("resnet10", 10, []int64{3, 32, 32})
		if err != nil {
			return err
		}
		flat := s.Zeros([]int64{m.Numel}, tensor.Float32, tensor.CPU)
		buf := s.Zeros([]int64{m.BufNumel + 1}, tensor.Float32, tensor.CPU)
		m.InitParams(s, flat)
		m.InitBuffers(s, buf)
		x := s.Randn([]int64{n, 3, 32, 32}, tensor.Float32, tensor.CPU)
		// A first pass warms up the allocator and the thread pool.
		cs := tensor.NewScope()
		m.Forward(cs, flat, buf, x, false, 0)
		cs.Close()
		if err := os.WriteFile("/proc/self/clear_refs", []byte("5"), 0); err != nil {
			t.Skip("cannot reset the peak resident set:", err)
		}
		base := vmKB(t, "VmRSS")
		out := m.Forward(s, flat, buf, x, false, 0)
		peak := vmKB(t, "VmHWM")
		logits = s.Float32s(out)
		if err := s.Err(); err != nil {
			return err
		}
		t.Logf("peak %d kB above the baseline; one activation is %d kB", peak-base, act)
		if peak-base > 6*act {
			t.Errorf("the forward pass peaked %d kB (%.1f activations) above the baseline; want ≤ 6 activations (%d kB)",
				peak-base, float64(peak-base)/float64(act), 6*act)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(logits) != n*10 {
		t.Fatalf("%d logits", len(logits))
	}
}
