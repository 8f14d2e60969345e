"""The plugin side of go-plugin's protocol, tested from a host written here
in Python: handshake, health, broker, stdio, the Optimizer service, errors
with their op, deadlines and shutdown. (host/plugin's Go tests drive Python
plugins through the real host client.)"""

import json
import os
import queue
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import unittest
from concurrent import futures

import grpc

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))

from optlab._pb import plugin_pb2 as pb  # noqa: E402
from optlab._pb import runtime_pb2 as rt  # noqa: E402
from optlab.serve import MAGIC_COOKIE_KEY, MAGIC_COOKIE_VALUE  # noqa: E402
from optlab import PROTOCOL_MINOR  # noqa: E402

TOY = os.path.join(HERE, "toy_plugin.py")
PYTHON = "/usr/bin/python3"


class FakeHost:
    """optlab.plugin.v1.Host: every Read reads 0.5; a Norm of handle 999
    fails with an OpError, a Free with a VecError; delay slows every Exec
    down."""

    def __init__(self):
        self.programs = []
        self.exec_minors = []
        self.call_ids = []  # the call id each Exec named (None: none)
        self.delay = 0.0

    def layout(self, request, context):
        t = pb.Tensor(name="w", shape=[2, 2], offset=0, kind="weight")
        return pb.LayoutResponse(layout=pb.Layout(members=[pb.MemberLayout(arch="toy", numel=4, tensors=[t])],
                                                  train_size=64, batch_size=16))

    def exec(self, request, context):
        time.sleep(self.delay)
        self.programs.append(request.program)
        self.exec_minors.append(request.protocol_minor)
        self.call_ids.append(dict(context.invocation_metadata()).get("optlab-call-id"))
        scalars = []
        for i, op in enumerate(request.program.ops):
            kind = op.WhichOneof("kind")
            if kind == "norm" and op.norm.x == 999:
                st = rt.Status(code=grpc.StatusCode.FAILED_PRECONDITION.value[0],
                               message=f"op {i} (Norm): handle 999 is not allocated")
                st.details.add().Pack(pb.OpError(op_index=i, op="Norm", message="handle 999 is not allocated"))
                context.set_trailing_metadata((("grpc-status-details-bin", st.SerializeToString()),))
                context.abort(grpc.StatusCode.FAILED_PRECONDITION, st.message)
            if kind == "free":
                st = rt.Status(code=grpc.StatusCode.FAILED_PRECONDITION.value[0],
                               message=f"op {i} (Free): handle v{op.free.id} is not allocated")
                st.details.add().Pack(pb.OpError(op_index=i, op="Free", message="is not allocated", vec_error=True,
                                                 vec=op.free.id))
                context.set_trailing_metadata((("grpc-status-details-bin", st.SerializeToString()),))
                context.abort(grpc.StatusCode.FAILED_PRECONDITION, st.message)
            if kind == "read":
                scalars.append(0.5)
        return pb.ExecResponse(result=pb.Result(scalars=scalars))


def _uu(fn, req, resp):
    return grpc.unary_unary_rpc_method_handler(fn, request_deserializer=req.FromString,
                                               response_serializer=resp.SerializeToString)


