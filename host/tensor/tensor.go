package tensor

import (
	"fmt"
	"runtime"
	"strconv"
	"strings"

	"github.com/sugarme/gotch"
	lib "github.com/sugarme/gotch/libtch"
	"github.com/sugarme/gotch/ts"
)

// T is a tensor handle. A T made by a Scope is dropped with it; a T moved out
// with Scope.Keep is owned by the caller, who drops it with Drop. The zero T
// is "no tensor" (an absent optional argument).
type T struct{ t *ts.Tensor }

// Valid tells whether t holds a tensor.
func (t T) Valid() bool { return t.t != nil }

// Drop frees a kept tensor. Dropping the zero T is a no-op.
func (t *T) Drop() {
	if t.t != nil {
		free(t.t)
		t.t = nil
	}
}

// Device returns where t lives (the CPU when unknown).
func (t T) Device() Device {
	if t.t == nil {
		return CPU
	}
	if isFake(t.t) {
		return Device{d: gotch.CPU, fake: true}
	}
	d, err := t.t.Device()
	if err != nil || d.Name != "CUDA" {
		// gotch reports a CPU tensor's device as {CPU 1}, not gotch.CPU's
		// {CPU -1}: a comparison with CPU would never hold.
		return CPU
	}
	return Device{d: d}
}

// Same tells whether t and u are the same handle.
func (t T) Same(u T) bool { return t.t != nil && t.t == u.t }

// Shape returns the tensor's sizes.
func (t T) Shape() []int64 {
	if t.t == nil {
		return nil
	}
	s, _ := t.t.Size()
	return s
}

// DType returns the tensor's element type (Float32 for the zero T).
func (t T) DType() DType {
	if t.t == nil {
		return Float32
	}
	return t.t.DType()
}

// RequiresGrad tells whether autograd records ops on t (a module's
// parameter saved with requires_grad=False says no).
func (t T) RequiresGrad() bool {
	if t.t == nil {
		return false
	}
	r, err := t.t.RequiresGrad()
	return err == nil && r
}

// Numel returns the number of elements.
func (t T) Numel() int64 {
	n := int64(1)
	for _, d := range t.Shape() {
		n *= d
	}
	return n
}

// DType is a tensor element type.
type DType = gotch.DType

// Element types.
var (
	Float32 = gotch.Float
	Float64 = gotch.Double
	Int64   = gotch.Int64
	Uint8   = gotch.Uint8
	Bool    = gotch.Bool
)

// Device is where tensors live.
type Device struct {
	d    gotch.Device
	fake bool // FakeDevice: CPU memory that counts as another device
}

// CPU is the host CPU.
var CPU = Device{d: gotch.CPU}

// IsCUDA tells whether d is a GPU.
func (d Device) IsCUDA() bool { return d.d.Name == "CUDA" }

// String renders d as "cpu" or "cuda:N" ("fake" for FakeDevice).
func (d Device) String() string {
	if d.fake {
		return "fake"
	}
	if d.IsCUDA() {
		return "cuda:" + strconv.Itoa(d.d.Value)
	}
	return "cpu"
}

// The CUDA calls ParseDevice makes; tests replace them.
var (
	cudaAvailable   = func() bool { return lib.AtcCudaIsAvailable() }
	cudaDeviceCount = func() int { return int(lib.AtcCudaDeviceCount()) }
	setCUDADevice   = cSetDevice
)

// ParseDevice turns "auto", "cpu", "cuda" or "cuda:N" into a device. "auto"
// is the first GPU when CUDA is available, else the CPU. A GPU becomes the
// current CUDA device of the calling thread (cudaSetDevice), so that what
// libtorch allocates without naming a device (cuBLAS and cuDNN handles and
// workspaces, the current stream) is on it, not on GPU 0. Must run on the
// worker.
func ParseDevice(spec string) (Device, error) {
	spec = strings.TrimSpace(strings.ToLower(spec))
	switch {
	case spec == "" || spec == "auto":
		if cudaAvailable() {
			cudaSeen.Store(true)
			return useCUDA(spec, 0)
		}
		return CPU, nil
	case spec == "cpu":
		return CPU, nil
	case spec == "cuda" || strings.HasPrefix(spec, "cuda:"):
		n := 0
		if spec != "cuda" {
			v, err := strconv.Atoi(spec[len("cuda:"):])
			if err != nil || v < 0 {
				return CPU, fmt.Errorf("device %q: want auto, cpu, cuda or cuda:N", spec)
			}
			n = v
		}
		if !cudaAvailable() {
			return CPU, fmt.Errorf("device %q: CUDA is not available with %s: %s", spec, LibtorchDescription(), ProbeCUDA().Problem())
		}
		if c := cudaDeviceCount(); n >= c {
			return CPU, fmt.Errorf("device %q: only %d CUDA device(s)", spec, c)
		}
		cudaSeen.Store(true)
		return useCUDA(spec, n)
	}
	return CPU, fmt.Errorf("device %q: want auto, cpu, cuda or cuda:N", spec)
}

