package optim

import (
	"fmt"
	"reflect"
	"slices"
)

// OpSpec describes one op of the protocol: the single source from which the
// listing (Program.String), both wire directions (sdk/internal/wire, by the
// field names), the Python SDK's ops (sdk/python/optlab/ops.json, which
// sdk/opset writes from this table and a test checks against it) and the
// argument checker that every host runs (sdk/opset's Checker) take the op
// set. Adding an op is: its Go type and
// builder method, a row here, its message in the .proto, the engine's and
// the exact host's kernels, and its conformance cases.
type OpSpec struct {
	// Name is the op's Go type name, which listings and errors print.
	Name string
	// Wire is the op's field in the protocol's Op oneof.
	Wire string
	// Since is the protocol minor that added the op.
	Since int
	// Regs names the registers the op sets, in order (none for most ops).
	Regs []string
	// Segs says the op sets a segment register (SegReduce), and Arith that
	// its register is a segment register when an operand is one.
	Segs, Arith bool
	// Format is the listing's template: {Field} prints a field ({Field:out}
	// prints a handle 0 as "_"), a [group] prints only when every field it
	// names is not zero ({Field?} names one without printing it), and [[
	// and ]] print [ and ].
	Format string
	// Type is the op's Go type (a struct).
	Type reflect.Type
	// Doc is a one-line description of what the op does.
	Doc string
}

func spec[T Op](name, wire string, since int, format string, regs ...string) OpSpec {
	return OpSpec{Name: name, Wire: wire, Since: since, Format: format, Regs: regs, Type: reflect.TypeFor[T](), Doc: opDocs[name]}
}

// opDocs is each op's one-line description (docs/PLUGINS.md's op table).
var opDocs = map[string]string{
	"Alloc":        "new zero vector with member m's layout under a plugin-chosen handle; with a shape, a factor vector: one square matrix per block of each matrix tensor, left (rows×rows) or right (cols×cols) (minor 8)",
	"Free":         "release an allocated handle",
	"Copy":         "dst = src; with BN the BatchNorm running statistics travel too: a snapshot of a whole model state (`CopyState`, minor 3)",
	"Fill":         "dst = v everywhere (per segment for a segment register)",
	"Scale":        "dst = a·dst",
	"AddConst":     "dst = dst + v",
	"Axpy":         "dst = dst + a·x",
	"LinComb":      "dst = Σ cᵢ·xᵢ (dst may be a term)",
	"Unary":        "dst = f(src): abs sign sqrt square softplus exp log reciprocal",
	"Binary":       "dst = a ∘ b: mul div add sub max min",
	"RandN":        "dst ~ N(0, std²) i.i.d. (seed 0: the run's host stream)",
	"Dot":          "Σ aᵢbᵢ, accumulated in float64",
	"Norm":         "‖x‖₂ over all parameters, accumulated in float64",
	"Grad":         "out = ∇L(at) on a part of the batch (out 0: none); variational members: weights μ + softplus(ρ)⊙κ, `OutRho` = ∂L/∂ρ (`GradOp`, minor 1); per-sample losses into a sample vector (`OutLosses`), the pass on the `Keep` samples of largest `Rank` only (minor 10)",
	"BaseStep":     "the experiment's base optimizer step of member m with gradient g",
	"SetLR":        "base-step learning rate of member m for the rest of the step",
	"JointGrad":    "one loss on the averaged probabilities of several members; outs[i] = ∂L/∂ats[i]",
	"FillRange":    "dst[offset : offset+n] = v",
	"Arith":        "float64 register arithmetic: add sub mul div min max sqrt recip clamp; a segment register operand makes it per segment",
	"SegReduce":    "per tensor, per row or per column (minor 8) of the layout: Σx², Σx·y, Σ|x|, max|x| into a segment register",
	"TopKMask":     "dst = 1 on the ⌊frac·size+½⌋ largest |x| of every segment, else 0",
	"Read":         "the register's value comes back in the Result (a blocking read: for control flow only)",
	"Report":       "the register becomes the step's metric name in the host's logs, without a blocking read",
	"NewtonSchulz": "dst = src with every tensor of 2+ dims, viewed as a matrix [d0, rest], orthogonalised: X = G/(‖G‖_F+eps), then steps times X ← a·X + (b·A + c·A²)·X with A = X·Xᵀ (Keller Jordan's quintic Newton–Schulz, Muon); other tensors copied",
	"Gram":         "factor dst = β·dst + α·G·Gᵀ (left) or α·Gᵀ·G (right) for every block G of src (Shampoo's statistics)",
	"MatMul":       "dst = op(left)·X·op(right) for every block X of src, op a transpose or not, a factor 0 the identity (preconditioning, rotation into an eigenbasis)",
	"MatFunc":      "dst = f(src) for every matrix of a factor vector, in float64: inverse p-th root (A+εI)^(−1/p), its pseudo-inverse variant, eigenvectors, eigenvalues, QR's Q",
	"SortColumns":  "reorder the columns of every matrix of a factor vector by the descending diagonal of another's (SOAP's sorted eigenbasis), a parameter vector's blocks permuted along: rows for a left factor, columns for a right one (minor 12)",
	"If":           "run the next n ops only when the scalar register x > 0; skipped ops change nothing and set their registers to NaN (no round trip to the plugin)",
	"BaseState":    "dst = the base optimizer's state vector name of the live parameters of (momentum_buffer; exp_avg, exp_avg_sq), zeros before its first step; refused when the base optimizer keeps none (minor 10)",
	"UpdateBN":     "recompute x's BatchNorm running statistics exactly over the training set (update_bn): reset, then a cumulative average over every batch in train mode, no gradient",
}

