package optim

import (
	"fmt"
	"slices"
)

// Vec is a handle to a host-side vector laid out like one member's
// trainable parameters. Plugins never see the vector's contents: they send
// programs of ops naming handles, and what the ops compute stays on the
// host, in registers, unless a program reads it.
//
// Handles ≤ 0 are reserved by the host: ParamsOf(m) names the live
// parameters of member m (so Params, handle 0, is member 0's). Handles > 0
// are chosen by the plugin in Alloc, which lets one program allocate a vector
// and use it without an extra round trip.
type Vec int32

// Params is the handle of member 0's live parameters.
const Params Vec = 0

// ParamsOf returns the handle of member m's live parameters.
func ParamsOf(m int) Vec { return Vec(-m) }

// rhoBase starts the reserved range of ρ handles.
const rhoBase = -(1 << 24)

// RhoOf returns the handle of variational member m's ρ vector (σ =
// softplus(ρ) elementwise; the live parameters ParamsOf(m) are the means μ).
// Since protocol minor 1.
func RhoOf(m int) Vec { return Vec(rhoBase - m) }

// Member returns the member index of a reserved parameter handle and
// whether v is one.
func (v Vec) Member() (int, bool) {
	if v > 0 || v <= rhoBase {
		return 0, false
	}
	return int(-v), true
}

// Rho returns the member index of a reserved ρ handle and whether v is one.
func (v Vec) Rho() (int, bool) {
	if v > rhoBase {
		return 0, false
	}
	return int(rhoBase - v), true
}

// Program is an ordered list of ops that the host executes on the device in
// one call. Build one with Handles.Prog (or Prog) and the builder methods:
// ops that change vectors chain, and ops that compute values return the
// registers they set, which later ops use as coefficients and which a Read
// op brings back (blocking) or a Report op hands to the host's metrics
// (without blocking):
//
//	p := hs.Prog()
//	ev := p.Grad(g, optim.Params, optim.Batch{}, optim.BNUpdate)
//	c := p.Div(optim.K(rho), p.Add(p.Norm(g), optim.K(1e-12))) // ρ/(‖g‖+ε), on the device
//	p.Axpy(optim.Params, c, g)
//	p.Report("loss", ev.Loss)
//	_, err := h.Exec(ctx, p)
type Program struct {
	Ops []Op // at most MaxProgramOps

	names *Handles // for String; nil prints bare handles
	id    *progID  // identity of the registers the builder hands out
	err   error    // first misuse of the builder (a foreign register)
}

// MaxProgramOps is the most ops one program may hold: the host refuses a
// longer one before it decodes it (a plugin that keeps appending to one
// Program across steps would otherwise make the host hold its every op;
// built-in methods send at most a few hundred ops per Exec).
const MaxProgramOps = 1 << 16

// Prog starts an empty program (its listing prints bare handles; see
// Handles.Prog).
func Prog() *Program { return &Program{} }

// ident returns the program's identity, made on first use.
func (p *Program) ident() *progID {
	if p.id == nil {
		p.id = new(progID)
	}
	return p.id
}

// Reg returns register i (1-based) of p: for hosts and wire decoders that
// build programs from numbers; plugins use the registers the builder
// returns.
func (p *Program) Reg(i int) Reg { return Reg{i: int32(i), id: p.ident()} }

// Err returns the first misuse of p's builder: a register of another
// program used as an operand. Hosts fail such a program before running
// it.
func (p *Program) Err() error {
	if p == nil {
		return nil
	}
	return p.err
}

// NumRegs returns the number of registers p's ops set.
func (p *Program) NumRegs() int {
	n := 0
	for _, op := range p.Ops {
		n += emits(op)
	}
	return n
}

func (p *Program) add(op Op) *Program { p.Ops = append(p.Ops, op); return p }

// emit appends an op that sets registers and returns its first. It counts
// the ops, so ops appended to (or replaced in) Ops directly are counted
// too; programs are tens of ops.
func (p *Program) emit(op Op) Reg {
	r := Reg{i: int32(p.NumRegs()) + 1, id: p.ident()}
	p.add(op)
	return r
}

func (r Reg) next() Reg { return Reg{i: r.i + 1, id: r.id} }

// own checks that the registers among ns belong to p (recording the first
// misuse for Err) and returns them.
func (p *Program) own(ns ...Num) {
	for _, n := range ns {
		if r, ok := n.(Reg); ok && r.i != 0 && r.id != p.ident() && p.err == nil {
			p.err = fmt.Errorf("op %d uses register %s of another program", len(p.Ops), r)
		}
	}
}

