"""The plugin side of hashicorp/go-plugin's gRPC protocol (v1.8.0), written
for the optlab host from go-plugin's documented behaviour:

- Handshake: the plugin listens on a Unix socket in PLUGIN_UNIX_SOCKET_DIR
  and writes "CORE|APP|unix|ADDRESS|grpc|" to stdout (core protocol 1, app
  protocol optlab's major version 1).
- On that socket one gRPC server serves the optlab Optimizer service and
  go-plugin's own: grpc.health.v1.Health (service "plugin" SERVING),
  plugin.GRPCBroker (the stream on which the host announces the addresses of
  the services it offers by broker ID; Configure names the ID of the Host
  service), plugin.GRPCController (Shutdown: the host closes the plugin) and
  plugin.GRPCStdio (the plugin's stdout and stderr, streamed to the host).
- The plugin exits when the host asks it to, and with status 3 when the host
  process is gone (OPTLAB_HOST_PID, else a change of parent), as sdk/serve.

Errors follow sdk/serve: an optlab.Error becomes a gRPC status with its code
and message (and an optlab.plugin.v1.OpError in the status details when an op
failed); any other exception is treated like a Go panic: "panic in Step: …"
with code INTERNAL, and the traceback logged to stderr as a JSON log line
that the host shows with the error.
"""

from __future__ import annotations

import datetime
import faulthandler
import inspect
import io
import json
import os
import queue
import signal
import sys
import tempfile
import threading
import time
import traceback
from concurrent import futures

import grpc

from ._pb import plugin_pb2 as pb
from ._pb import runtime_pb2 as rt
from .errors import Code, Error, name_handles
from .optimizer import PROTOCOL_MAJOR
from .program import Reg, Result
from .trace import TRACE_ENV, Trace
from .wire import (config_from_pb, exec_request_to_pb, info_response_to_pb, layout_from_pb, op_error_from_pb,
                   op_error_to_pb, params_to_pb, predictive_to_pb, result_from_pb, step_input_from_pb,
                   step_output_to_pb)

CORE_PROTOCOL_VERSION = 1
HOST_PID_ENV = "OPTLAB_HOST_PID"
PARENT_POLL_INTERVAL = 0.5
MAX_MESSAGE_SIZE = 256 << 20
BROKER_DIAL_TIMEOUT = 5.0  # go-plugin's GRPCBroker.Dial waits as long
STATUS_DETAILS_KEY = "grpc-status-details-bin"

_MSG_OPTIONS = [("grpc.max_receive_message_length", MAX_MESSAGE_SIZE),
                ("grpc.max_send_message_length", MAX_MESSAGE_SIZE)]
_GRPC_CODES = {c.value[0]: c for c in grpc.StatusCode}


class _Logger:
    """hclog's JSON lines on the process's real stderr (file descriptor 2),
    which go-plugin reads line by line and the host keeps for reports."""

    def __init__(self, fd: int = 2):
        self._fd = fd
        self._mu = threading.Lock()

    def log(self, level: str, message: str, **kv) -> None:
        entry = {"@level": level, "@message": message,
                 "@timestamp": datetime.datetime.now().astimezone().isoformat(timespec="microseconds")}
        entry.update({k: str(v) for k, v in kv.items()})
        line = (json.dumps(entry, ensure_ascii=False) + "\n").encode("utf-8", "replace")
        with self._mu:
            try:
                os.write(self._fd, line)
            except OSError:
                pass

    def error(self, message: str, **kv) -> None:
        self.log("error", message, **kv)


class _Stdio:
    """The plugin's stdout and stderr after the handshake: what Python code
    writes to sys.stdout and sys.stderr is streamed to the host by
    plugin.GRPCStdio/StreamStdio, as go-plugin does with os.Stdout/os.Stderr."""

    def __init__(self):
        self._q: "queue.Queue" = queue.Queue()
        self.drained = threading.Event()  # set when the stream has sent everything

    def writer(self, channel: int) -> "_StreamWriter":
        return _StreamWriter(self._q, channel)

    def close(self) -> None:
        """End the stream once what was written before has been sent."""
        self._q.put(None)

    def stream(self, request, context):
        while context.is_active():
            try:
                item = self._q.get(timeout=0.5)
            except queue.Empty:
                continue
            if item is None:
                self.drained.set()
                return
            channel, data = item
            yield rt.StdioData(channel=channel, data=data)


