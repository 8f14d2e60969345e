package optim

// Vec is a handle to a host-side vector laid out like one member's
// trainable parameters. Plugins never see the vector's contents: they send
// programs of ops naming handles, and the host returns scalars.
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

// UnaryKind selects an elementwise function for the Unary op.
type UnaryKind int32

// Elementwise functions of the Unary op.
const (
	Abs UnaryKind = iota + 1
	Sign
	Sqrt
	Square
	Softplus
	Exp
	Log
	Reciprocal
)

// BinaryKind selects an elementwise function of two vectors for the Binary op.
type BinaryKind int32

// Elementwise functions of the Binary op.
const (
	Mul BinaryKind = iota + 1
	Div
	Add
	Sub
	Max
	Min
)

// BNMode says what a gradient pass does to BatchNorm running statistics.
type BNMode int32

// BatchNorm modes of the Grad op. BNUpdate is the default (train mode,
// running statistics updated); BNFreeze normalizes with batch statistics but
// leaves the running statistics unchanged (PyTorch momentum 0).
const (
	BNUpdate BNMode = iota
	BNFreeze
)

// Batch selects the samples of the current batch that a Grad op uses.
// The zero value is the whole batch, and so is Of = 1. With Of ≥ 2 the batch (permuted by the
// host with Shuffle as seed when Shuffle ≠ 0, else in loader order) is cut
// into Of equal contiguous parts and Part (0-based) is used; the remainder of
// an uneven split is dropped from the last part. Two ops with the same
// Shuffle see the same permutation, so {0,2,s} and {1,2,s} are complementary
// random halves. A negative Of, or a Part outside [0, max(Of, 1)), is an
// error.
type Batch struct {
	Part    int32
	Of      int32
	Shuffle int64
}

// Op is one instruction of a Program. The concrete types below are the
// whole, closed op set of protocol minor version ProtocolMinor; ops and
// fields added after minor 0 say since which minor they exist.
type Op interface{ isOp() }

// Alloc makes a new zero-filled vector with the layout of member Member's
// parameters under the plugin-chosen handle ID (> 0, and not allocated).
// Ops on vectors of different layouts (lengths) fail.
type Alloc struct {
	ID     Vec
	Member int32
}

// Free releases a vector allocated with Alloc; its handle then names no
// vector (until allocated again).
type Free struct{ ID Vec }

// Copy sets Dst = Src. With BN set the BatchNorm running statistics travel
// with the parameters: Dst then holds a whole model state, so a snapshot of
// the live parameters evaluates with the statistics it was trained with,
// not the member's later ones. The statistics come from the member whose
// live parameters Src names, or from the ones a vector received by an
// earlier Copy with BN (an error if it has none); copied into live
// parameters they replace the member's running statistics. A Copy without
// BN into an allocated vector clears the statistics it held; no other op
// touches them. A vector without statistics of its own evaluates with its
// member's live ones. BN is protocol minor 3.
type Copy struct {
	Dst, Src Vec
	BN       bool
}

// Fill sets every element of Dst to Value.
type Fill struct {
	Dst   Vec
	Value float64
}

// FillRange sets the Len elements of Dst from Offset on to Value: with the
// offsets and kinds of Layout's Tensors, a plugin builds per-tensor masks
// (e.g. 1 on weight tensors, 0 elsewhere) and applies them with Binary, so
// every other op can stay whole-vector. Protocol minor 4.
type FillRange struct {
	Dst         Vec
	Offset, Len int64
	Value       float64
}

// Scale sets Dst = Alpha·Dst.
type Scale struct {
	Dst   Vec
	Alpha float64
}

// AddConst sets Dst = Dst + Value elementwise.
type AddConst struct {
	Dst   Vec
	Value float64
}

// Axpy sets Dst = Dst + Alpha·X.
type Axpy struct {
	Dst   Vec
	Alpha float64
	X     Vec
}

// Term is one coefficient·vector pair of a LinComb.
type Term struct {
	Coef float64
	X    Vec
}

// LinComb sets Dst = Σ Coef_i·X_i. Dst may appear among the terms.
type LinComb struct {
	Dst   Vec
	Terms []Term
}

// Unary sets Dst = f(Src) elementwise.
type Unary struct {
	Dst  Vec
	Src  Vec
	Kind UnaryKind
}

// Binary sets Dst = A ∘ B elementwise.
type Binary struct {
	Dst  Vec
	A, B Vec
	Kind BinaryKind
}

// RandN fills Dst with independent N(0, Std²) draws. Seed ≠ 0 gives a
// reproducible draw independent of the host's stream; Seed = 0 draws from
// the run's seeded host stream.
type RandN struct {
	Dst  Vec
	Std  float64
	Seed int64
}

