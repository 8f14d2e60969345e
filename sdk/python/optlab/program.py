"""Programs of ops, the handles and registers they name and the results
they return.

This mirrors sdk/optim's program.go, regs.go, handles.go and listing.go, and
takes the op set from the Go op table (optlab/ops.json, written by
sdk/opset from optim.OpSet: never edit it by hand): the same ops with the
same names and fields (the protocol's snake-case names), the same listing
(byte for byte), and a builder whose value-computing ops return registers
that later ops use on the device, that a Read op brings back in the Result
(a blocking read) and a Report op hands to the host's metrics (no
blocking read). Nothing here needs gRPC.

    hs = config.namespace("sam")
    g = hs.new("g")
    p = hs.prog().alloc(g, 0)
    ev = p.grad(g, PARAMS)
    c = p.div(0.05, p.add(p.norm(g), 1e-12))   # ρ/(‖g‖+ε), on the device
    p.axpy(PARAMS, c, g)
    p.report("loss", ev.loss)
    host.exec(p)
"""

from __future__ import annotations

import enum
import json
import math
import os
from dataclasses import dataclass, field, make_dataclass
from typing import Any, Callable, Dict, List, NamedTuple, Optional, Sequence, Tuple, Union

# The op table (sdk/opset OpSetJSON): the protocol minor, every op with its
# wire name, registers, listing format and fields, and the enumerations.
with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "ops.json"), encoding="utf-8") as _f:
    OPSET: Dict[str, Any] = json.load(_f)

# Vector handles are ints. Handles <= 0 are reserved by the host: params_of(m)
# names the live parameters of member m (PARAMS, 0, is member 0's), and
# rho_of(m) a variational member's ρ vector. Handles > 0 come from Handles.
Vec = int

PARAMS: Vec = 0
_RHO_BASE = -(1 << 24)


def params_of(m: int) -> Vec:
    """The handle of member m's live parameters."""
    return -m


def rho_of(m: int) -> Vec:
    """The handle of variational member m's ρ vector (protocol minor 1)."""
    return _RHO_BASE - m


def member_of(v: Vec) -> Optional[int]:
    """The member whose live parameters v names, or None."""
    if v > 0 or v <= _RHO_BASE:
        return None
    return -v


def rho_member_of(v: Vec) -> Optional[int]:
    """The member whose ρ vector v names, or None."""
    if v > _RHO_BASE:
        return None
    return _RHO_BASE - v


# Enumerations, from the table's (numbers as on the wire). The Python member
# names are the listing names in capitals, but for the ones spelled apart
# below (Go's SegSumSq is SUM_SQ, PerTensor PER_TENSOR); the module-level
# constants carry a prefix where names would clash (ARITH_ADD and Binary's
# ADD, SEG_DOT, BN_UPDATE), and VecShape's are Go's names (PARAM_SHAPE,
# LEFT_FACTOR, RIGHT_FACTOR: a bare PARAMS is the handle of member 0's
# parameters).
_ENUM_SPELLING = {"sumsq": "SUM_SQ", "sumabs": "SUM_ABS", "maxabs": "MAX_ABS", "tensor": "PER_TENSOR",
                  "row": "PER_ROW", "column": "PER_COLUMN"}
_ENUM_PREFIX = {"UnaryKind": "", "BinaryKind": "", "BNMode": "BN_", "ArithKind": "ARITH_", "SegKind": "SEG_",
                "Segmentation": "", "MatFuncKind": ""}
_ENUM_CONSTANT = {("VecShape", "PARAMS"): "PARAM_SHAPE", ("VecShape", "LEFT"): "LEFT_FACTOR",
                  ("VecShape", "RIGHT"): "RIGHT_FACTOR", ("VecShape", "SAMPLES"): "SAMPLE_SHAPE"}
