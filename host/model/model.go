// Package model defines optlab's architectures over flat parameter vectors.
//
// A Model is a description: the list of its parameter tensors (PyTorch-style
// names, shapes, initializers), its BatchNorm buffers, and a forward
// function. The parameters of one member live in ONE flat contiguous vector
// (and its buffers in another); Forward takes any vector with that layout and
// cuts per-layer views out of it, so whole-vector operations are a handful of
// kernels and a gradient "at another point" is a gradient with respect to
// another vector.
package model

import (
	"context"
	"fmt"
	"math"
	"sort"
	"strings"

	"github.com/optlab/optlab/host/tensor"
)

// InitKind selects how a parameter is initialized.
type InitKind int

// Initializers.
const (
	Zeros InitKind = iota
	Ones
	KaimingNormalFanIn  // N(0, 2/fan_in): convs, as the reference code does
	KaimingNormalFanOut // N(0, 2/fan_out): MobileNet/EfficientNet convs (torchvision)
	TorchDefault        // PyTorch's Linear/Conv default: U(±1/√fan_in) (weights and biases)
	Normal              // N(0, Std²)
	Given               // the model's own initial value (a TorchScript module's)
)

// Init is a parameter initializer.
type Init struct {
	Kind  InitKind
	Std   float64 // Normal
	FanIn int64   // TorchDefault for biases: fan-in of the layer
}

// Param describes one trainable tensor.
type Param struct {
	Name  string
	Shape []int64
	Kind  string // weight | bias | bn
	Init  Init
}

// Numel is the number of elements.
func (p Param) Numel() int64 { return numel(p.Shape) }

// Buffer describes one non-trainable tensor (BatchNorm running statistics).
type Buffer struct {
	Name  string
	Shape []int64
	Fill  float64
}

// Numel is the number of elements of a tensor of the given shape.
func Numel(shape []int64) int64 { return numel(shape) }

func numel(shape []int64) int64 {
	n := int64(1)
	for _, d := range shape {
		n *= d
	}
	return n
}

// Net is an architecture's forward pass over views of the parameters.
type Net interface {
	Forward(f *Fwd, x tensor.T) tensor.T
}

// Fwd carries one forward pass: its scope, the parameter and buffer views,
// and the BatchNorm mode.
type Fwd struct {
	S *tensor.Scope
	P []tensor.T
	B []tensor.T
	// V, when set, holds the variances of the parameters in P (same
	// shapes): convolution and linear layers then sample their outputs by
	// the local reparameterization trick (see Model.ForwardLocal).
	V []tensor.T
	// Train selects batch statistics in BatchNorm; running statistics are
	// updated with BNMomentum (0 freezes them).
	Train      bool
	BNMomentum float64
	// ChannelsLast lays convolution weights out NHWC (Numerics).
	ChannelsLast bool
	// Params are the model's parameters (Model.Params), whose names name
	// the layer whose op fails in the scope's error (Seq).
	Params []Param
}

// Numerics is how a model's passes compute; the zero value is float32 in
// PyTorch's default (contiguous, NCHW) layout.
type Numerics struct {
	// BF16 runs every forward pass (Forward, ForwardLocal) under
	// libtorch's autocast to bfloat16 (tensor.Autocast) on the input's
	// device, and returns float32 logits; the backward pass of its graph
	// runs each op in the precision autocast chose for it. Parameters,
	// buffers and gradients with respect to them stay float32.
	BF16 bool
	// ChannelsLast gives 4-D inputs and convolution weights NHWC strides
	// (PyTorch's torch.channels_last; the shapes stay NCHW) for every
	// pass; only for architectures with convolutions.
	ChannelsLast bool
}

// String names the numerics as the experiment keys do.
func (n Numerics) String() string {
	p, f := "fp32", "contiguous"
	if n.BF16 {
		p = "bf16"
	}
	if n.ChannelsLast {
		f = "channels_last"
	}
	return p + ", " + f
}

