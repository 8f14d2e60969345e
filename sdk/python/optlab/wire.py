"""Conversions between the optlab types and the protobuf messages of
sdk/proto/optlab/plugin/v1/plugin.proto, as sdk/internal/wire does in Go,
with the same checks on what the plugin sends (hyperparameter types and
defaults) and receives (value kinds)."""

from __future__ import annotations

from typing import Any, Dict, List

from ._pb import plugin_pb2 as pb
from .errors import Code, Error
from .hparams import check
from .optimizer import (BOOL, FLOAT, INT, STRING, Config, Info, Layout, MemberLayout, ParamSpec,
                        Predictive, StepInput, Tensor)
from .program import (AddConst, Alloc, Axpy, BaseStep, Binary, Copy, Dot, Fill, FillRange, Free,
                      Grad, JointGrad, LinComb, Norm, Program, RandN, Scale, SetLR, Unary,
                      op_name)

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
    out = pb.Info(name=info.name, version=info.version, protocol_minor=info.protocol_minor,
                  capabilities=[str(c) for c in info.capabilities])
    for s in info.params:
        try:
            out.params.append(param_spec_to_pb(s))
        except ValueError as e:
            raise ValueError(f"info of {info.name!r}: {e}") from None
    return out


def config_from_pb(c: pb.Config) -> Config:
    params: Dict[str, Any] = {}
    for name in sorted(c.params):
        try:
            params[name] = value_from_pb(c.params[name])
        except Error as e:
            raise e.wrap(f"hyperparameter {name!r}") from None
    return Config(params=params, seed=c.seed, total_steps=c.total_steps, steps_per_epoch=c.steps_per_epoch,
                  members=c.members)


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
                         mean=p.mean, std=p.std, n=p.n)


def layout_from_pb(l: pb.Layout) -> Layout:
    return Layout(
        members=[MemberLayout(arch=m.arch, numel=m.numel, variational=m.variational,
                              tensors=[Tensor(t.name, list(t.shape), t.offset, t.kind) for t in m.tensors])
                 for m in l.members],
        train_size=l.train_size, batch_size=l.batch_size)


def _batch(b) -> pb.Batch:
    return pb.Batch(part=b.part, of=b.of, shuffle=b.shuffle)


def _op_to_pb(op) -> pb.Op:
    t = type(op)
    if t is Alloc:
        return pb.Op(alloc=pb.AllocOp(id=op.id, member=op.member))
    if t is Free:
        return pb.Op(free=pb.FreeOp(id=op.id))
    if t is Copy:
        return pb.Op(copy=pb.CopyOp(dst=op.dst, src=op.src, bn=op.bn))
    if t is Fill:
        return pb.Op(fill=pb.FillOp(dst=op.dst, value=op.value))
    if t is FillRange:
        return pb.Op(fill_range=pb.FillRangeOp(dst=op.dst, offset=op.offset, len=op.len, value=op.value))
    if t is Scale:
        return pb.Op(scale=pb.ScaleOp(dst=op.dst, alpha=op.alpha))
    if t is AddConst:
        return pb.Op(add_const=pb.AddConstOp(dst=op.dst, value=op.value))
    if t is Axpy:
        return pb.Op(axpy=pb.AxpyOp(dst=op.dst, alpha=op.alpha, x=op.x))
    if t is LinComb:
        return pb.Op(lin_comb=pb.LinCombOp(dst=op.dst, terms=[pb.Term(coef=c, x=x) for c, x in op.terms]))
    if t is Unary:
        return pb.Op(unary=pb.UnaryOp(dst=op.dst, src=op.src, kind=int(op.kind)))
    if t is Binary:
        return pb.Op(binary=pb.BinaryOp(dst=op.dst, a=op.a, b=op.b, kind=int(op.kind)))
    if t is RandN:
        return pb.Op(rand_n=pb.RandNOp(dst=op.dst, std=op.std, seed=op.seed))
    if t is Dot:
        return pb.Op(dot=pb.DotOp(a=op.a, b=op.b))
    if t is Norm:
        return pb.Op(norm=pb.NormOp(x=op.x))
    if t is Grad:
        return pb.Op(grad=pb.GradOp(out=op.out, at=op.at, batch=_batch(op.batch), bn=int(op.bn), eps=op.eps,
                                    out_rho=op.out_rho))
    if t is BaseStep:
        return pb.Op(base_step=pb.BaseStepOp(params=op.params, grad=op.grad))
    if t is SetLR:
        return pb.Op(set_lr=pb.SetLROp(member=op.member, lr=op.lr))
    if t is JointGrad:
        return pb.Op(joint_grad=pb.JointGradOp(outs=list(op.outs), ats=list(op.ats), batch=_batch(op.batch),
                                               bn=int(op.bn)))
    raise TypeError(f"{op_name(op)} is not an op")


def program_to_pb(p: Program) -> pb.Program:
    """The wire form of p; an op that is not one raises optlab.Error naming it."""
    out = pb.Program()
    for i, op in enumerate(p.ops if p is not None else ()):
        try:
            out.ops.append(_op_to_pb(op))
        except (TypeError, ValueError) as e:
            raise Error(f"op {i} ({op_name(op)}): {e}", Code.INVALID_ARGUMENT) from None
    return out


__all__ = [
    "value_to_pb", "value_from_pb", "param_spec_to_pb", "info_to_pb", "config_from_pb",
    "step_input_from_pb", "step_output_to_pb", "predictive_to_pb", "layout_from_pb", "program_to_pb",
    ]
