"""Conversions to and from the protocol's messages, and the trace."""

import dataclasses
import io
import os
import re
import sys
import unittest
from dataclasses import dataclass

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
sys.path.insert(0, HERE)

import optlab  # noqa: E402
from optlab import wire  # noqa: E402
from optlab._pb import plugin_pb2 as pb  # noqa: E402
from optlab.trace import go_duration  # noqa: E402


def _filled(cls, spec, p, regs, n=[0]):
    """An op of cls with every field set to a non-zero value (registers of
    p for the operands with regs, else immediates)."""

    def value(kind):
        n[0] += 1
        i = n[0]
        if kind == "vec":
            return i if i % 3 else optlab.params_of(1 + i % 4)
        if kind == "vecs":
            return [i, 0, optlab.params_of(1)]
        if kind == "num":
            return p.reg(i) if regs else optlab.K(-0.25 * i)
        if kind == "reg":
            return p.reg(i)
        if kind == "terms":
            return [optlab.Term(value("num"), value("vec")) for _ in range(2)]
        if kind == "batch":
            return optlab.Batch(1, 2, -99)
        if kind == "bool":
            return True
        if kind in ("int32", "int64"):
            return i * 1_000_003 * (1 - 2 * (i % 2))
        if kind == "float":
            return 0.1 * i
        if kind == "string":
            return f"metric{i}"
        return max(optlab.ENUMS[kind[5:]])

    return cls(*[value(f["kind"]) for f in spec["fields"]])


def _plain(x):
    """x with registers as their numbers (the decoded program's registers
    are its own)."""
    if isinstance(x, optlab.Reg):
        return ("reg", x.i)
    if isinstance(x, (list, tuple)):
        return type(x).__name__, [_plain(y) for y in x]
    if dataclasses.is_dataclass(x):
        return type(x).__name__, [_plain(getattr(x, f.name)) for f in dataclasses.fields(x)]
    if isinstance(x, optlab.K):
        return ("K", float(x))
    return x


def _round_trip(p):
    m = wire.program_to_pb(p)
    return m, wire.program_from_pb(pb.Program.FromString(m.SerializeToString()))


def _snake_upper(name):
    return re.sub(r"(?<=[a-z])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", "_", name).upper()



def optlab_method(go_name):
    """The Python name of a Go method: SaveState -> save_state."""
    return re.sub(r"(?<!^)([A-Z])", r"_\1", go_name).lower()


