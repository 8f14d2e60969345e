package tensor

// The optlab_module_* functions are C++ that tools/gotchprep appends to
// libtch's torch_api.cpp (tools/gotchprep/cxx/optlab_api.cpp.in).

// #include <stdlib.h>
// char *optlab_module_buffer_names(void *m);
// void *optlab_module_get(void *m, char *path);
// void optlab_module_set(void *m, char **paths, void **ts, int n);
// void *atm_load_on_device(char *path, int device);
// char *optlab_module_batchnorms(void *m);
// char *optlab_module_types(void *m);
import "C"

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unsafe"

	lib "github.com/sugarme/gotch/libtch"
	"github.com/sugarme/gotch/ts"
)

// Module is a TorchScript module (torch.jit.script(model).save(path) in
// PyTorch) loaded onto a device. Its parameters and buffers can be pointed
// at any tensors of the right shapes (SetAttrs) before a forward pass, which
// then computes with them: autograd follows a view back to the vector it
// was cut from. Use a Module on the worker only; Close frees it.
type Module struct {
	m     *ts.CModule
	train int8      // the mode last set: 0 unknown, 1 train, 2 eval
	paths []*C.char // the attributes ModuleSet points (Bind), C-allocated
}

// ModuleBatchNorm is a submodule of a Module that keeps running statistics
// (tensor attributes running_mean and running_var).
type ModuleBatchNorm struct {
	// Path is the submodule's dotted name ("layer1.0.bn1"; "" for the root).
	Path string
	// Momentum is the factor of its running-statistics update: in
	// torch.nn's BatchNorm a constant baked into the scripted code.
	// HasMomentum is false when it is None (a cumulative average) or
	// absent.
	Momentum    float64
	HasMomentum bool
}

// moduleErr returns libtch's pending error, if any, without gotch's Go
// stack trace or c10's C++ one (a TorchScript error keeps its own
// traceback, which names the line of the scripted code).
func moduleErr() error {
	c := (*C.char)(unsafe.Pointer(lib.GetAndResetLastErr()))
	if c == nil {
		return nil
	}
	defer C.free(unsafe.Pointer(c))
	msg := C.GoString(c)
	// c10's messages end with the C++ stack: of no use to a user.
	if i := strings.Index(msg, "\nException raised from "); i >= 0 {
		msg = msg[:i]
	}
	msg = strings.TrimSpace(msg)
	// An error in the scripted code: its last line (the exception) first,
	// then the traceback that leads to it.
	if strings.Contains(msg, "Traceback of TorchScript") {
		if i := strings.LastIndexByte(msg, '\n'); i >= 0 {
			msg = msg[i+1:] + "\n" + msg[:i]
		}
	}
	return errors.New(msg)
}

// LoadModule loads a TorchScript file onto device d.
func LoadModule(path string, d Device) (*Module, error) {
	cp := C.CString(path)
	defer C.free(unsafe.Pointer(cp))
	cm := lib.Cmodule(C.atm_load_on_device(cp, C.int(d.d.CInt())))
	if err := moduleErr(); err != nil {
		return nil, fmt.Errorf("loading TorchScript module %s: %w", path, err)
	}
	return &Module{m: &ts.CModule{Cmodule: cm}}, nil
}

// Close frees the module.
func (m *Module) Close() {
	if m != nil && m.m != nil {
		m.unbind()
		m.m.Drop()
		m.m = nil
	}
}

func (m *Module) ptr() unsafe.Pointer { return unsafe.Pointer(m.m.Cmodule) }

// ModuleParameters returns the module's parameters in named_parameters order
// (recursive, as a state dict lists them), as tensors owned by s that share
// the module's storage.
func (s *Scope) ModuleParameters(m *Module) ([]string, []T) {
	if s.err != nil {
		return nil, nil
	}
	named, err := m.m.NamedParameters()
	if err != nil {
		s.Fail(fmt.Errorf("named_parameters: %w", err))
		return nil, nil
	}
	names := make([]string, len(named))
	out := make([]T, len(named))
	for i, n := range named {
		names[i], out[i] = n.Name, T{s.own(n.Tensor)}
	}
	return names, out
}

// ModuleBuffers returns the module's buffers in named_buffers order
// (recursive), as tensors owned by s that share the module's storage.
func (s *Scope) ModuleBuffers(m *Module) ([]string, []T) {
	if s.err != nil {
		return nil, nil
	}
	c := C.optlab_module_buffer_names(m.ptr())
	if err := moduleErr(); err != nil {
		s.Fail(fmt.Errorf("named_buffers: %w", err))
		return nil, nil
	}
	text := C.GoString(c)
	C.free(unsafe.Pointer(c))
	var names []string
	var out []T
	for _, name := range strings.Split(text, "\n") {
		if name == "" {
			continue
		}
		t := s.moduleGet(m, name)
		if s.err != nil {
			return nil, nil
		}
		names, out = append(names, name), append(out, t)
	}
	return names, out
}