// Model is an architecture with its parameter layout.
type Model struct {
	Arch       string
	Classes    int
	InShape    []int64 // per-sample input shape (C,H,W) or (F)
	Params     []Param
	Buffers    []Buffer
	Offsets    []int64 // of each parameter in the flat vector
	BufOffsets []int64
	Numel      int64 // total parameters
	BufNumel   int64
	net        Net
	num        Numerics
	// initial, when set, holds each parameter's initial value (a
	// TorchScript module's own), which InitParams copies for Given.
	initial []tensor.T
	// release frees what the model holds on the device (Release).
	release func()
}

// SetNumerics sets how the model's passes compute. ChannelsLast is refused
// for an architecture without convolutions.
func (m *Model) SetNumerics(n Numerics) error {
	if n.ChannelsLast && m.IsTorchScript() {
		return fmt.Errorf("%s: model.memory_format = \"channels_last\" applies only to the built-in architectures (a TorchScript module's weights keep their layout)", m.Arch)
	}
	if n.ChannelsLast && !m.HasConv() {
		return fmt.Errorf("%s has no convolution: model.memory_format = \"channels_last\" applies only to convolutional networks", m.Arch)
	}
	m.num = n
	return nil
}

// Numerics returns how the model's passes compute.
func (m *Model) Numerics() Numerics { return m.num }

// HasConv tells whether the architecture has a 2-D convolution (a 4-D
// weight).
func (m *Model) HasConv() bool {
	for _, p := range m.Params {
		if len(p.Shape) == 4 {
			return true
		}
	}
	return false
}

// Builder collects an architecture's parameters while its layers are made.
type Builder struct {
	params  []Param
	buffers []Buffer
	names   map[string]bool
	err     error
}

// NewBuilder starts an empty layout.
func NewBuilder() *Builder { return &Builder{names: map[string]bool{}} }

// Param registers a parameter and returns its index.
func (b *Builder) Param(name string, shape []int64, kind string, init Init) int {
	if b.names[name] && b.err == nil {
		b.err = fmt.Errorf("duplicate parameter name %q", name)
	}
	b.names[name] = true
	b.params = append(b.params, Param{Name: name, Shape: shape, Kind: kind, Init: init})
	return len(b.params) - 1
}

// Buffer registers a buffer and returns its index.
func (b *Builder) Buffer(name string, shape []int64, fill float64) int {
	if b.names[name] && b.err == nil {
		b.err = fmt.Errorf("duplicate buffer name %q", name)
	}
	b.names[name] = true
	b.buffers = append(b.buffers, Buffer{Name: name, Shape: shape, Fill: fill})
	return len(b.buffers) - 1
}

// Build finishes the layout.
func (b *Builder) Build(arch string, classes int, in []int64, net Net) (*Model, error) {
	if b.err != nil {
		return nil, fmt.Errorf("%s: %w", arch, b.err)
	}
	m := &Model{Arch: arch, Classes: classes, InShape: in, Params: b.params, Buffers: b.buffers, net: net}
	for _, p := range m.Params {
		m.Offsets = append(m.Offsets, m.Numel)
		m.Numel += p.Numel()
	}
	for _, q := range m.Buffers {
		m.BufOffsets = append(m.BufOffsets, m.BufNumel)
		m.BufNumel += numel(q.Shape)
	}
	return m, nil
}

// Forward computes logits for input x with the parameters taken from the flat
// vector params and BatchNorm buffers from the flat vector buf (either may be
// a leaf that requires gradients). The logits belong to s; views and
// intermediates are freed during the pass (what autograd needs, it keeps).
func (m *Model) Forward(s *tensor.Scope, params, buf tensor.T, x tensor.T, train bool, bnMomentum float64) tensor.T {
	return m.forward(s, params, tensor.T{}, buf, x, train, bnMomentum)
}