class WireTest(unittest.TestCase):
    def test_every_op_round_trip(self):
        # Every op of the table, with every field set, immediates and
        # registers: a new op is covered by its row.
        for regs in (False, True):
            p = optlab.Program()
            for spec in optlab.OPSET["ops"]:
                op = _filled(optlab.OPS[spec["name"]], spec, p, regs)
                with self.subTest(op=spec["name"], regs=regs):
                    for f in spec["fields"]:
                        x = getattr(op, f["wire"])
                        self.assertTrue(x != 0 and x != [] and x != optlab.Batch() and x is not False, f)
                    one = optlab.Program([op])
                    m, got = _round_trip(one)
                    self.assertEqual(m.ops[0].WhichOneof("kind"), spec["wire"])
                    self.assertEqual(_plain(got.ops), _plain(one.ops))
                    self.assertEqual(str(got), str(one))

    def test_builder_round_trip(self):
        from test_program import all_ops_program
        p = all_ops_program()
        p.ops.pop()  # Unary kind 42 is refused by a receiver
        _, got = _round_trip(p)
        # Handles by number, registers by number: the same program.
        want = [_plain(op) for op in p.ops]
        for i, op in enumerate(want):
            if op[0] == "Fill" and op[1][1] is None:  # a nil Num of an old op arrives as K(0)
                want[i] = ("Fill", [op[1][0], ("K", 0.0)])
        self.assertEqual([_plain(op) for op in got.ops], want)

    def test_table_matches_proto(self):
        kinds = {"vec": "TYPE_SINT32", "vecs": "TYPE_SINT32", "num": "TYPE_MESSAGE", "reg": "TYPE_INT32",
                 "terms": "TYPE_MESSAGE", "batch": "TYPE_MESSAGE", "bool": "TYPE_BOOL", "int32": "TYPE_INT32",
                 "int64": "TYPE_INT64", "float": "TYPE_DOUBLE", "string": "TYPE_STRING"}
        messages = {"num": "Num", "terms": "Term", "batch": "Batch"}
        FD = pb.Op.DESCRIPTOR.fields[0].__class__

        def check(name, fields, desc):
            known = set()
            for wire_name, kind in fields:
                target = wire_name + "_num" if kind == "num" and wire_name + "_num" in desc.fields_by_name else wire_name
                fd = desc.fields_by_name.get(target)
                self.assertIsNotNone(fd, f"{name}.{wire_name}")
                known.add(target)
                if target != wire_name:  # the legacy double of a Num
                    legacy = desc.fields_by_name[wire_name]
                    self.assertEqual(legacy.type, FD.TYPE_DOUBLE, f"{name}.{wire_name}")
                    known.add(wire_name)
                if kind.startswith("enum:"):
                    self.assertEqual((fd.type, fd.enum_type.name), (FD.TYPE_ENUM, kind[5:]), f"{name}.{wire_name}")
                else:
                    self.assertEqual(fd.type, getattr(FD, kinds[kind]), f"{name}.{wire_name}")
                self.assertEqual(fd.label == FD.LABEL_REPEATED, kind in ("vecs", "terms"), f"{name}.{wire_name}")
                if kind in messages:
                    self.assertEqual(fd.message_type.name, messages[kind], f"{name}.{wire_name}")
            self.assertEqual(set(desc.fields_by_name) - known, set(), f"{name}: fields the table lacks")

        oneof = {f.name: f for f in pb.Op.DESCRIPTOR.oneofs_by_name["kind"].fields}
        for spec in optlab.OPSET["ops"]:
            self.assertIn(spec["wire"], oneof, spec["name"])
            check(spec["name"], wire._fields(spec), oneof[spec["wire"]].message_type)
        self.assertEqual(set(oneof), {s["wire"] for s in optlab.OPSET["ops"]}, "pb.Op fields not in the table")
        check("Batch", wire._BATCH_FIELDS, pb.Batch.DESCRIPTOR)
        check("Term", wire._TERM_FIELDS, pb.Term.DESCRIPTOR)

    def test_enums_match_proto(self):
        for name, cls in optlab.ENUMS.items():
            enum_desc = pb.DESCRIPTOR.enum_types_by_name[name]
            for m in cls:
                v = enum_desc.values_by_name.get(_snake_upper(name) + "_" + m.name)
                self.assertIsNotNone(v, f"{name}.{m.name}")
                self.assertEqual(v.number, int(m), f"{name}.{m.name}")

    def test_num_legacy_double(self):
        p = optlab.Program()
        r = p.norm(1)
        p.fill(2, 2.5).scale(2, r).lin_comb(2, (-3, 1), (r, 2))
        m = wire.program_to_pb(p)
        self.assertEqual((m.ops[1].fill.value, m.ops[1].fill.value_num.k), (2.5, 2.5))
        self.assertEqual((m.ops[2].scale.alpha, m.ops[2].scale.alpha_num.reg), (0.0, 1))
        t = m.ops[3].lin_comb.terms
        self.assertEqual((t[0].coef, t[0].coef_num.k, t[1].coef_num.reg), (-3.0, -3.0, 1))
        old = pb.Program(ops=[
            pb.Op(fill=pb.FillOp(dst=2, value=1.5)),
            pb.Op(add_const=pb.AddConstOp(dst=2)),
            pb.Op(axpy=pb.AxpyOp(dst=2, alpha=0.5, x=1, alpha_num=pb.Num(k=7))),
            pb.Op(lin_comb=pb.LinCombOp(dst=2, terms=[pb.Term(coef=4, x=1)])),
        ])
        got = wire.program_from_pb(old)
        self.assertEqual([_plain(op) for op in got.ops], [_plain(op) for op in [
            optlab.Fill(2, optlab.K(1.5)), optlab.AddConst(2, optlab.K(0)),
            optlab.Axpy(2, optlab.K(7), 1),  # the Num wins
            optlab.LinComb(2, [optlab.Term(optlab.K(4), 1)])]])
        self.assertEqual(wire.program_to_pb(optlab.Program([optlab.Arith(optlab.ARITH_SQRT, optlab.K(4))])).ops[0].arith,
                         pb.ArithOp(kind=pb.ARITH_KIND_SQRT, a=pb.Num(k=4)))

    def test_exec_request(self):
        p = optlab.Program()
        n = p.norm(1)
        p.read(n)
        req = wire.exec_request_to_pb(p)
        self.assertEqual(req.protocol_minor, optlab.PROTOCOL_MINOR)
        self.assertEqual(optlab.PROTOCOL_MINOR, 12)
        self.assertEqual(len(wire.exec_request_from_pb(req).ops), 2)
        # A plugin older than minor 5 reads every register, in op order.
        old = pb.ExecRequest(program=pb.Program(ops=[pb.Op(grad=pb.GradOp(out=1)), pb.Op(norm=pb.NormOp(x=1)),
                                                     pb.Op(scale=pb.ScaleOp(dst=1, alpha=2))]))
        got = wire.exec_request_from_pb(old)
        self.assertEqual([(optlab.op_name(op), getattr(op, "x", None)) for op in got.ops[3:]],
                         [("Read", got.reg(1)), ("Read", got.reg(2)), ("Read", got.reg(3))])
        r = optlab.new_result(got, [0.5, 0.25, 3.0])
        self.assertEqual([r.get(got.reg(i)) for i in (1, 2, 3)], [0.5, 0.25, 3.0])
        self.assertEqual(list(wire.result_to_pb(r).scalars), [0.5, 0.25, 3.0])
        self.assertEqual(wire.result_from_pb(p, pb.Result(scalars=[2.0])).get(n), 2.0)
        with self.assertRaises(optlab.Error) as cm:
            wire.result_from_pb(p, pb.Result(scalars=[]))
        self.assertEqual(cm.exception.code, optlab.Code.INTERNAL)

    def test_unknown(self):
        def newer(msg):
            return type(msg).FromString(msg.SerializeToString() + bytes([0x9a, 0x06, 0x02, 0x08, 0x01]))

        norm = pb.Op(norm=pb.NormOp(x=1))
        for name, op in [("newer op kind", newer(pb.Op())), ("empty op", pb.Op()),
                         ("newer field", pb.Op(norm=newer(pb.NormOp(x=1)))),
                         ("newer operand", pb.Op(fill=pb.FillOp(value_num=newer(pb.Num())))),
                         ("unknown unary kind", pb.Op(unary=pb.UnaryOp(kind=42))),
                         ("unspecified unary kind", pb.Op(unary=pb.UnaryOp())),
                         ("unknown BN mode", pb.Op(grad=pb.GradOp(bn=5))),
                         ("unknown segmentation", pb.Op(seg_reduce=pb.SegReduceOp(kind=1, by=4))),
                         ("unknown vector shape", pb.Op(alloc=pb.AllocOp(id=1, shape=4))),
                         ("unknown mat_func kind", pb.Op(mat_func=pb.MatFuncOp(kind=6))),
                         ("unspecified mat_func kind", pb.Op(mat_func=pb.MatFuncOp()))]:
            with self.subTest(name):
                with self.assertRaises(optlab.Error) as cm:
                    wire.program_from_pb(pb.Program(ops=[norm, norm, op]))
                e = cm.exception
                self.assertEqual((e.code, e.op.index), (optlab.Code.UNIMPLEMENTED, 2))
                self.assertTrue(str(e).startswith("op 2 ("), str(e))

    def test_bad_op(self):
        p = optlab.Program()
        p.norm(1)
        p.ops.append("not an op")
        with self.assertRaises(optlab.Error) as cm:
            wire.program_to_pb(p)
        self.assertEqual(str(cm.exception), "op 1 (str): str is not an op")
        self.assertEqual((cm.exception.code, cm.exception.op.index), (optlab.Code.INVALID_ARGUMENT, 1))
        other = optlab.Program()
        p = optlab.Program().scale(1, other.norm(1))
        with self.assertRaises(optlab.Error) as cm:
            wire.program_to_pb(p)
        self.assertEqual(str(cm.exception), "program: op 0 uses register #1 of another program")

    def test_vec_error(self):
        # The host's OpError detail of an op that failed on a handle: the
        # plugin names the handle from its program.
        hs = optlab.Handles().sub("sam")
        g = hs.new("g")
        p = hs.prog().axpy(optlab.PARAMS, 1, g)
        host = optlab.OpError(0, "Axpy", vec_error=optlab.VecError(g, "is not allocated"))
        oe = wire.op_error_to_pb(host)
        self.assertEqual((oe.vec_error, oe.vec, oe.message), (True, g, "is not allocated"))
        err = optlab.Error("exec: op 0 (Axpy): handle v1 is not allocated", optlab.Code.FAILED_PRECONDITION)
        err.op = wire.op_error_from_pb(pb.OpError.FromString(oe.SerializeToString()))
        self.assertEqual(str(err.op), "op 0 (Axpy): handle v1 is not allocated")
        optlab.name_handles(err, p)
        self.assertEqual(str(err), "exec: op 0 (Axpy): handle sam/g is not allocated")
        self.assertEqual(str(err.op), "op 0 (Axpy): handle sam/g is not allocated")
        self.assertEqual(str(err.wrap("sam: step")), "sam: step: exec: op 0 (Axpy): handle sam/g is not allocated")
        # Back to the host: still the handle and the text after it.
        back = wire.op_error_to_pb(err.wrap("sam").op)
        self.assertEqual((back.vec_error, back.vec, back.message), (True, g, "is not allocated"))
        plain = wire.op_error_from_pb(pb.OpError(op_index=2, op="Norm", message="boom"))
        self.assertEqual((str(plain), plain.vec_error), ("op 2 (Norm): boom", None))

    def test_info(self):
        @dataclass
        class Params:
            rho: float = optlab.param(0.05, range="[0,)", doc="radius")
            m: int = optlab.param(1)

        info = optlab.Info(name="x", version="1", features=optlab.Features(members=True), params=optlab.specs(Params))
        m = wire.info_to_pb(info)
        self.assertEqual((m.name, m.version, m.protocol_minor, list(m.capabilities)),
                         ("x", "1", optlab.PROTOCOL_MINOR, ["members"]))
        self.assertEqual((m.params[0].default.float_value, m.params[0].range, m.params[1].default.int_value), (0.05, "[0,)", 1))
        bad = optlab.Info(name="x", params=[optlab.ParamSpec("k", "int", default="one")])
        with self.assertRaises(ValueError) as cm:
            wire.info_to_pb(bad)
        self.assertIn("info of 'x': hyperparameter 'k': default 'one' (str) does not match type int", str(cm.exception))

    def test_features(self):
        """Every feature of the op table (Go's optim.FeatureSet, through
        ops.json) is a field of optlab.Features, in order, and crosses the
        wire alone under its name, in the capabilities and, for the three
        that hosts once knew by booleans, in those too."""
        fields = [f.name for f in dataclasses.fields(optlab.Features)]
        self.assertEqual(fields, [f["name"].replace("-", "_") for f in optlab.FEATURES])
        self.assertEqual([f["name"] for f in optlab.FEATURES],
                         ["members", "member-data-order", "owns-update", "base-step", "update-rule", "predictive", "state",
                          "finalize"])
        for f in optlab.FEATURES:
            feats = optlab.Features(**{f["name"].replace("-", "_"): True})
            r = wire.info_response_to_pb(optlab.Info(name="x", features=feats))
            self.assertEqual(list(r.info.capabilities), [f["name"]])
            self.assertEqual((r.predictor, r.stateful, r.finalizer),
                             (f["name"] == "predictive", f["name"] == "state", f["name"] == "finalize"))
            self.assertEqual(wire.info_from_pb(r.info).features, feats)
            if f.get("method"):
                self.assertTrue(callable(getattr(optlab.Optimizer, optlab_method(f["method"]))), f)
        with self.assertRaises(TypeError):
            wire.info_to_pb(optlab.Info(name="x", features=["members"]))

    def test_params_to_pb(self):
        r = pb.ConfigureResponse()
        wire.params_to_pb({"rho2": 0.1, "m": 2, "on": True, "s": "all"}, r.resolved)
        self.assertEqual({k: v.WhichOneof("kind") for k, v in r.resolved.items()},
                         {"rho2": "float_value", "m": "int_value", "on": "bool_value", "s": "string_value"})
        wire.params_to_pb(None, r.resolved)
        with self.assertRaises(ValueError) as cm:
            wire.params_to_pb({"rho2": [0.1]}, pb.ConfigureResponse().resolved)
        self.assertIn('hyperparameter "rho2": unsupported hyperparameter value', str(cm.exception))

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
        n = sum(isinstance(op, optlab.Read) for op in p.ops)
        if self.calls == 2:
            raise optlab.Error("op 0 (Grad): boom")
        return optlab.new_result(p, [0.25 * (i + 1) for i in range(n)])


