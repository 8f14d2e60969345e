"""Programs of ops, the handles they name and the results they return.

This mirrors sdk/optim's program.go, handles.go and listing.go: the same ops
(with the same names, so listings and traces read alike in both languages),
a builder whose scalar-emitting ops return the slots their results are read
from, and a handle allocator with namespaces. Nothing here needs gRPC.

    hs = config.namespace("sam")
    g = hs.new("g")
    p = hs.prog().alloc(g, 0)
    ev = p.grad(g, PARAMS)
    n = p.norm(g)
    r = host.exec(p)
    loss, norm = r.get(ev.loss), r.get(n)
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass
from typing import List, NamedTuple, Optional, Sequence, Union

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


class UnaryKind(enum.IntEnum):
    """Elementwise functions of the Unary op (same numbers as Go)."""

    ABS = 1
    SIGN = 2
    SQRT = 3
    SQUARE = 4
    SOFTPLUS = 5
    EXP = 6
    LOG = 7
    RECIPROCAL = 8


class BinaryKind(enum.IntEnum):
    """Elementwise functions of two vectors for the Binary op."""

    MUL = 1
    DIV = 2
    ADD = 3
    SUB = 4
    MAX = 5
    MIN = 6


class BNMode(enum.IntEnum):
    """What a gradient pass does to BatchNorm running statistics."""

    UPDATE = 0
    FREEZE = 1


ABS, SIGN, SQRT, SQUARE, SOFTPLUS, EXP, LOG, RECIPROCAL = tuple(UnaryKind)
MUL, DIV, ADD, SUB, MAX, MIN = tuple(BinaryKind)
BN_UPDATE, BN_FREEZE = BNMode.UPDATE, BNMode.FREEZE


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


# Ops. The classes carry Go's names, which the listing and errors print.


@dataclass
class Alloc:
    id: Vec
    member: int = 0


@dataclass
class Free:
    id: Vec


@dataclass
class Copy:
    dst: Vec
    src: Vec
    bn: bool = False


@dataclass
class Fill:
    dst: Vec
    value: float


@dataclass
class FillRange:
    dst: Vec
    offset: int
    len: int
    value: float


@dataclass
class Scale:
    dst: Vec
    alpha: float


@dataclass
class AddConst:
    dst: Vec
    value: float


@dataclass
class Axpy:
    dst: Vec
    alpha: float
    x: Vec


class Term(NamedTuple):
    """One coefficient·vector pair of a LinComb."""

    coef: float
    x: Vec


@dataclass
class LinComb:
    dst: Vec
    terms: List[Term]


@dataclass
class Unary:
    dst: Vec
    src: Vec
    kind: UnaryKind


@dataclass
class Binary:
    dst: Vec
    a: Vec
    b: Vec
    kind: BinaryKind


@dataclass
class RandN:
    dst: Vec
    std: float
    seed: int = 0


@dataclass
class Dot:
    a: Vec
    b: Vec


@dataclass
class Norm:
    x: Vec


@dataclass
class Grad:
    out: Vec
    at: Vec
    batch: Batch = ALL
    bn: BNMode = BNMode.UPDATE
    eps: Vec = 0
    out_rho: Vec = 0


@dataclass
class BaseStep:
    params: Vec
    grad: Vec


@dataclass
class SetLR:
    member: int
    lr: float


@dataclass
class JointGrad:
    outs: List[Vec]
    ats: List[Vec]
    batch: Batch = ALL
    bn: BNMode = BNMode.UPDATE


Op = Union[Alloc, Free, Copy, Fill, FillRange, Scale, AddConst, Axpy, LinComb, Unary, Binary,
           RandN, Dot, Norm, Grad, BaseStep, SetLR, JointGrad]


def op_name(op) -> str:
    """The name of an op's kind ("Grad", "Norm", …), as in Go."""
    return "nil" if op is None else type(op).__name__


