"""The types an optimizer is written against, mirroring sdk/optim/optim.go:
the Optimizer interface, what the host says (Layout, Config, StepInput) and
what the optimizer says (Info, Predictive)."""

from __future__ import annotations

import dataclasses
import enum
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

from .program import MAX_BLOCK, OPSET, Handles, Segmentation, Vec, VecShape

# PROTOCOL_MAJOR is the go-plugin protocol version; PROTOCOL_MINOR the
# in-band minor version this SDK speaks (sdk/optim's ProtocolMinor, from the
# op table).
PROTOCOL_MAJOR = 1
PROTOCOL_MINOR = OPSET["protocol_minor"]

# FEATURES is the table of optional features (optim.FeatureSet): each
# entry's "name" is its name on the wire, its Features field is the name
# with "-" as "_", and "method" names the Optimizer method it enables.
FEATURES = OPSET["features"]


def _feature_field(name: str) -> str:
    return name.replace("-", "_")


Features = dataclasses.make_dataclass(
    "Features", [(_feature_field(f["name"]), bool, field(default=False)) for f in FEATURES],
    namespace={
        "__doc__": "An optimizer's optional features (optim.Features), declared once in its Info:\n" +
                   "\n".join(f"  {_feature_field(f['name'])}: {f['doc']}" for f in FEATURES),
        "names": lambda self: [f["name"] for f in FEATURES if getattr(self, _feature_field(f["name"]))],
    })
"""An optimizer's optional features (optim.Features), one bool per entry
of FEATURES; names() lists those it has, by wire name."""


def features_of(names) -> "Features":
    """The Features named in names (wire names); unknown ones are ignored."""
    known = {f["name"] for f in FEATURES}
    return Features(**{_feature_field(n): True for n in names if n in known})


# Hyperparameter types (optim.ParamType).
FLOAT, INT, BOOL, STRING = "float", "int", "bool", "string"


@dataclass
class ParamSpec:
    """One hyperparameter: the host validates an experiment's TOML against
    these before training. Build them with optlab.param and optlab.specs."""

    name: str
    type: str
    default: Any = None
    doc: str = ""
    enum: List[str] = field(default_factory=list)
    range: str = ""


@dataclass
class Info:
    """What a plugin says about itself. protocol_minor 0 is stamped with
    this SDK's (PROTOCOL_MINOR) when served."""

    name: str
    version: str = "0.0.0"
    protocol_minor: int = 0
    features: "Features" = field(default_factory=lambda: Features())
    params: List[ParamSpec] = field(default_factory=list)


@dataclass
class Tensor:
    """One parameter tensor inside a member's flat vector."""

    name: str
    shape: List[int]
    offset: int
    kind: str  # "weight", "bias", "bn" or "rho"

    @property
    def numel(self) -> int:
        n = 1
        for d in self.shape:
            n *= d
        return n


@dataclass(frozen=True)
class Matrix:
    """A tensor of a member's layout with two or more dims, viewed as the
    matrix of rows = d0 rows and cols = d1·d2·… columns (a conv weight [out,
    in, kh, kw] as [out, in·kh·kw]), row-major from offset in the flat
    vector (Go's optim.Matrix); tensor is its index in the layout's tensors."""

    tensor: int
    offset: int
    rows: int
    cols: int


@dataclass(frozen=True)
class Tile:
    """One block of a matrix tensor's 2-D view (Go's optim.Tile): rows
    row…row+rows−1 and columns col…col+cols−1 of matrix."""

    matrix: Matrix
    row: int
    col: int
    rows: int
    cols: int


@dataclass(frozen=True)
class VecLayout:
    """The layout of a vector (Go's optim.VecLayout; protocol minor 8):
    member's parameter layout (shape PARAM_SHAPE, block 0), or its factor
    layout of shape cut in blocks of side block (0: whole rows and
    columns), as alloc_factor(id, member, shape, block) allocates it."""

    member: int
    shape: VecShape = VecShape.PARAMS
    block: int = 0


