"""The types an optimizer is written against, mirroring sdk/optim/optim.go:
the Optimizer interface, what the host says (Layout, Config, StepInput) and
what the optimizer says (Info, Predictive)."""

from __future__ import annotations

import dataclasses
import enum
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

from .program import OPSET, Handles, Vec

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