def emits(op) -> int:
    """How many scalars op emits: 1 for Dot and Norm, 2 for Grad and JointGrad."""
    if isinstance(op, (Dot, Norm)):
        return 1
    if isinstance(op, (Grad, JointGrad)):
        return 2
    return 0


class Scalar:
    """The slot of one scalar a program emits; read it with Result.get. The
    zero slot, Scalar(), reads NaN."""

    __slots__ = ("i",)

    def __init__(self, i: int = 0):
        self.i = i  # 1-based; 0 is no slot

    def __repr__(self) -> str:
        return f"Scalar(#{self.i})"

    def __eq__(self, other) -> bool:
        return isinstance(other, Scalar) and other.i == self.i

    def __hash__(self) -> int:
        return hash(self.i)


class Eval(NamedTuple):
    """The slots of the loss and accuracy a gradient pass emits."""

    loss: Scalar
    acc: Scalar


class Result:
    """The scalars a program emitted, in op order. Read them with get and
    the slots the builder returned."""

    __slots__ = ("scalars",)

    def __init__(self, scalars: Sequence[float] = ()):
        self.scalars = list(scalars)

    def get(self, s: Scalar) -> float:
        """The scalar in slot s, or NaN when the result has none there."""
        i = s.i - 1
        if i < 0 or i >= len(self.scalars):
            return math.nan
        return self.scalars[i]

    def mean(self, evs: Sequence[Eval]):
        """The mean (loss, acc) over the gradient passes evs, summed in Go's
        order (each term divided by the count); NaN, NaN with none."""
        if not evs:
            return math.nan, math.nan
        n = float(len(evs))
        loss = acc = 0.0
        for ev in evs:
            loss += self.get(ev.loss) / n
            acc += self.get(ev.acc) / n
        return loss, acc

    def __repr__(self) -> str:
        return f"Result({self.scalars!r})"


def metrics(loss: float, acc: float) -> dict:
    """The step output of training loss and accuracy that the host's curves
    and tables expect."""
    return {"loss": loss, "acc": acc}


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


