"""Conversions to and from the protocol's messages, and the trace."""

import io
import os
import re
import sys
import unittest
from dataclasses import dataclass

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))

import optlab  # noqa: E402
from optlab import wire  # noqa: E402
from optlab._pb import plugin_pb2 as pb  # noqa: E402
from optlab.trace import go_duration  # noqa: E402


class WireTest(unittest.TestCase):
    def test_every_op(self):
        hs = optlab.Handles()
        a, b = hs.new("a"), hs.new("b")
        p = hs.prog().alloc(a, 1).free(b).copy(a, b).copy_state(b, a).fill(a, 1).fill_range(a, 2, 3, 4)
        p.scale(a, 2).add_const(a, 3).axpy(a, 4, b).lin_comb(a, (1, a), (2, b)).unary(a, b, optlab.SQRT)
        p.binary(a, a, b, optlab.DIV).rand_n(a, 0.1, 7).dot(a, b)
        p.norm(a)
        p.grad_op(optlab.Grad(a, optlab.PARAMS, optlab.Batch(1, 2, 3), optlab.BN_FREEZE, eps=b, out_rho=a))
        p.base_step(optlab.PARAMS, a).set_lr(2, 0.5)
        p.joint_grad([a, b], [optlab.params_of(0), optlab.params_of(1)], optlab.Batch(0, 2), optlab.BN_FREEZE)
        m = wire.program_to_pb(p)
        kinds = [op.WhichOneof("kind") for op in m.ops]
        self.assertEqual(kinds, ["alloc", "free", "copy", "copy", "fill", "fill_range", "scale", "add_const", "axpy",
                                 "lin_comb", "unary", "binary", "rand_n", "dot", "norm", "grad", "base_step", "set_lr",
                                 "joint_grad"])
        self.assertEqual((m.ops[0].alloc.id, m.ops[0].alloc.member), (a, 1))
        self.assertTrue(m.ops[3].copy.bn)
        self.assertEqual((m.ops[5].fill_range.offset, m.ops[5].fill_range.len, m.ops[5].fill_range.value), (2, 3, 4.0))
        self.assertEqual([(t.coef, t.x) for t in m.ops[9].lin_comb.terms], [(1.0, a), (2.0, b)])
        self.assertEqual(m.ops[10].unary.kind, pb.UNARY_KIND_SQRT)
        self.assertEqual(m.ops[11].binary.kind, pb.BINARY_KIND_DIV)
        g = m.ops[15].grad
        self.assertEqual((g.out, g.at, g.batch.part, g.batch.of, g.batch.shuffle, g.bn, g.eps, g.out_rho),
                         (a, 0, 1, 2, 3, pb.BN_MODE_FREEZE, b, a))
        self.assertEqual((list(m.ops[18].joint_grad.outs), list(m.ops[18].joint_grad.ats)), ([a, b], [0, -1]))
        # Negative handles travel as sint32.
        self.assertEqual(pb.Program.FromString(m.SerializeToString()), m)

    def test_bad_op(self):
        p = optlab.Program()
        p.norm(1)
        p.ops.append("not an op")
        with self.assertRaises(optlab.Error) as cm:
            wire.program_to_pb(p)
        self.assertEqual(str(cm.exception), "op 1 (str): str is not an op")

    def test_info(self):
        @dataclass
        class Params:
            rho: float = optlab.param(0.05, range="[0,)", doc="radius")
            m: int = optlab.param(1)

        info = optlab.Info(name="x", version="1", capabilities=[optlab.CAP_MEMBERS], params=optlab.specs(Params))
        m = wire.info_to_pb(info)
        self.assertEqual((m.name, m.version, m.protocol_minor, list(m.capabilities)), ("x", "1", 4, ["members"]))
        self.assertEqual((m.params[0].default.float_value, m.params[0].range, m.params[1].default.int_value), (0.05, "[0,)", 1))
        bad = optlab.Info(name="x", params=[optlab.ParamSpec("k", "int", default="one")])
        with self.assertRaises(ValueError) as cm:
            wire.info_to_pb(bad)
        self.assertIn("info of 'x': hyperparameter 'k': default 'one' (str) does not match type int", str(cm.exception))

    def test_config(self):
        c = pb.Config(seed=3, total_steps=10, steps_per_epoch=5, members=2)
        c.params["rho"].float_value = 0.1
        c.params["m"].int_value = 2
        c.params["on"].bool_value = True
        c.params["s"].string_value = "all"
        cfg = wire.config_from_pb(c)
        self.assertEqual(cfg.params, {"m": 2, "on": True, "rho": 0.1, "s": "all"})
        self.assertEqual((cfg.seed, cfg.total_steps, cfg.steps_per_epoch, cfg.members), (3, 10, 5, 2))
        c.params["bad"].CopyFrom(pb.Value())
        with self.assertRaises(optlab.Error) as cm:
            wire.config_from_pb(c)
        self.assertEqual(cm.exception.code, optlab.Code.UNIMPLEMENTED)

    def test_layout(self):
        l = pb.Layout(members=[pb.MemberLayout(arch="cnn", numel=10, variational=True,
                                               tensors=[pb.Tensor(name="w", shape=[2, 5], offset=0, kind="weight")])],
                      train_size=100, batch_size=10)
        got = wire.layout_from_pb(l)
        self.assertEqual((got.members[0].arch, got.members[0].tensors[0].numel, got.train_size), ("cnn", 10, 100))
        self.assertTrue(got.members[0].variational)


