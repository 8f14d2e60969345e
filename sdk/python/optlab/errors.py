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
from dataclasses import dataclass
from typing import Optional


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


@dataclass(frozen=True)
class OpError:
    """The op of a program that failed: its 0-based index, its kind ("Grad")
    and its own message. Go's optim.OpError; it travels in the gRPC status
    details as optlab.plugin.v1.OpError."""

    index: int
    op: str
    message: str

    def __str__(self) -> str:
        return f"op {self.index} ({self.op}): {self.message}"


class Error(Exception):
    """A failure an optimizer reports: a message, a gRPC code (UNKNOWN by
    default) and, when a program failed, the OpError that says which op.

    Host.exec raises it with the host's code, message and op; wrap it with a
    prefix (Error.wrap, or the wrap_errors context manager) to say where it
    happened, as Go plugins do with fmt.Errorf("sam: ascent: %w", err)."""

    def __init__(self, message: str, code: Code = Code.UNKNOWN, op: Optional[OpError] = None):
        super().__init__(message)
        self.message = message
        self.code = Code(code)
        self.op = op

    def __str__(self) -> str:
        return self.message

    def wrap(self, prefix: str) -> "Error":
        """The same error with message "prefix: message"."""
        return Error(f"{prefix}: {self.message}", self.code, self.op)


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


__all__ = ["Code", "OpError", "Error", "wrap_errors"]