// ForwardLocal is Forward for a mean-field Gaussian posterior over the
// parameters with means mean and variances variance (flat vectors laid out
// like the parameters) by the local reparameterization trick (Kingma,
// Salimans and Welling, 2015): every convolution and linear layer samples
// its outputs from N(x∗μ + μ_b, x²∗σ² + σ_b²), independently per sample and
// per output, instead of sampling one weight matrix for the whole batch.
// The noise comes from torch's global generator (seed it first). Other
// parameters (BatchNorm) use their means.
func (m *Model) ForwardLocal(s *tensor.Scope, mean, variance, buf tensor.T, x tensor.T, train bool, bnMomentum float64) tensor.T {
	return m.forward(s, mean, variance, buf, x, train, bnMomentum)
}

// forward runs the net in a scope of its own, which owns the views and
// every intermediate, so that the layers can release each activation as
// soon as the next one has read it (Fwd.Seq, Fwd.Done): without autograd
// (evaluation) only a few activations are alive at any time instead of all
// of them until s closes; with autograd the ones it saves stay alive, held
// by the graph. Only the logits move to s.
func (m *Model) forward(s *tensor.Scope, params, variance, buf tensor.T, x tensor.T, train bool, bnMomentum float64) tensor.T {
	if s.Err() != nil {
		return tensor.T{}
	}
	if m.num.BF16 {
		restore, err := tensor.Autocast(x.Device(), tensor.BFloat16)
		if err != nil {
			return s.Fail(err)
		}
		defer restore()
	}
	fs := tensor.NewScope()
	defer fs.Close()
	if m.num.ChannelsLast && len(x.Shape()) == 4 {
		x = fs.ChannelsLast(x)
	}
	f := &Fwd{S: fs, Train: train, BNMomentum: bnMomentum, ChannelsLast: m.num.ChannelsLast, Params: m.Params}
	shape := func(i int) []int64 { return m.Params[i].Shape }
	f.P = views(fs, params, m.Offsets, shape)
	if variance.Valid() {
		f.V = views(fs, variance, m.Offsets, shape)
	}
	if len(m.Buffers) > 0 {
		f.B = views(fs, buf, m.BufOffsets, func(i int) []int64 { return m.Buffers[i].Shape })
	}
	if err := fs.Err(); err != nil {
		return s.Fail(err)
	}
	out := m.net.Forward(f, x)
	if m.num.BF16 && out.Valid() && out.DType() != tensor.Float32 {
		out = fs.Cast(out, tensor.Float32)
	}
	if err := fs.Err(); err != nil {
		return s.Fail(err)
	}
	return s.Adopt(fs.Keep(out))
}

func views(s *tensor.Scope, flat tensor.T, offsets []int64, shape func(int) []int64) []tensor.T {
	sizes := make([]int64, len(offsets))
	for i := range offsets {
		sizes[i] = numel(shape(i))
	}
	if total := flat.Numel(); len(offsets) > 0 && offsets[len(offsets)-1]+sizes[len(sizes)-1] < total {
		sizes = append(sizes, total-offsets[len(offsets)-1]-sizes[len(sizes)-1]) // padding
	}
	parts := s.Split(flat, sizes)
	out := make([]tensor.T, len(offsets))
	for i := range offsets {
		out[i] = s.View(parts[i], shape(i)...)
	}
	return out
}

// InitParams fills a caller-owned flat vector with the model's initial values,
// drawing from torch's global generator (seed it first); a TorchScript
// model's are the module's own.
func (m *Model) InitParams(s *tensor.Scope, flat tensor.T) {
	for i, p := range m.Params {
		v := s.Narrow(flat, 0, m.Offsets[i], p.Numel())
		fanIn, fanOut := fans(p.Shape)
		switch p.Init.Kind {
		case Zeros:
			s.Fill(v, 0)
		case Ones:
			s.Fill(v, 1)
		case KaimingNormalFanIn:
			s.NormalInPlace(v, 0, math.Sqrt(2/float64(fanIn)))
		case KaimingNormalFanOut:
			s.NormalInPlace(v, 0, math.Sqrt(2/float64(fanOut)))
		case TorchDefault:
			fi := fanIn
			if p.Init.FanIn > 0 {
				fi = p.Init.FanIn
			}
			bound := 1 / math.Sqrt(float64(fi))
			s.UniformInPlace(v, -bound, bound)
		case Normal:
			s.NormalInPlace(v, 0, p.Init.Std)
		case Given:
			s.CopyFrom(v, s.Reshape(m.initial[i], p.Numel()))
		}
	}
}

