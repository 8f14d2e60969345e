package engine

// Helpers shared by the op-semantics, predict and data tests: a small smooth
// MLP built with model.NewBuilder and its float64 reference forward pass,
// and ways to read and write engine vectors on the worker.

import (
	"context"
	"fmt"
	"math"
	"sync"
	"testing"

	"github.com/optlab/optlab/host/model"
	"github.com/optlab/optlab/host/tensor"
	"github.com/optlab/optlab/sdk/optim"
)

var semWorker = sync.OnceValue(func() *tensor.Worker { return tensor.NewWorker(1) })

// semNet is Linear → sigmoid → Linear on the flattened input: smooth, so
// finite differences are accurate, and small enough for a float64 reference.
type semNet struct{ l1, l2 model.Linear }

func (n *semNet) Forward(f *model.Fwd, x tensor.T) tensor.T {
	x = f.S.Flatten(x, 1, -1)
	return n.l2.Forward(f, f.S.Sigmoid(n.l1.Forward(f, x)))
}

// semTiny builds the smooth MLP for input shape in.
func semTiny(t testing.TB, in []int64, hidden int64, classes int) *model.Model {
	t.Helper()
	b := model.NewBuilder()
	f := int64(1)
	for _, d := range in {
		f *= d
	}
	n := &semNet{l1: b.Linear("fc1", f, hidden, false), l2: b.Linear("fc2", hidden, int64(classes), false)}
	m, err := b.Build("semtiny", classes, in, n)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// semWideNet is a model with one big parameter; its forward is never used.
type semWideNet struct{}

func (semWideNet) Forward(f *model.Fwd, x tensor.T) tensor.T { return x }

func semWide(t testing.TB, n int64) *model.Model {
	t.Helper()
	b := model.NewBuilder()
	b.Param("w", []int64{n}, "weight", model.Init{Kind: model.Normal, Std: 1})
	m, err := b.Build("semwide", 2, []int64{1}, semWideNet{})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func semEngine(t testing.TB, cfg Config, models ...*model.Model) *Engine {
	t.Helper()
	cfg.Device = tensor.CPU
	e, err := New(context.Background(), semWorker(), cfg, models)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	return e
}

// semDo runs fn on the engine's worker with a scope and fails on error.
func semDo(t testing.TB, e *Engine, fn func(s *tensor.Scope) error) {
	t.Helper()
	err := e.w.Do(context.Background(), func() error {
		s := tensor.NewScope()
		defer s.Close()
		if err := fn(s); err != nil {
			return err
		}
		return s.Err()
	})
	if err != nil {
		t.Fatal(err)
	}
}

// semRead returns the contents of handle h.
func semRead(t testing.TB, e *Engine, h optim.Vec) []float64 {
	t.Helper()
	var out []float64
	semDo(t, e, func(s *tensor.Scope) error {
		v, _, err := e.get(h)
		if err != nil {
			return err
		}
		out = s.Float64s(v)
		return nil
	})
	return out
}

// semWrite sets the contents of handle h (rounded to float32).
func semWrite(t testing.TB, e *Engine, h optim.Vec, vals []float64) {
	t.Helper()
	semDo(t, e, func(s *tensor.Scope) error {
		v, _, err := e.get(h)
		if err != nil {
			return err
		}
		if int64(len(vals)) != v.Numel() {
			return fmt.Errorf("writing %d values into handle %d of %d", len(vals), h, v.Numel())
		}
		f := make([]float32, len(vals))
		for i, x := range vals {
			f[i] = float32(x)
		}
		s.CopyFrom(v, s.FromFloat32(f, v.Shape(), tensor.CPU))
		return nil
	})
}

// semBatch makes (x, y) member m's current batch; x is N×F float features.
func semBatch(t testing.TB, e *Engine, m int, x [][]float64, y []int64) {
	t.Helper()
	semDo(t, e, func(s *tensor.Scope) error {
		var flat []float32
		for _, row := range x {
			for _, v := range row {
				flat = append(flat, float32(v))
			}
		}
		xt := s.FromFloat32(flat, []int64{int64(len(x)), int64(len(x[0]))}, tensor.CPU)
		yt := s.FromInt64(y, []int64{int64(len(y))}, tensor.CPU)
		if err := s.Err(); err != nil {
			return err
		}
		e.SetBatch(m, s.Keep(xt), s.Keep(yt))
		return nil
	})
}

// semExec runs p with a Read op of every scalar register appended
// (Program.ReadAll) and fails on error; read the result with the registers
// p's builder returned.
func semExec(t testing.TB, e *Engine, p *optim.Program) optim.Result {
	t.Helper()
	r, err := e.Exec(context.Background(), p.ReadAll())
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// semGrad runs a Grad of the whole batch (BNUpdate) at at into out and
// returns its loss and accuracy.
func semGrad(t testing.TB, e *Engine, out, at optim.Vec) []float64 {
	t.Helper()
	p := optim.Prog()
	ev := p.Grad(out, at, optim.Batch{}, optim.BNUpdate)
	return semEval(semExec(t, e, p), ev)
}

// semEval returns the loss and accuracy of a gradient pass.
func semEval(r optim.Result, ev optim.Eval) []float64 {
	return []float64{r.Get(ev.Loss), r.Get(ev.Acc)}
}

// semLogits is the float64 forward pass of semTiny for one sample.
func semLogits(m *model.Model, p []float64, x []float64) []float64 {
	w1, b1, w2, b2 := p[m.Offsets[0]:], p[m.Offsets[1]:], p[m.Offsets[2]:], p[m.Offsets[3]:]
	in, hid := m.Params[0].Shape[1], m.Params[0].Shape[0]
	h := make([]float64, hid)
	for j := range hid {
		a := b1[j]
		for k := range in {
			a += w1[j*in+k] * x[k]
		}
		h[j] = 1 / (1 + math.Exp(-a))
	}
	z := make([]float64, m.Classes)
	for c := range z {
		a := b2[c]
		for j := range hid {
			a += w2[int64(c)*hid+j] * h[j]
		}
		z[c] = a
	}
	return z
}

func semSoftmax(z []float64) []float64 {
	mx := math.Inf(-1)
	for _, v := range z {
		mx = max(mx, v)
	}
	out := make([]float64, len(z))
	var sum float64
	for i, v := range z {
		out[i] = math.Exp(v - mx)
		sum += out[i]
	}
	for i := range out {
		out[i] /= sum
	}
	return out
}

// semLoss is PyTorch's mean cross-entropy with label smoothing eps and the
// accuracy of semTiny on (x, y), in float64.
func semLoss(m *model.Model, p []float64, x [][]float64, y []int64, eps float64) (loss, acc float64) {
	for i := range x {
		z := semLogits(m, p, x[i])
		pr := semSoftmax(z)
		c := float64(len(z))
		var l float64
		for k, q := range pr {
			w := eps / c
			if int64(k) == y[i] {
				w += 1 - eps
			}
			l -= w * math.Log(q)
		}
		loss += l
		best := 0
		for k := range z {
			if z[k] > z[best] {
				best = k
			}
		}
		if int64(best) == y[i] {
			acc++
		}
	}
	n := float64(len(x))
	return loss / n, acc / n
}

// semFDGrad is the central finite-difference gradient of semLoss.
func semFDGrad(m *model.Model, p []float64, x [][]float64, y []int64, eps float64) []float64 {
	const h = 1e-6
	g := make([]float64, len(p))
	q := append([]float64(nil), p...)
	for i := range p {
		q[i] = p[i] + h
		lp, _ := semLoss(m, q, x, y, eps)
		q[i] = p[i] - h
		lm, _ := semLoss(m, q, x, y, eps)
		q[i] = p[i]
		g[i] = (lp - lm) / (2 * h)
	}
	return g
}

// semF32 rounds to float32, as the device stores vectors.
func semF32(v []float64) []float64 {
	out := make([]float64, len(v))
	for i, x := range v {
		out[i] = float64(float32(x))
	}
	return out
}