_ENUM_DOC = {
    "UnaryKind": "Elementwise functions of the Unary op.",
    "BinaryKind": "Elementwise functions of two vectors for the Binary op.",
    "BNMode": "What a gradient pass does to BatchNorm running statistics.",
    "ArithKind": "Functions of the Arith op: binary (a, b), unary (a) and clamp (a to [b, c]).",
    "SegKind": "Reductions of SegReduce, per segment: Σx², Σx·y, Σ|x|, max|x|.",
    "Segmentation": "How a member's flat vector is cut into segments: per tensor, per output row, or per column "
                    "of each tensor's 2-D view [d0, rest] (PER_COLUMN, protocol minor 8; its segments interleave: "
                    "MemberLayout.segment_of).",
    "VecShape": "What an allocated vector holds (protocol minor 8): its member's parameter layout (PARAMS), or "
                "one square matrix per block of each matrix tensor, the left (rows×rows, LEFT) or right "
                "(cols×cols, RIGHT) factors of a Kronecker-factored preconditioner (MemberLayout.factors), or "
                "(protocol minor 10) a sample vector of Layout.batch_size elements, one per sample of a batch "
                "(SAMPLES: Grad's out_losses and rank).",
    "MatFuncKind": "Functions of the MatFunc op, of each matrix A of a factor vector (protocol minor 8): "
                   "INV_ROOT (A + eps·I)^(−1/root), PINV_ROOT its pseudo-inverse variant (eps relative to the "
                   "largest eigenvalue), EIGVECS the eigenvectors as columns by descending eigenvalue, EIGVALS "
                   "diag(λ) descending, QR the Q of A = Q·R with R's diagonal ≥ 0.",
}
# _ENUM_NAMES[type][number] is the name listings print.
_ENUM_NAMES: Dict[str, Dict[int, str]] = {}
ENUMS: Dict[str, type] = {}
_enum_constants: Dict[str, Any] = {}
for _name, _values in sorted(OPSET["enums"].items()):
    _members = sorted(((_ENUM_SPELLING.get(s, s.upper()), n) for s, n in _values.items()), key=lambda m: m[1])
    _cls = enum.IntEnum(_name, _members, module=__name__)
    _cls.__doc__ = _ENUM_DOC.get(_name, _name + " (same numbers as Go).")
    ENUMS[_name] = _cls
    _ENUM_NAMES[_name] = {n: s for s, n in _values.items()}
    for _m in _cls:
        _enum_constants[_ENUM_CONSTANT.get((_name, _m.name), _ENUM_PREFIX.get(_name, _name.upper() + "_") + _m.name)] = _m
globals().update(ENUMS)
globals().update(_enum_constants)
UnaryKind = ENUMS["UnaryKind"]
BinaryKind = ENUMS["BinaryKind"]
BNMode = ENUMS["BNMode"]
ArithKind = ENUMS["ArithKind"]
SegKind = ENUMS["SegKind"]
Segmentation = ENUMS["Segmentation"]
VecShape = ENUMS["VecShape"]
MatFuncKind = ENUMS["MatFuncKind"]

# Keller Jordan's quintic Newton–Schulz iteration (zeropower_via_newtonschulz5
# in github.com/KellerJordan/Muon): coefficients, step count and the ε of its
# normalisation, as Go's optim.NS5A … NS5Eps.
NS5_A, NS5_B, NS5_C, NS5_STEPS, NS5_EPS = 3.4445, -4.7750, 2.0315, 5, 1e-7

# The largest side of a factor matrix (Go's optim.MaxBlock; protocol minor
# 8): a matrix tensor whose rows (a left factor) or columns (a right one)
# exceed it needs blocks (Alloc's block ≤ MAX_BLOCK). A factor of side 8192
# is 256 MiB in float32.
MAX_BLOCK = 8192

_ARITY = {ArithKind.SQRT: 1, ArithKind.RECIP: 1, ArithKind.CLAMP: 3}


def arity(k) -> int:
    """The number of operands of Arith kind k (0 for an unknown kind)."""
    try:
        return _ARITY.get(ArithKind(k), 2)
    except ValueError:
        return 0


@dataclass(frozen=True)
class Batch:
    """The part of the current batch a Grad op uses: the whole batch by
    default; with of >= 2 the batch (permuted with shuffle as seed when
    shuffle != 0) is cut into `of` equal parts and part `part` is used."""

    part: int = 0
    of: int = 0
    shuffle: int = 0

    def __str__(self) -> str:
        if (self.of == 0 and self.part == 0) or (self.of == 1 and self.part == 0 and self.shuffle == 0):
            return "all"
        if self.shuffle != 0:
            return f"{self.part}/{self.of} shuffle={self.shuffle}"
        return f"{self.part}/{self.of}"


ALL = Batch()


# Registers and operands.


class _ProgID:
    """The identity of a program (compared by identity only)."""

    __slots__ = ()


class Reg:
    """A register of a program: a value an op computes on the device (a
    scalar, or one per segment for SegReduce) that later ops of the same
    program use without a round trip. Registers are numbered from 1 in op
    order. A Reg belongs to the program whose builder returned it; using it
    in, or reading it from the result of, another program is an error. The
    zero Reg, Reg(), is no register (it reads NaN)."""

    __slots__ = ("i", "_id")

    def __init__(self, i: int = 0, _id: Optional[_ProgID] = None):
        self.i = i  # 1-based; 0 is no register
        self._id = _id

    @property
    def index(self) -> int:
        """The register's 1-based number in its program (0 for no register)."""
        return self.i

    def __str__(self) -> str:
        return f"#{self.i}"

    def __repr__(self) -> str:
        return f"Reg(#{self.i})"

    def __eq__(self, other) -> bool:
        return isinstance(other, Reg) and other.i == self.i and other._id is self._id

    def __hash__(self) -> int:
        return hash((self.i, id(self._id)))


Scalar = Reg
"""The register type that scalar-computing ops return (the name of the
result slots before registers)."""


