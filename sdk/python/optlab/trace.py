"""optim.Trace for Python: a Host that logs every call, in the format of Go's
tracer (so traces of a Python and a Go optimizer can be compared line by
line). OPTLAB_TRACE=1 makes serve wrap the host with it, writing to the
plugin's stderr, which reaches the host's output."""

from __future__ import annotations

import threading
import time

from .program import listing, num

TRACE_ENV = "OPTLAB_TRACE"


class Trace:
    """A Host that passes every call on to host and writes it to out (a
    text stream): each exec as its number, the program's listing, the
    values it read back by register and, with timing, how long it took; or
    the error it failed with."""

    def __init__(self, host, out, timing: bool = False):
        self._host = host
        self._out = out
        self._timing = timing
        self._mu = threading.Lock()
        self._n = 0

    def layout(self):
        try:
            l = self._host.layout()
        except Exception as e:
            with self._mu:
                self._write(f"layout: error: {e}\n")
            raise
        with self._mu:
            s = f"layout: {len(l.members)} member(s)"
            for m in l.members:
                s += f" [{m.arch}: {m.numel} parameters in {len(m.tensors)} tensors]"
            self._write(s + "\n")
        return l

    def exec(self, p):
        start = time.perf_counter_ns()
        err = None
        try:
            r = self._host.exec(p)
        except Exception as e:
            err, r = e, None
        took = time.perf_counter_ns() - start
        with self._mu:
            self._n += 1
            head = f"exec {self._n}: {len(p.ops) if p is not None else 0} ops"
            if self._timing:
                head += ", " + go_duration(round(took / 1000) * 1000)
            s = head + "\n" + listing(p)
            if err is not None:
                s += f"   error: {err}\n"
            elif r.reads:
                s += "   ←" + "".join(f" #{i}={num(x)}" for i, x in zip(r._regs, r.reads)) + "\n"
            self._write(s)
        if err is not None:
            raise err
        return r

    def _write(self, s: str) -> None:
        self._out.write(s)
        flush = getattr(self._out, "flush", None)
        if flush:
            flush()


def go_duration(ns: int) -> str:
    """ns nanoseconds as Go's time.Duration.String writes them."""
    if ns == 0:
        return "0s"
    neg, ns = ns < 0, abs(ns)
    if ns < 1000:
        s = f"{ns}ns"
    elif ns < 1_000_000:
        s = _frac(ns, 1000) + "µs"
    elif ns < 1_000_000_000:
        s = _frac(ns, 1_000_000) + "ms"
    else:
        h, rest = divmod(ns, 3600 * 10**9)
        m, rest = divmod(rest, 60 * 10**9)
        s = _frac(rest, 10**9) + "s"
        if h:
            s = f"{h}h{m}m" + s
        elif m:
            s = f"{m}m" + s
    return ("-" if neg else "") + s


def _frac(v: int, unit: int) -> str:
    whole, frac = divmod(v, unit)
    if frac == 0:
        return str(whole)
    width = len(str(unit)) - 1
    return f"{whole}." + f"{frac:0{width}d}".rstrip("0")


__all__ = ["TRACE_ENV", "Trace", "go_duration"]
