"""The types an optimizer is written against, mirroring sdk/optim/optim.go:
the Optimizer interface, what the host says (Layout, Config, StepInput) and
what the optimizer says (Info, Predictive)."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

from .program import OPSET, Handles, Vec

# PROTOCOL_MAJOR is the go-plugin protocol version; PROTOCOL_MINOR the
# in-band minor version this SDK speaks (sdk/optim's ProtocolMinor, from the
# op table).
PROTOCOL_MAJOR = 1
PROTOCOL_MINOR = OPSET["protocol_minor"]

# Capabilities (optim.Capability).
CAP_MEMBERS = "members"
"""The optimizer trains every member of a run with several members."""
CAP_MEMBER_DATA_ORDER = "member-data-order"
"""Every member gets its own data order (deep ensembles)."""
CAP_OWNS_UPDATE = "owns-update"
"""The optimizer applies its own update and never sends base_step or set_lr:
the host uses and records no base optimizer for it, and shows the step
metric "lr" it reports as the run's learning rate."""

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
    """What a plugin says about itself."""

    name: str
    version: str = "0.0.0"
    protocol_minor: int = PROTOCOL_MINOR
    capabilities: List[str] = field(default_factory=list)
    params: List[ParamSpec] = field(default_factory=list)

    def has(self, cap: str) -> bool:
        return cap in self.capabilities


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


@dataclass
class MemberLayout:
    arch: str
    numel: int
    tensors: List[Tensor]
    variational: bool = False


@dataclass
class Layout:
    """The members' parameters (metadata only)."""

    members: List[MemberLayout]
    train_size: int = 0
    batch_size: int = 0


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
    """What a plugin implements. step is called once per minibatch: it
    sends programs to host and returns the step's metrics as a dict.

    Optional methods, found by name as Go finds interfaces:
      predictive(self) -> Predictive        (optim.Predictor)
      save_state(self) -> (bytes, [Vec])    (optim.Stateful, with load_state)
      load_state(self, blob: bytes) -> None
      resolved(self) -> dict                (optim.Resolver: the values of
          hyperparameters configure derived, a -1 "auto" made concrete, by
          name; called after a successful configure, recorded by the host)
      finalize(self, host: Host) -> None    (optim.Finalizer, protocol minor
          6: called once after the last step, before the run is evaluated
          and its model saved; it may send programs, e.g. update_bn)
    """

    def info(self) -> Info:  # pragma: no cover - interface
        raise NotImplementedError

    def configure(self, host: Host, config: Config) -> None:  # pragma: no cover - interface
        raise NotImplementedError

    def step(self, host: Host, inp: StepInput) -> Dict[str, float]:  # pragma: no cover - interface
        raise NotImplementedError


def is_predictor(opt) -> bool:
    return callable(getattr(opt, "predictive", None))


def is_stateful(opt) -> bool:
    return callable(getattr(opt, "save_state", None)) and callable(getattr(opt, "load_state", None))


def is_finalizer(opt) -> bool:
    return callable(getattr(opt, "finalize", None))


def is_resolver(opt) -> bool:
    return callable(getattr(opt, "resolved", None))


__all__ = [
    "PROTOCOL_MAJOR", "PROTOCOL_MINOR", "CAP_MEMBERS", "CAP_MEMBER_DATA_ORDER",
    "FLOAT", "INT", "BOOL", "STRING", "ParamSpec", "Info", "Tensor", "MemberLayout", "Layout",
    "Config", "StepInput", "PredictiveKind", "Predictive", "Host", "Optimizer",
    "is_predictor", "is_stateful", "is_resolver", "is_finalizer",
]