class K(float):
    """An immediate operand: a constant sent with the program. Builder
    methods take plain numbers where Go takes a Num, as K."""

    __slots__ = ()

    def __repr__(self) -> str:
        return f"K({float(self)!r})"


Num = Union[K, Reg, None]
"""An operand of a coefficient or of Arith: an immediate K or a register;
None is the immediate 0 (and an unused operand of Arith)."""


def as_num(x) -> Num:
    """x as an operand: None, a Reg or a K stay; a number becomes a K."""
    if x is None or isinstance(x, (Reg, K)):
        return x
    if isinstance(x, (int, float)) and not isinstance(x, bool):
        return K(x)
    raise TypeError(f"operand {x!r} of type {type(x).__name__} is not a number or a register")


class Eval(NamedTuple):
    """The registers of the loss and accuracy that a gradient pass sets."""

    loss: Reg
    acc: Reg


class Term(NamedTuple):
    """One coefficient·vector pair of a LinComb; coef is an immediate or a
    register."""

    coef: Num
    x: Vec


# Ops, made from the table: class names are Go's (which listings and errors
# print), fields the protocol's, and every field defaults to Go's zero value.


def _zero(kind: str):
    """The dataclass field of a field of protocol kind kind: Go's zero value."""
    if kind in ("vecs", "terms"):
        return field(default_factory=list)
    if kind.startswith("enum:"):
        cls = ENUMS[kind[5:]]
        return field(default=cls(0) if 0 in cls._value2member_map_ else 0)
    return field(default={"vec": 0, "num": None, "reg": Reg(), "batch": ALL, "bool": False, "int32": 0,
                          "int64": 0, "float": 0.0, "string": ""}[kind])


_TYPES = {"vec": Vec, "vecs": List[Vec], "num": Num, "reg": Reg, "terms": List[Term], "batch": Batch,
          "bool": bool, "int32": int, "int64": int, "float": float, "string": str}

OPS: Dict[str, type] = {}
"""The op classes by name."""
_SPECS: Dict[type, Dict[str, Any]] = {}
for _spec in OPSET["ops"]:
    _fields = []
    for _f in _spec["fields"]:
        _kind = _f["kind"]
        _typ = ENUMS[_kind[5:]] if _kind.startswith("enum:") else _TYPES[_kind]
        _fields.append((_f["wire"], _typ, _zero(_kind)))
    _cls = make_dataclass(_spec["name"], _fields, namespace={
        "__doc__": f"The {_spec['name']} op (protocol minor {_spec['since']}; the wire's {_spec['wire']}): "
                   f"listed as {_spec['format']!r}."})
    _cls.__module__ = __name__
    OPS[_spec["name"]] = _cls
    _SPECS[_cls] = _spec
globals().update(OPS)

Op = Union[tuple(OPS.values())]  # type: ignore[valid-type]


def op_spec(op) -> Optional[Dict[str, Any]]:
    """The table's row of op's type, or None."""
    return _SPECS.get(type(op))


def op_name(op) -> str:
    """The name of an op's kind ("Grad", "Norm", …), as in Go."""
    return "nil" if op is None else type(op).__name__


def emits(op) -> int:
    """The number of registers op sets: 1 for Dot, Norm, Arith and
    SegReduce, 2 for Grad and JointGrad, else 0."""
    spec = op_spec(op)
    return len(spec["regs"]) if spec else 0


# Results.


class ReadError(Exception):
    """What Result.get raises for a register that cannot be read from a
    result: it belongs to another program, or its program did not Read it.
    Both are programming errors of the optimizer (a panic, in Go)."""

    def __init__(self, reg: Reg, reason: str):
        super().__init__(f"register {reg}: {reason}")
        self.reg, self.reason = reg, reason


class Result:
    """The values of a program's Read ops, in op order (reads). Read them
    with get and the registers the builder returned."""

    __slots__ = ("reads", "_regs", "_id")

    def __init__(self, reads: Sequence[float] = (), _regs: Sequence[int] = (), _id: Optional[_ProgID] = None):
        self.reads = list(reads)
        self._regs = list(_regs)  # the register of each read
        self._id = _id

    def lookup(self, x: Reg) -> Tuple[float, Optional[ReadError]]:
        """(value, None) for register x, or (0, ReadError) when x belongs to
        another program or was not read. The zero Reg reads NaN."""
        if x.i == 0:
            return math.nan, None
        if x._id is not self._id:
            return 0.0, ReadError(x, "belongs to another program than this result's")
        for j, i in enumerate(self._regs):
            if i == x.i:
                return self.reads[j], None
        return 0.0, ReadError(x, "was not read: add a Read op for it (Program.read)")

    def get(self, x: Reg) -> float:
        """The value of register x; raises ReadError when x belongs to
        another program or was not read. The zero Reg reads NaN."""
        v, err = self.lookup(x)
        if err is not None:
            raise err
        return v

    def mean(self, evs: Sequence[Eval]):
        """The mean (loss, acc) over the read gradient passes evs, summed in
        Go's order (each term divided by the count); NaN, NaN with none."""
        if not evs:
            return math.nan, math.nan
        n = float(len(evs))
        loss = acc = 0.0
        for ev in evs:
            loss += self.get(ev.loss) / n
            acc += self.get(ev.acc) / n
        return loss, acc

    def __repr__(self) -> str:
        return f"Result({self.reads!r})"