class _StreamWriter(io.TextIOBase):
    """A text stream whose writes go to a _Stdio channel."""

    def __init__(self, q: "queue.Queue", channel: int):
        super().__init__()
        self._q = q
        self._channel = channel

    @property
    def encoding(self) -> str:
        return "utf-8"

    def writable(self) -> bool:
        return True

    def write(self, s: str) -> int:
        if s:
            self._q.put((self._channel, s.encode("utf-8", "replace")))
        return len(s)

    def isatty(self) -> bool:
        return False


class _Broker:
    """The plugin's end of go-plugin's GRPCBroker: the host sends, on one
    bidirectional stream, the network address of every service it offers
    under a broker ID; Dial waits for the ID's address and connects."""

    def __init__(self, log: _Logger):
        self._cv = threading.Condition()
        self._infos = {}
        self._log = log

    def start_stream(self, request_iterator, context):
        try:
            for info in request_iterator:
                if info.HasField("knock"):
                    self._log.error("go-plugin broker multiplexing is not supported", service_id=info.service_id)
                    continue
                with self._cv:
                    self._infos[info.service_id] = info
                    self._cv.notify_all()
        except Exception:  # the host closed the stream
            pass
        return
        yield  # a generator that sends nothing

    def dial(self, service_id: int, timeout: float = BROKER_DIAL_TIMEOUT) -> grpc.Channel:
        with self._cv:
            if not self._cv.wait_for(lambda: service_id in self._infos, timeout):
                raise Error("timeout waiting for connection info", Code.UNAVAILABLE)
            info = self._infos.pop(service_id)
        if info.network == "unix":
            target = "unix:" + info.address
        elif info.network == "tcp":
            target = info.address
        else:
            raise Error(f"unknown address type: {info.address}", Code.UNAVAILABLE)
        return grpc.insecure_channel(target, options=_MSG_OPTIONS)


CALL_ID_KEY = "optlab-call-id"  # sdk/internal/wire's CallIDKey (protocol minor 11)


class _Call(threading.local):
    """The deadline, context and call id of the host's call a server thread
    is serving, so that the optimizer's host calls inherit the Step's
    deadline (as Go's ctx does) and name the call they belong to: the host
    refuses an Exec that names none of its calls in flight, such as one
    from a thread the optimizer started (which serves no call) or one sent
    after the call returned (docs/PROTOCOL.md §3)."""

    deadline = None
    context = None
    call_id = None


_call = _Call()


class _HostClient:
    """The optlab.Host an optimizer drives: the host's Host service over the
    broker connection of this Configure."""

    def __init__(self, channel: grpc.Channel):
        self.channel = channel
        self._exec = channel.unary_unary("/optlab.plugin.v1.Host/Exec",
                                         request_serializer=pb.ExecRequest.SerializeToString,
                                         response_deserializer=pb.ExecResponse.FromString)
        self._layout = channel.unary_unary("/optlab.plugin.v1.Host/Layout",
                                           request_serializer=pb.LayoutRequest.SerializeToString,
                                           response_deserializer=pb.LayoutResponse.FromString)

    @staticmethod
    def _metadata():
        """The call id of the host's call this thread serves, as the
        metadata of a host call; none on a thread that serves none."""
        if _call.call_id is None:
            return None
        return ((CALL_ID_KEY, _call.call_id),)

    @staticmethod
    def _timeout():
        ctx = _call.context
        if ctx is not None and not ctx.is_active():
            raise Error("context canceled", Code.CANCELLED)
        if _call.deadline is None:
            return None
        left = _call.deadline - time.monotonic()
        if left <= 0:
            raise Error("context deadline exceeded", Code.DEADLINE_EXCEEDED)
        return left

    def layout(self):
        try:
            resp = self._layout(pb.LayoutRequest(), timeout=self._timeout(), metadata=self._metadata())
        except grpc.RpcError as e:
            raise error_from_rpc(e) from None
        return layout_from_pb(resp.layout)

    def exec(self, p) -> Result:
        req = exec_request_to_pb(p)
        try:
            resp = self._exec(req, timeout=self._timeout(), metadata=self._metadata())
        except grpc.RpcError as e:
            err = error_from_rpc(e)
            name_handles(err, p)
            raise err from None
        return result_from_pb(p, resp.result)


def error_from_rpc(e: grpc.RpcError) -> Error:
    """The optlab.Error of a failed call: its code, message and failing op."""
    code = e.code().value[0] if e.code() is not None else Code.UNKNOWN
    err = Error(e.details() or "", code)
    for key, value in e.trailing_metadata() or ():
        if key == STATUS_DETAILS_KEY:
            st = rt.Status.FromString(value)
            for d in st.details:
                if d.type_url.endswith("/" + pb.OpError.DESCRIPTOR.full_name):
                    err.op = op_error_from_pb(pb.OpError.FromString(d.value))
    return err