// Alloc appends an Alloc op of id with member m's layout.
func (p *Program) Alloc(id Vec, m int) *Program { return p.add(Alloc{ID: id, Member: int32(m)}) }

// AllocFactor appends an Alloc op of id as a factor vector of member m:
// one square matrix per block (of side at most block; 0: whole rows and
// columns) of each matrix tensor, rows×rows for LeftFactor, cols×cols for
// RightFactor (VecShape).
func (p *Program) AllocFactor(id Vec, m int, s VecShape, block int64) *Program {
	return p.add(Alloc{ID: id, Member: int32(m), Shape: s, Block: block})
}

// Free appends a Free op.
func (p *Program) Free(id Vec) *Program { return p.add(Free{ID: id}) }

// Copy appends dst = src.
func (p *Program) Copy(dst, src Vec) *Program { return p.add(Copy{Dst: dst, Src: src}) }

// CopyState appends dst = src with the BatchNorm running statistics (a
// Copy with BN set): a snapshot of a whole model state.
func (p *Program) CopyState(dst, src Vec) *Program {
	return p.add(Copy{Dst: dst, Src: src, BN: true})
}

// Fill appends dst = v.
func (p *Program) Fill(dst Vec, v Num) *Program { p.own(v); return p.add(Fill{Dst: dst, Value: v}) }

// FillRange appends dst[offset : offset+n] = v.
func (p *Program) FillRange(dst Vec, offset, n int64, v float64) *Program {
	return p.add(FillRange{Dst: dst, Offset: offset, Len: n, Value: v})
}

// Scale appends dst *= a.
func (p *Program) Scale(dst Vec, a Num) *Program { p.own(a); return p.add(Scale{Dst: dst, Alpha: a}) }

// AddConst appends dst += v.
func (p *Program) AddConst(dst Vec, v Num) *Program {
	p.own(v)
	return p.add(AddConst{Dst: dst, Value: v})
}

// Axpy appends dst += a·x.
func (p *Program) Axpy(dst Vec, a Num, x Vec) *Program {
	p.own(a)
	return p.add(Axpy{Dst: dst, Alpha: a, X: x})
}

// LinComb appends dst = Σ terms.
func (p *Program) LinComb(dst Vec, terms ...Term) *Program {
	for _, t := range terms {
		p.own(t.Coef)
	}
	return p.add(LinComb{Dst: dst, Terms: terms})
}

// Unary appends dst = f(src).
func (p *Program) Unary(dst, src Vec, k UnaryKind) *Program {
	return p.add(Unary{Dst: dst, Src: src, Kind: k})
}

// Binary appends dst = a ∘ b.
func (p *Program) Binary(dst, a, b Vec, k BinaryKind) *Program {
	return p.add(Binary{Dst: dst, A: a, B: b, Kind: k})
}

// RandN appends dst ~ N(0, std²).
func (p *Program) RandN(dst Vec, std float64, seed int64) *Program {
	return p.add(RandN{Dst: dst, Std: std, Seed: seed})
}

// Dot appends a Dot op and returns the register of a·b.
func (p *Program) Dot(a, b Vec) Reg { return p.emit(Dot{A: a, B: b}) }

// Norm appends a Norm op and returns the register of ‖x‖.
func (p *Program) Norm(x Vec) Reg { return p.emit(Norm{X: x}) }

// Grad appends a Grad op and returns the registers of its loss and accuracy.
func (p *Program) Grad(out, at Vec, b Batch, bn BNMode) Eval {
	return p.GradOp(Grad{Out: out, At: at, Batch: b, BN: bn})
}

// GradOp appends g (a Grad op with any of its fields set, e.g. a
// variational pass's Eps and OutRho) and returns its registers.
func (p *Program) GradOp(g Grad) Eval {
	r := p.emit(g)
	return Eval{Loss: r, Acc: r.next()}
}

// JointGrad appends a JointGrad op and returns the registers of its loss
// and accuracy.
func (p *Program) JointGrad(outs, ats []Vec, b Batch, bn BNMode) Eval {
	r := p.emit(JointGrad{Outs: outs, Ats: ats, Batch: b, BN: bn})
	return Eval{Loss: r, Acc: r.next()}
}

// BaseStep appends a base-optimizer step of params with gradient g.
func (p *Program) BaseStep(params, g Vec) *Program { return p.add(BaseStep{Params: params, Grad: g}) }

