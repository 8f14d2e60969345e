"""Conversions between the optlab types and the protobuf messages of
sdk/proto/optlab/plugin/v1/plugin.proto, as sdk/internal/wire does in Go,
with the same checks on what the plugin sends (hyperparameter types and
defaults, ops) and receives (value, op and enum kinds)."""

from __future__ import annotations

from typing import Any, Dict, List

from ._pb import plugin_pb2 as pb
from .errors import Code, Error, OpError, VecError
from .hparams import check
from .optimizer import (BOOL, FLOAT, INT, PROTOCOL_MINOR, STRING, Config, Features, Info, features_of, Layout, MemberLayout,
                        ParamSpec, Predictive, StepInput, Tensor)
from .program import (ENUMS, OPS, OPSET, Batch, K, Program, Reg, Result, Term, as_num, new_result,
                      op_name, op_spec)

_PARAM_TYPES = {FLOAT: pb.PARAM_TYPE_FLOAT, INT: pb.PARAM_TYPE_INT, BOOL: pb.PARAM_TYPE_BOOL,
                STRING: pb.PARAM_TYPE_STRING}


def value_to_pb(v: Any) -> pb.Value:
    if isinstance(v, bool):
        return pb.Value(bool_value=v)
    if isinstance(v, int):
        return pb.Value(int_value=v)
    if isinstance(v, float):
        return pb.Value(float_value=v)
    if isinstance(v, str):
        return pb.Value(string_value=v)
    raise ValueError(f"unsupported hyperparameter value {v!r} of type {type(v).__name__} (want float, int, bool or str)")


def value_from_pb(v: pb.Value) -> Any:
    kind = v.WhichOneof("kind")
    if kind is None:
        raise Error("hyperparameter value with no known kind", Code.UNIMPLEMENTED)
    return getattr(v, kind)


def _default_to_pb(typ: str, d: Any):
    if d is None:
        return None
    ok = {FLOAT: isinstance(d, (int, float)) and not isinstance(d, bool),
          INT: isinstance(d, int) and not isinstance(d, bool),
          BOOL: isinstance(d, bool), STRING: isinstance(d, str)}[typ]
    if not ok:
        raise ValueError(f"default {d!r} ({type(d).__name__}) does not match type {typ}")
    if typ == FLOAT:
        return pb.Value(float_value=float(d))
    return value_to_pb(d)


def param_spec_to_pb(s: ParamSpec) -> pb.ParamSpec:
    t = _PARAM_TYPES.get(s.type)
    if t is None:
        raise ValueError(f"hyperparameter {s.name!r}: unknown type {s.type!r} (want float, int, bool or string)")
    try:
        d = _default_to_pb(s.type, s.default)
    except ValueError as e:
        raise ValueError(f"hyperparameter {s.name!r}: {e}") from None
    msg = check(s, s.default) if s.default is not None else ""
    if msg:
        raise ValueError(f"hyperparameter {s.name!r}: default: {msg}")
    out = pb.ParamSpec(name=s.name, type=t, doc=s.doc, enum=list(s.enum), range=s.range)
    if d is not None:
        out.default.CopyFrom(d)
    return out


def info_to_pb(info: Info) -> pb.Info:
    """The Info for the wire: its features by name among the capabilities,
    the protocol minor stamped with PROTOCOL_MINOR when it is 0."""
    if not isinstance(info.features, Features):
        raise TypeError(f"features must be optlab.Features, got {type(info.features).__name__}")
    out = pb.Info(name=info.name, version=info.version, protocol_minor=info.protocol_minor or PROTOCOL_MINOR,
                  capabilities=info.features.names())
    for s in info.params:
        try:
            out.params.append(param_spec_to_pb(s))
        except ValueError as e:
            raise ValueError(f"info of {info.name!r}: {e}") from None
    return out


def info_response_to_pb(info: Info) -> pb.InfoResponse:
    """The Info call's reply: the Info, and predictive, state and finalize
    also in the booleans by which hosts before feature names knew them."""
    f = info.features
    return pb.InfoResponse(info=info_to_pb(info), predictor=f.predictive, stateful=f.state, finalizer=f.finalize)


def info_from_pb(msg: pb.Info) -> Info:
    """A received Info (params left out); unknown feature names are ignored."""
    return Info(name=msg.name, version=msg.version, protocol_minor=msg.protocol_minor,
                features=features_of(msg.capabilities))


def config_from_pb(c: pb.Config) -> Config:
    params: Dict[str, Any] = {}
    for name in sorted(c.params):
        try:
            params[name] = value_from_pb(c.params[name])
        except Error as e:
            raise e.wrap(f"hyperparameter {name!r}") from None
    return Config(params=params, seed=c.seed, total_steps=c.total_steps, steps_per_epoch=c.steps_per_epoch,
                  members=c.members)


