package model

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/optlab/optlab/host/tensor"
)

// TorchScriptPrefix starts an arch name that is a TorchScript file
// ("torchscript:net.pt"): Zoo.Make loads the module in that file. The
// experiment file's model.archs writes them so (experiment.TorchScriptPrefix
// is the same string; package experiment does not import this one, which
// needs libtorch).
const TorchScriptPrefix = "torchscript:"

// TorchScriptPath returns the file of a "torchscript:" arch name, and
// whether arch is one.
func TorchScriptPath(arch string) (string, bool) {
	return strings.CutPrefix(arch, TorchScriptPrefix)
}

// scriptNet runs a TorchScript module over optlab's flat vectors: before
// every pass it points the module's parameters and BatchNorm running
// statistics at the views Forward cut from them (no copy), so gradients
// flow back to the flat vector and the statistics are updated in it.
type scriptNet struct {
	mod     *tensor.Module
	params  []string // dotted names, in the Model's order
	buffers []string // the running statistics, in the Model's order
	bn      []scriptBN
	initial []tensor.T // the file's parameter values (InitParams)
}

// scriptBN is one BatchNorm of the module: its buffers' indices in
// scriptNet.buffers and the momentum its scripted code applies.
type scriptBN struct {
	mean, variance int
	momentum       float64
}

// NewTorchScript loads a TorchScript module onto device d and describes it
// as a Model whose parameters are the module's named_parameters (same
// names, same order) and whose buffers are its BatchNorm running
// statistics; its initial parameters are the file's. The module must take
// one tensor and return one tensor of logits [batch, classes]; its
// parameters must be float32 and its BatchNorms must have a float
// momentum. Other buffers stay in the module as they are. Call it on the
// worker; the Model's Release frees the module.
func NewTorchScript(path string, classes int, in []int64, d tensor.Device) (m *Model, err error) {
	arch := TorchScriptPrefix + path
	if _, err := os.Stat(path); err != nil {
		return nil, fmt.Errorf("%s: %w", arch, err)
	}
	mod, err := tensor.LoadModule(path, d)
	if err != nil {
		return nil, err
	}
	s := tensor.NewScope()
	defer s.Close()
	net := &scriptNet{mod: mod}
	defer func() {
		if err != nil {
			net.release()
		}
	}()
	b := NewBuilder()
	names, values := s.ModuleParameters(mod)
	if err := s.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", arch, err)
	}
	if len(names) == 0 {
		return nil, fmt.Errorf("%s has no parameters (a frozen module? save torch.jit.script(model) without torch.jit.freeze)", arch)
	}
	bns, err := mod.BatchNorms()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", arch, err)
	}
	bnPaths := map[string]bool{}
	for _, bn := range bns {
		switch {
		case !bn.HasMomentum:
			return nil, fmt.Errorf("%s: BatchNorm %s has momentum None (a cumulative average) or none at all; optlab sets the running statistics' update itself (model.bn): script it with a float momentum, as torch.nn's default 0.1", arch, bnName(bn.Path))
		case bn.Momentum <= 0 || bn.Momentum > 1:
			return nil, fmt.Errorf("%s: BatchNorm %s has momentum %g; optlab needs one in (0, 1] to set the running statistics' update itself", arch, bnName(bn.Path), bn.Momentum)
		}
		bnPaths[bn.Path] = true
	}
	for i, name := range names {
		v := values[i]
		if dt := v.DType(); dt != tensor.Float32 {
			return nil, fmt.Errorf("%s: parameter %s is %v; optlab trains float32 parameters (call model.float() before scripting it)", arch, name, dt)
		}
		owner, leaf := splitPath(name)
		kind := "weight"
		switch {
		case bnPaths[owner]:
			kind = "bn"
		case leaf == "bias":
			kind = "bias"
		}
		b.Param(name, v.Shape(), kind, Init{Kind: Given})
		net.params = append(net.params, name)
		net.initial = append(net.initial, s.Keep(s.Detach(v)))
	}
	// The running statistics, in named_buffers order.
	bufNames, bufValues := s.ModuleBuffers(mod)
	if err := s.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", arch, err)
	}
	index := map[string]int{}
	for i, name := range bufNames {
		owner, leaf := splitPath(name)
		if !bnPaths[owner] || (leaf != "running_mean" && leaf != "running_var") {
			continue
		}
		if dt := bufValues[i].DType(); dt != tensor.Float32 {
			return nil, fmt.Errorf("%s: buffer %s is %v; optlab keeps float32 running statistics (call model.float() before scripting it)", arch, name, dt)
		}
		fill := 0.0
		if leaf == "running_var" {
			fill = 1
		}
		index[name] = len(net.buffers)
		b.Buffer(name, bufValues[i].Shape(), fill)
		net.buffers = append(net.buffers, name)
	}
	for _, bn := range bns {
		mean, ok1 := index[joinPath(bn.Path, "running_mean")]
		variance, ok2 := index[joinPath(bn.Path, "running_var")]
		if !ok1 || !ok2 {
			return nil, fmt.Errorf("%s: BatchNorm %s: its running statistics are not among the module's buffers", arch, bnName(bn.Path))
		}
		net.bn = append(net.bn, scriptBN{mean: mean, variance: variance, momentum: bn.Momentum})
	}
	mod.Bind(slices.Concat(net.params, net.buffers))
	shape := append([]int64{}, in...)
	m, err = b.Build(arch, classes, shape, net)
	if err != nil {
		return nil, err
	}
	m.release = net.release
	m.initial = net.initial
	if err := probe(m, d); err != nil {
		return nil, fmt.Errorf("%s: %w", arch, err)
	}
	return m, nil
}

