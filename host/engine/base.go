package engine

import (
	"fmt"
	"math"

	"github.com/optlab/optlab/host/tensor"
	"github.com/optlab/optlab/sdk/opset"
	"github.com/optlab/optlab/sdk/optim"
)

// BaseConfig is the experiment's base optimizer, applied by the BaseStep op
// with PyTorch's semantics (coupled L2 weight decay for both).
type BaseConfig struct {
	Name        string // "sgd" or "adam"
	Momentum    float64
	Dampening   float64
	Nesterov    bool
	WeightDecay float64
	Beta1       float64
	Beta2       float64
	Eps         float64
}

// baseState is one member's base-optimizer state: SGD's momentum buffer, or
// Adam's moments and step count.
type baseState struct {
	buf, m, v tensor.T
	t         int64
}

func (b *baseState) drop() {
	b.buf.Drop()
	b.m.Drop()
	b.v.Drop()
	b.t = 0
}

// errOwnsUpdate is the error of op (base_step, set_lr) sent by an
// optimizer that declared it applies its own update.
func errOwnsUpdate(op string) error {
	return fmt.Errorf("%s: the optimizer declared the %q feature (it applies its own update, and the run has no base optimizer), so it may not send %s",
		op, "owns-update", op)
}

func (e *Engine) baseStep(s *tensor.Scope, o optim.BaseStep) error {
	if e.cfg.OwnsUpdate {
		return errOwnsUpdate("base_step")
	}
	p, mi, err := e.get(o.Params)
	if err != nil {
		return fmt.Errorf("base_step: %w", err)
	}
	mem := e.members[mi]
	st := &mem.base
	c := e.cfg.Base
	if _, isRho := o.Params.Rho(); isRho {
		// ρ has its own state and no weight decay.
		st = &mem.vi.base
		c.WeightDecay = 0
	} else if _, ok := o.Params.Member(); !ok {
		return fmt.Errorf("base_step: handle %d is not a member's live parameters or ρ", o.Params)
	}
	_, g, err := e.same(s, o.Params, o.Grad)
	if err != nil {
		return err
	}
	lr := mem.lr
	d := g
	if c.WeightDecay != 0 {
		d = s.Add(g, s.Scale(p, c.WeightDecay))
	}
	switch c.Name {
	case "", "sgd":
		if c.Momentum != 0 {
			if !st.buf.Valid() {
				st.buf = s.Keep(s.Scale(d, 1))
			} else {
				s.ScaleInPlace(st.buf, c.Momentum)
				s.Axpy(st.buf, 1-c.Dampening, d)
			}
			if c.Nesterov {
				d = s.Add(d, s.Scale(st.buf, c.Momentum))
			} else {
				d = st.buf
			}
		}
		s.Axpy(p, -lr, d)
	case "adam":
		if !st.m.Valid() {
			st.m = s.Keep(s.Zeros(p.Shape(), tensor.Float32, e.cfg.Device))
			st.v = s.Keep(s.Zeros(p.Shape(), tensor.Float32, e.cfg.Device))
		}
		st.t++
		s.ScaleInPlace(st.m, c.Beta1)
		s.Axpy(st.m, 1-c.Beta1, d)
		s.ScaleInPlace(st.v, c.Beta2)
		s.Axpy(st.v, 1-c.Beta2, s.Square(d))
		bc1 := 1 - math.Pow(c.Beta1, float64(st.t))
		bc2 := 1 - math.Pow(c.Beta2, float64(st.t))
		den := s.AddScalar(s.Scale(s.Sqrt(st.v), 1/math.Sqrt(bc2)), c.Eps)
		s.Axpy(p, -lr/bc1, s.Div(st.m, den))
	default:
		return fmt.Errorf("base_step: unknown base optimizer %q", c.Name)
	}
	return nil
}

// baseStateOp runs a BaseState: Dst = the base optimizer's state vector
// o.Name of the live parameters (or ρ) o.Of, zeros before its first step.
func (e *Engine) baseStateOp(s *tensor.Scope, o optim.BaseState) error {
	if e.cfg.OwnsUpdate {
		return errOwnsUpdate("base_state")
	}
	_, mi, err := e.get(o.Of)
	if err != nil {
		return fmt.Errorf("base_state: %w", err)
	}
	st := &e.members[mi].base
	if _, isRho := o.Of.Rho(); isRho {
		st = &e.members[mi].vi.base
	}
	name := e.cfg.Base.Name
	if name == "" {
		name = "sgd"
	}
	if err := opset.BaseStateRefusal(name, e.cfg.Base.Momentum, o.Name); err != nil {
		return err
	}
	d, _, err := e.same(s, o.Dst, o.Of)
	if err != nil {
		return err
	}
	t := st.buf
	switch o.Name {
	case optim.ExpAvg:
		t = st.m
	case optim.ExpAvgSq:
		t = st.v
	}
	if !t.Valid() {
		s.Fill(d, 0)
		return nil
	}
	s.CopyFrom(d, e.align(s, t, d))
	return nil
}