// useCUDA makes GPU n the calling thread's current device.
func useCUDA(spec string, n int) (Device, error) {
	if err := setCUDADevice(n); err != nil {
		return CPU, fmt.Errorf("device %q: making cuda:%d the current device: %w", spec, n, err)
	}
	return Device{d: gotch.CudaBuilder(uint(n))}, nil
}

// AutoDeviceNote explains, for a CUDA build, why the device spec "auto"
// (or "") resolved to the CPU d: no usable GPU, and why. It is "" otherwise,
// and on a CPU build, where the CPU is the only choice.
func AutoDeviceNote(spec string, d Device) string {
	spec = strings.TrimSpace(strings.ToLower(spec))
	if (spec != "" && spec != "auto") || d.IsCUDA() || !lib.LibtorchCUDA {
		return ""
	}
	return "device auto: no usable GPU, running on the CPU: " + ProbeCUDA().Problem()
}

// LibtorchVersion is the libtorch version optlab was built against.
func LibtorchVersion() string { return lib.LibtorchVersion }

// LibtorchDescription says which libtorch this binary uses.
func LibtorchDescription() string {
	kind := "CPU"
	if lib.LibtorchCUDA {
		kind = "CUDA"
	}
	return fmt.Sprintf("libtorch %s (%s build, %s)", lib.LibtorchVersion, kind, lib.LibtorchDir)
}

// Synchronize waits for the device's queued work (a no-op on the CPU).
func Synchronize(d Device) {
	if d.IsCUDA() {
		lib.AtcSynchronize(int64(d.d.Value))
	}
}

// ManualSeed seeds torch's global generators (CPU and CUDA). Must run on the
// worker.
func ManualSeed(seed int64) { cManualSeed(seed) }

func setThreads(n int) {
	if n <= 0 {
		n = runtime.NumCPU()
	}
	cSetNumThreads(n)
	tuneBLAS()
}

// Threads returns torch's intra-op thread count.
func Threads() int { return cGetNumThreads() }

// SetGradEnabled switches autograd recording on the worker's thread and
// returns the previous state.
func SetGradEnabled(on bool) (bool, error) {
	switch cGradSetEnabled(on) {
	case 0:
		return false, nil
	case 1:
		return true, nil
	}
	return false, fmt.Errorf("setting grad mode: %w", ts.TorchErr())
}

// NoGrad turns autograd recording off on the worker's thread and returns
// the function that restores the previous state (defer it).
func NoGrad() (restore func(), err error) {
	prev, err := SetGradEnabled(false)
	if err != nil {
		return nil, err
	}
	return func() { _, _ = SetGradEnabled(prev) }, nil
}

// Scope owns the temporaries made through it and keeps the first error.
// After an error every op returns the zero T, so straight-line model code
// checks once, at the end, with Err.
type Scope struct {
	owned []*ts.Tensor
	err   error
	// annotated: Annotate has prefixed err.
	annotated bool
	// onFake: the next results are on FakeDevice (their inputs are).
	onFake bool
}

// NewScope starts a scope.
func NewScope() *Scope { return &Scope{} }

// Err returns the first error of an op in this scope.
func (s *Scope) Err() error { return s.err }

// Fail records err (when it is the first) and returns the zero T.
func (s *Scope) Fail(err error) T {
	if s.err == nil && err != nil {
		s.err = cleanTorchErr(err)
		noteLost(err)
	}
	return T{}
}

// Annotate prefixes the scope's error, when it has one, with what (the
// model layer whose op failed): "layer3.1.conv2: convolution: …". Only the
// first Annotate after the error counts, so the innermost of nested
// layers names it.
func (s *Scope) Annotate(what string) {
	if s.err == nil || s.annotated || what == "" {
		return
	}
	s.err = fmt.Errorf("%s: %w", what, s.err)
	s.annotated = true
}

