"""Hyperparameters declared as a dataclass, as sdk/hparams does with a tagged
Go struct: the field defaults are the defaults, `param` adds the doc and the
enum and range constraints, `specs` gives the schema for Info and `apply`
checks the values configure receives, with Go's messages.

    @dataclass
    class Params:
        rho: float = optlab.param(0.05, range="[0,)", doc="neighbourhood radius")
        scope: str = optlab.param("all", enum=["all", "weights"], doc="…")

    specs(Params)                       # [ParamSpec("rho", "float", 0.05, …), …]
    apply(Params, {"rho": -1.0})        # Error: hparams: "rho": -1 is out of range [0,): want ≥ 0

Supported field types are float, int, bool and str. Constraints: `enum`
lists the values a str may take; `range` is an interval such as "[0,1]",
"(0,)", "[1,)" or "[1,batch]" (the batch size; "[" and "]" inclusive, an empty bound unbounded).
"""

from __future__ import annotations

import dataclasses
import decimal
import math
import typing
from typing import Any, Dict, List, Optional, Sequence

from .errors import Error
from .optimizer import BOOL, FLOAT, INT, STRING, ParamSpec

_META = "optlab"
_TYPES = {float: FLOAT, int: INT, bool: BOOL, str: STRING}


def param(default, *, doc: str = "", enum: Optional[Sequence[str]] = None, range: str = "",
          name: Optional[str] = None):
    """A hyperparameter field of a dataclass: its default and, optionally,
    its doc, the values it may take (enum, for str) or the interval it must
    lie in (range, for float and int), and its name when it is not the
    field's (e.g. a Python keyword)."""
    meta = {"doc": doc, "enum": list(enum or []), "range": range, "name": name}
    return dataclasses.field(default=default, metadata={_META: meta})


def _fields(cls) -> List[tuple]:
    """(field, spec) pairs of a dataclass type, in field order."""
    if not dataclasses.is_dataclass(cls):
        raise TypeError(f"hparams: {cls!r} is not a dataclass")
    if not isinstance(cls, type):
        cls = type(cls)
    hints = typing.get_type_hints(cls)
    out, seen = [], set()
    for f in dataclasses.fields(cls):
        meta = f.metadata.get(_META, {})
        name = meta.get("name") or f.name
        typ = _TYPES.get(hints.get(f.name))
        if typ is None:
            raise TypeError(f"hparams: field {cls.__name__}.{f.name}: unsupported type {hints.get(f.name)!r} "
                            "(want float, int, bool or str)")
        if name in seen:
            raise TypeError(f"hparams: duplicate hyperparameter {name!r} in {cls.__name__}")
        seen.add(name)
        spec = ParamSpec(name=name, type=typ, doc=meta.get("doc", ""), enum=list(meta.get("enum", [])),
                         range=meta.get("range", ""))
        err = _check_constraints(spec)
        if err:
            raise TypeError(f"hparams: field {cls.__name__}.{f.name}: {err}")
        out.append((f, spec))
    return out


def specs(cls) -> List[ParamSpec]:
    """The schema of a hyperparameter dataclass (a type or an instance),
    in field order, with the defaults (or an instance's values)."""
    out = []
    for f, spec in _fields(cls):
        if isinstance(cls, type):
            if f.default is dataclasses.MISSING:
                raise TypeError(f"hparams: field {cls.__name__}.{f.name} has no default")
            value = f.default
        else:
            value = getattr(cls, f.name)
        spec.default = convert(spec.type, value)
        msg = check(spec, spec.default)
        if msg:
            raise TypeError(f"hparams: default of {spec.name!r}: {msg}")
        out.append(spec)
    return out


def apply(cls, params: Dict[str, Any]):
    """A new instance of the dataclass cls (or a copy of an instance) with
    the values in params. Every name must be a hyperparameter and every
    value must fit its type and constraints, else optlab.Error with Go's
    message (e.g. 'hparams: "eta": -1 is out of range [0,): want ≥ 0')."""
    fs = _fields(cls)
    by_name = {spec.name: (f, spec) for f, spec in fs}
    values = {}
    for name in sorted(params):
        if name not in by_name:
            have = ", ".join(spec.name for _, spec in fs)
            raise Error(f'hparams: {_quote(name)}: unknown hyperparameter (have {have})')
        f, spec = by_name[name]
        try:
            v = convert(spec.type, params[name])
        except ValueError as e:
            raise Error(f"hparams: {_quote(name)}: {e}") from None
        msg = check(spec, v)
        if msg:
            raise Error(f"hparams: {_quote(name)}: {msg}")
        values[f.name] = v
    if isinstance(cls, type):
        return cls(**values)
    return dataclasses.replace(cls, **values)


