package tensor

import (
	"strings"
	"testing"
)

// A libtorch error reaches the caller as libtorch's reason, without c10's
// C++ frames nor gotch's Go stack (hardening4/18: 5 KB of them in a gRPC
// status made a Python plugin see only "RST_STREAM").
func TestTorchErrorsCleaned(t *testing.T) {
	tests := []struct{ in, want string }{
		{"plain", "plain"},
		{"Libtorch API Error: Target 7 is out of bounds.\nException raised from nll_loss at x.cpp:1 (most recent call first):\nframe #0: c10::f\n\ngoroutine 1 [running]:\nmain.main()", "Target 7 is out of bounds."},
		{"cross_entropy: Libtorch API Error: shapes differ\n\ngoroutine 7 [running]:\nx", "cross_entropy: shapes differ"},
		{"Libtorch API Error: The following operation failed in the TorchScript interpreter.\nTraceback of TorchScript (most recent call last):\n  File \"code\", line 3\nRuntimeError: boom\n\ngoroutine 1 [running]:", "The following operation failed in the TorchScript interpreter.\nTraceback of TorchScript (most recent call last):\n  File \"code\", line 3\nRuntimeError: boom"},
	}
	for _, tc := range tests {
		if got := CleanTorchMessage(tc.in); got != tc.want {
			t.Errorf("CleanTorchMessage(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
	s := NewScope()
	defer s.Close()
	logits := s.Zeros([]int64{2, 3}, Float32, CPU)
	target := s.FromFloat32([]float32{0, 7}, []int64{2}, CPU)
	s.CrossEntropy(logits, s.Cast(target, Int64), 0)
	err := s.Err()
	if err == nil {
		t.Fatal("cross entropy with a target out of bounds succeeded")
	}
	msg := err.Error()
	if !strings.Contains(msg, "out of bounds") || strings.Contains(msg, "goroutine") || strings.Contains(msg, "frame #") || len(msg) > 300 {
		t.Errorf("error %q: want libtorch's reason alone", msg)
	}
}