// torchErr is an error of libtorch's (through gotch) with its message
// cut to what a user can read: gotch's "Libtorch API Error: " prefix,
// c10's C++ frames ("Exception raised from …") and gotch's Go stack
// (debug.Stack) removed. Unwrap gives the original.
type torchErr struct {
	msg string
	err error
}

func (e *torchErr) Error() string { return e.msg }
func (e *torchErr) Unwrap() error { return e.err }

// cleanTorchErr returns err with libtorch's stacks removed from its
// message (torchErr), or err itself when it carries none. A failing op's
// message then reads "cross_entropy: Target 7 is out of bounds." instead
// of some 5 KB of C++ frames and goroutines, which also crosses gRPC to a
// plugin whole (a Python plugin's client refuses status headers that large).
func cleanTorchErr(err error) error {
	msg := err.Error()
	clean := CleanTorchMessage(msg)
	if clean == msg {
		return err
	}
	return &torchErr{msg: clean, err: err}
}

// CleanTorchMessage removes from a libtorch error message gotch's prefix,
// c10's C++ stack and gotch's Go stack, keeping what comes before and the
// TorchScript traceback, if any.
func CleanTorchMessage(msg string) string {
	const prefix = "Libtorch API Error: "
	if !strings.Contains(msg, prefix) && !strings.Contains(msg, "\nException raised from ") && !strings.Contains(msg, "\ngoroutine ") {
		return msg
	}
	msg = strings.Replace(msg, prefix, "", 1)
	for _, cut := range []string{"\nException raised from ", "\nframe #0", "\ngoroutine "} {
		if i := strings.Index(msg, cut); i >= 0 {
			msg = msg[:i]
		}
	}
	return strings.TrimSpace(msg)
}

// Close drops every tensor the scope still owns.
func (s *Scope) Close() {
	for _, t := range s.owned {
		free(t)
	}
	s.owned = nil
}

// Keep moves t out of the scope: the caller now owns it and must Drop it.
func (s *Scope) Keep(t T) T {
	for i := len(s.owned) - 1; i >= 0; i-- {
		if s.owned[i] == t.t {
			s.owned = append(s.owned[:i], s.owned[i+1:]...)
			break
		}
	}
	return t
}

// Release drops, now, each of ts that the scope owns, instead of at Close;
// tensors it does not own (a caller's input, a kept tensor, the zero T, one
// already released) are left alone. The memory goes back at once unless
// something else still holds it (a view, autograd's saved tensors): a
// forward pass releases each activation when the next layer has read it,
// so without autograd only a few are alive at a time. Never use a released
// tensor again.
func (s *Scope) Release(ts ...T) {
	for _, t := range ts {
		if t.t == nil {
			continue
		}
		for i := len(s.owned) - 1; i >= 0; i-- {
			if s.owned[i] == t.t {
				s.owned = append(s.owned[:i], s.owned[i+1:]...)
				free(t.t)
				break
			}
		}
	}
}

// Adopt hands a kept tensor to the scope, which drops it on Close.
func (s *Scope) Adopt(t T) T {
	if t.t != nil {
		s.owned = append(s.owned, t.t)
	}
	return t
}

// op runs one gotch call unless the scope already failed, and owns its result.
func (s *Scope) op(name string, f func() (*ts.Tensor, error)) T {
	if s.err != nil {
		return T{}
	}
	r, err := f()
	if err == nil && nonFiniteTrap.Load() && !movesOnly[name] {
		if err = checkFinite(r); err != nil {
			free(r)
		}
	}
	if err != nil {
		return s.Fail(fmt.Errorf("%s: %w", name, err))
	}
	return T{s.own(r)}
}

// own makes the scope the owner of a result of an op on the device of the
// op's inputs (see sameDevice).
func (s *Scope) own(r *ts.Tensor) *ts.Tensor {
	s.owned = append(s.owned, r)
	markFake(r, s.onFake)
	return r
}

// inplace runs an in-place gotch call on a tensor the caller owns; never call
// it on a temporary of another scope's making.
func (s *Scope) inplace(name string, f func() error) {
	if s.err != nil {
		return
	}
	if err := f(); err != nil {
		s.Fail(fmt.Errorf("%s: %w", name, err))
	}
}

// check tells whether an op on ts may run: the scope has not failed, every
// tensor is there, and all are on one device (FakeDevice is told apart; a
// real CUDA/CPU mix is libtorch's to refuse).
func (s *Scope) check(ts ...T) bool {
	return s.present(ts) && s.sameDevice(ts)
}