// BaseState appends dst = the base optimizer's state vector name
// (MomentumBuffer, ExpAvg, ExpAvgSq) of the live parameters of.
func (p *Program) BaseState(dst, of Vec, name string) *Program {
	return p.add(BaseState{Dst: dst, Of: of, Name: name})
}

// AllocSamples appends an Alloc of id as a sample vector of member m
// (SampleShape: one element per sample of a batch).
func (p *Program) AllocSamples(id Vec, m int) *Program {
	return p.add(Alloc{ID: id, Member: int32(m), Shape: SampleShape})
}

// SetLR appends a learning-rate override for member m.
func (p *Program) SetLR(m int, lr float64) *Program { return p.add(SetLR{Member: int32(m), LR: lr}) }

// Arith appends an Arith op and returns its register.
func (p *Program) Arith(k ArithKind, a, b, c Num) Reg {
	p.own(a, b, c)
	return p.emit(Arith{Kind: k, A: a, B: b, C: c})
}

// Add returns the register of a + b.
func (p *Program) Add(a, b Num) Reg { return p.Arith(ArithAdd, a, b, nil) }

// Sub returns the register of a − b.
func (p *Program) Sub(a, b Num) Reg { return p.Arith(ArithSub, a, b, nil) }

// Mul returns the register of a·b.
func (p *Program) Mul(a, b Num) Reg { return p.Arith(ArithMul, a, b, nil) }

// Div returns the register of a/b.
func (p *Program) Div(a, b Num) Reg { return p.Arith(ArithDiv, a, b, nil) }

// Min returns the register of min(a, b).
func (p *Program) Min(a, b Num) Reg { return p.Arith(ArithMin, a, b, nil) }

// Max returns the register of max(a, b).
func (p *Program) Max(a, b Num) Reg { return p.Arith(ArithMax, a, b, nil) }

// Sqrt returns the register of √a.
func (p *Program) Sqrt(a Num) Reg { return p.Arith(ArithSqrt, a, nil, nil) }

// Recip returns the register of 1/a.
func (p *Program) Recip(a Num) Reg { return p.Arith(ArithRecip, a, nil, nil) }

// Clamp returns the register of a clamped to [lo, hi].
func (p *Program) Clamp(a, lo, hi Num) Reg { return p.Arith(ArithClamp, a, lo, hi) }

// SegReduce appends a SegReduce op and returns its segment register.
func (p *Program) SegReduce(k SegKind, by Segmentation, x, y Vec) Reg {
	return p.emit(SegReduce{Kind: k, By: by, X: x, Y: y})
}

// SegNorm returns the segment register of the L2 norm of every segment of
// x: the square root of SegReduce's SegSumSq.
func (p *Program) SegNorm(by Segmentation, x Vec) Reg {
	return p.Sqrt(p.SegReduce(SegSumSq, by, x, 0))
}

// TopKMask appends dst = the mask of the ⌊frac·size+½⌋ largest |x| of each
// segment.
func (p *Program) TopKMask(dst, x Vec, by Segmentation, frac Num) *Program {
	p.own(frac)
	return p.add(TopKMask{Dst: dst, X: x, By: by, Frac: frac})
}

// Read appends a Read op of every register in xs: their values come back
// in the Result (a blocking read; use it for control flow only).
func (p *Program) Read(xs ...Reg) *Program {
	for _, x := range xs {
		p.own(x)
		p.add(Read{X: x})
	}
	return p
}

// Report appends a Report op: register x becomes the step's metric name
// in the host's logs, without a blocking read.
func (p *Program) Report(name string, x Reg) *Program {
	p.own(x)
	return p.add(Report{Name: name, X: x})
}

// UpdateBN appends an UpdateBN op: x's BatchNorm running statistics are
// recomputed exactly over the training set (a full forward pass: for an
// optimizer's Finalize).
func (p *Program) UpdateBN(x Vec) *Program { return p.add(UpdateBN{X: x}) }

// NewtonSchulz appends dst = the Newton–Schulz orthogonalisation of every
// matrix-shaped tensor of src with Keller Jordan's coefficients (NS5A,
// NS5B, NS5C, NS5Eps) and the given number of steps (NS5Steps is his); the
// other tensors are copied. NewtonSchulzOp sends coefficients of one's own.
func (p *Program) NewtonSchulz(dst, src Vec, steps int) *Program {
	return p.NewtonSchulzOp(NewtonSchulz{Dst: dst, Src: src, Steps: int32(steps), A: NS5A, B: NS5B, C: NS5C, Eps: NS5Eps})
}

