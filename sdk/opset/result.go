package opset

import (
	"fmt"

	"github.com/optlab/optlab/sdk/optim"
)

// NewResult returns p's result with the values vals of its Read ops, in
// op order: hosts (the engine, optimtest's exact host, the wire client)
// make their results with it. It is an error when vals has another length
// than p has Read ops.
func NewResult(p *optim.Program, vals []float64) (optim.Result, error) {
	n := 0
	if p != nil {
		for _, op := range p.Ops {
			if _, ok := op.(optim.Read); ok {
				n++
			}
		}
	}
	if n != len(vals) {
		if p == nil {
			return optim.Result{}, fmt.Errorf("result of a nil program with %d values", len(vals))
		}
		return optim.Result{}, fmt.Errorf("result has %d values for %d Read ops", len(vals), n)
	}
	return optim.Result{Program: p, Reads: vals}, nil
}

// Imm returns n's immediate value and true, or 0 and false when n is a
// register. A nil Num is optim.K(0).
func Imm(n optim.Num) (float64, bool) {
	switch v := n.(type) {
	case nil:
		return 0, true
	case optim.K:
		return float64(v), true
	}
	return 0, false
}

// RegOf returns the register n names, and whether it names one (the zero
// Reg names none).
func RegOf(n optim.Num) (optim.Reg, bool) {
	r, ok := n.(optim.Reg)
	return r, ok && r.Index() != 0
}