class TraceTest(unittest.TestCase):
    def test_trace(self):
        out = io.StringIO()
        h = optlab.Trace(FakeHost(), out)
        h.layout()
        p = optlab.Handles().sub("t").prog()
        n = p.norm(optlab.PARAMS)
        d = p.dot(optlab.PARAMS, optlab.PARAMS)
        p.read(d, n)
        h.exec(p)
        with self.assertRaises(optlab.Error):
            h.exec(p)
        self.assertEqual(out.getvalue(), (
            "layout: 1 member(s) [mlp: 6 parameters in 1 tensors]\n"
            "exec 1: 4 ops\n 0 Norm      params[0]  → #1\n 1 Dot       params[0] · params[0]  → #2\n"
            " 2 Read      #2\n 3 Read      #1\n   ← #2=0.25 #1=0.5\n"
            "exec 2: 4 ops\n 0 Norm      params[0]  → #1\n 1 Dot       params[0] · params[0]  → #2\n"
            " 2 Read      #2\n 3 Read      #1\n   error: op 0 (Grad): boom\n"))

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
    """examples/python-sam sends the ops of the Go SAM's golden traces (the
    trace of plain SAM has no value read back, so a host that computes
    nothing gives it whole; host/plugin's Go tests compare all three
    goldens through the exact host)."""

    def test_ops_match_go_golden(self):
        import importlib.util

        spec = importlib.util.spec_from_file_location("python_sam", SAM_SCRIPT)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)

        class Host:
            def layout(self):
                # Read once, first, for the batch size that bounds m.
                t = [optlab.Tensor(name=f"t{i}", shape=[1], offset=i, kind="weight") for i in range(4)]
                member = optlab.MemberLayout(arch="mlp-4x4x3", numel=35, tensors=t)
                return optlab.Layout(members=[member, member], batch_size=32)

            def exec(self, p):
                wire.program_to_pb(p)  # it would go over the wire
                return optlab.new_result(p, [0.5] * sum(isinstance(op, optlab.Read) for op in p.ops))

        out = io.StringIO()
        h = optlab.Trace(Host(), out)
        sam = mod.SAM()
        params = {s.name: s.default for s in sam.info().params}
        sam.configure(h, optlab.Config(params=params, members=2))
        for step in range(2):
            self.assertEqual(sam.step(optlab.StepInput(step=step, lr=0.1)), {})
        with open(SAM_GOLDEN, encoding="utf-8") as f:
            self.assertEqual(out.getvalue(), f.read())


if __name__ == "__main__":
    unittest.main()