class Program:
    """An ordered list of ops the host executes in one call. Ops that change
    vectors return the program (so they chain); ops that emit scalars
    return their slots. Ops appended to .ops directly are counted too."""

    __slots__ = ("ops", "_names", "_counted", "_scalars")

    def __init__(self, ops: Optional[List] = None, names: Optional[Handles] = None):
        self.ops: List = list(ops) if ops else []
        self._names = names
        self._counted = 0
        self._scalars = 0

    def __len__(self) -> int:
        return len(self.ops)

    def _slot(self) -> Scalar:
        if self._counted > len(self.ops):
            self._counted, self._scalars = 0, 0
        for op in self.ops[self._counted:]:
            self._scalars += emits(op)
        self._counted = len(self.ops)
        return Scalar(self._scalars + 1)

    def _add(self, op) -> "Program":
        self.ops.append(op)
        return self

    def _emit(self, op) -> Scalar:
        s = self._slot()
        self.ops.append(op)
        return s

    def alloc(self, id: Vec, member: int = 0) -> "Program":
        """A zero-filled vector id with member's layout."""
        return self._add(Alloc(id, member))

    def free(self, id: Vec) -> "Program":
        return self._add(Free(id))

    def copy(self, dst: Vec, src: Vec) -> "Program":
        """dst = src."""
        return self._add(Copy(dst, src))

    def copy_state(self, dst: Vec, src: Vec) -> "Program":
        """dst = src with the BatchNorm running statistics."""
        return self._add(Copy(dst, src, bn=True))

    def fill(self, dst: Vec, value: float) -> "Program":
        return self._add(Fill(dst, float(value)))

    def fill_range(self, dst: Vec, offset: int, n: int, value: float) -> "Program":
        """dst[offset:offset+n] = value (protocol minor 4)."""
        return self._add(FillRange(dst, offset, n, float(value)))

    def scale(self, dst: Vec, alpha: float) -> "Program":
        return self._add(Scale(dst, float(alpha)))

    def add_const(self, dst: Vec, value: float) -> "Program":
        return self._add(AddConst(dst, float(value)))

    def axpy(self, dst: Vec, alpha: float, x: Vec) -> "Program":
        """dst += alpha·x."""
        return self._add(Axpy(dst, float(alpha), x))

    def lin_comb(self, dst: Vec, *terms) -> "Program":
        """dst = Σ coef·x over terms, each a Term or a (coef, x) pair."""
        return self._add(LinComb(dst, [Term(float(c), x) for c, x in terms]))

    def unary(self, dst: Vec, src: Vec, kind: UnaryKind) -> "Program":
        return self._add(Unary(dst, src, UnaryKind(kind)))

    def binary(self, dst: Vec, a: Vec, b: Vec, kind: BinaryKind) -> "Program":
        return self._add(Binary(dst, a, b, BinaryKind(kind)))

    def rand_n(self, dst: Vec, std: float, seed: int = 0) -> "Program":
        return self._add(RandN(dst, float(std), seed))

    def dot(self, a: Vec, b: Vec) -> Scalar:
        """The slot of a·b."""
        return self._emit(Dot(a, b))

    def norm(self, x: Vec) -> Scalar:
        """The slot of ‖x‖ (global L2 norm)."""
        return self._emit(Norm(x))

    def grad(self, out: Vec, at: Vec, batch: Batch = ALL, bn: BNMode = BNMode.UPDATE) -> Eval:
        """∇L at `at` into `out` (0: none); the slots of its loss and accuracy."""
        return self.grad_op(Grad(out, at, batch, BNMode(bn)))

    def grad_op(self, g: Grad) -> Eval:
        """A Grad op with any of its fields set (eps, out_rho); its slots."""
        s = self._emit(g)
        return Eval(s, Scalar(s.i + 1))

    def joint_grad(self, outs: Sequence[Vec], ats: Sequence[Vec], batch: Batch = ALL,
                   bn: BNMode = BNMode.UPDATE) -> Eval:
        """A JointGrad op (protocol minor 2); the slots of its loss and accuracy."""
        s = self._emit(JointGrad(list(outs), list(ats), batch, BNMode(bn)))
        return Eval(s, Scalar(s.i + 1))

    def base_step(self, params: Vec, grad: Vec) -> "Program":
        """The experiment's base optimizer step of params with gradient grad."""
        return self._add(BaseStep(params, grad))

    def set_lr(self, member: int, lr: float) -> "Program":
        return self._add(SetLR(member, float(lr)))

    def name(self, v: Vec) -> str:
        return self._names.name(v) if self._names is not None else vec_name(v)

    def __str__(self) -> str:
        return listing(self)


def num(f: float) -> str:
    """f as Go's strconv.FormatFloat(f, 'g', 6, 64) writes it."""
    if math.isnan(f):
        return "NaN"
    if math.isinf(f):
        return "+Inf" if f > 0 else "-Inf"
    return format(f, ".6g")


def listing(p: Optional[Program]) -> str:
    """The program one op a line, exactly as Go's Program.String writes it."""
    if p is None:
        return "<nil program>"
    lines = []
    slot = 1
    for i, op in enumerate(p.ops):
        line = "%2d %-9s %s" % (i, op_name(op), _operands(p, op))
        n = emits(op)
        if n == 1:
            line += f"  → #{slot}"
        elif n == 2:
            line += f"  → loss #{slot}, acc #{slot + 1}"
        slot += n
        lines.append(line + "\n")
    return "".join(lines)


def _kind_name(k, names) -> str:
    try:
        return names[int(k)]
    except (KeyError, ValueError):
        return f"{type(k).__name__}({int(k)})"