// Dot emits the scalar Σ A_i·B_i (accumulated in float64 where the device
// allows).
type Dot struct{ A, B Vec }

// Norm emits the global L2 norm of X over all parameters.
type Norm struct{ X Vec }

// Grad evaluates the loss of the member that owns At, with the parameters
// taken from At, on the selected part of the current batch, and writes the
// gradient into Out (Out = 0 writes none: the live parameters are never a
// gradient target, and a reserved Out < 0 is an error). It emits two
// scalars: the mean loss and the accuracy of that pass (NaN for a loss
// without one). The pass changes neither At nor the parameters.
//
// For a variational member (Layout says so) At holds the means μ; the pass
// uses the weights W = μ + softplus(ρ) ⊙ κ with the member's live ρ and the
// standard-normal noise vector κ in Eps (Eps = 0: a fresh draw for this
// pass), so passes that share Eps see the same weight sample. The loss is
// then the mean NLL plus the KL term of the run's variational settings, and
// OutRho (≠ 0) receives the gradient with respect to ρ. At must not be a ρ
// handle; Eps and OutRho are allocated vectors or 0 (an error at a
// deterministic member). Eps and OutRho are protocol minor 1.
type Grad struct {
	Out    Vec
	At     Vec
	Batch  Batch
	BN     BNMode
	Eps    Vec
	OutRho Vec
}

// BaseStep applies the experiment's base optimizer (SGD with momentum,
// Nesterov and weight decay, or Adam) with its learning-rate schedule to the
// live parameters Params (a reserved handle), using Grad as the gradient.
// The base optimizer's state belongs to the member.
type BaseStep struct {
	Params Vec
	Grad   Vec
}

// JointGrad evaluates several members together on the current batch
// (member 0's batch, which they must share; Batch selects a part as in
// Grad): the member owning Ats[i] runs at the parameters in Ats[i], the
// predictive is the average p̄ of their softmax probabilities, and the loss is
// the cross-entropy of log p̄ with the run's label smoothing — one loss on the
// averaged probabilities, as the OT-MDR reference code trains ensembles.
// Outs is empty (no gradients) or has one entry per Ats: Outs[i] (0 = none,
// else an allocated vector that no other entry names) receives the gradient
// with respect to Ats[i]. Ats needs at least one entry, each of a different
// deterministic member. It emits two scalars: the loss and the accuracy of
// p̄. Protocol minor 2.
type JointGrad struct {
	Outs  []Vec
	Ats   []Vec
	Batch Batch
	BN    BNMode
}

// SetLR overrides the learning rate that BaseStep uses for member Member
// during the rest of the current step (across programs; a later SetLR
// replaces it). LR must be ≥ 0 (not NaN).
type SetLR struct {
	Member int32
	LR     float64
}

func (JointGrad) isOp() {}
func (Alloc) isOp()     {}
func (Free) isOp()      {}
func (Copy) isOp()      {}
func (Fill) isOp()      {}
func (FillRange) isOp() {}
func (Scale) isOp()     {}
func (AddConst) isOp()  {}
func (Axpy) isOp()      {}
func (LinComb) isOp()   {}
func (Unary) isOp()     {}
func (Binary) isOp()    {}
func (RandN) isOp()     {}
func (Dot) isOp()       {}
func (Norm) isOp()      {}
func (Grad) isOp()      {}
func (BaseStep) isOp()  {}
func (SetLR) isOp()     {}

// Program is an ordered list of ops that the host executes on the device in
// one call. Build one with Handles.Prog (or Prog) and the builder methods:
// ops that change vectors chain, and ops that emit scalars return the slot
// (Scalar, Eval) from which the Result is read, so no optimizer counts
// positions:
//
//	p := hs.Prog()
//	ev := p.Grad(g, optim.Params, optim.Batch{}, optim.BNUpdate)
//	n := p.Norm(g)
//	r, err := h.Exec(ctx, p)
//	loss, norm := r.Get(ev.Loss), r.Get(n)
type Program struct {
	Ops []Op

	names *Handles // for String; nil prints bare handles
}

// Prog starts an empty program (its listing prints bare handles; see
// Handles.Prog).
func Prog() *Program { return &Program{} }

// Scalar is the slot of one scalar that a program emits: read it from the
// program's Result with Result.Get. The zero Scalar reads NaN.
type Scalar struct{ i int32 }

// Eval is the slots of the loss and accuracy that a gradient pass emits.
type Eval struct{ Loss, Acc Scalar }

// Emits returns the number of scalars op emits: 1 for Dot and Norm, 2 for
// Grad and JointGrad, else 0.
func Emits(op Op) int {
	switch op.(type) {
	case Dot, *Dot, Norm, *Norm:
		return 1
	case Grad, *Grad, JointGrad, *JointGrad:
		return 2
	}
	return 0
}