// InitBuffers fills a caller-owned flat buffer vector (running mean 0, var 1).
func (m *Model) InitBuffers(s *tensor.Scope, flat tensor.T) {
	for i, q := range m.Buffers {
		s.Fill(s.Narrow(flat, 0, m.BufOffsets[i], numel(q.Shape)), q.Fill)
	}
}

// fans returns PyTorch's fan-in and fan-out of a weight shape.
func fans(shape []int64) (int64, int64) {
	if len(shape) < 2 {
		return shape[0], shape[0]
	}
	rf := int64(1)
	for _, d := range shape[2:] {
		rf *= d
	}
	return shape[1] * rf, shape[0] * rf
}

// Constructor builds an architecture for a number of classes and an input
// shape.
type Constructor func(classes int, in []int64) (*Model, error)

// Zoo is the registry of architectures by name.
type Zoo map[string]Constructor

// Names returns the registered names, sorted.
func (z Zoo) Names() []string {
	out := make([]string, 0, len(z))
	for k := range z {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// New builds the named architecture.
func (z Zoo) New(arch string, classes int, in []int64) (*Model, error) {
	c, ok := z[arch]
	if !ok {
		return nil, fmt.Errorf("unknown model %q (known: %s)", arch, strings.Join(z.Names(), ", "))
	}
	return c(classes, in)
}

// Make builds arch for a number of classes and an input shape: for a
// "torchscript:" name (TorchScriptPrefix), the module in that
// file, loaded onto device d on w's thread (NewTorchScript); else the
// zoo's architecture. Release the model on w once done with it.
func (z Zoo) Make(ctx context.Context, w *tensor.Worker, d tensor.Device, arch string, classes int, in []int64) (*Model, error) {
	path, ok := TorchScriptPath(arch)
	if !ok {
		return z.New(arch, classes, in)
	}
	var m *Model
	err := w.Do(ctx, func() error {
		var err error
		m, err = NewTorchScript(path, classes, in, d)
		return err
	})
	return m, err
}

// Builtin returns the built-in architectures.
func Builtin() Zoo {
	return Zoo{
		"mlp":          NewMLP,
		"cnn":          NewCNN,
		"lenet5":       NewLeNet5,
		"cnn-small":    func(c int, in []int64) (*Model, error) { return NewCNNWidths("cnn-small", []int64{16, 32, 64}, c, in) },
		"resnet10":     func(c int, in []int64) (*Model, error) { return NewResNet("resnet10", []int{1, 1, 1, 1}, c, in) },
		"resnet18":     func(c int, in []int64) (*Model, error) { return NewResNet("resnet18", []int{2, 2, 2, 2}, c, in) },
		"wrn28-10":     func(c int, in []int64) (*Model, error) { return NewWRN("wrn28-10", 28, 10, false, c, in) },
		"wrn28-10-ref": func(c int, in []int64) (*Model, error) { return NewWRN("wrn28-10-ref", 28, 10, true, c, in) },
		"pyramidnet101": func(c int, in []int64) (*Model, error) {
			return NewPyramidNet("pyramidnet101", 101, 64, c, in)
		},
		"densenet121": func(c int, in []int64) (*Model, error) {
			return NewDenseNet("densenet121", []int{6, 12, 24, 16}, 32, 0.5, c, in)
		},
		"mobilenet":       func(c int, in []int64) (*Model, error) { return NewMobileNetV2("mobilenet", c, in) },
		"efficientnet-b0": func(c int, in []int64) (*Model, error) { return NewEfficientNetB0("efficientnet-b0", c, in) },
	}
}
