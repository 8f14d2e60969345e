package tensor

import (
	"errors"
	"strings"
	"testing"
)

// FakeDevice keeps its tensors apart from the CPU's as libtorch keeps CUDA
// tensors apart: mixing them fails, copies and moves cross, results stay
// on their inputs' device, and the values are the CPU's.
func TestFakeDevice(t *testing.T) {
	fd := FakeDevice()
	if fd == CPU || fd.IsCUDA() || fd.String() != "fake" {
		t.Fatalf("FakeDevice() = %v", fd)
	}
	onWorker(t, func(s *Scope) error {
		a := s.FromFloat32([]float32{1, 2, 3}, []int64{3}, fd)
		b := s.Ones([]int64{3}, Float32, fd)
		c := s.FromFloat32([]float32{4, 5, 6}, []int64{3}, CPU)
		if a.Device() != fd || b.Device() != fd || c.Device() != CPU {
			return errors.New("devices: " + a.Device().String() + " " + b.Device().String() + " " + c.Device().String())
		}
		sum := s.Add(a, b)
		if sum.Device() != fd {
			t.Errorf("a result of fake tensors is on %v", sum.Device())
		}
		if d := s.Dot(a, b); d.Device() != fd {
			t.Errorf("Dot of fake tensors is on %v", d.Device())
		}
		moved := s.To(sum, CPU)
		if moved.Device() != CPU {
			t.Errorf("To(CPU) gives %v", moved.Device())
		}
		if got := s.Float32s(s.Add(moved, c)); len(got) != 3 || got[0] != 6 || got[2] != 10 {
			t.Errorf("values %v", got)
		}
		// Copies cross devices; in-place ops of mixed devices do not.
		dst := s.Zeros([]int64{3}, Float32, fd)
		s.CopyFrom(dst, c)
		if got := s.Float32s(dst); got[1] != 5 {
			t.Errorf("CopyFrom: %v", got)
		}
		if err := s.Err(); err != nil {
			return err
		}
		for name, op := range map[string]func(s *Scope){
			"add":  func(s *Scope) { s.Add(a, c) },
			"axpy": func(s *Scope) { s.Axpy(dst, 2, c) },
			"dot":  func(s *Scope) { s.Dot(c, a) },
			"into": func(s *Scope) { s.MulInto(dst, a, c) },
		} {
			ms := NewScope()
			op(ms)
			if err := ms.Err(); err == nil || !strings.Contains(err.Error(), "same device") {
				t.Errorf("%s of fake and CPU tensors: error %v", name, err)
			}
			ms.Close()
		}
		k := s.Keep(s.Scale(a, 2))
		if k.Device() != fd {
			t.Errorf("a kept tensor is on %v", k.Device())
		}
		k.Drop()
		return nil
	})
}