// opTable is the op table, built once; it is never modified (OpSet hands
// out copies).
var opTable = buildOpSet()

// opByType indexes opTable by Go type.
var opByType = func() map[reflect.Type]int {
	m := map[reflect.Type]int{}
	for i, s := range opTable {
		m[s.Type] = i
	}
	return m
}()

// OpSet returns the op table, in the order of the protocol's Op oneof.
func OpSet() []OpSpec { return slices.Clone(opTable) }

func buildOpSet() []OpSpec {
	arith := spec[Arith]("Arith", "arith", 5, "{Kind}({A}[, {B}][, {C}])", "value")
	arith.Arith = true
	seg := spec[SegReduce]("SegReduce", "seg_reduce", 5, "{Kind} per {By} of {X}[, {Y}]", "value")
	seg.Segs = true
	return []OpSpec{
		spec[Alloc]("Alloc", "alloc", 0, "{ID} member={Member}[ shape={Shape}][ block={Block}]"),
		spec[Free]("Free", "free", 0, "{ID}"),
		spec[Copy]("Copy", "copy", 0, "{Dst} = {Src}[{BN?} (with BatchNorm statistics)]"),
		spec[Fill]("Fill", "fill", 0, "{Dst} = {Value}"),
		spec[Scale]("Scale", "scale", 0, "{Dst} *= {Alpha}"),
		spec[AddConst]("AddConst", "add_const", 0, "{Dst} += {Value}"),
		spec[Axpy]("Axpy", "axpy", 0, "{Dst} += {Alpha}·{X}"),
		spec[LinComb]("LinComb", "lin_comb", 0, "{Dst} = {Terms}"),
		spec[Unary]("Unary", "unary", 0, "{Dst} = {Kind}({Src})"),
		spec[Binary]("Binary", "binary", 0, "{Dst} = {Kind}({A}, {B})"),
		spec[RandN]("RandN", "rand_n", 0, "{Dst} ~ N(0, {Std}²) seed={Seed}"),
		spec[Dot]("Dot", "dot", 0, "{A} · {B}", "value"),
		spec[Norm]("Norm", "norm", 0, "{X}", "value"),
		spec[Grad]("Grad", "grad", 0, "{Out:out} = ∇L({At}) batch={Batch} bn={BN}[ eps={Eps}][ rho-grad={OutRho}][ losses={OutLosses}][ top {Keep} by {Rank}]", "loss", "acc"),
		spec[BaseStep]("BaseStep", "base_step", 0, "{Params} with gradient {Grad}"),
		spec[SetLR]("SetLR", "set_lr", 0, "member={Member} lr={LR}"),
		spec[JointGrad]("JointGrad", "joint_grad", 2, "{Outs:out} = ∇L({Ats}) batch={Batch} bn={BN}", "loss", "acc"),
		spec[FillRange]("FillRange", "fill_range", 4, "{Dst}[[{Offset}:+{Len}]] = {Value}"),
		arith,
		seg,
		spec[TopKMask]("TopKMask", "top_k_mask", 5, "{Dst} = top {Frac} of |{X}| per {By}"),
		spec[Read]("Read", "read", 5, "{X}"),
		spec[Report]("Report", "report", 5, "{Name} = {X}"),
		spec[UpdateBN]("UpdateBN", "update_bn", 6, "BatchNorm statistics of {X} over the training set"),
		spec[NewtonSchulz]("NewtonSchulz", "newton_schulz", 7, "{Dst} = newton-schulz({Src}) steps={Steps} a={A} b={B} c={C} eps={Eps}"),
		spec[Gram]("Gram", "gram", 8, "{Dst} = {Beta}·{Dst} + {Alpha}·gram({Src})"),
		spec[MatMul]("MatMul", "mat_mul", 8, "{Dst} = {Left:out}·{Src}·{Right:out}[ {TransLeft?}left transposed][ {TransRight?}right transposed]"),
		spec[MatFunc]("MatFunc", "mat_func", 8, "{Dst} = {Kind}({Src})[ root={Root}][ eps={Eps}]"),
		spec[If]("If", "if_block", 9, "{X} > 0: run the next {Len} ops"),
		spec[BaseState]("BaseState", "base_state", 10, "{Dst} = base {Name} of {Of}"),
		spec[SortColumns]("SortColumns", "sort_columns", 12, "{Dst} columns by descending diag({Key})[, {Carry} permuted along]"),
	}
}

