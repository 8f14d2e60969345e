package optim

import (
	"fmt"
	"reflect"
)

// OpError reports the op of a program that failed. Every interpreter of
// programs (the host's engine, optimtest's exact host, protocoltest's fake)
// returns it, and it survives the wire: errors.As finds it in the error a
// plugin gets back from Host.Exec, and in the error the host gets back from
// a plugin's Step that wrapped it.
type OpError struct {
	// Index is the 0-based index of the op in its program.
	Index int
	// Op names the op's kind, as OpName does ("Grad", "Norm", …).
	Op string
	// Err is what went wrong.
	Err error
}

// Error returns "op <index> (<kind>): <error>".
func (e *OpError) Error() string { return fmt.Sprintf("op %d (%s): %v", e.Index, e.Op, e.Err) }

// Unwrap returns Err.
func (e *OpError) Unwrap() error { return e.Err }

// OpName returns the name of an op's kind: the name of its Go type
// ("Grad" for a Grad or *Grad), or "nil".
func OpName(op Op) string {
	if op == nil {
		return "nil"
	}
	t := reflect.TypeOf(op)
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t.Name()
}

// VecError is an error about one vector handle of an op. It prints the
// handle by its namespaced name ("handle sam/g[0] is not allocated") when
// the program that named it was built with Handles.Prog, also on the far
// side of the wire, where the SDK names it from the plugin's program.
type VecError struct {
	Vec Vec
	// Name is the handle's name in the program that used it
	// (Program.Name), which the host or SDK reporting the error fills in;
	// "" prints the bare name ("v3", "params[0]").
	Name string
	// Msg follows the handle: "is not allocated".
	Msg string
}

// Error implements error.
func (e *VecError) Error() string {
	name := e.Name
	if name == "" {
		name = vecName(e.Vec)
	}
	return "handle " + name + " " + e.Msg
}
