package optim

import "fmt"

// Handles hands out the handles of an optimizer's vectors, so that no
// optimizer numbers them itself. Every Handles derived from one root (by
// Sub) shares its counter, so a method running inside another (a
// sub-namespace) can never collide with it, and every handle has a name
// ("otmdr/g1[0]") that Program.String and the trace print.
//
// An optimizer takes its Handles from Config.Handles in Configure (see
// Config.Namespace); New gives a fresh root for tests and standalone use.
// Handles are not safe for concurrent use.
type Handles struct {
	t      *handleTable
	prefix string
}

type handleTable struct {
	next  Vec
	names map[Vec]string
}

// NewHandles returns a root namespace whose first handle is 1.
func NewHandles() *Handles {
	return &Handles{t: &handleTable{next: 1, names: map[Vec]string{}}}
}

// Sub returns the namespace name inside h: its handles come from the same
// counter, and their names start with "name/".
func (h *Handles) Sub(name string) *Handles {
	return &Handles{t: h.t, prefix: h.prefix + name + "/"}
}

// New returns a fresh handle named name in h. The handle names no vector
// until a program allocates it (Program.Alloc).
func (h *Handles) New(name string) Vec {
	v := h.t.next
	h.t.next++
	h.t.names[v] = h.prefix + name
	return v
}

// PerMember returns a fresh handle named name[m] for each of n members.
func (h *Handles) PerMember(name string, n int) []Vec {
	out := make([]Vec, n)
	for m := range out {
		out[m] = h.New(fmt.Sprintf("%s[%d]", name, m))
	}
	return out
}

// Name returns the name of v: the name it was handed out with, or for a
// reserved handle "params[m]" or "rho[m]", or "v<n>" for a handle that no
// Handles of h's root made.
func (h *Handles) Name(v Vec) string {
	if h != nil {
		if s, ok := h.t.names[v]; ok {
			return s
		}
	}
	return vecName(v)
}

// Prog starts an empty program whose listing (Program.String) names the
// handles of h's root.
func (h *Handles) Prog() *Program { return &Program{names: h} }

// vecName is the name of a handle without a namespace.
func vecName(v Vec) string {
	if m, ok := v.Member(); ok {
		return fmt.Sprintf("params[%d]", m)
	}
	if m, ok := v.Rho(); ok {
		return fmt.Sprintf("rho[%d]", m)
	}
	return fmt.Sprintf("v%d", int32(v))
}

// Namespace returns the handles an optimizer configured with c allocates
// from: c.Handles.Sub(name) when the optimizer runs inside another, else a
// fresh root's Sub(name).
func (c Config) Namespace(name string) *Handles {
	if c.Handles == nil {
		return NewHandles().Sub(name)
	}
	return c.Handles.Sub(name)
}
