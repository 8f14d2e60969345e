"""Errors that cross the process boundary.

An optimizer reports a failure it expects (bad configuration, a failed
program) by raising Error: the host then gets it as the plugin's error, as
for a Go plugin that returns an error ("plugin sam.py: Step: sam: ascent: op
3 (Grad): …"). Any other exception is a bug and is treated like a Go panic:
its traceback goes to the plugin's stderr, which the host shows with the
error ("panic in Step: ZeroDivisionError: …; last stderr lines: …").
"""

from __future__ import annotations

import contextlib
import enum
from typing import Optional

from .program import vec_name


class Code(enum.IntEnum):
    """gRPC status codes (the numbers are the wire's)."""

    OK = 0
    CANCELLED = 1
    UNKNOWN = 2
    INVALID_ARGUMENT = 3
    DEADLINE_EXCEEDED = 4
    NOT_FOUND = 5
    ALREADY_EXISTS = 6
    PERMISSION_DENIED = 7
    RESOURCE_EXHAUSTED = 8
    FAILED_PRECONDITION = 9
    ABORTED = 10
    OUT_OF_RANGE = 11
    UNIMPLEMENTED = 12
    INTERNAL = 13
    UNAVAILABLE = 14
    DATA_LOSS = 15
    UNAUTHENTICATED = 16


class VecError:
    """An error about one vector handle of an op (Go's optim.VecError): it
    prints the handle by its namespaced name ("handle sam/g[0] is not
    allocated") once name_handles gave it the names of the program that
    named it; the host's message has the bare handle ("handle v3 …")."""

    __slots__ = ("vec", "msg", "names")

    def __init__(self, vec: int, msg: str, names=None):
        self.vec, self.msg, self.names = vec, msg, names

    def __str__(self) -> str:
        name = self.names.name(self.vec) if self.names is not None else vec_name(self.vec)
        return f"handle {name} {self.msg}"

    def __repr__(self) -> str:
        return f"VecError({self.vec}, {self.msg!r})"

    def __eq__(self, other) -> bool:
        return isinstance(other, VecError) and (other.vec, other.msg) == (self.vec, self.msg)

    __hash__ = None  # mutable (names)


class OpError:
    """The op of a program that failed: its 0-based index, its kind ("Grad")
    and its own message (with vec_error, the VecError it is). Go's
    optim.OpError; it travels in the gRPC status details as
    optlab.plugin.v1.OpError."""

    __slots__ = ("index", "op", "_message", "vec_error")

    def __init__(self, index: int, op: str, message: str = "", vec_error: Optional[VecError] = None):
        self.index, self.op, self._message, self.vec_error = index, op, message, vec_error

    @property
    def message(self) -> str:
        """The op's own message."""
        return str(self.vec_error) if self.vec_error is not None else self._message

    def __str__(self) -> str:
        return f"op {self.index} ({self.op}): {self.message}"

    def __repr__(self) -> str:
        return f"OpError({self.index}, {self.op!r}, {self.message!r})"

    def __eq__(self, other) -> bool:
        return isinstance(other, OpError) and (other.index, other.op, other.message, other.vec_error) == (
            self.index, self.op, self.message, self.vec_error)

    __hash__ = None


class Error(Exception):
    """A failure an optimizer reports: a message, a gRPC code (UNKNOWN by
    default) and, when a program failed, the OpError that says which op.

    Host.exec raises it with the host's code, message and op; wrap it with a
    prefix (Error.wrap, or the wrap_errors context manager) to say where it
    happened, as Go plugins do with fmt.Errorf("sam: ascent: %w", err)."""

    def __init__(self, message: str, code: Code = Code.UNKNOWN, op: Optional[OpError] = None):
        super().__init__(message)
        self._message = message
        self.code = Code(code)
        self.op = op
        self._prefix: Optional[str] = None  # with op.vec_error: message = prefix + str(vec_error)

    @property
    def message(self) -> str:
        """The whole message."""
        if self._prefix is not None and self.op is not None and self.op.vec_error is not None:
            return self._prefix + str(self.op.vec_error)
        return self._message

    def __str__(self) -> str:
        return self.message

    def wrap(self, prefix: str) -> "Error":
        """The same error with message "prefix: message"."""
        return Error(f"{prefix}: {self.message}", self.code, self.op)


def name_handles(err: BaseException, p) -> None:
    """Make the VecError of err (an Error whose op failed on a handle) print
    its handle with the names of program p's namespace, in the op's message
    and in err's, when the message ends with the host's text: the SDK calls
    it on the errors Host.exec raises (Go's opset.NameHandles)."""
    op = getattr(err, "op", None)
    names = getattr(p, "_names", None)
    if not isinstance(err, Error) or op is None or op.vec_error is None or names is None:
        return
    bare = str(op.vec_error)
    if err._prefix is None and err._message.endswith(bare):
        err._prefix = err._message[:len(err._message) - len(bare)]
    op.vec_error.names = names


@contextlib.contextmanager
def wrap_errors(prefix: str):
    """Re-raise every Error raised inside the block with prefix prepended:

        with optlab.wrap_errors("sam: ascent"):
            r = host.exec(p)
    """
    try:
        yield
    except Error as e:
        raise e.wrap(prefix) from e


__all__ = ["Code", "VecError", "OpError", "Error", "name_handles", "wrap_errors"]