def new_result(p: Optional["Program"], vals: Sequence[float]) -> Result:
    """p's result with the values vals of its Read ops, in op order (hosts
    and the wire client make results with it). Raises ValueError when vals
    has another length than p has Read ops."""
    if p is None:
        if len(vals):
            raise ValueError(f"result of a nil program with {len(vals)} values")
        return Result()
    regs = [op.x.i for op in p.ops if isinstance(op, Read)]
    if len(regs) != len(vals):
        raise ValueError(f"result has {len(vals)} values for {len(regs)} Read ops")
    return Result(vals, regs, p._ident())


def metrics(loss: float, acc: float) -> dict:
    """The step output of a step with training loss and accuracy computed by
    the plugin (a method that reports them from the device with
    report_metrics returns {} instead)."""
    return {"loss": loss, "acc": acc}


# Handles.


class Handles:
    """Hands out an optimizer's vector handles, so that no optimizer numbers
    them itself. Every Handles derived from one root (by sub) shares its
    counter, and every handle has a name ("sam/g[0]") that listings print.

    An optimizer takes its Handles from Config.namespace in configure."""

    __slots__ = ("_t", "_prefix")

    def __init__(self, _table=None, _prefix: str = ""):
        self._t = _table if _table is not None else {"next": 1, "names": {}}
        self._prefix = _prefix

    def sub(self, name: str) -> "Handles":
        """The namespace name inside this one (same counter, names "name/…")."""
        return Handles(self._t, self._prefix + name + "/")

    def new(self, name: str) -> Vec:
        """A fresh handle named name; it names no vector until allocated."""
        v = self._t["next"]
        self._t["next"] = v + 1
        self._t["names"][v] = self._prefix + name
        return v

    def per_member(self, name: str, n: int) -> List[Vec]:
        """A fresh handle named name[m] for each of n members."""
        return [self.new(f"{name}[{m}]") for m in range(n)]

    def name(self, v: Vec) -> str:
        """The name v was handed out with, or params[m], rho[m], v<n>."""
        s = self._t["names"].get(v)
        return s if s is not None else vec_name(v)

    def prog(self) -> "Program":
        """An empty program whose listing names the handles of this root."""
        return Program(names=self)


def vec_name(v: Vec) -> str:
    """The name of a handle without a namespace."""
    m = member_of(v)
    if m is not None:
        return f"params[{m}]"
    m = rho_member_of(v)
    if m is not None:
        return f"rho[{m}]"
    return f"v{v}"


# Programs.


