"""serve turns an optimizer into an optlab plugin process, as sdk/serve does
for Go: the host starts the script, and serve speaks hashicorp/go-plugin's
gRPC protocol to it (see optlab/_runtime.py for the protocol itself).

    if __name__ == "__main__":
        optlab.serve(SAM)

serve owns the process: nothing may be printed to stdout before it (stdout
carries the handshake; afterwards print() output reaches the host's output,
as stderr does). Run by hand, the script says it is a plugin and exits with
status 1.

Debian packages grpc and protobuf for /usr/bin/python3 only (python3-grpcio,
python3-protobuf). When the script was started by another python3 that lacks
them (the first one on PATH may be a pyenv or venv interpreter), serve runs
it again with /usr/bin/python3, before anything is written to stdout; set
OPTLAB_PYTHON to use another interpreter that has them.
"""

from __future__ import annotations

import os
import sys

MAGIC_COOKIE_KEY = "OPTLAB_OPTIMIZER_PLUGIN"
MAGIC_COOKIE_VALUE = "7b1c2f0e-optlab-optimizer"

SYSTEM_PYTHON = "/usr/bin/python3"
_REEXEC_ENV = "OPTLAB_PYTHON_REEXEC"

# go-plugin's message for a plugin run by hand, word for word.
_NOT_A_PROGRAM = (
    "This binary is a plugin. These are not meant to be executed directly.\n"
    "Please execute the program that consumes these plugins, which will\n"
    "load any plugins automatically\n"
)


def serve(optimizer) -> None:
    """Serve optimizer (an optlab.Optimizer, or a class or function that
    returns one, called once) until the host closes the plugin; then exit
    the process. Never returns."""
    if os.environ.get(MAGIC_COOKIE_KEY) != MAGIC_COOKIE_VALUE:
        sys.stderr.write(_NOT_A_PROGRAM)
        sys.stderr.flush()
        sys.exit(1)
    _ensure_grpc()
    from . import _runtime

    _runtime.run(optimizer)


def _ensure_grpc() -> None:
    """Make sure grpc and protobuf import, re-executing the script under an
    interpreter that has them (OPTLAB_PYTHON, else /usr/bin/python3) once
    when this one does not; else explain and exit 1."""
    try:
        import google.protobuf  # noqa: F401
        import grpc  # noqa: F401

        return
    except ImportError as e:
        missing = e
    chosen = os.environ.get("OPTLAB_PYTHON")
    if chosen and not os.access(chosen, os.X_OK):
        sys.stderr.write(
            f"optlab: {sys.executable} cannot import grpc and protobuf ({missing}), and "
            f"OPTLAB_PYTHON={chosen} names no executable interpreter: fix OPTLAB_PYTHON, "
            f"or unset it to use {SYSTEM_PYTHON}\n")
        sys.stderr.flush()
        sys.exit(1)
    target = chosen or SYSTEM_PYTHON
    if os.environ.get(_REEXEC_ENV) != "1" and os.path.exists(target):
        os.environ[_REEXEC_ENV] = "1"
        argv = list(getattr(sys, "orig_argv", []))[1:] or sys.argv
        sys.stderr.flush()
        os.execv(target, [target] + argv)
    sys.stderr.write(
        f"optlab: {sys.executable} cannot import grpc and protobuf ({missing}): "
        "install them with `apt-get install python3-grpcio python3-protobuf` and run the plugin "
        f"with {SYSTEM_PYTHON} (or point OPTLAB_PYTHON at an interpreter that has them)\n")
    sys.stderr.flush()
    sys.exit(1)


__all__ = ["serve", "MAGIC_COOKIE_KEY", "MAGIC_COOKIE_VALUE"]