// specOf returns the table row of op's type (a value or a pointer), and
// whether it has one.
func specOf(op Op) (OpSpec, bool) {
	if op == nil {
		return OpSpec{}, false
	}
	t := reflect.TypeOf(op)
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	i, ok := opByType[t]
	if !ok {
		return OpSpec{}, false
	}
	return opTable[i], true
}

// emits returns the number of registers op sets: 1 for Dot, Norm, Arith
// and SegReduce, 2 for Grad and JointGrad, else 0 (what the table's Regs
// say, which a test of sdk/opset checks).
func emits(op Op) int {
	switch op.(type) {
	case Dot, *Dot, Norm, *Norm, Arith, *Arith, SegReduce, *SegReduce:
		return 1
	case Grad, *Grad, JointGrad, *JointGrad:
		return 2
	}
	return 0
}

var arithNames = [...]string{ArithAdd: "add", ArithSub: "sub", ArithMul: "mul", ArithDiv: "div",
	ArithMin: "min", ArithMax: "max", ArithSqrt: "sqrt", ArithRecip: "recip", ArithClamp: "clamp"}

func (k ArithKind) String() string {
	if k > 0 && int(k) < len(arithNames) {
		return arithNames[k]
	}
	return fmt.Sprintf("ArithKind(%d)", int32(k))
}

var segKindNames = [...]string{SegSumSq: "sumsq", SegDot: "dot", SegSumAbs: "sumabs", SegMaxAbs: "maxabs"}

func (k SegKind) String() string {
	if k > 0 && int(k) < len(segKindNames) {
		return segKindNames[k]
	}
	return fmt.Sprintf("SegKind(%d)", int32(k))
}

func (s Segmentation) String() string {
	switch s {
	case PerTensor:
		return "tensor"
	case PerRow:
		return "row"
	case PerColumn:
		return "column"
	}
	return fmt.Sprintf("Segmentation(%d)", int32(s))
}