class Program:
    """An ordered list of ops the host executes in one call. Ops that change
    vectors return the program (so they chain); ops that compute values
    return the registers they set. Ops appended to .ops directly are
    counted too."""

    __slots__ = ("ops", "_names", "_id", "_err")

    def __init__(self, ops: Optional[List] = None, names: Optional[Handles] = None):
        self.ops: List = list(ops) if ops else []
        self._names = names
        self._id: Optional[_ProgID] = None
        self._err: Optional[ValueError] = None

    def __len__(self) -> int:
        return len(self.ops)

    def _ident(self) -> _ProgID:
        if self._id is None:
            self._id = _ProgID()
        return self._id

    def reg(self, i: int) -> Reg:
        """Register i (1-based) of this program: for hosts and decoders that
        build programs from numbers; plugins use the registers the builder
        returns."""
        return Reg(i, self._ident())

    def err(self) -> Optional[ValueError]:
        """The first misuse of the builder (a register of another program
        used as an operand), or None. Such a program is refused before it is
        sent."""
        return self._err

    def num_regs(self) -> int:
        """The number of registers the program's ops set."""
        return sum(emits(op) for op in self.ops)

    def _add(self, op) -> "Program":
        self.ops.append(op)
        return self

    def _emit(self, op) -> Reg:
        r = Reg(self.num_regs() + 1, self._ident())
        self.ops.append(op)
        return r

    def _own(self, *ns) -> None:
        for n in ns:
            if isinstance(n, Reg) and n.i != 0 and n._id is not self._ident() and self._err is None:
                self._err = ValueError(f"op {len(self.ops)} uses register {n} of another program")

    def _num(self, x) -> Num:
        n = as_num(x)
        self._own(n)
        return n

    def alloc(self, id: Vec, member: int = 0) -> "Program":
        """A zero-filled vector id with member's layout."""
        return self._add(Alloc(id, member))

    def alloc_factor(self, id: Vec, member: int, shape, block: int = 0) -> "Program":
        """A zero-filled factor vector id of member (protocol minor 8): one
        square matrix per block (of side at most block; 0: whole rows and
        columns) of each matrix tensor, rows×rows for LEFT_FACTOR,
        cols×cols for RIGHT_FACTOR (VecShape; MemberLayout.factors is its
        layout, and block ≤ MAX_BLOCK)."""
        return self._add(Alloc(id, member, VecShape(shape), int(block)))

    def alloc_samples(self, id: Vec, member: int) -> "Program":
        """A zero-filled sample vector id of member (protocol minor 10): one
        element per sample of a batch (Layout.batch_size), for Grad's
        out_losses and rank."""
        return self._add(Alloc(id, member, VecShape.SAMPLES, 0))

    def free(self, id: Vec) -> "Program":
        return self._add(Free(id))

    def copy(self, dst: Vec, src: Vec) -> "Program":
        """dst = src."""
        return self._add(Copy(dst, src))

    def copy_state(self, dst: Vec, src: Vec) -> "Program":
        """dst = src with the BatchNorm running statistics."""
        return self._add(Copy(dst, src, bn=True))

    def fill(self, dst: Vec, v) -> "Program":
        """dst = v (a number or a register; per segment for a segment
        register)."""
        return self._add(Fill(dst, self._num(v)))

    def fill_range(self, dst: Vec, offset: int, n: int, value: float) -> "Program":
        """dst[offset:offset+n] = value (protocol minor 4)."""
        return self._add(FillRange(dst, offset, n, float(value)))

    def scale(self, dst: Vec, a) -> "Program":
        """dst *= a."""
        return self._add(Scale(dst, self._num(a)))

    def add_const(self, dst: Vec, v) -> "Program":
        """dst += v elementwise."""
        return self._add(AddConst(dst, self._num(v)))

    def axpy(self, dst: Vec, a, x: Vec) -> "Program":
        """dst += a·x."""
        return self._add(Axpy(dst, self._num(a), x))

    def lin_comb(self, dst: Vec, *terms) -> "Program":
        """dst = Σ coef·x over terms, each a Term or a (coef, x) pair."""
        return self._add(LinComb(dst, [Term(self._num(c), x) for c, x in terms]))

    def unary(self, dst: Vec, src: Vec, kind) -> "Program":
        """dst = kind(src) elementwise."""
        return self._add(Unary(dst, src, UnaryKind(kind)))

    def binary(self, dst: Vec, a: Vec, b: Vec, kind) -> "Program":
        """dst = a ∘ b elementwise."""
        return self._add(Binary(dst, a, b, BinaryKind(kind)))

    def rand_n(self, dst: Vec, std: float, seed: int = 0) -> "Program":
        """dst ~ N(0, std²)."""
        return self._add(RandN(dst, float(std), seed))

    def dot(self, a: Vec, b: Vec) -> Reg:
        """The register of a·b."""
        return self._emit(Dot(a, b))

    def norm(self, x: Vec) -> Reg:
        """The register of ‖x‖ (global L2 norm)."""
        return self._emit(Norm(x))

    def grad(self, out: Vec, at: Vec, batch: Batch = ALL, bn=BNMode.UPDATE) -> Eval:
        """∇L at `at` into `out` (0: none); the registers of its loss and accuracy."""
        return self.grad_op(Grad(out, at, batch, BNMode(bn)))

    def grad_op(self, g) -> Eval:
        """A Grad op with any of its fields set (eps, out_rho); its registers."""
        r = self._emit(g)
        return Eval(r, Reg(r.i + 1, r._id))

    def joint_grad(self, outs: Sequence[Vec], ats: Sequence[Vec], batch: Batch = ALL, bn=BNMode.UPDATE) -> Eval:
        """A JointGrad op (protocol minor 2); the registers of its loss and accuracy."""
        r = self._emit(JointGrad(list(outs), list(ats), batch, BNMode(bn)))
        return Eval(r, Reg(r.i + 1, r._id))

    def base_step(self, params: Vec, grad: Vec) -> "Program":
        """The experiment's base optimizer step of params with gradient grad."""
        return self._add(BaseStep(params, grad))

    def base_state(self, dst: Vec, of: Vec, name: str) -> "Program":
        """dst = the base optimizer's state vector name ("momentum_buffer",
        "exp_avg", "exp_avg_sq") of the live parameters of, zeros before
        its first step (protocol minor 10)."""
        return self._add(BaseState(dst, of, str(name)))

    def set_lr(self, member: int, lr: float) -> "Program":
        """Override the learning rate of member's BaseStep for the rest of the step."""
        return self._add(SetLR(member, float(lr)))

    def arith(self, kind, a, b=None, c=None) -> Reg:
        """An Arith op (protocol minor 5): the register of kind(a, b, c)."""
        a, b, c = as_num(a), as_num(b), as_num(c)
        self._own(a, b, c)
        return self._emit(Arith(ArithKind(kind), a, b, c))

    def add(self, a, b) -> Reg:
        """The register of a + b."""
        return self.arith(ArithKind.ADD, a, b)

    def sub(self, a, b) -> Reg:
        """The register of a − b."""
        return self.arith(ArithKind.SUB, a, b)

    def mul(self, a, b) -> Reg:
        """The register of a·b."""
        return self.arith(ArithKind.MUL, a, b)

    def div(self, a, b) -> Reg:
        """The register of a/b."""
        return self.arith(ArithKind.DIV, a, b)

    def min(self, a, b) -> Reg:
        """The register of min(a, b)."""
        return self.arith(ArithKind.MIN, a, b)

    def max(self, a, b) -> Reg:
        """The register of max(a, b)."""
        return self.arith(ArithKind.MAX, a, b)

    def sqrt(self, a) -> Reg:
        """The register of √a."""
        return self.arith(ArithKind.SQRT, a)

    def recip(self, a) -> Reg:
        """The register of 1/a."""
        return self.arith(ArithKind.RECIP, a)

    def clamp(self, a, lo, hi) -> Reg:
        """The register of a clamped to [lo, hi]."""
        return self.arith(ArithKind.CLAMP, a, lo, hi)

    def seg_reduce(self, kind, by, x: Vec, y: Vec = 0) -> Reg:
        """A SegReduce op (protocol minor 5): its segment register."""
        return self._emit(SegReduce(SegKind(kind), Segmentation(by), x, y))

    def seg_norm(self, by, x: Vec) -> Reg:
        """The segment register of the L2 norm of every segment of x."""
        return self.sqrt(self.seg_reduce(SegKind.SUM_SQ, by, x, 0))

    def top_k_mask(self, dst: Vec, x: Vec, by, frac) -> "Program":
        """dst = the mask of the ⌊frac·size+½⌋ largest |x| of each segment
        (protocol minor 5)."""
        return self._add(TopKMask(dst, x, Segmentation(by), self._num(frac)))

    def read(self, *xs: Reg) -> "Program":
        """A Read op of every register in xs: their values come back in the
        Result (a blocking read; use it for control flow only).

        Each must be a scalar register: the host refuses a segment
        register (seg_reduce, seg_norm, arithmetic on one), which holds
        one value per segment; docs/PLUGINS.md ("Reading and reporting")
        says how to read its values as scalars."""
        for x in xs:
            self._own(x)
            self._add(Read(x))
        return self

    def report(self, name: str, x: Reg) -> "Program":
        """A Report op: register x becomes the step's metric name in the
        host's logs, without a blocking read."""
        self._own(x)
        return self._add(Report(name, x))

    def update_bn(self, x: Vec) -> "Program":
        """An UpdateBN op: x's BatchNorm running statistics are recomputed
        exactly over the training set, as torch.optim.swa_utils.update_bn
        does (a full forward pass: for an optimizer's finalize; protocol
        minor 6)."""
        return self._add(UpdateBN(x))

    def newton_schulz(self, dst: Vec, src: Vec, steps: int) -> "Program":
        """dst = the Newton–Schulz orthogonalisation of every tensor of src
        with two or more dims, viewed as a matrix [d0, rest], with Keller
        Jordan's coefficients (NS5_A, NS5_B, NS5_C, NS5_EPS; NS5_STEPS is
        his step count); the other tensors are copied (protocol minor 7)."""
        return self.newton_schulz_op(NewtonSchulz(dst, src, int(steps), NS5_A, NS5_B, NS5_C, NS5_EPS))

    def newton_schulz_op(self, o) -> "Program":
        """A NewtonSchulz op with every field set by the caller (its own
        coefficients a, b, c, step count and eps)."""
        return self._add(o)

    def gram(self, dst: Vec, src: Vec, beta: float, alpha: float) -> "Program":
        """dst = beta·dst + alpha·G·Gᵀ (dst a left factor vector) or
        alpha·Gᵀ·G (a right one) for every block G of src, cut by dst's
        blocks: Shampoo's L ← β·L + (1−β)·G·Gᵀ (protocol minor 8)."""
        return self._add(Gram(dst, src, float(beta), float(alpha)))

    def mat_mul(self, dst: Vec, left: Vec, src: Vec, right: Vec) -> "Program":
        """dst = left·X·right for every block X of src, a factor 0 the
        identity (at least one set; dst is neither): Shampoo's
        L^(−1/4)·G·R^(−1/4). Other elements of a parameter vector are
        copied from src; mat_mul_op sends transposes (protocol minor 8)."""
        return self._add(MatMul(dst, src, left, right))

    def mat_mul_op(self, o) -> "Program":
        """A MatMul op with every field set by the caller (trans_left,
        trans_right: SOAP's rotation Qₗᵀ·G·Qᵣ)."""
        return self._add(o)

    def inv_root(self, dst: Vec, src: Vec, root: float, eps: float) -> "Program":
        """dst = (A + eps·I)^(−1/root) for every matrix A of the factor
        vector src (in float64, from its eigendecomposition; eps > 0;
        protocol minor 8)."""
        return self.mat_func(dst, src, MatFuncKind.INV_ROOT, root, eps)

    def mat_func(self, dst: Vec, src: Vec, kind, root: float = 0.0, eps: float = 0.0) -> "Program":
        """dst = kind(A) for every matrix A of the factor vector src (one
        factor layout; dst may be src): INV_ROOT, PINV_ROOT, EIGVECS,
        EIGVALS or QR (MatFuncKind; root and eps as Go's optim.MatFunc says,
        ignored by EIGVECS, EIGVALS and QR; protocol minor 8)."""
        return self._add(MatFunc(dst, src, MatFuncKind(kind), float(root), float(eps)))

    def sort_columns(self, dst: Vec, key: Vec, carry: Vec = 0) -> "Program":
        """Reorder the columns of every matrix of the factor vector dst by
        the descending diagonal of key's matrix of the same index (equal
        values in their order, NaN as the largest); carry (0: none), a
        parameter vector of dst's member, has the rows (left factors) or
        columns (right factors) of its blocks permuted the same way:
        SOAP's sorted eigenbasis and Adam's second moment along (Go's
        SortColumns; protocol minor 12)."""
        return self._add(SortColumns(dst, key, carry))

    def if_(self, x: Reg, body) -> "Program":
        """An If op on register x and the block that body(p) appends: its
        ops run only when x > 0, and are skipped otherwise (their
        registers are then NaN); an empty block appends nothing (Go's
        Program.If; protocol minor 9)."""
        self._own(x)
        i = len(self.ops)
        self.ops.append(None)
        body(self)
        n = len(self.ops) - i - 1
        if n == 0:
            del self.ops[i]
            return self
        self.ops[i] = If(x, n)
        return self

    def mean(self, evs: Sequence[Eval]) -> Tuple[Reg, Reg]:
        """The registers of the mean loss and accuracy over the gradient
        passes evs, each term divided by the count and summed in order (the
        float64 arithmetic of Result.mean, on the device). With no passes,
        zero registers."""
        if not evs:
            return Reg(), Reg()
        n = K(len(evs))
        loss, acc = self.div(evs[0].loss, n), self.div(evs[0].acc, n)
        for ev in evs[1:]:
            loss = self.add(loss, self.div(ev.loss, n))
            acc = self.add(acc, self.div(ev.acc, n))
        return loss, acc

    def report_metrics(self, loss: Reg, acc: Reg) -> "Program":
        """Report ops of the step's training loss and accuracy ("loss" and
        "acc"), the metrics the host's curves and tables expect."""
        return self.report("loss", loss).report("acc", acc)

    def name(self, v: Vec) -> str:
        """The name of handle v in this program's namespace."""
        return self._names.name(v) if self._names is not None else vec_name(v)

    def __str__(self) -> str:
        return listing(self)


