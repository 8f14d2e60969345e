package model

import (
	"archive/zip"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"

	"github.com/optlab/optlab/host/internal/regfile"
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
	arch    string   // "torchscript:<path>", for messages
	classes int64    // the logits' width every forward must return
	params  []string // dotted names, in the Model's order
	buffers []string // the running statistics, in the Model's order
	bn      []scriptBN
	initial []tensor.T // the file's parameter values (InitParams)
	// others are the module's other buffers (a step counter, a custom
	// normalizer's statistics, a BatchNorm's num_batches_tracked): they
	// stay in the module, which updates them in place, and the training
	// state saves and restores them (Model.ModuleBuffers).
	others []string
	// types are the module's and its submodules' types by dotted path
	// (tensor.Module.Types), for ResetInit.
	types map[string]string
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
	// A regular file only (a FIFO would block libtorch's open for ever),
	// and no code that reaches outside its tensors.
	if err := checkScriptFile(path); err != nil {
		return nil, fmt.Errorf("%s: %w", arch, err)
	}
	mod, err := tensor.LoadModule(path, d)
	if err != nil {
		return nil, err
	}
	s := tensor.NewScope()
	defer s.Close()
	net := &scriptNet{mod: mod, arch: arch, classes: int64(classes)}
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
	if net.types, err = mod.Types(); err != nil {
		return nil, fmt.Errorf("%s: %w", arch, err)
	}
	var frozen []string
	for i, name := range names {
		if !values[i].RequiresGrad() {
			frozen = append(frozen, name)
		}
	}
	if len(frozen) > 0 {
		return nil, fmt.Errorf("%s: parameters %s were saved with requires_grad=False (frozen); optlab trains every parameter of a module, so they would be trained: register what must stay fixed as buffers (self.register_buffer), or call requires_grad_(True) before scripting", arch, listNames(frozen))
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
			net.others = append(net.others, name)
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
		if errors.Is(err, errLogitsShape) {
			return nil, err // it names the module
		}
		return nil, fmt.Errorf("%s: %w", arch, err)
	}
	return m, nil
}