@dataclass
class MemberLayout:
    arch: str
    numel: int
    tensors: List[Tensor]
    variational: bool = False

    def _tensors(self) -> List[Tensor]:
        # A layout without tensors is one tensor of shape [numel].
        return self.tensors or [Tensor("", [self.numel], 0, "")]

    def segments(self, by) -> Optional[List[int]]:
        """The sizes of the segments of the flat vector under Segmentation
        by, in order (Go's MemberLayout.Segments): one per tensor
        (PER_TENSOR), per row d0 of each tensor (PER_ROW), or per column of
        each tensor's 2-D view [d0, rest] (PER_COLUMN, protocol minor 8: a
        tensor of fewer than 2 dims is one segment). None for an unknown
        segmentation."""
        out: List[int] = []
        for t in self._tensors():
            if by == Segmentation.PER_TENSOR:
                out.append(t.numel)
            elif by == Segmentation.PER_ROW:
                if not t.shape:
                    out.append(1)
                    continue
                out += [t.numel // max(t.shape[0], 1)] * t.shape[0]
            elif by == Segmentation.PER_COLUMN:
                if len(t.shape) < 2:
                    out.append(t.numel)
                    continue
                out += [t.shape[0]] * (t.numel // max(t.shape[0], 1))
            else:
                return None
        return out

    def segment_of(self, by) -> Optional[List[int]]:
        """The segment of every element of the flat vector under by (Go's
        MemberLayout.SegmentOf): contiguous runs for PER_TENSOR and PER_ROW;
        for PER_COLUMN element (i, j) of a tensor's 2-D view [d0, rest] is in
        that tensor's j-th column segment (the segments interleave). None
        for an unknown segmentation."""
        sizes = self.segments(by)
        if sizes is None:
            return None
        if by != Segmentation.PER_COLUMN:
            return [s for s, z in enumerate(sizes) for _ in range(z)]
        out: List[int] = []
        first = 0  # the first column segment of the tensor
        for t in self._tensors():
            if len(t.shape) < 2:
                out += [first] * t.numel
                first += 1
                continue
            cols = t.numel // max(t.shape[0], 1)
            for _ in range(t.shape[0]):
                out += range(first, first + cols)
            first += cols
        return out

    def matrices(self) -> List[Matrix]:
        """The matrix-shaped tensors (two or more dims, none of them 0), in
        layout order (Go's MemberLayout.Matrices): what the matrix ops
        (newton_schulz, gram, mat_mul) act on."""
        return [Matrix(i, t.offset, t.shape[0], t.numel // t.shape[0])
                for i, t in enumerate(self.tensors) if len(t.shape) >= 2 and t.numel != 0]

    def tiles(self, block: int = 0) -> List[Tile]:
        """The blocks of the matrices for a block side block (0 or negative:
        one tile per matrix), as Go's MemberLayout.Tiles: each matrix is cut
        into ⌈rows/block⌉ × ⌈cols/block⌉ tiles of side at most block, the
        last row and column of tiles taking the remainder, row-major within
        each matrix and matrix after matrix."""
        out: List[Tile] = []
        for mx in self.matrices():
            rb, cb = mx.rows, mx.cols
            if block > 0:
                rb, cb = min(rb, block), min(cb, block)
            for r in range(0, mx.rows, rb):
                for c in range(0, mx.cols, cb):
                    out.append(Tile(mx, r, c, min(rb, mx.rows - r), min(cb, mx.cols - c)))
        return out

    def _tensor_name(self, i: int) -> str:
        if i < len(self.tensors) and self.tensors[i].name:
            return self.tensors[i].name
        return f"tensor {i}"

    def factors(self, shape, block: int = 0) -> "MemberLayout":
        """The layout of a factor vector of this member (VecShape shape,
        blocks of side block; protocol minor 8), as Go's
        MemberLayout.Factors: one tensor per tile (tiles(block)) of shape
        [rows, rows] (LEFT_FACTOR) or [cols, cols] (RIGHT_FACTOR), named
        after the tensor with ".L" or ".R" (and, with more than one tile per
        matrix, the tile's block row and column: "fc.weight.L[1,0]"), of
        kind "factor", tiling the vector in order. PARAM_SHAPE gives the
        layout itself."""
        shape = VecShape(shape)
        if shape == VecShape.PARAMS:
            return self
        out = MemberLayout(arch=self.arch, numel=0, tensors=[])
        for t in self.tiles(block):
            n = t.cols if shape == VecShape.RIGHT else t.rows
            name = f"{self._tensor_name(t.matrix.tensor)}.{shape.name[0]}"
            if t.rows < t.matrix.rows or t.cols < t.matrix.cols:  # block > 0
                name += f"[{t.row // block},{t.col // block}]"
            out.tensors.append(Tensor(name, [n, n], out.numel, "factor"))
            out.numel += n * n
        return out

    def check_factors(self, shape, block: int = 0) -> Optional[ValueError]:
        """None when this member can have factor vectors of VecShape shape in
        blocks of side block (Go's MemberLayout.CheckFactors, the host's
        check of alloc_factor), else the ValueError saying why: a shape it
        does not know, a block outside [0, MAX_BLOCK] (0 for PARAM_SHAPE),
        no matrix tensor, or a factor side above MAX_BLOCK (naming the
        tensor and the block to use)."""
        if shape not in VecShape._value2member_map_:
            return ValueError(f"unknown vector shape {int(shape)}")
        shape = VecShape(shape)
        s = shape.name.lower()
        if block < 0 or block > MAX_BLOCK:
            return ValueError(f"block {block} is outside [0, {MAX_BLOCK}] (0: whole rows and columns)")
        if shape == VecShape.PARAMS:
            if block != 0:
                return ValueError(f"block {block} set for a parameter-shaped vector: "
                                  "blocks apply to factor shapes (left, right)")
            return None
        if shape == VecShape.SAMPLES:  # protocol minor 10: Layout.batch_size elements
            if block != 0:
                return ValueError(f"block {block} set for a sample vector: "
                                  "blocks apply to factor shapes (left, right)")
            return None
        ms = self.matrices()
        if not ms:
            return ValueError(f"a {s} factor vector needs matrix tensors (2+ dims); this layout has none")
        for mx in ms:
            side = mx.cols if shape == VecShape.RIGHT else mx.rows
            if block > 0:
                side = min(side, block)
            if side > MAX_BLOCK:
                return ValueError(
                    f"tensor {self._tensor_name(mx.tensor)}, as the matrix {mx.rows}×{mx.cols}, would have a {s} "
                    f"factor of {side}×{side} ({4 * side * side / (1 << 30):.1f} GiB in float32), over the largest "
                    f"side {MAX_BLOCK}: set a block size ≤ {MAX_BLOCK} (Distributed Shampoo's default is 1024)")
        return None


@dataclass
class Layout:
    """The members' parameters (metadata only)."""

    members: List[MemberLayout]
    train_size: int = 0
    batch_size: int = 0

    def of(self, v: VecLayout) -> MemberLayout:
        """The layout of a vector of layout v (its member's factors, Go's
        Layout.Of); a member out of range gives an empty MemberLayout."""
        if v.member < 0 or v.member >= len(self.members):
            return MemberLayout(arch="", numel=0, tensors=[])
        return self.members[v.member].factors(v.shape, v.block)

    def tiles_of(self, v: VecLayout, block: int = 0) -> List[Tile]:
        """The tiles the matrix ops (gram, mat_mul) cut a vector of layout v
        into (Go's Layout.TilesOf): a parameter vector's matrices in blocks
        of side block, a factor vector's own matrices, whole."""
        if v.shape != VecShape.PARAMS:
            block = 0
        return self.of(v).tiles(block)


@dataclass
class Config:
    """What configure receives: the validated hyperparameters by name
    (float, int, bool or str, defaults filled in) and the run's shape."""

    params: Dict[str, Any] = field(default_factory=dict)
    seed: int = 0
    total_steps: int = 0
    steps_per_epoch: int = 0
    members: int = 1
    handles: Optional[Handles] = None

    def namespace(self, name: str) -> Handles:
        """The handles to allocate from: handles.sub(name) when the
        optimizer runs inside another, else a fresh root's sub(name)."""
        return (self.handles or Handles()).sub(name)


@dataclass
class StepInput:
    step: int = 0  # 0-based global step
    epoch: int = 0  # 0-based epoch
    lr: float = 0.0  # the base learning rate of the schedule at this step


class PredictiveKind(enum.IntEnum):
    POINT = 0
    MEMBERS = 1
    SAMPLES = 2


@dataclass
class Predictive:
    """How the host forms the predictive distribution."""

    kind: PredictiveKind = PredictiveKind.POINT
    vecs: List[Vec] = field(default_factory=list)
    weights: List[float] = field(default_factory=list)
    mean: Vec = 0
    std: Vec = 0
    n: int = 0
    # optional, one per vec (MEMBERS): a 0/1 mask the host saves beside it
    # in the run's model file ("mask." names), e.g. a sparse member's
    # active weights
    masks: List[Vec] = field(default_factory=list)


class Host:
    """What an optimizer drives (the plugin's connection to the host)."""

    def layout(self) -> Layout:  # pragma: no cover - interface
        raise NotImplementedError

    def exec(self, program) -> "Result":  # pragma: no cover - interface
        """Run the program's ops in order; return the values of its Read
        ops (a Result). A failing op raises optlab.Error whose .op names
        it."""
        raise NotImplementedError


class Optimizer:
    """What a plugin implements (optim.Optimizer). configure binds the host
    the optimizer drives for the rest of the run (keep it); step is called
    once per minibatch, sends programs to that host and returns the step's
    metrics as a dict.

    The other methods belong to optional features (Features, declared in
    Info): the host calls each only when its feature is declared. This
    class has their defaults, so a subclass writes info, configure and
    step, and the methods of the features it declares:
      predictive(self) -> Predictive        (features.predictive)
      save_state(self) -> (bytes, [Vec])    (features.state, with load_state)
      load_state(self, blob: bytes) -> None
      finalize(self) -> None                (features.finalize: called once
          after the last step, before the run is evaluated and its model
          saved; it may send programs, e.g. update_bn)
      resolved(self) -> dict                (always asked after configure:
          the values of hyperparameters configure derived, a -1 "auto"
          made concrete, by name; the host records them)
    """

    def info(self) -> Info:  # pragma: no cover - interface
        raise NotImplementedError

    def configure(self, host: Host, config: Config) -> None:  # pragma: no cover - interface
        raise NotImplementedError

    def step(self, inp: StepInput) -> Dict[str, float]:  # pragma: no cover - interface
        raise NotImplementedError

    def predictive(self) -> Predictive:
        """The point estimate of member 0 (no features.predictive)."""
        return Predictive(kind=PredictiveKind.POINT)

    def save_state(self):
        """Nothing (no features.state): the state lives on the host."""
        return b"", []

    def load_state(self, blob: bytes) -> None:
        """Only an empty state loads (no features.state)."""
        if blob:
            raise ValueError(f"unexpected {len(blob)}-byte state for an optimizer without state")

    def finalize(self) -> None:
        """Nothing (no features.finalize)."""

    def resolved(self):
        """Nothing derived: every hyperparameter trains as configured."""
        return None


__all__ = [
    "PROTOCOL_MAJOR", "PROTOCOL_MINOR", "FEATURES", "Features", "features_of",
    "FLOAT", "INT", "BOOL", "STRING", "ParamSpec", "Info", "Tensor", "MemberLayout", "Layout",
    "Config", "StepInput", "PredictiveKind", "Predictive", "Host", "Optimizer",
]