# Listings.


def num(f: float) -> str:
    """f as Go's strconv.FormatFloat(f, 'g', 6, 64) writes it."""
    if math.isnan(f):
        return "NaN"
    if math.isinf(f):
        return "+Inf" if f > 0 else "-Inf"
    return format(f, ".6g")


def _num_string(n) -> str:
    """An operand as listings print it: an immediate as a number, a
    register as #n."""
    if n is None:
        return "0"
    if isinstance(n, Reg):
        return str(n)
    return num(float(n))


def listing(p: Optional[Program]) -> str:
    """The program one op a line, exactly as Go's Program.String writes it."""
    if p is None:
        return "<nil program>\n"
    lines = []
    reg = 1
    for i, op in enumerate(p.ops):
        line = "%2d %-9s %s" % (i, op_name(op), _operands(p, op))
        spec = op_spec(op)
        regs = spec["regs"] if spec else []
        if len(regs) == 1:
            line += f"  → #{reg}"
        elif len(regs) > 1:
            line += "  → " + ", ".join(f"{name} #{reg + j}" for j, name in enumerate(regs))
        reg += emits(op)
        lines.append(line + "\n")
    return "".join(lines)


def _operands(p: Program, op) -> str:
    """op's fields formatted with its table format."""
    spec = op_spec(op)
    if spec is None:
        return "<nil>" if op is None else repr(op)
    kinds = {f["name"]: (f["wire"], f["kind"]) for f in spec["fields"]}

    def fld(name: str, mod: str) -> Tuple[str, bool]:
        if name not in kinds:
            return "{" + name + "?}", True
        wire, kind = kinds[name]
        x = getattr(op, wire)
        return _value(p, x, kind, mod), not _is_zero(x, kind)

    return format_op(spec["format"], fld)


