package optim

import (
	"fmt"
	"slices"
	"strings"
)

// Registry lists optimizers by name (telegraf's registry of inputs, without
// its global state): the built-in methods are listed once, in one
// Registry, and the ensembles plugin's members, a plugin's main and an
// in-process run under a debugger all make their optimizers from it.
type Registry struct {
	entries []Entry
}

// Entry is one optimizer of a Registry.
type Entry struct {
	Name string
	New  func() Optimizer
	// Doc is a one-line description.
	Doc string
}

// Add lists an optimizer; adding a name twice is an error.
func (r *Registry) Add(e Entry) error {
	if e.Name == "" || e.New == nil {
		return fmt.Errorf("registry: entry %q needs a name and a constructor", e.Name)
	}
	if _, ok := r.Lookup(e.Name); ok {
		return fmt.Errorf("registry: %q is listed twice", e.Name)
	}
	r.entries = append(r.entries, e)
	return nil
}

// Lookup returns the entry of name; a nil Registry has none.
func (r *Registry) Lookup(name string) (Entry, bool) {
	if r == nil {
		return Entry{}, false
	}
	i := slices.IndexFunc(r.entries, func(e Entry) bool { return e.Name == name })
	if i < 0 {
		return Entry{}, false
	}
	return r.entries[i], true
}

// New makes the optimizer name; an unknown name's error lists the known
// ones.
func (r *Registry) New(name string) (Optimizer, error) {
	e, ok := r.Lookup(name)
	if !ok {
		return nil, fmt.Errorf("unknown optimizer %q (known: %s)", name, strings.Join(r.Names(), ", "))
	}
	return e.New(), nil
}

// Names returns the listed names in the order they were added.
func (r *Registry) Names() []string {
	out := make([]string, len(r.entries))
	for i, e := range r.entries {
		out[i] = e.Name
	}
	return out
}

// Entries returns the entries in the order they were added.
func (r *Registry) Entries() []Entry { return slices.Clone(r.entries) }