_UNARY_NAMES = {1: "abs", 2: "sign", 3: "sqrt", 4: "square", 5: "softplus", 6: "exp", 7: "log", 8: "reciprocal"}
_BINARY_NAMES = {1: "mul", 2: "div", 3: "add", 4: "sub", 5: "max", 6: "min"}
_BN_NAMES = {0: "update", 1: "freeze"}


def _operands(p: Program, op) -> str:
    v = p.name

    def out(x: Vec) -> str:  # a gradient target: 0 is none, not params[0]
        return "_" if x == 0 else v(x)

    if isinstance(op, Alloc):
        return f"{v(op.id)} member={op.member}"
    if isinstance(op, Free):
        return v(op.id)
    if isinstance(op, Copy):
        s = f"{v(op.dst)} = {v(op.src)}"
        return s + " (with BatchNorm statistics)" if op.bn else s
    if isinstance(op, Fill):
        return f"{v(op.dst)} = {num(op.value)}"
    if isinstance(op, FillRange):
        return f"{v(op.dst)}[{op.offset}:{op.offset + op.len}] = {num(op.value)}"
    if isinstance(op, Scale):
        return f"{v(op.dst)} *= {num(op.alpha)}"
    if isinstance(op, AddConst):
        return f"{v(op.dst)} += {num(op.value)}"
    if isinstance(op, Axpy):
        return f"{v(op.dst)} += {num(op.alpha)}·{v(op.x)}"
    if isinstance(op, LinComb):
        return f"{v(op.dst)} = " + " + ".join(f"{num(t.coef)}·{v(t.x)}" for t in op.terms)
    if isinstance(op, Unary):
        return f"{v(op.dst)} = {_kind_name(op.kind, _UNARY_NAMES)}({v(op.src)})"
    if isinstance(op, Binary):
        return f"{v(op.dst)} = {_kind_name(op.kind, _BINARY_NAMES)}({v(op.a)}, {v(op.b)})"
    if isinstance(op, RandN):
        return f"{v(op.dst)} ~ N(0, {num(op.std)}²) seed={op.seed}"
    if isinstance(op, Dot):
        return f"{v(op.a)} · {v(op.b)}"
    if isinstance(op, Norm):
        return v(op.x)
    if isinstance(op, Grad):
        s = f"{out(op.out)} = ∇L({v(op.at)}) batch={op.batch} bn={_kind_name(op.bn, _BN_NAMES)}"
        if op.eps != 0:
            s += " eps=" + v(op.eps)
        if op.out_rho != 0:
            s += " rho-grad=" + v(op.out_rho)
        return s
    if isinstance(op, JointGrad):
        outs = " ".join(out(x) for x in op.outs)
        ats = " ".join(v(x) for x in op.ats)
        return f"[{outs}] = ∇L([{ats}]) batch={op.batch} bn={_kind_name(op.bn, _BN_NAMES)}"
    if isinstance(op, BaseStep):
        return f"{v(op.params)} with gradient {v(op.grad)}"
    if isinstance(op, SetLR):
        return f"member={op.member} lr={num(op.lr)}"
    return repr(op)


__all__ = [
    "Vec", "PARAMS", "params_of", "rho_of", "member_of", "rho_member_of",
    "UnaryKind", "BinaryKind", "BNMode",
    "ABS", "SIGN", "SQRT", "SQUARE", "SOFTPLUS", "EXP", "LOG", "RECIPROCAL",
    "MUL", "DIV", "ADD", "SUB", "MAX", "MIN", "BN_UPDATE", "BN_FREEZE",
    "Batch", "ALL", "Term", "Op",
    "Alloc", "Free", "Copy", "Fill", "FillRange", "Scale", "AddConst", "Axpy", "LinComb",
    "Unary", "Binary", "RandN", "Dot", "Norm", "Grad", "BaseStep", "SetLR", "JointGrad",
    "op_name", "emits", "Scalar", "Eval", "Result", "metrics", "Handles", "vec_name",
    "Program", "num", "listing",
]
