package optim

import (
	"fmt"
	"math"
)

// Reg is a register of a program: a value that an op computes on the
// device and that later ops of the same program use, without a round trip
// to the plugin. A scalar register holds one float64 (Norm, Dot, a Grad's
// loss and accuracy, Arith on scalars); a segment register holds one
// float64 per segment of a member's layout (SegReduce, Arith on segment
// registers). Registers are numbered from 1 in the order their ops appear
// in the program and live until its Exec ends; no value crosses to the
// plugin unless a Read op asks for it (or the host's metrics, with Report).
//
// A Reg belongs to the program whose builder returned it: using it in, or
// reading it from the result of, another program is an error. The zero Reg
// is no register.
type Reg struct {
	i  int32
	id *progID
}

// progID identifies a program (its address; never compared by value).
type progID struct{ _ byte }

// Index returns the register's 1-based number in its program, the number
// String prints (0 for the zero Reg).
func (r Reg) Index() int { return int(r.i) }

// String returns "#n".
func (r Reg) String() string { return fmt.Sprintf("#%d", r.i) }

// Eval is the registers of the loss and accuracy that a gradient pass sets.
type Eval struct{ Loss, Acc Reg }

// Num is an operand of a coefficient or of Arith: an immediate K, or a
// register (Reg). A nil Num is the immediate 0.
type Num interface{ isNum() }

// K is an immediate operand: a constant sent with the program.
type K float64

func (K) isNum()   {}
func (Reg) isNum() {}

// Result holds the values of a program's Read ops. Read them with Get and
// the registers the builder returned. A host makes the Result of a program
// it ran from the program and the values of its Read ops (sdk/opset's
// NewResult checks their count); a fake host in a test may too.
type Result struct {
	// Program is the program that ran: Get finds a register's Read among
	// its ops, so the program is not changed while its Result is read.
	Program *Program
	// Reads are the values of the program's Read ops, in op order: what
	// crosses the wire.
	Reads []float64
}

// ReadError is what Result.Get panics with when a register cannot be read
// from a result: it belongs to another program, or its program did not Read
// it. Both are programming errors of the optimizer (sdk/serve turns the
// panic into the run's error). A Result made by hand with fewer Reads than
// its program has Read ops is the third case.
type ReadError struct {
	Reg    Reg
	Reason string
}

// Error implements error.
func (e *ReadError) Error() string { return fmt.Sprintf("register %s: %s", e.Reg, e.Reason) }

// Lookup returns the value of register x, or a *ReadError when x belongs to
// another program or was not read. The zero Reg reads NaN.
func (r Result) Lookup(x Reg) (float64, error) {
	if x.i == 0 {
		return math.NaN(), nil
	}
	if r.Program == nil || x.id != r.Program.id {
		return 0, &ReadError{Reg: x, Reason: "belongs to another program than this result's"}
	}
	j := 0 // index of the Read op among the program's
	for _, op := range r.Program.Ops {
		rd, ok := op.(Read)
		if !ok {
			continue
		}
		if rd.X.i == x.i {
			if j >= len(r.Reads) {
				return 0, &ReadError{Reg: x, Reason: fmt.Sprintf("has no value: the result has %d value(s), fewer than the program's Read ops", len(r.Reads))}
			}
			return r.Reads[j], nil
		}
		j++
	}
	return 0, &ReadError{Reg: x, Reason: "was not read: add a Read op for it (Program.Read)"}
}

// Get returns the value of register x; it panics with a *ReadError when x
// belongs to another program or was not read (Lookup returns the error
// instead). The zero Reg reads NaN.
func (r Result) Get(x Reg) float64 {
	v, err := r.Lookup(x)
	if err != nil {
		panic(err)
	}
	return v
}

// Mean returns the mean loss and accuracy over the read gradient passes evs
// (each term divided by the count, in order). With no passes both are NaN.
func (r Result) Mean(evs []Eval) (loss, acc float64) {
	if len(evs) == 0 {
		return math.NaN(), math.NaN()
	}
	n := float64(len(evs))
	for _, ev := range evs {
		loss += r.Get(ev.Loss) / n
		acc += r.Get(ev.Acc) / n
	}
	return loss, acc
}