class Plugin:
    """A plugin process started as go-plugin starts one, and the host's end
    of its connections."""

    def __init__(self, script=TOY, env=None):
        self.dir = tempfile.mkdtemp(prefix="optlab-py-test-")
        self.host = FakeHost()
        self.host_sock = os.path.join(self.dir, "host.sock")
        self.host_server = grpc.server(futures.ThreadPoolExecutor(max_workers=4), handlers=[
            grpc.method_handlers_generic_handler("optlab.plugin.v1.Host", {
                "Layout": _uu(self.host.layout, pb.LayoutRequest, pb.LayoutResponse),
                "Exec": _uu(self.host.exec, pb.ExecRequest, pb.ExecResponse)})])
        self.host_server.add_insecure_port("unix:" + self.host_sock)
        self.host_server.start()
        e = dict(os.environ, PLUGIN_PROTOCOL_VERSIONS="1", PLUGIN_UNIX_SOCKET_DIR=self.dir,
                 OPTLAB_HOST_PID=str(os.getpid()))
        e[MAGIC_COOKIE_KEY] = MAGIC_COOKIE_VALUE
        e.update(env or {})
        self.proc = subprocess.Popen([PYTHON, script], env=e, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.stderr = []
        self._stderr_reader = threading.Thread(target=self._read_stderr, daemon=True)
        self._stderr_reader.start()
        self.handshake = self.proc.stdout.readline().decode().rstrip("\n")
        parts = self.handshake.split("|")
        if len(parts) < 5:
            raise AssertionError(f"handshake {self.handshake!r}; stderr {self.stderr}")
        self.address = parts[3]
        self.channel = grpc.insecure_channel("unix:" + self.address)
        self.broker_q = queue.Queue()
        self.broker = self.channel.stream_stream("/plugin.GRPCBroker/StartStream",
                                                 request_serializer=rt.ConnInfo.SerializeToString,
                                                 response_deserializer=rt.ConnInfo.FromString)(iter(self.broker_q.get, None))
        self.output = []
        stdio = self.channel.unary_stream("/plugin.GRPCStdio/StreamStdio", request_serializer=rt.Empty.SerializeToString,
                                          response_deserializer=rt.StdioData.FromString)(rt.Empty())
        threading.Thread(target=self._read_stdio, args=(stdio,), daemon=True).start()

    def _read_stderr(self):
        for line in self.proc.stderr:
            self.stderr.append(line.decode())

    def _read_stdio(self, stream):
        try:
            for d in stream:
                self.output.append((d.channel, d.data.decode()))
        except grpc.RpcError:
            pass

    def call(self, method, req, resp, timeout=10, call_id=None):
        md = (("optlab-call-id", call_id),) if call_id is not None else None
        return self.channel.unary_unary(f"/optlab.plugin.v1.Optimizer/{method}",
                                        request_serializer=type(req).SerializeToString,
                                        response_deserializer=resp.FromString)(req, timeout=timeout, metadata=md)

    def configure(self, broker_id=7, call_id=None, **params):
        self.broker_q.put(rt.ConnInfo(service_id=broker_id, network="unix", address=self.host_sock))
        cfg = pb.Config(seed=1, total_steps=10, steps_per_epoch=5, members=1)
        for k, v in params.items():
            cfg.params[k].CopyFrom(pb.Value(float_value=v) if isinstance(v, float) else pb.Value(string_value=v))
        return self.call("Configure", pb.ConfigureRequest(host_broker_id=broker_id, config=cfg), pb.ConfigureResponse,
                         call_id=call_id)

    def step(self, step=0, timeout=10, call_id=None):
        return self.call("Step", pb.StepRequest(input=pb.StepInput(step=step, epoch=0, lr=0.1)), pb.StepResponse,
                         timeout=timeout, call_id=call_id)

    def shutdown(self):
        try:
            self.channel.unary_unary("/plugin.GRPCController/Shutdown", request_serializer=rt.Empty.SerializeToString,
                                     response_deserializer=rt.Empty.FromString)(rt.Empty(), timeout=5)
        except grpc.RpcError:
            pass  # the plugin may stop before its answer leaves

    def close(self):
        self.broker_q.put(None)
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        self._stderr_reader.join(5)
        self.proc.stdout.close()
        self.proc.stderr.close()
        self.channel.close()
        self.host_server.stop(0)
        shutil.rmtree(self.dir, ignore_errors=True)


class ServeTest(unittest.TestCase):
    def setUp(self):
        self.p = Plugin()
        self.addCleanup(self.p.close)

    def test_handshake_and_health(self):
        self.assertRegex(self.p.handshake, r"^1\|1\|unix\|.+\|grpc\|$")
        self.assertTrue(self.p.address.startswith(self.p.dir + os.sep))
        check = self.p.channel.unary_unary("/grpc.health.v1.Health/Check",
                                           request_serializer=rt.HealthCheckRequest.SerializeToString,
                                           response_deserializer=rt.HealthCheckResponse.FromString)
        self.assertEqual(check(rt.HealthCheckRequest(service="plugin"), timeout=5).status,
                         rt.HealthCheckResponse.SERVING)

    def test_info(self):
        r = self.p.call("Info", pb.InfoRequest(), pb.InfoResponse)
        self.assertEqual((r.info.name, r.info.version, r.info.protocol_minor), ("toy", "1.2.3", PROTOCOL_MINOR))
        self.assertEqual(list(r.info.capabilities), ["members", "base-step", "predictive", "state", "finalize"])
        self.assertTrue(r.predictor)
        self.assertTrue(r.stateful)
        self.assertTrue(r.finalizer)
        scale, fault = r.info.params
        self.assertEqual((scale.name, scale.type, scale.default.float_value, scale.range), ("scale", pb.PARAM_TYPE_FLOAT, 1.0, "(0,)"))
        self.assertEqual((fault.name, fault.type, fault.default.string_value), ("fault", pb.PARAM_TYPE_STRING, "none"))
        self.assertIn("raise", fault.enum)

    def test_configure_and_step(self):
        r = self.p.configure(scale=2.0)
        self.assertEqual(dict(r.resolved), {"scale": pb.Value(float_value=2.0)})
        out = self.p.step().output.metrics
        self.assertEqual(dict(out), {"loss": 1.0, "acc": 0.5, "norm": 0.5, "lr": 0.1})
        alloc, step = self.p.host.programs
        self.assertEqual([op.WhichOneof("kind") for op in alloc.ops], ["alloc"])
        self.assertEqual([op.WhichOneof("kind") for op in step.ops], ["grad", "norm", "base_step", "read", "read", "read"])
        self.assertEqual(step.ops[0].grad.out, alloc.ops[0].alloc.id)

    def test_finalize(self):
        self.p.configure()
        self.p.step()
        self.p.call("Finalize", pb.FinalizeRequest(), pb.FinalizeResponse)
        last = self.p.host.programs[-1]
        self.assertEqual([op.WhichOneof("kind") for op in last.ops], ["update_bn"])
        self.assertEqual(last.ops[0].update_bn.x, 0)

    def test_step_before_configure(self):
        with self.assertRaises(grpc.RpcError) as cm:
            self.p.step()
        self.assertEqual(cm.exception.code(), grpc.StatusCode.FAILED_PRECONDITION)
        self.assertEqual(cm.exception.details(), "optimizer used before Configure")

    def test_bad_params(self):
        with self.assertRaises(grpc.RpcError) as cm:
            self.p.configure(scale=-1.0)
        self.assertEqual(cm.exception.details(), 'toy: hparams: "scale": -1 is out of range (0,): want > 0')

    def test_unknown_broker_id(self):
        with self.assertRaises(grpc.RpcError) as cm:
            self.p.call("Configure", pb.ConfigureRequest(host_broker_id=99, config=pb.Config(members=1)),
                        pb.ConfigureResponse)
        self.assertEqual(cm.exception.code(), grpc.StatusCode.UNAVAILABLE)
        self.assertIn("dial host broker ID 99", cm.exception.details())

    def test_error(self):
        self.p.configure(fault="fail")
        with self.assertRaises(grpc.RpcError) as cm:
            self.p.step(3)
        self.assertEqual(cm.exception.code(), grpc.StatusCode.UNKNOWN)
        self.assertEqual(cm.exception.details(), "toy: failure at step 3")
        self.p.configure(fault="none", broker_id=8)  # the plugin lives on
        self.p.step()

    def test_step_returns_registers(self):
        # A step that returns registers as its metrics gets one clear
        # message saying how to report them (hardening 4, 02).
        self.p.configure(fault="regs")
        with self.assertRaises(grpc.RpcError) as cm:
            self.p.step()
        self.assertIn("step returned the register(s) of 'loss', 'acc' as metrics", cm.exception.details())
        self.assertIn("p.report_metrics(ev.loss, ev.acc)", cm.exception.details())

    def test_op_error_keeps_its_op(self):
        self.p.configure(fault="bad-op")
        with self.assertRaises(grpc.RpcError) as cm:
            self.p.step()
        e = cm.exception
        self.assertEqual(e.code(), grpc.StatusCode.FAILED_PRECONDITION)
        self.assertEqual(e.details(), "toy: step: op 3 (Norm): handle 999 is not allocated")
        details = dict(e.trailing_metadata())["grpc-status-details-bin"]
        st = rt.Status.FromString(details)
        oe = pb.OpError()
        self.assertTrue(st.details[0].Unpack(oe))
        self.assertEqual((oe.op_index, oe.op, oe.message), (3, "Norm", "handle 999 is not allocated"))

    def test_vec_error_names_the_handle(self):
        self.p.configure(fault="ghost")
        with self.assertRaises(grpc.RpcError) as cm:
            self.p.step()
        e = cm.exception
        self.assertEqual(e.details(), "toy: step: op 3 (Free): handle toy/ghost is not allocated")
        st = rt.Status.FromString(dict(e.trailing_metadata())["grpc-status-details-bin"])
        oe = pb.OpError()
        self.assertTrue(st.details[0].Unpack(oe))
        self.assertEqual((oe.op_index, oe.op, oe.message, oe.vec_error, oe.vec), (3, "Free", "is not allocated", True, 2))
        self.assertEqual(self.p.host.programs[-1].ops[3].free.id, 2)

    def test_exec_request_has_the_minor(self):
        self.p.configure()
        self.p.step()
        self.assertEqual(self.p.host.exec_minors[-1], PROTOCOL_MINOR)

    def test_exec_names_its_call(self):
        # Each Exec names the host's call it serves (protocol minor 11), so
        # that the host can refuse one sent after that call returned; a
        # thread the optimizer started serves no call, and its Exec names
        # none (hardening 4, 08: the host refuses it).
        self.p.configure(call_id="1", fault="thread")
        self.p.step(call_id="2")
        self.p.step()  # a host that sends no id (older than minor 11)
        self.assertEqual(self.p.host.call_ids, ["1", "2", None, None, None])
        self.assertEqual([len(p.ops) for p in self.p.host.programs][2], 1)  # the thread's Norm

    def test_exception_is_a_panic(self):
        self.p.configure(fault="raise")
        with self.assertRaises(grpc.RpcError) as cm:
            self.p.step()
        self.assertEqual(cm.exception.code(), grpc.StatusCode.INTERNAL)
        self.assertEqual(cm.exception.details(), "panic in Step: KeyError: 'boom'")
        deadline = time.time() + 5
        while time.time() < deadline and not any("recovered panic" in l for l in self.p.stderr):
            time.sleep(0.02)
        logged = [json.loads(l) for l in self.p.stderr if "recovered panic" in l]
        self.assertEqual(len(logged), 1, self.p.stderr)
        entry = logged[0]
        self.assertEqual((entry["@level"], entry["@message"], entry["method"]), ("error", "recovered panic in optimizer", "Step"))
        self.assertTrue(entry["stack"].startswith("Traceback (most recent call last):\n"), entry["stack"])
        self.assertIn('raise KeyError("boom")', entry["stack"])
        self.assertNotIn("_runtime.py", entry["stack"])  # the SDK's frames are left out

    def test_step_deadline_reaches_exec(self):
        self.p.configure()
        self.p.host.delay = 1.0
        with self.assertRaises(grpc.RpcError) as cm:
            self.p.step(timeout=0.3)
        self.assertEqual(cm.exception.code(), grpc.StatusCode.DEADLINE_EXCEEDED)

    def test_stdio(self):
        self.p.configure(fault="print")
        self.p.step(5)
        deadline = time.time() + 5
        want = [(rt.StdioData.STDOUT, "hello from step 5\n"), (rt.StdioData.STDERR, "to stderr\n")]
        while time.time() < deadline and not all(w in self._joined() for w in want):
            time.sleep(0.02)
        for w in want:
            self.assertIn(w, self._joined())

    def _joined(self):
        """The stdio chunks merged into lines per channel."""
        out = {}
        for ch, s in self.p.output:
            out[ch] = out.get(ch, "") + s
        return [(ch, line) for ch, text in out.items() for line in text.splitlines(keepends=True)]

    def test_predictive_and_state(self):
        self.p.configure()
        self.p.step()
        pred = self.p.call("Predictive", pb.PredictiveRequest(), pb.PredictiveResponse).predictive
        self.assertEqual((pred.kind, len(pred.vecs), list(pred.weights)), (pb.PREDICTIVE_KIND_MEMBERS, 1, [1.0]))
        self.assertEqual(list(pred.masks), list(pred.vecs))
        st = self.p.call("SaveState", pb.SaveStateRequest(), pb.SaveStateResponse)
        self.assertEqual((st.blob, list(st.vecs)), (b"1", list(pred.vecs)))
        self.p.call("LoadState", pb.LoadStateRequest(blob=b"41"), pb.LoadStateResponse)
        self.assertEqual(self.p.call("SaveState", pb.SaveStateRequest(), pb.SaveStateResponse).blob, b"41")

    def test_trace(self):
        p = Plugin(env={"OPTLAB_TRACE": "1"})
        self.addCleanup(p.close)
        p.configure()
        p.step()
        deadline = time.time() + 5
        while time.time() < deadline and "   ← #1=0.5 #2=0.5 #3=0.5\n" not in "".join(s for _, s in p.output):
            time.sleep(0.02)
        text = "".join(s for _, s in p.output)
        self.assertRegex(text, r"exec 2: 6 ops, \S+\n 0 Grad      toy/g\[0\] = ∇L\(params\[0\]\) batch=all bn=update  → loss #1, acc #2\n")
        self.assertIn("   ← #1=0.5 #2=0.5 #3=0.5\n", text)

    def test_shutdown(self):
        self.p.configure()
        self.p.shutdown()
        self.assertEqual(self.p.proc.wait(timeout=5), 0)
        self.assertFalse(os.path.exists(self.p.address), "socket left behind")


class ByHandTest(unittest.TestCase):
    def test_run_by_hand(self):
        env = {k: v for k, v in os.environ.items() if k != MAGIC_COOKIE_KEY}
        r = subprocess.run([PYTHON, TOY], env=env, capture_output=True, text=True, timeout=30)
        self.assertEqual(r.returncode, 1)
        self.assertEqual(r.stdout, "")
        self.assertTrue(r.stderr.startswith("This binary is a plugin. These are not meant to be executed directly.\n"))

    def test_exits_when_host_is_gone(self):
        # A host PID that no longer exists: the plugin notices and exits with status 3.
        dead = subprocess.Popen(["true"])
        dead.wait()
        p = Plugin(env={"OPTLAB_HOST_PID": str(dead.pid)})
        self.addCleanup(p.close)
        self.assertEqual(p.proc.wait(timeout=5), 3)
        deadline = time.time() + 2
        while time.time() < deadline and not any("host process died" in l for l in p.stderr):
            time.sleep(0.02)
        self.assertTrue(any("host process died; plugin exiting" in l for l in p.stderr), p.stderr)


class OldSignatureTest(unittest.TestCase):
    """A plugin written before configure bound the host (step(host, inp),
    finalize(host)) keeps running: the runtime passes the host."""

    def test_takes_host(self):
        from optlab._runtime import _takes_host

        class Old:
            def step(self, host, inp): pass
            def finalize(self, host): pass

        class New:
            def step(self, inp): pass
            def finalize(self): pass

        self.assertTrue(_takes_host(Old().step, 2))
        self.assertTrue(_takes_host(Old().finalize, 1))
        self.assertFalse(_takes_host(New().step, 2))
        self.assertFalse(_takes_host(New().finalize, 1))


if __name__ == "__main__":
    unittest.main()