// NewtonSchulzOp appends o, a NewtonSchulz op with every field set by the
// caller (its own coefficients, step count and ε).
func (p *Program) NewtonSchulzOp(o NewtonSchulz) *Program { return p.add(o) }

// Gram appends dst = beta·dst + alpha·G·Gᵀ (dst a left factor vector) or
// alpha·Gᵀ·G (a right one) for every block G of src.
func (p *Program) Gram(dst, src Vec, beta, alpha float64) *Program {
	return p.add(Gram{Dst: dst, Src: src, Beta: beta, Alpha: alpha})
}

// MatMul appends dst = left·X·right for every block X of src (a factor 0
// is the identity); MatMulOp sends transposes.
func (p *Program) MatMul(dst, left, src, right Vec) *Program {
	return p.add(MatMul{Dst: dst, Src: src, Left: left, Right: right})
}

// MatMulOp appends o, a MatMul op with every field set by the caller.
func (p *Program) MatMulOp(o MatMul) *Program { return p.add(o) }

// SortColumns appends the reordering of every matrix of the factor vector
// dst by the descending diagonal of key's matrices, carry (0: none; a
// parameter vector) permuted along (the SortColumns op).
func (p *Program) SortColumns(dst, key, carry Vec) *Program {
	return p.add(SortColumns{Dst: dst, Key: key, Carry: carry})
}

// InvRoot appends dst = (src + eps·I)^(−1/root) for every matrix of the
// factor vector src.
func (p *Program) InvRoot(dst, src Vec, root, eps float64) *Program {
	return p.add(MatFunc{Dst: dst, Src: src, Kind: InvRoot, Root: root, Eps: eps})
}

// MatFunc appends dst = f(src) for every matrix of the factor vector src
// (MatFuncKind; root and eps as MatFunc says).
func (p *Program) MatFunc(dst, src Vec, k MatFuncKind, root, eps float64) *Program {
	return p.add(MatFunc{Dst: dst, Src: src, Kind: k, Root: root, Eps: eps})
}

// If appends an If op on register x and the block that body appends to p:
// its ops run only when x > 0. An empty block appends nothing.
func (p *Program) If(x Reg, body func(p *Program)) *Program {
	p.own(x)
	i := len(p.Ops)
	p.add(If{X: x})
	body(p)
	n := len(p.Ops) - i - 1
	if n == 0 {
		p.Ops = p.Ops[:i]
		return p
	}
	p.Ops[i] = If{X: x, Len: int32(n)}
	return p
}

// Mean returns the registers of the mean loss and accuracy over the
// gradient passes evs, each term divided by the count and summed in order
// (the float64 arithmetic of Result.Mean, on the device). With no passes
// it returns zero registers.
func (p *Program) Mean(evs []Eval) (loss, acc Reg) {
	if len(evs) == 0 {
		return Reg{}, Reg{}
	}
	n := K(len(evs))
	loss, acc = p.Div(evs[0].Loss, n), p.Div(evs[0].Acc, n)
	for _, ev := range evs[1:] {
		loss = p.Add(loss, p.Div(ev.Loss, n))
		acc = p.Add(acc, p.Div(ev.Acc, n))
	}
	return loss, acc
}

// ReportMetrics appends the Report ops of the step's training loss and
// accuracy ("loss" and "acc"), the metrics the host's curves and tables
// expect.
func (p *Program) ReportMetrics(loss, acc Reg) *Program {
	return p.Report("loss", loss).Report("acc", acc)
}

// Metrics returns the StepOutput of a step with training loss and
// accuracy computed by the plugin (a method that reports its metrics from
// the device with ReportMetrics returns an empty StepOutput instead).
func Metrics(loss, acc float64) StepOutput {
	return StepOutput{Metrics: map[string]float64{"loss": loss, "acc": acc}}
}

// ReadAll appends a Read op for every scalar register that p's ops set, in
// order: what a program of protocol minor 4 or older got back (every
// scalar its ops emitted), which the wire decoder gives such plugins; tests
// use it too.
func (p *Program) ReadAll() *Program {
	segs := map[int32]bool{} // segment registers
	reg := int32(1)
	for _, op := range slices.Clone(p.Ops) {
		seg := false
		switch o := op.(type) {
		case SegReduce:
			seg = true
		case Arith:
			for _, x := range []Num{o.A, o.B, o.C} {
				if r, ok := x.(Reg); ok && segs[r.i] {
					seg = true
				}
			}
		}
		for range emits(op) {
			if seg {
				segs[reg] = true
			} else {
				p.Read(Reg{i: reg, id: p.ident()})
			}
			reg++
		}
	}
	return p
}
