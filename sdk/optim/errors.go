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