func (s *Scope) moduleGet(m *Module, path string) T {
	cp := C.CString(path)
	defer C.free(unsafe.Pointer(cp))
	r := C.optlab_module_get(m.ptr(), cp)
	if err := moduleErr(); err != nil {
		return s.Fail(fmt.Errorf("attribute %s: %w", path, err))
	}
	return T{s.own(ts.New(lib.Ctensor(r)))}
}

// BatchNorms describes the module's submodules that keep running statistics.
func (m *Module) BatchNorms() ([]ModuleBatchNorm, error) {
	c := C.optlab_module_batchnorms(m.ptr())
	if err := moduleErr(); err != nil {
		return nil, fmt.Errorf("listing BatchNorm modules: %w", err)
	}
	text := C.GoString(c)
	C.free(unsafe.Pointer(c))
	var out []ModuleBatchNorm
	for _, line := range strings.Split(text, "\n") {
		if line == "" {
			continue
		}
		path, mom, _ := strings.Cut(line, "\t")
		bn := ModuleBatchNorm{Path: path}
		if v, err := strconv.ParseFloat(mom, 64); err == nil {
			bn.Momentum, bn.HasMomentum = v, true
		}
		out = append(out, bn)
	}
	return out, nil
}

// Types returns the type of the module (path "") and of each of its
// submodules, by dotted path: the TorchScript class's qualified name
// without its "___torch_mangle_N." parts ("__torch__.torch.nn.modules.
// linear.Linear" for a scripted torch.nn.Linear).
func (m *Module) Types() (map[string]string, error) {
	c := C.optlab_module_types(m.ptr())
	if err := moduleErr(); err != nil {
		return nil, fmt.Errorf("listing submodules: %w", err)
	}
	text := C.GoString(c)
	C.free(unsafe.Pointer(c))
	out := map[string]string{}
	for _, line := range strings.Split(text, "\n") {
		if line == "" {
			continue
		}
		path, typ, _ := strings.Cut(line, "\t")
		parts := strings.Split(typ, ".")
		kept := parts[:0]
		for _, p := range parts {
			if !strings.HasPrefix(p, "___torch_mangle_") {
				kept = append(kept, p)
			}
		}
		out[path] = strings.Join(kept, ".")
	}
	return out, nil
}

// Bind fixes the module's tensor attributes (parameters or buffers, by
// dotted path) that ModuleSet points, in order; their C strings are made
// here once, not on every pass.
func (m *Module) Bind(paths []string) {
	m.unbind()
	for _, p := range paths {
		m.paths = append(m.paths, C.CString(p))
	}
}

func (m *Module) unbind() {
	for _, p := range m.paths {
		C.free(unsafe.Pointer(p))
	}
	m.paths = nil
}

// ModuleSet points the module's bound attributes (Bind) at vals, in the
// same order: views of a flat vector, say. A forward pass then reads them
// (a buffer it updates in place, BatchNorm's running statistics, is
// updated where it points). The module holds a reference to each until it
// is set again.
func (s *Scope) ModuleSet(m *Module, vals []T) {
	if len(m.paths) != len(vals) {
		s.Fail(fmt.Errorf("module set: %d bound attributes for %d tensors", len(m.paths), len(vals)))
		return
	}
	if !s.present(vals) || len(vals) == 0 {
		return
	}
	n := len(vals)
	cts := (*unsafe.Pointer)(C.malloc(C.size_t(unsafe.Sizeof(uintptr(0))) * C.size_t(n)))
	defer C.free(unsafe.Pointer(cts))
	tv := unsafe.Slice(cts, n)
	for i := range vals {
		tv[i] = unsafe.Pointer(vals[i].t.Ctensor())
	}
	C.optlab_module_set(m.ptr(), &m.paths[0], cts, C.int(n))
	if err := moduleErr(); err != nil {
		s.Fail(fmt.Errorf("setting the module's tensors: %w", err))
	}
}

// ModuleForward runs the module's forward on x in train or eval mode and
// returns its output, which must be one tensor.
func (s *Scope) ModuleForward(m *Module, x T, train bool) T {
	if !s.check(x) {
		return T{}
	}
	mode := int8(2)
	if train {
		mode = 1
	}
	if m.train != mode {
		if train {
			lib.AtmTrain(m.m.Cmodule)
		} else {
			lib.AtmEval(m.m.Cmodule)
		}
		if err := moduleErr(); err != nil {
			return s.Fail(fmt.Errorf("setting the module's mode: %w", err))
		}
		m.train = mode
	}
	in := []lib.Ctensor{lib.Ctensor(x.t.Ctensor())}
	r := lib.AtmForward(m.m.Cmodule, &in[0], 1)
	if err := moduleErr(); err != nil {
		return s.Fail(fmt.Errorf("TorchScript forward: %w", err))
	}
	return T{s.own(ts.New(r))}
}