def format_op(fmt: str, fld: Callable[[str, str], Tuple[str, bool]]) -> str:
    """Expand an op format as Go's formatOp: {Field} and {Field:mod} print a
    field, {Field?} prints nothing, a [group] prints only when every field
    it names is not zero, and [[ and ]] print [ and ]. fld returns a field's
    text and whether it is not zero."""
    out: List[str] = []
    group: List[str] = []
    in_group, group_ok = False, True
    w = out
    i = 0
    while i < len(fmt):
        c = fmt[i]
        if c in "[]" and fmt[i + 1:i + 2] == c:
            w.append(c)
            i += 1
        elif c == "[":
            in_group, group_ok = True, True
            group = []
            w = group
        elif c == "]" and in_group:
            if group_ok:
                out.append("".join(group))
            in_group = False
            w = out
        elif c == "{":
            j = fmt.index("}", i)
            name = fmt[i + 1:j]
            i = j
            silent = name.endswith("?")
            name = name.removesuffix("?")
            mod = ""
            if ":" in name:
                name, mod = name.split(":", 1)
            text, nonzero = fld(name, mod)
            if in_group and not nonzero:
                group_ok = False
            if not silent:
                w.append(text)
        else:
            w.append(c)
        i += 1
    return "".join(out)


def _is_zero(x, kind: str) -> bool:
    """Whether x is its Go field's zero value (reflect's IsZero)."""
    if kind in ("vecs", "terms"):
        return not x
    if kind == "num":
        return x is None
    if kind == "reg":
        return x.i == 0 and x._id is None
    if kind == "batch":
        return x.part == 0 and x.of == 0 and x.shuffle == 0
    if kind == "float":
        return x == 0 and math.copysign(1.0, x) > 0
    if kind == "string":
        return x == ""
    return not x