// NumScalars returns the number of scalars p emits.
func (p *Program) NumScalars() int {
	n := 0
	for _, op := range p.Ops {
		n += Emits(op)
	}
	return n
}

// slot returns the slot of the next scalar the program will emit. It
// counts the ops, so ops appended to (or replaced in) Ops directly are
// counted too; programs are tens of ops.
func (p *Program) slot() Scalar { return Scalar{i: int32(p.NumScalars()) + 1} }

func (p *Program) add(op Op) *Program { p.Ops = append(p.Ops, op); return p }

// emit appends an op that emits scalars and returns the slot of its first.
func (p *Program) emit(op Op) Scalar {
	s := p.slot()
	p.add(op)
	return s
}

func (s Scalar) next() Scalar { return Scalar{i: s.i + 1} }

// Alloc appends an Alloc op of id with member m's layout.
func (p *Program) Alloc(id Vec, m int) *Program { return p.add(Alloc{ID: id, Member: int32(m)}) }

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
func (p *Program) Fill(dst Vec, v float64) *Program { return p.add(Fill{Dst: dst, Value: v}) }

// FillRange appends dst[offset : offset+n] = v.
func (p *Program) FillRange(dst Vec, offset, n int64, v float64) *Program {
	return p.add(FillRange{Dst: dst, Offset: offset, Len: n, Value: v})
}

// Scale appends dst *= a.
func (p *Program) Scale(dst Vec, a float64) *Program { return p.add(Scale{Dst: dst, Alpha: a}) }

// AddConst appends dst += v.
func (p *Program) AddConst(dst Vec, v float64) *Program { return p.add(AddConst{Dst: dst, Value: v}) }

// Axpy appends dst += a·x.
func (p *Program) Axpy(dst Vec, a float64, x Vec) *Program {
	return p.add(Axpy{Dst: dst, Alpha: a, X: x})
}

// LinComb appends dst = Σ terms.
func (p *Program) LinComb(dst Vec, terms ...Term) *Program {
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

// Dot appends a Dot op and returns the slot of a·b.
func (p *Program) Dot(a, b Vec) Scalar { return p.emit(Dot{A: a, B: b}) }

// Norm appends a Norm op and returns the slot of ‖x‖.
func (p *Program) Norm(x Vec) Scalar { return p.emit(Norm{X: x}) }

// Grad appends a Grad op and returns the slots of its loss and accuracy.
func (p *Program) Grad(out, at Vec, b Batch, bn BNMode) Eval {
	return p.GradOp(Grad{Out: out, At: at, Batch: b, BN: bn})
}

// GradOp appends g (a Grad op with any of its fields set, e.g. a
// variational pass's Eps and OutRho) and returns its slots.
func (p *Program) GradOp(g Grad) Eval {
	s := p.emit(g)
	return Eval{Loss: s, Acc: s.next()}
}

// JointGrad appends a JointGrad op and returns the slots of its loss and
// accuracy.
func (p *Program) JointGrad(outs, ats []Vec, b Batch, bn BNMode) Eval {
	s := p.emit(JointGrad{Outs: outs, Ats: ats, Batch: b, BN: bn})
	return Eval{Loss: s, Acc: s.next()}
}

// BaseStep appends a base-optimizer step of params with gradient g.
func (p *Program) BaseStep(params, g Vec) *Program { return p.add(BaseStep{Params: params, Grad: g}) }

// SetLR appends a learning-rate override for member m.
func (p *Program) SetLR(m int, lr float64) *Program { return p.add(SetLR{Member: int32(m), LR: lr}) }

// Result holds the scalars a program emitted, in op order. Read them with
// Get and the slots the builder returned.
type Result struct {
	Scalars []float64
}

// Get returns the scalar in slot s, or NaN when the result has none there
// (the zero Scalar, or a slot of another, longer program).
func (r Result) Get(s Scalar) float64 {
	i := int(s.i) - 1
	if i < 0 || i >= len(r.Scalars) {
		return nan()
	}
	return r.Scalars[i]
}

// Mean returns the mean loss and accuracy over the gradient passes evs
// (e.g. one per member): the step's training metrics of most optimizers.
// With no passes both are NaN.
func (r Result) Mean(evs []Eval) (loss, acc float64) {
	if len(evs) == 0 {
		return nan(), nan()
	}
	n := float64(len(evs))
	for _, ev := range evs {
		loss += r.Get(ev.Loss) / n
		acc += r.Get(ev.Acc) / n
	}
	return loss, acc
}

// Metrics returns the StepOutput of a step with training loss and
// accuracy, the metrics the host's curves and tables expect.
func Metrics(loss, acc float64) StepOutput {
	return StepOutput{Metrics: map[string]float64{"loss": loss, "acc": acc}}
}