_PKG_DIR = os.path.dirname(os.path.realpath(__file__)) + os.sep


def user_traceback(e: BaseException) -> str:
    """e's traceback without the SDK's own frames on top (the optimizer's
    code is what the reader wants)."""
    tb = e.__traceback__
    while tb is not None and os.path.realpath(tb.tb_frame.f_code.co_filename).startswith(_PKG_DIR):
        tb = tb.tb_next
    return "".join(traceback.format_exception(type(e), e, tb if tb is not None else e.__traceback__))


def _status_details(code: int, message: str, op) -> bytes:
    st = rt.Status(code=int(code), message=message)
    st.details.add().Pack(op_error_to_pb(op))
    return st.SerializeToString()


class _Failure(Exception):
    """A call's error, turned into a gRPC status by _unary."""

    def __init__(self, code: int, message: str, op=None):
        super().__init__(message)
        self.code, self.message, self.op = code, message, op


class _OptimizerService:
    """optlab.plugin.v1.Optimizer over a Python optimizer."""

    def __init__(self, opt, broker: _Broker, log: _Logger):
        self.opt = opt
        self.broker = broker
        self.log = log
        self._mu = threading.Lock()
        self._host = None  # _HostClient of the last Configure
        self._view = None  # the host as the optimizer sees it (traced)

    def guard(self, method: str, fn):
        """fn(), with an optlab.Error as the call's error and any other
        exception as a recovered panic (logged with its traceback)."""
        try:
            return fn()
        except Error as e:
            raise _Failure(e.code, str(e), e.op) from None
        except SystemExit as e:  # sys.exit in an optimizer ends the process, as os.Exit in Go
            _exit(e.code if isinstance(e.code, int) else 1)
        except Exception as e:
            what = f"{type(e).__name__}: {e}"
            self.log.error("recovered panic in optimizer", method=method, panic=what, stack=user_traceback(e))
            raise _Failure(Code.INTERNAL, f"panic in {method}: {what}") from None

    def info(self, request, context):
        opt = self.opt
        info = self.guard("Info", opt.info)
        try:
            msg = info_response_to_pb(info)
        except (ValueError, TypeError, AttributeError) as e:
            raise _Failure(Code.INTERNAL, f"invalid Info: {e}") from None
        return msg

    def configure(self, request, context):
        try:
            cfg = config_from_pb(request.config)
        except Error as e:
            raise _Failure(e.code, f"config: {e}") from None
        try:
            channel = self.broker.dial(request.host_broker_id)
        except Error as e:
            raise _Failure(Code.UNAVAILABLE, f"dial host broker ID {request.host_broker_id}: {e}") from None
        host = _HostClient(channel)
        view = host
        if os.environ.get(TRACE_ENV) == "1":
            view = Trace(host, sys.stderr, timing=True)
        with self._mu:
            old, self._host, self._view = self._host, host, view
        if old is not None:
            old.channel.close()
        self.guard("Configure", lambda: self.opt.configure(view, cfg))
        resp = pb.ConfigureResponse()
        resolved = self.guard("Configure", self.opt.resolved)
        if resolved:
            try:
                params_to_pb(resolved, resp.resolved)
            except (ValueError, TypeError) as e:
                raise _Failure(Code.INTERNAL, f"invalid Resolved: {e}") from None
        return resp

    def _current_host(self):
        with self._mu:
            if self._view is None:
                raise _Failure(Code.FAILED_PRECONDITION, "optimizer used before Configure")
            return self._view

    def _declared(self, name: str):
        """Raises Unimplemented unless the optimizer's Info declares the
        feature name: the host calls a feature's method only then."""
        features = self.guard("Info", self.opt.info).features
        if not getattr(features, name.replace("-", "_"), False):
            raise _Failure(Code.UNIMPLEMENTED, f"optimizer does not declare the {name!r} feature")

    def step(self, request, context):
        h = self._current_host()
        inp = step_input_from_pb(request.input)
        if _takes_host(self.opt.step, 2):  # a plugin written before configure kept the host
            out = self.guard("Step", lambda: self.opt.step(h, inp))
        else:
            out = self.guard("Step", lambda: self.opt.step(inp))
        if isinstance(out, dict):
            regs = [k for k, v in out.items() if isinstance(v, Reg)]
            if regs:
                raise _Failure(Code.INTERNAL, f"step returned the register(s) of {', '.join(map(repr, regs))} as metrics: a register "
                               "holds a value on the device, not in the plugin; report them from the program "
                               "(p.report_metrics(ev.loss, ev.acc), then return {}) or read them (p.read) and return the values")
        try:
            return pb.StepResponse(output=step_output_to_pb(out))
        except (TypeError, ValueError) as e:
            raise _Failure(Code.INTERNAL, f"step returned {out!r}, want a dict of float metrics: {e}") from None

    def predictive(self, request, context):
        self._declared("predictive")
        p = self.guard("Predictive", self.opt.predictive)
        return pb.PredictiveResponse(predictive=predictive_to_pb(p))

    def save_state(self, request, context):
        self._declared("state")
        blob, vecs = self.guard("SaveState", self.opt.save_state)
        return pb.SaveStateResponse(blob=bytes(blob or b""), vecs=list(vecs or []))

    def load_state(self, request, context):
        self._declared("state")
        self.guard("LoadState", lambda: self.opt.load_state(request.blob))
        return pb.LoadStateResponse()

    def finalize(self, request, context):
        self._declared("finalize")
        h = self._current_host()
        if _takes_host(self.opt.finalize, 1):
            self.guard("Finalize", lambda: self.opt.finalize(h))
        else:
            self.guard("Finalize", self.opt.finalize)
        return pb.FinalizeResponse()