def _value(p: Program, x, kind: str, mod: str) -> str:
    """One field of an op as Go's listing prints it."""

    def vec(v: Vec) -> str:
        if mod == "out" and v == 0:  # a gradient target: 0 is none, not params[0]
            return "_"
        return p.name(v)

    if kind == "vec":
        return vec(x)
    if kind == "vecs":
        return "[" + " ".join(vec(v) for v in x) + "]"
    if kind in ("num", "reg"):
        return _num_string(x)
    if kind == "terms":
        return " + ".join(_num_string(c) + "·" + p.name(v) for c, v in x)
    if kind == "float":
        return num(float(x))
    if kind == "bool":
        return "true" if x else "false"
    if kind.startswith("enum:"):
        name = kind[5:]
        s = _ENUM_NAMES[name].get(int(x))
        return s if s is not None else f"{name}({int(x)})"
    return str(x)


# The op classes are made at import, so the names are listed here for
# `from optlab.program import *` and readers.
Alloc = OPS["Alloc"]
Free = OPS["Free"]
Copy = OPS["Copy"]
Fill = OPS["Fill"]
FillRange = OPS["FillRange"]
Scale = OPS["Scale"]
AddConst = OPS["AddConst"]
Axpy = OPS["Axpy"]
LinComb = OPS["LinComb"]
Unary = OPS["Unary"]
Binary = OPS["Binary"]
RandN = OPS["RandN"]
Dot = OPS["Dot"]
Norm = OPS["Norm"]
Grad = OPS["Grad"]
BaseStep = OPS["BaseStep"]
SetLR = OPS["SetLR"]
JointGrad = OPS["JointGrad"]
Arith = OPS["Arith"]
SegReduce = OPS["SegReduce"]
TopKMask = OPS["TopKMask"]
UpdateBN = OPS["UpdateBN"]
Read = OPS["Read"]
Report = OPS["Report"]
NewtonSchulz = OPS["NewtonSchulz"]
Gram = OPS["Gram"]
MatMul = OPS["MatMul"]
MatFunc = OPS["MatFunc"]
If = OPS["If"]

__all__ = [
    "OPSET", "Vec", "PARAMS", "params_of", "rho_of", "member_of", "rho_member_of",
    "ENUMS", "UnaryKind", "BinaryKind", "BNMode", "ArithKind", "SegKind", "Segmentation", "VecShape", "MatFuncKind",
    "arity", "NS5_A", "NS5_B", "NS5_C", "NS5_STEPS", "NS5_EPS", "MAX_BLOCK",
] + sorted(_enum_constants) + [
    "Batch", "ALL", "Reg", "Scalar", "K", "Num", "as_num", "Eval", "Term", "Op", "OPS",
] + list(OPS) + [
    "op_spec", "op_name", "emits", "ReadError", "Result", "new_result", "metrics", "Handles", "vec_name",
    "Program", "num", "listing", "format_op",
]