// present is check without the device test (copies cross devices).
func (s *Scope) present(ts []T) bool {
	if s.err != nil {
		return false
	}
	for _, t := range ts {
		if t.t == nil {
			s.Fail(fmt.Errorf("tensor op on a missing tensor"))
			return false
		}
	}
	return true
}

func opt(t T) *ts.Tensor {
	if t.t == nil {
		return ts.None
	}
	return t.t
}

// ---- creation and transfer ----

// Zeros makes a zero tensor.
func (s *Scope) Zeros(shape []int64, dt DType, d Device) T {
	s.onFake = d.fake
	return s.op("zeros", func() (*ts.Tensor, error) { return ts.Zeros(shape, dt, d.d) })
}

// Ones makes a tensor of ones.
func (s *Scope) Ones(shape []int64, dt DType, d Device) T {
	s.onFake = d.fake
	return s.op("ones", func() (*ts.Tensor, error) { return ts.Ones(shape, dt, d.d) })
}

// Randn makes a tensor of N(0,1) draws from torch's global generator.
func (s *Scope) Randn(shape []int64, dt DType, d Device) T {
	s.onFake = d.fake
	return s.op("randn", func() (*ts.Tensor, error) { return ts.Randn(shape, dt, d.d) })
}

// FromFloat32 uploads data with the given shape.
func (s *Scope) FromFloat32(data []float32, shape []int64, d Device) T {
	return s.upload("from float32", data, shape, d)
}

// FromFloat64 uploads data with the given shape.
func (s *Scope) FromFloat64(data []float64, shape []int64, d Device) T {
	return s.upload("from float64", data, shape, d)
}

// FromInt64 uploads data with the given shape.
func (s *Scope) FromInt64(data []int64, shape []int64, d Device) T {
	return s.upload("from int64", data, shape, d)
}

// FromUint8 uploads data with the given shape.
func (s *Scope) FromUint8(data []uint8, shape []int64, d Device) T {
	return s.upload("from uint8", data, shape, d)
}

func (s *Scope) upload(name string, data any, shape []int64, d Device) T {
	if s.err != nil {
		return T{}
	}
	s.onFake = false
	host := s.op(name, func() (*ts.Tensor, error) { return ts.NewTensorFromData(data, shape) })
	if s.err != nil {
		return T{}
	}
	hostToDevice.Add(1) // one copy of Go memory, to the device (transfer.go)
	if d.IsCUDA() || d.fake {
		return s.to(host, d)
	}
	return host
}

// To copies t to device d.
func (s *Scope) To(t T, d Device) T {
	if !s.present([]T{t}) {
		return T{}
	}
	if d.IsCUDA() && !t.Device().IsCUDA() {
		hostToDevice.Add(1)
	}
	return s.to(t, d)
}

// to is To without counting the copy.
func (s *Scope) to(t T, d Device) T {
	s.onFake = d.fake
	return s.op("to", func() (*ts.Tensor, error) { return t.t.To(d.d, false) })
}

// Cast converts t to dtype dt.
func (s *Scope) Cast(t T, dt DType) T {
	if !s.check(t) {
		return T{}
	}
	return s.op("cast", func() (*ts.Tensor, error) { return t.t.Totype(dt, false) })
}

// Float64s copies t (any device) into a Go slice of float64.
func (s *Scope) Float64s(t T) []float64 {
	if !s.check(t) {
		return nil
	}
	c := s.Cast(s.To(t, CPU), Float64)
	c = s.Contiguous(c)
	if s.err != nil {
		return nil
	}
	out := make([]float64, c.Numel())
	if len(out) == 0 {
		return out
	}
	if err := c.t.CopyData(out, uint(len(out))); err != nil {
		s.Fail(fmt.Errorf("copy to host: %w", err))
		return nil
	}
	return out
}

// Float32s copies t into a Go slice of float32.
func (s *Scope) Float32s(t T) []float32 {
	if !s.check(t) {
		return nil
	}
	c := s.Contiguous(s.Cast(s.To(t, CPU), Float32))
	if s.err != nil {
		return nil
	}
	out := make([]float32, c.Numel())
	if len(out) == 0 {
		return out
	}
	if err := c.t.CopyData(out, uint(len(out))); err != nil {
		s.Fail(fmt.Errorf("copy to host: %w", err))
		return nil
	}
	return out
}