// listNames writes up to 5 names, then how many more.
func listNames(names []string) string {
	if len(names) <= 5 {
		return strings.Join(names, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(names[:5], ", "), len(names)-5)
}

// sideEffectOps are TorchScript calls whose effects reach outside the
// module's tensors: torch.from_file maps any file the user can write (an
// in-place op then overwrites it). A module that calls one is refused
// before any forward pass.
var sideEffectOps = []string{"from_file"}

// checkScriptFile refuses a TorchScript file that is not a regular file,
// or whose scripted code (the archive's code/ folder, which libtorch
// compiles when it loads the module) calls one of sideEffectOps. The
// module is still code: a .pt file is to be trusted like a plugin
// (docs/EXPERIMENTS.md); this catches the calls known to write files.
func checkScriptFile(path string) error {
	f, err := regfile.Open(path)
	if err != nil {
		return err
	}
	defer func() { _ = f.Close() }()
	st, err := f.Stat()
	if err != nil {
		return err
	}
	z, err := zip.NewReader(f, st.Size())
	if err != nil {
		return nil // not a zip: libtorch's load says what it is
	}
	for _, zf := range z.File {
		dir, name := filepath.Split(zf.Name)
		if !strings.Contains("/"+dir, "/code/") || !strings.HasSuffix(name, ".py") || zf.UncompressedSize64 > 64<<20 {
			continue
		}
		r, err := zf.Open()
		if err != nil {
			return fmt.Errorf("reading its code %s: %w", zf.Name, err)
		}
		code, err := io.ReadAll(io.LimitReader(r, 64<<20))
		_ = r.Close()
		if err != nil {
			return fmt.Errorf("reading its code %s: %w", zf.Name, err)
		}
		for _, op := range sideEffectOps {
			if i := indexCall(string(code), op); i >= 0 {
				line := 1 + strings.Count(string(code[:i]), "\n")
				return fmt.Errorf("its code calls torch.%s (%s, line %d), which reaches files outside the module's tensors; optlab refuses such a module before running it", op, zf.Name, line)
			}
		}
	}
	return nil
}

// indexCall returns where code calls name (name followed by "(", not part
// of a longer identifier), or -1.
func indexCall(code, name string) int {
	for off := 0; ; {
		i := strings.Index(code[off:], name+"(")
		if i < 0 {
			return -1
		}
		i += off
		if i == 0 || !isIdent(code[i-1]) {
			return i
		}
		off = i + len(name)
	}
}

func isIdent(c byte) bool {
	return c == '_' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}

// ModuleBuffers returns a TorchScript model's buffers that optlab does not
// keep in its flat buffer vector (everything but BatchNorm running
// statistics), by name, as tensors of s that share the module's storage
// (write them through a flat view, Reshape(t, -1): a buffer may have no
// dimension): the training state saves and restores them. nil for a
// built-in architecture. Call on the worker.
func (m *Model) ModuleBuffers(s *tensor.Scope) ([]string, []tensor.T) {
	n, ok := m.net.(*scriptNet)
	if !ok || len(n.others) == 0 {
		return nil, nil
	}
	names, vals := s.ModuleBuffers(n.mod)
	var outN []string
	var outV []tensor.T
	for i, name := range names {
		if slices.Contains(n.others, name) {
			outN, outV = append(outN, name), append(outV, vals[i])
		}
	}
	return outN, outV
}

// probe runs the model without autograd on zero inputs, in eval mode on
// a batch of 2 and in train mode on a batch of 3 (a module whose output
// depends on the mode or the batch size shows it here; every forward is
// checked again in Forward), and checks that it returns float32 logits
// [batch, classes]. The module's own buffers, which a train-mode pass may
// update, are restored after.
func probe(m *Model, d tensor.Device) error {
	restore, err := tensor.NoGrad()
	if err != nil {
		return err
	}
	defer restore()
	s := tensor.NewScope()
	defer s.Close()
	names, live := m.ModuleBuffers(s)
	saved := make([]tensor.T, len(live))
	for i, t := range live {
		live[i] = s.Reshape(t, -1) // a flat view (a 0-dim buffer, too)
		saved[i] = s.Zeros([]int64{t.Numel()}, t.DType(), t.Device())
		s.CopyFrom(saved[i], live[i])
	}
	if err := s.Err(); err != nil {
		return fmt.Errorf("saving the module's buffers %v: %w", names, err)
	}
	defer func() {
		for i, t := range live {
			s.CopyFrom(t, saved[i])
		}
	}()
	for _, c := range []struct {
		n     int64
		train bool
	}{{2, false}, {3, true}} {
		p := s.Zeros([]int64{m.Numel}, tensor.Float32, d)
		m.InitParams(s, p)
		b := s.Zeros([]int64{max(m.BufNumel, 1)}, tensor.Float32, d)
		m.InitBuffers(s, b)
		x := s.Zeros(append([]int64{c.n}, m.InShape...), tensor.Float32, d)
		mode := "eval"
		if c.train {
			mode = "train"
		}
		out := m.Forward(s, p, b, x, c.train, 0)
		if err := s.Err(); err != nil {
			if errors.Is(err, errLogitsShape) {
				return err
			}
			return fmt.Errorf("a forward pass in %s mode on a batch of %d inputs of shape %v failed (optlab needs a module whose forward takes one tensor and returns one tensor of logits): %w", mode, c.n, m.InShape, err)
		}
		if dt := out.DType(); dt != tensor.Float32 {
			return fmt.Errorf("the module returns %v logits; optlab needs float32", dt)
		}
	}
	return nil
}

// errLogitsShape is wrapped by the error of a forward pass whose logits
// are not [batch, classes].
var errLogitsShape = errors.New("logits of the wrong shape")

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
	if s.Err() == nil {
		// Shape metadata only: cheap on every pass. A module whose logits
		// change with the mode or the batch size would otherwise train on
		// other logits, or fail deep in libtorch.
		want := []int64{x.Shape()[0], n.classes}
		if got := out.Shape(); !slices.Equal(got, want) {
			mode := "eval"
			if f.Train {
				mode = "train"
			}
			return s.Fail(fmt.Errorf("%s returns logits of shape %v for a batch of %d in %s mode; the data has %d classes, so optlab needs %v: %w",
				n.arch, got, want[0], mode, n.classes, want, errLogitsShape))
		}
	}
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

// resetTypes are the torch.nn modules whose weight and bias ResetInit
// draws as their reset_parameters() does (the module's type is the
// scripted class's qualified name, tensor.Module.Types).
var resetTypes = map[string]bool{
	"Linear": true, "Conv1d": true, "Conv2d": true, "Conv3d": true,
	"ConvTranspose1d": true, "ConvTranspose2d": true, "ConvTranspose3d": true,
}

// resettable tells whether the submodule at path is one of torch.nn's
// resetTypes.
func (n *scriptNet) resettable(path string) bool {
	typ, ok := strings.CutPrefix(n.types[path], "__torch__.torch.nn.modules.")
	if !ok {
		return false
	}
	_, class := splitPath(typ)
	return resetTypes[class]
}

// ResetInit makes InitParams draw a TorchScript model's parameters as
// torch.nn's reset_parameters() draws them, from torch's global generator
// (seeded per member by the engine), instead of copying the file's: the
// weight of a torch.nn Linear, Conv*d or ConvTranspose*d and the bias
// beside it U(±1/√fan_in) of that weight, a BatchNorm's weight 1 and bias
// 0. Other parameters keep the file's values: an nn.Embedding's, a
// position embedding (an nn.Parameter of the module itself), a
// LayerNorm's, an attention's or an LSTM's. It does nothing for a built-in
// architecture.
func (m *Model) ResetInit() {
	net, ok := m.net.(*scriptNet)
	if !ok {
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
		case p.Kind == "weight" && leaf == "weight" && len(p.Shape) >= 2 && net.resettable(owner):
			p.Init = Init{Kind: TorchDefault}
		case p.Kind == "bias" && net.resettable(owner):
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