def convert(typ: str, v: Any) -> Any:
    """v in the canonical Python type of a hyperparameter type: integers
    convert to float, integral floats to int; anything else that does not
    fit raises ValueError with Go's message."""
    if typ == FLOAT:
        if isinstance(v, float):
            return v
        if isinstance(v, int) and not isinstance(v, bool):
            return float(v)
    elif typ == INT:
        if isinstance(v, int) and not isinstance(v, bool):
            return v
        if isinstance(v, float):
            if v == math.trunc(v) and abs(v) <= 1 << 53:
                return int(v)
            raise ValueError(f"{go_value(v)} is not an integer")
    elif typ == BOOL:
        if isinstance(v, bool):
            return v
    elif typ == STRING:
        if isinstance(v, str):
            return v
    else:
        raise ValueError(f"unknown parameter type {_quote(typ)}")
    return _invalid(v, typ)


def _invalid(v, typ):
    raise ValueError(f"value {go_value(v)} of type {_go_type(v)} is not a valid {typ}")


def _go_type(v) -> str:
    return {bool: "bool", int: "int64", float: "float64", str: "string"}.get(type(v), type(v).__name__)


def check(spec: ParamSpec, v: Any) -> str:
    """The message saying why v breaks spec's enum or range, or ""."""
    err = _check_constraints(spec)
    if err:
        return err
    if spec.enum and v not in spec.enum:
        return f"{_quote(v if isinstance(v, str) else '')} is not one of " + ", ".join(_quote(e) for e in spec.enum)
    if spec.range:
        iv = _parse_range(spec.range)
        x = float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else 0.0
        if not _contains(iv, x):
            return f"{go_value(v)} is out of range {spec.range}: want {_want(iv)}"
    return ""


def _check_constraints(spec: ParamSpec) -> str:
    if spec.enum:
        if spec.type != STRING:
            return "enum applies to string hyperparameters only"
        if any(e == "" for e in spec.enum):
            return f"enum {_quote('|'.join(spec.enum))} has an empty value"
    if spec.range:
        if spec.type not in (FLOAT, INT):
            return "range applies to float and int hyperparameters only"
        try:
            _parse_range(spec.range)
        except ValueError as e:
            return str(e)
    return ""


def _parse_range(s: str):
    bad = ValueError(f'range {_quote(s)}: want an interval such as "[0,1]", "(0,)", "[1,)" or "[1,batch]"')
    if len(s) < 3 or s[0] not in "[(" or s[-1] not in "])" or "," not in s[1:-1]:
        raise bad
    lo_s, hi_s = s[1:-1].split(",", 1)
    lo, hi = -math.inf, math.inf
    # A bound may name what the host knows ("[1,batch]": the batch size);
    # the host checks it, the plugin leaves it open.
    try:
        if lo_s.strip() and lo_s.strip() != "batch":
            lo = float(lo_s.strip())
        if hi_s.strip() and hi_s.strip() != "batch":
            hi = float(hi_s.strip())
    except ValueError:
        raise bad from None
    if lo_s.strip() == hi_s.strip() == "batch":
        raise bad
    if lo > hi:
        raise bad
    return lo, hi, s[0] == "(", s[-1] == ")"


def _contains(iv, x: float) -> bool:
    lo, hi, lo_open, hi_open = iv
    if math.isnan(x):
        return False
    if x < lo or (lo_open and x == lo):
        return False
    if x > hi or (hi_open and x == hi):
        return False
    return True


def _want(iv) -> str:
    lo, hi, lo_open, hi_open = iv
    parts = []
    if not math.isinf(lo):
        parts.append((">" if lo_open else "≥") + " " + go_value(lo))
    if not math.isinf(hi):
        parts.append(("<" if hi_open else "≤") + " " + go_value(hi))
    return " and ".join(parts)


def _quote(s: str) -> str:
    """s as Go's %q writes a plain string."""
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


def go_value(v: Any) -> str:
    """v as Go's %v writes a float64, int64, bool or string."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        return _go_float(v)
    return str(v)


def _go_float(f: float) -> str:
    if math.isnan(f):
        return "NaN"
    if math.isinf(f):
        return "+Inf" if f > 0 else "-Inf"
    if f == 0:
        return "-0" if math.copysign(1, f) < 0 else "0"
    sign, digits, exp = decimal.Decimal(repr(f)).as_tuple()
    digits = list(digits)
    while len(digits) > 1 and digits[-1] == 0:
        digits.pop()
        exp += 1
    mant = "".join(map(str, digits))
    x = len(digits) + exp - 1  # exponent of the leading digit
    s = "-" if sign else ""
    if x < -4 or x >= 6:  # %e, as strconv's shortest 'g' decides
        m = mant[0] + ("." + mant[1:] if len(mant) > 1 else "")
        return f"{s}{m}e{'-' if x < 0 else '+'}{abs(x):02d}"
    if exp >= 0:
        return s + mant + "0" * exp
    point = len(mant) + exp
    if point > 0:
        return s + mant[:point] + "." + mant[point:]
    return s + "0." + "0" * (-point) + mant


__all__ = ["param", "specs", "apply", "convert", "check", "go_value"]