// probe runs the model on a batch of two zero inputs, without autograd,
// in eval mode, and checks that it returns logits [2, classes].
func probe(m *Model, d tensor.Device) error {
	restore, err := tensor.NoGrad()
	if err != nil {
		return err
	}
	defer restore()
	s := tensor.NewScope()
	defer s.Close()
	p := s.Zeros([]int64{m.Numel}, tensor.Float32, d)
	m.InitParams(s, p)
	b := s.Zeros([]int64{max(m.BufNumel, 1)}, tensor.Float32, d)
	m.InitBuffers(s, b)
	x := s.Zeros(append([]int64{2}, m.InShape...), tensor.Float32, d)
	out := m.Forward(s, p, b, x, false, 0)
	if err := s.Err(); err != nil {
		return fmt.Errorf("a forward pass on a batch of 2 inputs of shape %v failed (optlab needs a module whose forward takes one tensor and returns one tensor of logits): %w", m.InShape, err)
	}
	if got := out.Shape(); len(got) != 2 || got[0] != 2 || got[1] != int64(m.Classes) {
		return fmt.Errorf("for a batch of 2 inputs of shape %v the module returns shape %v; the data has %d classes, so optlab needs logits of shape [2 %d]", m.InShape, got, m.Classes, m.Classes)
	}
	if dt := out.DType(); dt != tensor.Float32 {
		return fmt.Errorf("the module returns %v logits; optlab needs float32", dt)
	}
	return nil
}

// Forward points the module's tensors at the pass's views and runs it. In
// train mode a BatchNorm updates its running statistics with the momentum
// baked into its scripted code; when the pass asks for another one
// (f.BNMomentum: 0 freezes them, UpdateBN's cumulative average varies it),
// the module updates scratch copies instead, and the flat buffer moves by
// the requested fraction of that update: r + (m/m₀)·(r₀′ − r) is
// (1 − m)·r + m·batch when r₀′ = (1 − m₀)·r + m₀·batch.
func (n *scriptNet) Forward(f *Fwd, x tensor.T) tensor.T {
	s := f.S
	if f.V != nil {
		return s.Fail(errors.New("a TorchScript model has no local-reparameterization forward (model.variational)"))
	}
	vals := slices.Concat(f.P, f.B) // in Bind's order: parameters, then statistics
	type rescale struct {
		view, scratch tensor.T
		factor        float64
	}
	var later []rescale
	if f.Train {
		for _, bn := range n.bn {
			if f.BNMomentum == bn.momentum {
				continue
			}
			for _, i := range []int{bn.mean, bn.variance} {
				r := f.B[i]
				c := s.Zeros(r.Shape(), tensor.Float32, r.Device())
				s.CopyFrom(c, r)
				vals[len(n.params)+i] = c
				if f.BNMomentum != 0 {
					later = append(later, rescale{view: r, scratch: c, factor: f.BNMomentum / bn.momentum})
				}
			}
		}
	}
	s.ModuleSet(n.mod, vals)
	out := s.ModuleForward(n.mod, x, f.Train)
	for _, l := range later {
		s.Axpy(l.view, l.factor, s.Sub(l.scratch, l.view))
	}
	return out
}

func (n *scriptNet) release() {
	for i := range n.initial {
		n.initial[i].Drop()
	}
	n.mod.Close()
}

// ResetInit makes InitParams draw a TorchScript model's parameters as
// torch.nn's reset_parameters() draws them, from torch's global generator
// (seeded per member by the engine), instead of copying the file's:
// weights of two or more dimensions (convolutions, linear layers) and the
// bias beside such a weight U(±1/√fan_in) of that weight, a BatchNorm's
// weight 1 and bias 0. Other parameters keep the file's values. It does
// nothing for a built-in architecture.
func (m *Model) ResetInit() {
	if !m.IsTorchScript() {
		return
	}
	weights := map[string]int{}
	for i, p := range m.Params {
		weights[p.Name] = i
	}
	for i := range m.Params {
		p := &m.Params[i]
		owner, leaf := splitPath(p.Name)
		switch {
		case p.Kind == "bn" && leaf == "weight":
			p.Init = Init{Kind: Ones}
		case p.Kind == "bn" && leaf == "bias":
			p.Init = Init{Kind: Zeros}
		case p.Kind == "weight" && len(p.Shape) >= 2:
			p.Init = Init{Kind: TorchDefault}
		case p.Kind == "bias":
			if w, ok := weights[joinPath(owner, "weight")]; ok && len(m.Params[w].Shape) >= 2 {
				fanIn, _ := fans(m.Params[w].Shape)
				p.Init = Init{Kind: TorchDefault, FanIn: fanIn}
			}
		}
	}
}

// IsTorchScript tells whether the model runs a TorchScript module.
func (m *Model) IsTorchScript() bool {
	_, ok := m.net.(*scriptNet)
	return ok
}

// Release frees what the model holds on the device (a TorchScript
// module); call it on the worker once no pass will run. Built-in
// architectures hold nothing.
func (m *Model) Release() {
	if m.release != nil {
		m.release()
		m.release = nil
	}
}

// splitPath cuts a dotted name into its owner's path and its last part.
func splitPath(name string) (string, string) {
	if i := strings.LastIndexByte(name, '.'); i >= 0 {
		return name[:i], name[i+1:]
	}
	return "", name
}

func joinPath(owner, leaf string) string {
	if owner == "" {
		return leaf
	}
	return owner + "." + leaf
}

func bnName(path string) string {
	if path == "" {
		return "(the root module)"
	}
	return path
}