def params_to_pb(params, out) -> None:
    """Write hyperparameter values by name (what an optimizer's resolved()
    returned) into the protobuf map out, as Go's wire.ParamsToProto."""
    for name in sorted(params or {}):
        try:
            out[name].CopyFrom(value_to_pb(params[name]))
        except ValueError as e:
            raise ValueError(f'hyperparameter "{name}": {e}') from None


def step_input_from_pb(s: pb.StepInput) -> StepInput:
    return StepInput(step=s.step, epoch=s.epoch, lr=s.lr)


def step_output_to_pb(metrics) -> pb.StepOutput:
    if metrics is None:
        metrics = {}
    if not isinstance(metrics, dict):
        metrics = getattr(metrics, "metrics", metrics)
    return pb.StepOutput(metrics={str(k): float(v) for k, v in dict(metrics).items()})


def predictive_to_pb(p: Predictive) -> pb.Predictive:
    return pb.Predictive(kind=int(p.kind), vecs=list(p.vecs), weights=[float(w) for w in p.weights],
                         mean=p.mean, std=p.std, n=p.n, masks=list(p.masks))


def layout_from_pb(l: pb.Layout) -> Layout:
    return Layout(
        members=[MemberLayout(arch=m.arch, numel=m.numel, variational=m.variational,
                              tensors=[Tensor(t.name, list(t.shape), t.offset, t.kind) for t in m.tensors])
                 for m in l.members],
        train_size=l.train_size, batch_size=l.batch_size)


# Ops cross the wire by the op table (ops.json), as in sdk/internal/wire: an
# op is the field of the Op oneof named by its wire name, and each of its
# fields the field of that message with the same name, converted by its
# protocol kind. A Num field f is the Num message f_num when the message has
# one (ops older than minor 5, whose double f then also carries an
# immediate for older receivers; a receiver reads f as an immediate when
# f_num is absent), else the Num message f. Batch and Term are messages
# whose fields map the same way.
_BATCH_FIELDS = (("part", "int32"), ("of", "int32"), ("shuffle", "int64"))
_TERM_FIELDS = (("coef", "num"), ("x", "vec"))
_OPS_BY_WIRE = {spec["wire"]: (OPS[spec["name"]], spec) for spec in OPSET["ops"]}


def _fields(spec):
    return tuple((f["wire"], f["kind"]) for f in spec["fields"])


def _num_field(msg, wire: str):
    """The Num field of wire in msg, and its legacy double (or None)."""
    if wire + "_num" in msg.DESCRIPTOR.fields_by_name:
        return wire + "_num", wire
    return wire, None


def _encode(fields, obj, msg) -> None:
    for wire, kind in fields:
        x = getattr(obj, wire)
        if kind in ("vec", "int32", "int64"):
            setattr(msg, wire, int(x))
        elif kind == "vecs":
            getattr(msg, wire).extend(int(v) for v in x)
        elif kind == "num":
            n = as_num(x)
            if n is None:
                continue  # absent: an immediate 0 (old ops), an unused operand (Arith)
            target, legacy = _num_field(msg, wire)
            if isinstance(n, Reg):
                getattr(msg, target).reg = n.i
            else:
                getattr(msg, target).k = float(n)
                if legacy is not None:
                    setattr(msg, legacy, float(n))
        elif kind == "reg":
            if not isinstance(x, Reg):
                raise TypeError(f"{wire} is {x!r}, not a register")
            setattr(msg, wire, x.i)
        elif kind == "batch":
            sub = getattr(msg, wire)
            sub.SetInParent()
            _encode(_BATCH_FIELDS, x, sub)
        elif kind == "terms":
            for c, v in x:
                _encode(_TERM_FIELDS, Term(c, v), getattr(msg, wire).add())
        elif kind == "bool":
            setattr(msg, wire, bool(x))
        elif kind == "float":
            setattr(msg, wire, float(x))
        elif kind == "string":
            setattr(msg, wire, str(x))
        else:  # enum
            setattr(msg, wire, int(x))


def _op_to_pb(op) -> pb.Op:
    spec = op_spec(op)
    if spec is None:
        raise TypeError(f"{op_name(op)} is not an op")
    out = pb.Op()
    sub = getattr(out, spec["wire"])
    sub.SetInParent()
    _encode(_fields(spec), op, sub)
    return out


def program_to_pb(p: Program) -> pb.Program:
    """The wire form of p; an op that is not one, or a misuse of the
    builder (p.err(): a register of another program), raises optlab.Error
    (INVALID_ARGUMENT) naming it."""
    out = pb.Program()
    if p is None:
        return out
    if p.err() is not None:
        raise Error(f"program: {p.err()}", Code.INVALID_ARGUMENT)
    for i, op in enumerate(p.ops):
        try:
            out.ops.append(_op_to_pb(op))
        except (TypeError, ValueError) as e:
            raise Error(f"op {i} ({op_name(op)}): {e}", Code.INVALID_ARGUMENT,
                        OpError(i, op_name(op), str(e))) from None
    return out