// CopyFrom copies src into dst in place (dst must be owned by the caller:
// a kept tensor or a view of one).
func (s *Scope) CopyFrom(dst, src T) {
	if !s.present([]T{dst, src}) {
		return
	}
	countCopy(dst, src)
	s.inplace("copy_", func() error {
		lib.AtCopy_(lib.Ctensor(dst.t.Ctensor()), lib.Ctensor(src.t.Ctensor()))
		return ts.TorchErr()
	})
}

// Fill sets every element of a caller-owned tensor to v.
func (s *Scope) Fill(dst T, v float64) {
	if !s.check(dst) {
		return
	}
	sc := ts.FloatScalar(v)
	defer sc.MustDrop()
	s.inplace("fill_", func() error { return dst.t.Fill_(sc) })
}

// ---- shape ----

// Narrow returns a view of length n from start along dim.
func (s *Scope) Narrow(t T, dim, start, n int64) T {
	if !s.check(t) {
		return T{}
	}
	return s.op("narrow", func() (*ts.Tensor, error) { return t.t.Narrow(dim, start, n, false) })
}

// View returns t with a new shape (no copy).
func (s *Scope) View(t T, shape ...int64) T {
	if !s.check(t) {
		return T{}
	}
	return s.op("view", func() (*ts.Tensor, error) { return t.t.View(shape, false) })
}

// Reshape returns t with a new shape: a view when t's strides allow, else
// a copy (−1 infers one size).
func (s *Scope) Reshape(t T, shape ...int64) T {
	if !s.check(t) {
		return T{}
	}
	return s.op("reshape", func() (*ts.Tensor, error) { return t.t.Reshape(shape, false) })
}

// Flatten flattens dims start..end.
func (s *Scope) Flatten(t T, start, end int64) T {
	if !s.check(t) {
		return T{}
	}
	return s.op("flatten", func() (*ts.Tensor, error) { return t.t.Flatten(start, end, false) })
}

// Contiguous returns a contiguous tensor with t's values.
func (s *Scope) Contiguous(t T) T {
	if !s.check(t) {
		return T{}
	}
	return s.op("contiguous", func() (*ts.Tensor, error) { return t.t.Contiguous(false) })
}

// Cat concatenates along dim.
func (s *Scope) Cat(dim int64, xs ...T) T {
	if !s.check(xs...) {
		return T{}
	}
	raw := make([]*ts.Tensor, len(xs))
	for i, x := range xs {
		raw[i] = x.t
	}
	return s.op("cat", func() (*ts.Tensor, error) { return ts.Cat(raw, dim) })
}

// IndexSelect gathers slices along dim at int64 indices.
func (s *Scope) IndexSelect(t T, dim int64, idx T) T {
	if !s.check(t, idx) {
		return T{}
	}
	return s.op("index_select", func() (*ts.Tensor, error) { return t.t.IndexSelect(dim, idx.t, false) })
}

// Gather gathers along dim with an index tensor of t's rank.
func (s *Scope) Gather(t T, dim int64, idx T) T {
	if !s.check(t, idx) {
		return T{}
	}
	return s.op("gather", func() (*ts.Tensor, error) { return t.t.Gather(dim, idx.t, false, false) })
}

// Flip reverses the given dims.
func (s *Scope) Flip(t T, dims ...int64) T {
	if !s.check(t) {
		return T{}
	}
	return s.op("flip", func() (*ts.Tensor, error) { return t.t.Flip(dims, false) })
}

// Pad zero-pads the trailing dims (PyTorch's F.pad order: last dim first).
func (s *Scope) Pad(t T, pad ...int64) T {
	if !s.check(t) {
		return T{}
	}
	return s.op("constant_pad_nd", func() (*ts.Tensor, error) { return t.t.ConstantPadNd(pad, false) })
}

// Detach returns a tensor sharing t's storage with no autograd history.
func (s *Scope) Detach(t T) T {
	if !s.check(t) {
		return T{}
	}
	return s.op("detach", func() (*ts.Tensor, error) { return t.t.Detach(false) })
}

// RequiresGrad returns an alias of t (same storage) that is an autograd leaf
// requiring gradients.
func (s *Scope) RequiresGrad(t T) T {
	d := s.Detach(t)
	if !s.check(d) {
		return T{}
	}
	return s.op("set_requires_grad", func() (*ts.Tensor, error) { return d.t.SetRequiresGrad(true, false) })
}

// Gradient returns ∂loss/∂leaf for a scalar loss without touching .grad.
func (s *Scope) Gradient(loss, leaf T) T { return s.Gradients(loss, leaf)[0] }
