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

// Index returns the register's 1-based number in its program (0 for the
// zero Reg). Hosts use it; plugins never need it.
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

// Imm returns n's immediate value and true, or 0 and false when n is a
// register. A nil Num is K(0).
func Imm(n Num) (float64, bool) {
	switch v := n.(type) {
	case nil:
		return 0, true
	case K:
		return float64(v), true
	}
	return 0, false
}

// RegOf returns the register n names, and whether it names one.
func RegOf(n Num) (Reg, bool) {
	r, ok := n.(Reg)
	return r, ok && r.i != 0
}

// Result holds the values of a program's Read ops. Read them with Get and
// the registers the builder returned.
type Result struct {
	// Reads are the values of the program's Read ops, in op order: what
	// crosses the wire.
	Reads []float64

	regs []int32 // register of each read
	id   *progID
}

// NewResult returns p's result with the values vals of its Read ops, in
// op order: hosts (the engine, optimtest's exact host, the wire client)
// make their results with it. It is an error when vals has another length
// than p has Read ops.
func NewResult(p *Program, vals []float64) (Result, error) {
	r := Result{Reads: vals}
	if p == nil {
		if len(vals) != 0 {
			return Result{}, fmt.Errorf("result of a nil program with %d values", len(vals))
		}
		return r, nil
	}
	r.id = p.ident()
	for _, op := range p.Ops {
		if rd, ok := op.(Read); ok {
			r.regs = append(r.regs, rd.X.i)
		}
	}
	if len(r.regs) != len(vals) {
		return Result{}, fmt.Errorf("result has %d values for %d Read ops", len(vals), len(r.regs))
	}
	return r, nil
}

// ReadError is what Result.Get panics with when a register cannot be read
// from a result: it belongs to another program, or its program did not Read
// it. Both are programming errors of the optimizer (sdk/serve turns the
// panic into the run's error).
type ReadError struct {
	Reg    Reg
	Reason string
}

// Error implements error.
func (e *ReadError) Error() string { return fmt.Sprintf("register %s: %s", e.Reg, e.Reason) }

// Lookup returns the value of register r, or a *ReadError when r belongs to
// another program or was not read. The zero Reg reads NaN.
func (r Result) Lookup(x Reg) (float64, error) {
	if x.i == 0 {
		return math.NaN(), nil
	}
	if x.id != r.id {
		return 0, &ReadError{Reg: x, Reason: "belongs to another program than this result's"}
	}
	for j, i := range r.regs {
		if i == x.i {
			return r.Reads[j], nil
		}
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