def _takes_host(method, n: int) -> bool:
    """Whether the bound method takes n positional arguments, the host
    first: step(host, inp) and finalize(host), as plugins wrote them
    before configure bound the host (they keep running unchanged)."""
    try:
        params = [p for p in inspect.signature(method).parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    except (TypeError, ValueError):
        return False
    return len(params) == n


def _unary(fn):
    """A unary handler that runs fn with the call's deadline and turns a
    _Failure into a gRPC status (with an OpError detail)."""

    def handler(request, context):
        left = context.time_remaining()
        _call.deadline = time.monotonic() + left if left is not None else None
        _call.context = context
        _call.call_id = _call_id(context)
        try:
            return fn(request, context)
        except _Failure as f:
            failure = f
        finally:
            _call.deadline = None
            _call.context = None
            _call.call_id = None
        if failure.op is not None:
            context.set_trailing_metadata(((STATUS_DETAILS_KEY, _status_details(failure.code, failure.message,
                                                                                 failure.op)),))
        context.abort(_GRPC_CODES.get(int(failure.code), grpc.StatusCode.UNKNOWN), failure.message)

    return handler


def _call_id(context):
    """The call id the host sent with the call context serves, or None."""
    for key, value in context.invocation_metadata() or ():
        if key == CALL_ID_KEY:
            return value
    return None


def _handlers(svc: _OptimizerService, broker: _Broker, stdio: _Stdio, stop: threading.Event):
    def uu(fn, req, resp):
        return grpc.unary_unary_rpc_method_handler(fn, request_deserializer=req.FromString,
                                                   response_serializer=resp.SerializeToString)

    optimizer = grpc.method_handlers_generic_handler("optlab.plugin.v1.Optimizer", {
        "Info": uu(_unary(svc.info), pb.InfoRequest, pb.InfoResponse),
        "Configure": uu(_unary(svc.configure), pb.ConfigureRequest, pb.ConfigureResponse),
        "Step": uu(_unary(svc.step), pb.StepRequest, pb.StepResponse),
        "Predictive": uu(_unary(svc.predictive), pb.PredictiveRequest, pb.PredictiveResponse),
        "SaveState": uu(_unary(svc.save_state), pb.SaveStateRequest, pb.SaveStateResponse),
        "LoadState": uu(_unary(svc.load_state), pb.LoadStateRequest, pb.LoadStateResponse),
        "Finalize": uu(_unary(svc.finalize), pb.FinalizeRequest, pb.FinalizeResponse),
    })

    def check(request, context):
        if request.service not in ("", "plugin"):
            context.abort(grpc.StatusCode.NOT_FOUND, "unknown service")
        return rt.HealthCheckResponse(status=rt.HealthCheckResponse.SERVING)

    health = grpc.method_handlers_generic_handler("grpc.health.v1.Health", {
        "Check": uu(check, rt.HealthCheckRequest, rt.HealthCheckResponse)})

    gobroker = grpc.method_handlers_generic_handler("plugin.GRPCBroker", {
        "StartStream": grpc.stream_stream_rpc_method_handler(
            broker.start_stream, request_deserializer=rt.ConnInfo.FromString,
            response_serializer=rt.ConnInfo.SerializeToString)})

    def shutdown(request, context):
        stop.set()
        return rt.Empty()

    controller = grpc.method_handlers_generic_handler("plugin.GRPCController", {
        "Shutdown": uu(shutdown, rt.Empty, rt.Empty)})

    stdio_svc = grpc.method_handlers_generic_handler("plugin.GRPCStdio", {
        "StreamStdio": grpc.unary_stream_rpc_method_handler(
            stdio.stream, request_deserializer=rt.Empty.FromString,
            response_serializer=rt.StdioData.SerializeToString)})
    return [optimizer, health, gobroker, controller, stdio_svc]


def _flush() -> None:
    for f in (sys.__stdout__, sys.__stderr__):
        try:
            if f is not None:
                f.flush()
        except (OSError, ValueError):
            pass


def _exit(code: int) -> None:
    _flush()
    os._exit(code)


def _host_gone(ppid: int, host_pid: int) -> bool:
    if host_pid > 0:
        try:
            os.kill(host_pid, 0)
        except ProcessLookupError:
            return True
        except PermissionError:
            return False
        return False
    return os.getppid() != ppid


def _watch_parent(log: _Logger, ppid: int, host_pid: int, every: float) -> None:
    """Exit with status 3 once the host has died (even by SIGKILL)."""
    while True:
        time.sleep(every)
        if _host_gone(ppid, host_pid):
            d = os.environ.get("PLUGIN_UNIX_SOCKET_DIR")
            if d:
                import shutil

                shutil.rmtree(d, ignore_errors=True)
            log.error("host process died; plugin exiting", host_pid=max(host_pid, ppid), parent=os.getppid())
            _exit(3)


def _host_pid() -> int:
    try:
        pid = int(os.environ.get(HOST_PID_ENV, ""))
    except ValueError:
        return 0
    return pid if pid > 0 else 0


def _listen_path() -> str:
    d = os.environ.get("PLUGIN_UNIX_SOCKET_DIR") or None
    fd, path = tempfile.mkstemp(prefix="plugin", dir=d)
    os.close(fd)
    os.remove(path)
    return path


def _app_version() -> int:
    """The app protocol version to announce: optlab's major version (the
    host then reports a mismatch with the versions it sent)."""
    return PROTOCOL_MAJOR


def _make(optimizer):
    if isinstance(optimizer, type) or (callable(optimizer) and not hasattr(optimizer, "step")):
        return optimizer()
    return optimizer


def run(optimizer) -> None:
    """Serve optimizer until the host closes the plugin; never returns."""
    log = _Logger()
    faulthandler.enable(file=sys.__stderr__)
    # go-plugin eats interrupts: Ctrl-C in the host's terminal reaches the
    # whole process group, and the host decides when its plugins stop.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if os.environ.get("PLUGIN_CLIENT_CERT"):
        sys.stderr.write("optlab: the Python SDK does not support go-plugin's automatic mTLS (PLUGIN_CLIENT_CERT)\n")
        _exit(1)
    ppid, host_pid = os.getppid(), _host_pid()
    threading.Thread(target=_watch_parent, args=(log, ppid, host_pid, PARENT_POLL_INTERVAL), daemon=True,
                     name="optlab-parent-watch").start()
    try:
        opt = _make(optimizer)
        if opt is None:
            raise ValueError("constructor returned None")
    except Exception as e:
        log.error("plugin init error", error=f"serve: constructor: {type(e).__name__}: {e}",
                  stack=traceback.format_exc())
        _exit(1)

    stop = threading.Event()
    stdio = _Stdio()
    broker = _Broker(log)
    svc = _OptimizerService(opt, broker, log)
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=16, thread_name_prefix="optlab-grpc"),
                         handlers=_handlers(svc, broker, stdio, stop), options=_MSG_OPTIONS)
    path = _listen_path()
    server.add_insecure_port("unix:" + path)
    group = os.environ.get("PLUGIN_UNIX_SOCKET_GROUP")
    server.start()
    if group:
        _set_group_writable(path, group)

    line = f"{CORE_PROTOCOL_VERSION}|{_app_version()}|unix|{path}|grpc|\n"
    sys.stdout.flush()
    os.write(1, line.encode())
    sys.stdout = stdio.writer(rt.StdioData.STDOUT)
    sys.stderr = stdio.writer(rt.StdioData.STDERR)

    stop.wait()
    stdio.close()
    stdio.drained.wait(0.5)  # what the optimizer printed reaches the host
    server.stop(grace=0).wait(1.0)
    try:
        os.remove(path)
    except OSError:
        pass
    _exit(0)


def _set_group_writable(path: str, group: str) -> None:
    import grp

    gid = int(group) if group.isdigit() else grp.getgrnam(group).gr_gid
    os.chown(path, -1, gid)
    os.chmod(path, 0o660)