def _decode(fields, cls, msg, p: Program):
    if len(msg.UnknownFields()):
        raise ValueError(f"{msg.DESCRIPTOR.name} has a field this protocol minor does not know (sent by a newer one?)")

    def reg(i: int) -> Reg:
        return Reg() if i == 0 else p.reg(i)

    kw = {}
    for wire, kind in fields:
        if kind in ("vec", "int32", "int64", "bool", "float", "string"):
            kw[wire] = getattr(msg, wire)
        elif kind == "vecs":
            kw[wire] = list(getattr(msg, wire))
        elif kind == "num":
            target, legacy = _num_field(msg, wire)
            n = None
            if msg.HasField(target):
                nm = getattr(msg, target)
                if len(nm.UnknownFields()):
                    raise ValueError(f"{wire}: an operand kind this protocol minor does not know")
                which = nm.WhichOneof("kind")
                if which == "k":
                    n = K(nm.k)
                elif which == "reg":
                    n = reg(nm.reg)
            if n is None and legacy is not None:
                n = K(getattr(msg, legacy))
            kw[wire] = n
        elif kind == "reg":
            kw[wire] = reg(getattr(msg, wire))
        elif kind == "batch":
            kw[wire] = _decode(_BATCH_FIELDS, Batch, getattr(msg, wire), p)
        elif kind == "terms":
            kw[wire] = [_decode(_TERM_FIELDS, Term, t, p) for t in getattr(msg, wire)]
        else:  # enum
            name, n = kind[5:], getattr(msg, wire)
            if n not in OPSET["enums"][name].values():
                raise ValueError(f"unknown {name} {n}")
            kw[wire] = ENUMS[name](n)
    return cls(**kw)


def program_from_pb(m: pb.Program) -> Program:
    """A received program (Go's wire.ProgramFromProto): an op of a kind, a
    field or an enum value this protocol minor does not know raises
    optlab.Error (UNIMPLEMENTED) with the op's index."""
    p = Program()
    for i, op in enumerate(m.ops):
        kind = op.WhichOneof("kind")
        if kind is None or kind not in _OPS_BY_WIRE:
            msg = "unknown op kind (sent by a newer protocol minor version?)"
            raise Error(f"op {i} (unknown): {msg}", Code.UNIMPLEMENTED, OpError(i, "unknown", msg))
        cls, spec = _OPS_BY_WIRE[kind]
        try:
            p.ops.append(_decode(_fields(spec), cls, getattr(op, kind), p))
        except ValueError as e:
            raise Error(f"op {i} ({spec['name']}): {e}", Code.UNIMPLEMENTED, OpError(i, spec["name"], str(e))) from None
    return p


def exec_request_to_pb(p: Program) -> pb.ExecRequest:
    """The Exec request of p, of this SDK's protocol minor."""
    return pb.ExecRequest(program=program_to_pb(p), protocol_minor=PROTOCOL_MINOR)


def exec_request_from_pb(req: pb.ExecRequest) -> Program:
    """A received Exec request's program; one of a plugin older than minor 5
    (protocol_minor 0) gets a Read op of every register appended, in op
    order (its result is then every scalar in op order)."""
    p = program_from_pb(req.program)
    if req.protocol_minor == 0:
        for r in range(1, p.num_regs() + 1):
            p.read(p.reg(r))
    return p


def result_from_pb(p: Program, r: pb.Result) -> Result:
    """The result of p: raises optlab.Error (INTERNAL) when it has another
    number of values than p has Read ops."""
    try:
        return new_result(p, list(r.scalars))
    except ValueError as e:
        raise Error(f"host's result: {e}", Code.INTERNAL) from None


def result_to_pb(r: Result) -> pb.Result:
    return pb.Result(scalars=r.reads)


def op_error_to_pb(op: OpError) -> pb.OpError:
    """The OpError detail of a failed op; a VecError crosses as its handle
    and the text after it, for the receiver to name the handle."""
    if op.vec_error is not None:
        return pb.OpError(op_index=op.index, op=op.op, message=op.vec_error.msg, vec_error=True,
                          vec=op.vec_error.vec)
    return pb.OpError(op_index=op.index, op=op.op, message=op.message)


def op_error_from_pb(oe: pb.OpError) -> OpError:
    if oe.vec_error:
        return OpError(oe.op_index, oe.op, vec_error=VecError(oe.vec, oe.message))
    return OpError(oe.op_index, oe.op, oe.message)


__all__ = [
    "value_to_pb", "value_from_pb", "param_spec_to_pb", "info_to_pb", "config_from_pb",
    "params_to_pb", "step_input_from_pb", "step_output_to_pb", "predictive_to_pb", "layout_from_pb", "program_to_pb",
    "program_from_pb", "exec_request_to_pb", "exec_request_from_pb", "result_from_pb", "result_to_pb",
    "op_error_to_pb", "op_error_from_pb",
]
