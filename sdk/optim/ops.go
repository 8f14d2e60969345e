package optim

import (
	"fmt"
	"math"
)

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
//
// With Shape ≠ ParamShape the vector is a factor vector of member Member
// instead (VecShape): one square matrix per block of side at most Block
// (0: whole rows and columns) of each of the member's matrix tensors, zero
// filled; MemberLayout.Factors is its layout. A Shape the host does not
// know, a Block outside [0, MaxBlock], a Block with ParamShape, a member
// without matrix tensors or a factor side above MaxBlock is refused
// (MemberLayout.CheckFactors), and so is a vector the host has no memory
// for. Shape and Block are protocol minor 8.
type Alloc struct {
	ID     Vec
	Member int32
	Shape  VecShape
	Block  int64
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

// Fill sets every element of Dst to Value (an immediate, a scalar
// register, or a segment register: each segment of Dst gets its own value).
type Fill struct {
	Dst   Vec
	Value Num
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

// Scale sets Dst = Alpha·Dst. Alpha is an immediate or a register; a
// segment register scales each segment of Dst by its own value.
type Scale struct {
	Dst   Vec
	Alpha Num
}

// AddConst sets Dst = Dst + Value elementwise (an immediate or a register;
// per segment for a segment register).
type AddConst struct {
	Dst   Vec
	Value Num
}

// Axpy sets Dst = Dst + Alpha·X (Alpha an immediate or a register; per
// segment for a segment register).
type Axpy struct {
	Dst   Vec
	Alpha Num
	X     Vec
}

// Term is one coefficient·vector pair of a LinComb; Coef is an immediate or
// a register.
type Term struct {
	Coef Num
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

// Dot sets a scalar register to Σ A_i·B_i, accumulated in float64 (the
// engine casts the float32 vectors to float64 a bounded chunk at a time,
// never a whole vector).
type Dot struct{ A, B Vec }

// Norm sets a scalar register to the global L2 norm of X over all
// parameters, accumulated as Dot.
type Norm struct{ X Vec }

// Grad evaluates the loss of the member that owns At, with the parameters
// taken from At, on the selected part of the current batch, and writes the
// gradient into Out (Out = 0 writes none: the live parameters are never a
// gradient target, and a reserved Out < 0 is an error). It sets two scalar
// registers: the mean loss and the accuracy of that pass (NaN for a loss
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
//
// Per-sample losses and a data-dependent subset of the batch (protocol
// minor 10, for ESAM's sharpness-sensitive data selection) use sample
// vectors (Alloc with Shape SampleShape: Layout.BatchSize elements, one
// per sample of a batch, in loader order). OutLosses (≠ 0, a sample vector
// of At's member) receives the loss of every sample of the pass, without
// label smoothing's mean: element i is the loss of the batch's sample i (the
// mean of them is the pass's loss register, up to rounding). Out = 0 with
// OutLosses ≠ 0 is a forward-only pass: no backward, and not counted as a
// gradient evaluation. Rank (≠ 0, a sample vector of At's member) restricts
// the pass to the Keep samples of the batch whose Rank is largest (ties to
// the lower index), taken in batch order: the forward pass, its BatchNorm
// batch statistics, the loss (the mean over the Keep samples), the accuracy
// and the gradient are those of that sub-batch alone, as a model called on
// inputs[idx] is in PyTorch; the selection costs no read-back (Keep is fixed,
// the indices stay on the device). Keep is in [1, BatchSize] with Rank, and
// 0 without. OutLosses and Rank take the whole batch (Batch zero), a
// deterministic member, and a batch of Layout.BatchSize samples (the loader
// drops a last incomplete one); with Rank, OutLosses gets the selected
// samples' losses at their batch positions and 0 elsewhere.
type Grad struct {
	Out       Vec
	At        Vec
	Batch     Batch
	BN        BNMode
	Eps       Vec
	OutRho    Vec
	OutLosses Vec
	Rank      Vec
	Keep      int64
}

// BaseStep applies the experiment's base optimizer (SGD with momentum,
// Nesterov and weight decay, or Adam) with its learning-rate schedule to the
// live parameters Params (a reserved handle), using Grad as the gradient.
// The base optimizer's state belongs to the member.
type BaseStep struct {
	Params Vec
	Grad   Vec
}

// BaseState copies a vector of the base optimizer's state into Dst: the
// state that BaseStep keeps for the live parameters Of (ParamsOf(m), or a
// variational member's RhoOf(m)), named as PyTorch names it:
// "momentum_buffer" (SGD with momentum ≠ 0), "exp_avg" and "exp_avg_sq"
// (Adam's first and second moments). Before the first BaseStep of Of the
// state reads as zeros (PyTorch creates it lazily on the first step, with
// the value a zero-initialised buffer would then get). Dst is an allocated
// parameter-shaped vector of Of's layout. It is refused, with a message
// that says what the base optimizer keeps, when the base optimizer has no
// such state (SGD with momentum 0 keeps none; SGD has no exp_avg; Adam no
// momentum_buffer) and when the optimizer owns its update (there is no base
// optimizer). A plugin reads the base optimizer's state with it, as
// Momentum-SAM perturbs along the SGD momentum. Protocol minor 10.
type BaseState struct {
	Dst, Of Vec
	Name    string
}

func (BaseState) isOp() {}

// Base optimizer state names of BaseState.
const (
	MomentumBuffer = "momentum_buffer"
	ExpAvg         = "exp_avg"
	ExpAvgSq       = "exp_avg_sq"
)

// JointGrad evaluates several members together on the current batch
// (member 0's batch, which they must share; Batch selects a part as in
// Grad): the member owning Ats[i] runs at the parameters in Ats[i], the
// predictive is the average p̄ of their softmax probabilities, and the loss is
// the cross-entropy of log p̄ with the run's label smoothing — one loss on the
// averaged probabilities, as the OT-MDR reference code trains ensembles.
// Outs is empty (no gradients) or has one entry per Ats: Outs[i] (0 = none,
// else an allocated vector that no other entry names) receives the gradient
// with respect to Ats[i]. Ats needs at least one entry, each of a different
// deterministic member. It sets two scalar registers: the loss and the
// accuracy of p̄. Protocol minor 2.
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

func (JointGrad) isOp()    {}
func (UpdateBN) isOp()     {}
func (Alloc) isOp()        {}
func (Free) isOp()         {}
func (Copy) isOp()         {}
func (Fill) isOp()         {}
func (FillRange) isOp()    {}
func (Scale) isOp()        {}
func (AddConst) isOp()     {}
func (Axpy) isOp()         {}
func (LinComb) isOp()      {}
func (Unary) isOp()        {}
func (Binary) isOp()       {}
func (RandN) isOp()        {}
func (Dot) isOp()          {}
func (Norm) isOp()         {}
func (Grad) isOp()         {}
func (BaseStep) isOp()     {}
func (SetLR) isOp()        {}
func (Arith) isOp()        {}
func (SegReduce) isOp()    {}
func (TopKMask) isOp()     {}
func (Read) isOp()         {}
func (Report) isOp()       {}
func (NewtonSchulz) isOp() {}

// ArithKind selects the function of an Arith op.
type ArithKind int32

// Functions of the Arith op: binary (A, B), unary (A) and Clamp (A
// clamped to [B, C]).
const (
	ArithAdd ArithKind = iota + 1
	ArithSub
	ArithMul
	ArithDiv
	ArithMin
	ArithMax
	ArithSqrt
	ArithRecip
	ArithClamp
)

// Arity returns the number of operands of k (0 for an unknown kind).
func (k ArithKind) Arity() int {
	switch k {
	case ArithAdd, ArithSub, ArithMul, ArithDiv, ArithMin, ArithMax:
		return 2
	case ArithSqrt, ArithRecip:
		return 1
	case ArithClamp:
		return 3
	}
	return 0
}

// Apply returns k(a, b, c) in float64: the function every host computes
// for an Arith op (unused operands are ignored). Min and Max are Go's
// math.Min and math.Max (NaN wins; −0 < +0), Clamp is Min(Max(a, b), c).
// An unknown kind gives NaN.
func (k ArithKind) Apply(a, b, c float64) float64 {
	switch k {
	case ArithAdd:
		return a + b
	case ArithSub:
		return a - b
	case ArithMul:
		return a * b
	case ArithDiv:
		return a / b
	case ArithMin:
		return math.Min(a, b)
	case ArithMax:
		return math.Max(a, b)
	case ArithSqrt:
		return math.Sqrt(a)
	case ArithRecip:
		return 1 / a
	case ArithClamp:
		return math.Min(math.Max(a, b), c)
	}
	return math.NaN()
}

// Arith sets a register to Kind(A, B, C) in float64 on the device: scalar
// arithmetic on registers, which lets a program compute data-dependent
// coefficients (ρ/‖g‖) without a round trip. The result is a segment
// register when an operand is one (operands of two segment registers must
// have the same segmentation), else a scalar register; immediates
// broadcast. Unused operands must be nil. Protocol minor 5.
type Arith struct {
	Kind    ArithKind
	A, B, C Num
}

// Segmentation says how a member's flat parameter vector is cut into
// segments for the segment ops.
type Segmentation int32

// Segmentations. PerTensor has one segment per parameter tensor (Layout's
// Tensors, in order); PerRow one per output channel: a tensor of shape
// [d0, d1, …] is d0 segments of d1·… elements (a 1-D tensor d0 segments of
// one element, a 0-D tensor one segment).
//
// PerColumn (protocol minor 8) has one segment per column of each tensor's
// 2-D view [d0, d1·d2·…]: d1·… segments of d0 elements, element (i, j) of
// the view in segment j (a 1-D or 0-D tensor is one segment). Its segments
// interleave in the flat vector; MemberLayout.SegmentOf gives each
// element's segment.
const (
	PerTensor Segmentation = iota + 1
	PerRow
	PerColumn
)

// SegKind selects the reduction of a SegReduce op.
type SegKind int32

// Reductions of SegReduce, per segment: Σx², Σx·y, Σ|x|, max|x|.
const (
	SegSumSq SegKind = iota + 1
	SegDot
	SegSumAbs
	SegMaxAbs
)

// SegReduce sets a segment register to one reduction per segment of X (and
// Y, for SegDot; 0 otherwise) under segmentation By of X's member layout:
// a constant number of device kernels however many tensors the model has.
// Sums accumulate in float32 per element and are stored as float64.
// Protocol minor 5.
type SegReduce struct {
	Kind SegKind
	By   Segmentation
	X, Y Vec
}

// TopKMask sets Dst to 1 where |X| is among the k largest of its segment
// (By) and 0 elsewhere, with k = ⌊Frac·size + ½⌋ clamped to [0, size] per
// segment; ties go to the lower index. Frac is an immediate, a scalar
// register or a segment register of the same segmentation (one fraction
// per segment). For pruning and regrowth in sparse training. Protocol
// minor 5.
type TopKMask struct {
	Dst, X Vec
	By     Segmentation
	Frac   Num
}

// Read asks for register X's value in the program's Result: a blocking
// device-to-host read at the end of the Exec, for real control flow. A
// program with no Read returns without waiting on the device. Protocol
// minor 5.
//
// X must be a scalar register. A segment register (SegReduce, SegNorm,
// Arith with a segment operand) holds one value per segment, which
// Result.Get has no place for: Read refuses it, as Report does, and the
// Exec fails before it runs ("register #n holds one value per segment;
// this op takes a scalar"). To read a segment register's values, make a
// scalar register of each on the device, in the same program: Fill an
// allocated vector v of the member's layout with the segment register
// (every element of segment k holds its value, as a float32); then, for
// each segment k, with a second allocated vector e, Fill e with 0,
// FillRange 1 at the first element of segment k (the segments tile the
// vector in order: MemberLayout.Segments gives their sizes) and Dot(v, e)
// is segment k's value, as Fill stored it. Read every such register: they
// come back together at the end of the one Exec. (A per-tensor quantity
// can be made a scalar register directly too: Dot or Norm of the tensor's
// slice, masked with FillRange and Binary.) To compare a run's
// parameters with another implementation's step by step, no program is
// needed: the host writes them after every N-th step with
// [train] dump_params_every (docs/EXPERIMENTS.md).
type Read struct{ X Reg }

// UpdateBN recomputes the BatchNorm running statistics of the model that
// vector X parameterizes, exactly, over the whole training set, as
// torch.optim.swa_utils.update_bn does: the statistics are reset (mean 0,
// variance 1), then every training batch, in order and without
// augmentation, is passed forward in train mode with no gradient, and each
// BatchNorm's running mean and variance become the cumulative average of
// the batch means and of the (unbiased) batch variances, each batch
// weighing the same (PyTorch's momentum = None). X is a member's live
// parameters (their running statistics are replaced) or an allocated
// vector, which then holds statistics of its own, as after a Copy with BN
// (a snapshot): the host evaluates it with them, and a later Copy with BN
// from it carries them. For a model without BatchNorm it does nothing. It
// costs one forward pass over the training set: send it from an
// optimizer's Finalize (Features.Finalize), not every step. X must not be a
// ρ handle. Protocol minor 6.
type UpdateBN struct{ X Vec }

// Report hands register X to the host's metrics under Name, without a
// blocking read: the host averages each reported scalar over the steps of
// an epoch (the training curve's "loss" and "acc", OT-MDR's
// "loss_perturbed", …), writes it to TensorBoard and checks "loss" for
// finiteness, all from values it copies back in the background, at most one
// step late. A name may be reported once per step. Protocol minor 5.
type Report struct {
	Name string
	X    Reg
}

// Keller Jordan's coefficients of the quintic Newton–Schulz iteration
// (zeropower_via_newtonschulz5 in github.com/KellerJordan/Muon, muon.py),
// his default step count and the ε of its normalisation: what
// Program.NewtonSchulz sends.
const (
	NS5A     = 3.4445
	NS5B     = -4.7750
	NS5C     = 2.0315
	NS5Steps = 5
	NS5Eps   = 1e-7
)

// NewtonSchulz orthogonalises every matrix-shaped tensor of Src and
// writes the result into Dst: for each tensor of the member's layout with
// two or more dims, viewed as the matrix G of shape [d0, d1·d2·…] (a conv
// weight [out, in, kh, kw] as [out, in·kh·kw]), the quintic Newton–Schulz
// iteration of Keller Jordan's zeropower_via_newtonschulz5:
//
//	X = G / (‖G‖_F + Eps), transposed when d0 > d1·d2·… (so that X has no more rows than columns)
//	Steps times: M = X·Xᵀ; X = A·X + (B·M + C·M·M)·X
//	transposed back
//
// with A, B, C the coefficients (NS5A, NS5B, NS5C with NS5Steps steps and
// NS5Eps are his). The iteration maps every singular value s of X to
// A·s + B·s³ + C·s⁵ and keeps the singular vectors: with his coefficients
// and 5 steps it takes G = U·S·Vᵀ to U·S'·Vᵀ with S' in [0.68, 1.14] for
// the singular values of G/‖G‖_F above 0.01 (in [0.47, 1.21] above
// 0.001), not exactly U·Vᵀ (the cubic coefficients 1.5, −0.5, 0 converge
// to U·Vᵀ, slowly). Tensors of fewer than two dims (biases, BatchNorm weights, a
// layout's 1-D tensors) are copied from Src to Dst unchanged, so a plugin
// masks them itself when it wants something else there. Dst and Src have
// one member's tensor shapes (they may be the same vector). Steps is in
// [1, 100], the coefficients are finite and Eps is finite and ≥ 0.
//
// Keller Jordan runs the iteration in bfloat16 on the GPU; hosts run it in
// the vector's own type (float32 on the engine, float64 in optimtest's
// exact host), a matrix at a time or batched over tensors of one shape.
// Muon orthogonalises its momentum with it. Protocol minor 7.
type NewtonSchulz struct {
	Dst, Src Vec
	Steps    int32
	A, B, C  float64
	Eps      float64
}

// Gram accumulates the Gram matrices of Src's blocks into the factor
// vector Dst: for every tile G of Src cut by Dst's blocks (Tiles; a factor
// vector's tiles are its whole matrices),
//
//	Dst_tile = Beta·Dst_tile + Alpha·G·Gᵀ   (Dst a LeftFactor vector)
//	Dst_tile = Beta·Dst_tile + Alpha·Gᵀ·G   (Dst a RightFactor vector)
//
// Shampoo's L ← β₂·L + (1−β₂)·G·Gᵀ and R ← β₂·R + (1−β₂)·Gᵀ·G. Dst must have
// a factor shape whose matrices match Src's tiles (one per tile, of its rows
// or columns): a mismatch is one error naming the tile's tensor. Beta and
// Alpha are finite. The product is computed in the vectors' type.
// Protocol minor 8.
type Gram struct {
	Dst, Src    Vec
	Beta, Alpha float64
}

// MatMul multiplies every tile X of Src by factor matrices on either side
// and writes the product into Dst:
//
//	Dst_tile = op(Left_tile) · X · op(Right_tile)
//
// where op transposes when TransLeft (TransRight) is set and a Left or Right
// of 0 is the identity (at least one is set: a factor vector is never a
// member's live parameters, so 0 is free to mean none, as Grad's Out). Src and Dst have one layout:
// a parameter vector, whose tiles are its matrices cut by the factors'
// blocks (its other elements are copied from Src), or a factor vector,
// whose tiles are its matrices. Left's matrices are the tiles' rows×rows,
// Right's cols×cols: Shampoo's preconditioned gradient L^(−1/4)·G·R^(−1/4),
// SOAP's rotation into an eigenbasis Qₗᵀ·G·Qᵣ and back, a power iteration's
// L·Q. Dst must not be Left or Right. Protocol minor 8.
type MatMul struct {
	Dst, Src, Left, Right Vec
	TransLeft, TransRight bool
}

// MatFuncKind selects the function of a MatFunc op.
type MatFuncKind int32

// Functions of MatFunc, of each square matrix A of a factor vector:
//
//	InvRoot:  (A + Eps·I)^(−1/Root) of the symmetric part of A, as V·diag((max(λ, 0) + Eps)^(−1/Root))·Vᵀ from its eigendecomposition; Eps > 0
//	PinvRoot: the pseudo-inverse root V·diag(λ^(−1/Root) where λ > Eps·λ_max, else 0)·Vᵀ; Eps ≥ 0 is relative to the largest eigenvalue
//	EigVecs:  V, the eigenvectors of the symmetric part as columns, by descending eigenvalue, each column's largest-magnitude entry positive
//	EigVals:  diag(λ), the eigenvalues by descending value on the diagonal, 0 elsewhere
//	QR:       Q of A = Q·R with R's diagonal ≥ 0 (columns of Q flipped where it is not)
const (
	InvRoot MatFuncKind = iota + 1
	PinvRoot
	EigVecs
	EigVals
	QR
)

var matFuncNames = [...]string{InvRoot: "inv_root", PinvRoot: "pinv_root", EigVecs: "eigvecs", EigVals: "eigvals", QR: "qr"}

func (k MatFuncKind) String() string {
	if k > 0 && int(k) < len(matFuncNames) {
		return matFuncNames[k]
	}
	return fmt.Sprintf("MatFuncKind(%d)", int32(k))
}

// MatFunc sets every matrix of the factor vector Dst to a function of the
// same matrix of Src (one factor layout; Dst may be Src): an inverse p-th
// root (Root = p > 0), its pseudo-inverse variant, an eigendecomposition's
// vectors or values, or a QR decomposition's Q (MatFuncKind). Hosts compute
// it in float64 (the engine batches the matrices of one size through
// torch.linalg.eigh or qr) and store it in the vector's type; the
// eigenvectors of repeated eigenvalues are not unique, and two hosts may
// then differ. Root is ignored by EigVecs, EigVals and QR, Eps by EigVecs,
// EigVals and QR. Protocol minor 8.
type MatFunc struct {
	Dst, Src Vec
	Kind     MatFuncKind
	Root     float64
	Eps      float64
}

func (Gram) isOp()    {}
func (MatMul) isOp()  {}
func (MatFunc) isOp() {}

// SortColumns reorders the columns of every matrix Q of the factor vector
// Dst by the diagonal of the matrix K of the same index of Key (a factor
// vector of Dst's layout): Q's column j becomes its column π(j), where π
// orders K's diagonal descending (K[π(0)][π(0)] ≥ K[π(1)][π(1)] ≥ …; equal
// values keep their order, NaN counts as the largest). With Carry ≠ 0, a
// parameter vector of Dst's member, each tile of Carry cut by Dst's blocks
// is permuted by the same π along Dst's side: its rows for a LeftFactor
// vector, its columns for a RightFactor one (Carry's other elements are
// left alone). SOAP's basis refresh: the eigenvalue estimates diag(Qᵀ·L·Q)
// sort the basis Q, and Adam's second moment, kept in that basis, follows
// it, a permutation that depends on the data and so needs no read back to
// the plugin. Protocol minor 12.
type SortColumns struct {
	Dst, Key, Carry Vec
}

func (SortColumns) isOp() {}

// If runs the Len ops that follow it only when the scalar register X holds
// a value > 0 (NaN is not), and skips them otherwise: a data-dependent
// choice (run SAM's second pass or not, refresh a preconditioner or not)
// inside the one Exec of a step, with no round trip to the plugin. A
// skipped op changes nothing and reports nothing; the registers it would
// set hold NaN (a segment register NaN in every segment), so the register
// numbering of the program is the same either way. Blocks nest: an If
// inside a block belongs to it, and its own block ends within the outer
// one. Len ≥ 1, the block lies within the program, and it holds no Alloc
// or Free (which vectors exist must not depend on the device). The host
// reads the condition's value when it reaches the If (on a GPU, one scalar
// copied to the host and waited for; no Exec ends). Program.If builds one
// from a function that appends the block. Protocol minor 9.
type If struct {
	X   Reg
	Len int32
}

func (If) isOp() {}