class FakeHost:
    def __init__(self):
        self.calls = 0

    def layout(self):
        return optlab.Layout(members=[optlab.MemberLayout("mlp", 6, [optlab.Tensor("fc.weight", [2, 3], 0, "weight")])])

    def exec(self, p):
        self.calls += 1
        n = sum(optlab.emits(op) for op in p.ops)
        if self.calls == 2:
            raise optlab.Error("op 0 (Grad): boom")
        return optlab.Result([0.25] * n)


class TraceTest(unittest.TestCase):
    def test_trace(self):
        out = io.StringIO()
        h = optlab.Trace(FakeHost(), out)
        h.layout()
        p = optlab.Handles().sub("t").prog()
        p.norm(optlab.PARAMS)
        h.exec(p)
        with self.assertRaises(optlab.Error):
            h.exec(p)
        self.assertEqual(out.getvalue(), (
            "layout: 1 member(s) [mlp: 6 parameters in 1 tensors]\n"
            "exec 1: 1 ops\n 0 Norm      params[0]  → #1\n   ← #1=0.25\n"
            "exec 2: 1 ops\n 0 Norm      params[0]  → #1\n   error: op 0 (Grad): boom\n"))

    def test_timing(self):
        out = io.StringIO()
        optlab.Trace(FakeHost(), out, timing=True).exec(optlab.Program())
        self.assertRegex(out.getvalue(), r"^exec 1: 0 ops, [0-9.]+(µs|ms|s)\n$")

    def test_go_duration(self):
        for ns, s in [(0, "0s"), (999, "999ns"), (12_000, "12µs"), (1_234_000, "1.234ms"), (1_500_000_000, "1.5s"),
                      (61_000_000_000, "1m1s"), (3_723_500_000_000, "1h2m3.5s")]:
            self.assertEqual(go_duration(ns), s)


SAM_GOLDEN = os.path.join(HERE, "..", "..", "..", "plugins", "sam", "testdata", "trace.golden")
SAM_SCRIPT = os.path.join(HERE, "..", "..", "..", "examples", "python-sam", "sam.py")


class SAMExampleTest(unittest.TestCase):
    """examples/python-sam sends the ops of the Go SAM's golden trace (the
    numbers need the exact host: host/plugin's Go tests compare them)."""

    def test_ops_match_go_golden(self):
        import importlib.util

        spec = importlib.util.spec_from_file_location("python_sam", SAM_SCRIPT)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)

        class Host:
            def layout(self):
                raise AssertionError("plain SAM needs no layout")

            def exec(self, p):
                return optlab.Result([0.5] * sum(optlab.emits(op) for op in p.ops))

        out = io.StringIO()
        h = optlab.Trace(Host(), out)
        sam = mod.SAM()
        params = {s.name: s.default for s in sam.info().params}
        sam.configure(h, optlab.Config(params=params, members=2))
        for step in range(2):
            metrics = sam.step(h, optlab.StepInput(step=step, lr=0.1))
            self.assertEqual(metrics, {"loss": 0.5, "acc": 0.5})
        mask = lambda s: re.sub(r"(?m)^   ←.*\n", "", re.sub(r"\+= [-0-9.e]+·", "+= X·", s))  # noqa: E731
        with open(SAM_GOLDEN, encoding="utf-8") as f:
            self.assertEqual(mask(out.getvalue()), mask(f.read()))


if __name__ == "__main__":
    unittest.main()
