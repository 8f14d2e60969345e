"""The builder, handles, registers, results and listings (sdk/optim's
program.go, regs.go, handles.go and listing.go in Python)."""

import dataclasses
import math
import os
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import optlab  # noqa: E402
from optlab import program as P  # noqa: E402


class HandlesTest(unittest.TestCase):
    def test_namespaces_share_the_counter(self):
        root = optlab.Handles()
        sam = root.sub("sam")
        inner = sam.sub("inner")
        g = sam.per_member("g", 2)
        x = inner.new("x")
        y = root.new("y")
        self.assertEqual(g + [x, y], [1, 2, 3, 4])
        self.assertEqual([root.name(v) for v in (1, 2, 3, 4)], ["sam/g[0]", "sam/g[1]", "sam/inner/x", "y"])

    def test_reserved_and_unknown_names(self):
        hs = optlab.Handles()
        self.assertEqual(hs.name(optlab.PARAMS), "params[0]")
        self.assertEqual(hs.name(optlab.params_of(3)), "params[3]")
        self.assertEqual(hs.name(optlab.rho_of(2)), "rho[2]")
        self.assertEqual(hs.name(42), "v42")
        self.assertEqual(optlab.member_of(optlab.params_of(5)), 5)
        self.assertIsNone(optlab.member_of(7))
        self.assertEqual(optlab.rho_member_of(optlab.rho_of(1)), 1)
        self.assertIsNone(optlab.rho_member_of(optlab.params_of(1)))

    def test_config_namespace(self):
        h = optlab.Config().namespace("sam")
        self.assertEqual(h.name(h.new("g")), "sam/g")
        outer = optlab.Handles().sub("ens")
        cfg = optlab.Config(handles=outer.sub("member0"))
        h = cfg.namespace("sam")
        self.assertEqual(h.name(h.new("g")), "ens/member0/sam/g")


GOLDEN = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "optim", "testdata", "listing_all_ops.txt")


def all_ops_program():
    """sdk/optim's allOpsProgram (listing_golden_test.go), op for op."""
    hs = optlab.Handles().sub("all")
    g, saved, t, mask = hs.new("g[0]"), hs.new("saved[0]"), hs.new("t"), hs.new("mask")
    p = hs.prog()
    p.alloc(g, 0).alloc(saved, 1).alloc(t, 0).alloc(mask, 0)
    ev = p.grad(g, optlab.PARAMS, optlab.ALL, optlab.BN_UPDATE)
    n = p.norm(g)
    d = p.dot(g, saved)
    c = p.div(0.05, p.add(n, 1e-12))
    p.copy(saved, optlab.PARAMS).axpy(optlab.PARAMS, c, g).axpy(optlab.PARAMS, -0.0877017, g)
    ev2 = p.grad(g, optlab.PARAMS, optlab.ALL, optlab.BN_FREEZE)
    p.copy_state(optlab.PARAMS, saved).base_step(optlab.PARAMS, g)
    p.lin_comb(saved, optlab.Term(optlab.K(0.5), g), (d, saved))
    p.unary(t, optlab.PARAMS, optlab.ABS).binary(t, t, g, optlab.MUL)
    p.fill_range(mask, 4, 6, 1).fill(g, 0).fill(t, None).fill(t, -math.inf)
    p.scale(g, 2).scale(g, n).add_const(g, 0.01).rand_n(g, 1e-7, 3).set_lr(1, 0.1)
    p.grad(0, optlab.PARAMS, optlab.Batch(part=1, of=2, shuffle=5), optlab.BN_UPDATE)
    p.grad_op(optlab.Grad(at=optlab.params_of(1), batch=optlab.Batch(1, 2), bn=optlab.BN_FREEZE, eps=t, out_rho=saved))
    p.grad_op(optlab.Grad(out=g, at=optlab.PARAMS, eps=t))
    p.joint_grad([g, 0], [optlab.PARAMS, optlab.params_of(1)], optlab.Batch(1, 2), optlab.BN_UPDATE)
    s = p.seg_reduce(optlab.SEG_DOT, optlab.PER_ROW, g, saved)
    sn = p.seg_norm(optlab.PER_TENSOR, g)
    p.seg_reduce(optlab.SEG_MAX_ABS, optlab.PER_TENSOR, optlab.rho_of(1), 0)
    p.seg_reduce(optlab.SEG_SUM_ABS, optlab.PER_ROW, g)
    p.scale(g, p.recip(sn)).axpy(t, s, g)
    p.top_k_mask(mask, g, optlab.PER_ROW, 0.25)
    p.top_k_mask(mask, g, optlab.PER_TENSOR, p.clamp(s, 0, 1))
    m = p.max(p.min(n, 3), p.sub(d, p.mul(n, n)))
    p.add_const(g, p.sqrt(m))
    loss, acc = p.mean([ev, ev2])
    p.report_metrics(loss, acc).report("norm", n)
    p.newton_schulz(t, g, 5).newton_schulz_op(optlab.NewtonSchulz(g, g, 30, 1.5, -0.5, 0, 0))
    p.read(n, m).update_bn(saved).update_bn(optlab.PARAMS).free(t)
    p.ops.append(optlab.Unary(t, g, 42))
    return p


class ProgramTest(unittest.TestCase):
    def test_listing_is_gos(self):
        # sdk/optim's TestListingAllOps writes the golden from the same
        # program built in Go (go test ./optim -run TestListingAllOps -update).
        p = all_ops_program()
        self.assertEqual({optlab.op_name(op) for op in p.ops}, set(optlab.OPS), "every op of the table")
        with open(GOLDEN, encoding="utf-8") as f:
            self.assertEqual(str(p), f.read())
        self.assertIsNone(p.err())

    def test_ops_from_the_table(self):
        self.assertEqual(list(optlab.OPS), [o["name"] for o in optlab.OPSET["ops"]])
        for spec in optlab.OPSET["ops"]:
            cls = optlab.OPS[spec["name"]]
            self.assertIs(getattr(optlab, spec["name"]), cls)
            op = cls()  # every field has Go's zero value
            self.assertEqual([f.name for f in dataclasses.fields(cls)], [f["wire"] for f in spec["fields"]])
            self.assertEqual(optlab.emits(op), len(spec["regs"]))
            self.assertEqual(optlab.op_name(op), spec["name"])
        self.assertEqual(optlab.Grad(), optlab.Grad(0, 0, optlab.ALL, optlab.BN_UPDATE, 0, 0))
        self.assertEqual((optlab.Arith().a, optlab.Read().x, optlab.JointGrad().outs), (None, optlab.Reg(), []))

    def test_enums(self):
        self.assertEqual((optlab.ABS, optlab.RECIPROCAL, optlab.MUL, optlab.MIN, optlab.BN_UPDATE, optlab.BN_FREEZE),
                         (1, 8, 1, 6, 0, 1))
        self.assertIs(optlab.ABS, optlab.UnaryKind.ABS)
        self.assertIs(optlab.BN_FREEZE, optlab.BNMode.FREEZE)
        self.assertEqual((optlab.ARITH_ADD, optlab.ARITH_CLAMP, optlab.SEG_SUM_SQ, optlab.SEG_MAX_ABS,
                          optlab.PER_TENSOR, optlab.PER_ROW), (1, 9, 1, 4, 1, 2))
        self.assertIs(optlab.SEG_DOT, optlab.SegKind.DOT)
        self.assertIs(optlab.PER_ROW, optlab.Segmentation.PER_ROW)
        for name, values in optlab.OPSET["enums"].items():
            self.assertEqual(sorted(int(m) for m in optlab.ENUMS[name]), sorted(values.values()), name)
        self.assertEqual([optlab.arity(k) for k in (optlab.ARITH_ADD, optlab.ARITH_SQRT, optlab.ARITH_CLAMP, 42)],
                         [2, 1, 3, 0])

    def test_registers(self):
        p = optlab.Program()
        ev = p.alloc(1, 0).grad(1, optlab.PARAMS)
        n = p.norm(1)
        d = p.dot(1, 1)
        ev2 = p.grad_op(optlab.Grad(out=1, at=optlab.PARAMS, eps=2, out_rho=3))
        j = p.joint_grad([1, 0], [optlab.params_of(0), optlab.params_of(1)])
        a = p.add(n, 1)
        s = p.seg_reduce(optlab.SEG_SUM_SQ, optlab.PER_TENSOR, 1)
        self.assertEqual([r.index for r in (ev.loss, ev.acc, n, d, ev2.loss, ev2.acc, j.loss, j.acc, a, s)],
                         list(range(1, 11)))
        self.assertIs(optlab.Scalar, optlab.Reg)
        self.assertEqual(p.reg(3), n)
        self.assertNotEqual(optlab.Program().reg(3), n)  # another program's
        self.assertEqual(p.num_regs(), 10)

    def test_numbers_are_immediates(self):
        p = optlab.Program()
        r = p.norm(1)
        p.fill(1, 2).scale(1, 0.5).axpy(1, r, 2).lin_comb(1, (1, 2))
        self.assertEqual([type(x) for x in (p.ops[1].value, p.ops[2].alpha, p.ops[4].terms[0].coef)],
                         [optlab.K, optlab.K, optlab.K])
        self.assertIs(p.ops[3].alpha, r)
        self.assertEqual(p.arith(optlab.ARITH_SQRT, 4).index, 2)
        self.assertEqual((p.ops[-1].a, p.ops[-1].b, p.ops[-1].c), (4.0, None, None))
        with self.assertRaises(TypeError):
            p.fill(1, "x")
        with self.assertRaises(ValueError):
            p.unary(1, 2, 42)

    def test_foreign_register(self):
        other = optlab.Program()
        r = other.norm(1)
        p = optlab.Program()
        p.norm(1)
        p.scale(1, r)
        p.scale(1, other.norm(2))
        self.assertEqual(str(p.err()), "op 1 uses register #1 of another program")

    def test_ops_appended_directly_are_counted(self):
        p = optlab.Program()
        p.ops.append(optlab.Norm(1))
        p.ops.append(optlab.Grad(1, 0))
        self.assertEqual(p.norm(2).i, 4)
        p.ops[:] = []  # a reset program counts from the start
        self.assertEqual(p.norm(2).i, 1)

    def test_result(self):
        p = optlab.Program()
        ev = p.grad(1, 0)
        n = p.norm(1)
        p.read(n, ev.loss)
        r = optlab.new_result(p, [3.0, 0.5])
        self.assertEqual(r.reads, [3.0, 0.5])
        self.assertEqual((r.get(n), r.get(ev.loss)), (3.0, 0.5))
        self.assertTrue(math.isnan(r.get(optlab.Reg())))
        with self.assertRaises(optlab.ReadError) as cm:
            r.get(ev.acc)
        self.assertEqual(str(cm.exception), "register #2: was not read: add a Read op for it (Program.read)")
        other = optlab.Program()
        with self.assertRaises(optlab.ReadError) as cm:
            r.get(other.norm(1))
        self.assertEqual(str(cm.exception), "register #1: belongs to another program than this result's")
        self.assertEqual(r.lookup(n), (3.0, None))
        v, err = r.lookup(ev.acc)
        self.assertIsInstance(err, optlab.ReadError)
        with self.assertRaises(ValueError):
            optlab.new_result(p, [1.0])
        with self.assertRaises(ValueError):
            optlab.new_result(None, [1.0])
        self.assertEqual(optlab.new_result(None, []).reads, [])

    def test_mean(self):
        p = optlab.Program()
        evs = [p.grad(1, 0), p.grad(2, -1)]
        p.read(evs[0].loss, evs[0].acc, evs[1].loss, evs[1].acc)
        loss, acc = optlab.new_result(p, [1.0, 0.25, 2.0, 0.75]).mean(evs)
        self.assertEqual((loss, acc), (1.0 / 2 + 2.0 / 2, 0.25 / 2 + 0.75 / 2))
        self.assertTrue(all(math.isnan(x) for x in optlab.Result().mean([])))

    def test_mean_on_the_device(self):
        p = optlab.Program()
        evs = [p.grad(1, 0), p.grad(2, -1), p.grad(3, -2)]
        loss, acc = p.mean(evs)
        self.assertEqual(str(p).splitlines()[3:], [
            " 3 Arith     div(#1, 3)  → #7",
            " 4 Arith     div(#2, 3)  → #8",
            " 5 Arith     div(#3, 3)  → #9",
            " 6 Arith     add(#7, #9)  → #10",
            " 7 Arith     div(#4, 3)  → #11",
            " 8 Arith     add(#8, #11)  → #12",
            " 9 Arith     div(#5, 3)  → #13",
            "10 Arith     add(#10, #13)  → #14",
            "11 Arith     div(#6, 3)  → #15",
            "12 Arith     add(#12, #15)  → #16",
        ])
        self.assertEqual((loss.index, acc.index), (14, 16))
        self.assertEqual(p.mean([]), (optlab.Reg(), optlab.Reg()))
        p.report_metrics(loss, acc)
        self.assertEqual([(op.name, op.x) for op in p.ops[-2:]], [("loss", loss), ("acc", acc)])

    def test_listing_details(self):
        hs = optlab.Handles().sub("sam")
        g = hs.new("g")
        p = hs.prog()
        p.ops.append(optlab.Copy(g, 0, False))
        p.ops.append(optlab.Arith(optlab.ARITH_ADD, optlab.K(0), None))
        p.ops.append(None)
        self.assertEqual(str(p), " 0 Copy      sam/g = params[0]\n 1 Arith     add(0)  → #1\n 2 nil       <nil>\n")
        self.assertEqual(optlab.listing(None), "<nil program>\n")

    def test_newton_schulz(self):
        # The builder sends Keller Jordan's coefficients (Go's optim.NS5A …)
        # with the given step count; newton_schulz_op sends one's own, and
        # both cross the wire as they are (protocol minor 7).
        from optlab import wire
        hs = optlab.Handles().sub("muon")
        u, g = hs.new("u"), hs.new("g")
        p = hs.prog().newton_schulz(u, g, optlab.NS5_STEPS)
        p.newton_schulz_op(optlab.NewtonSchulz(dst=g, src=g, steps=30, a=1.5, b=-0.5, c=0.0, eps=0.0))
        self.assertEqual(p.ops[0], optlab.NewtonSchulz(u, g, 5, 3.4445, -4.7750, 2.0315, 1e-7))
        self.assertEqual(optlab.emits(p.ops[0]), 0)
        self.assertEqual(optlab.op_spec(p.ops[0])["since"], 7)
        self.assertEqual(str(p), " 0 NewtonSchulz muon/u = newton-schulz(muon/g) steps=5 a=3.4445 b=-4.775 c=2.0315 eps=1e-07\n"
                                 " 1 NewtonSchulz muon/g = newton-schulz(muon/g) steps=30 a=1.5 b=-0.5 c=0 eps=0\n")
        back = wire.exec_request_from_pb(wire.exec_request_to_pb(p))
        self.assertEqual(back.ops, p.ops)

    def test_num_is_go_g6(self):
        for f, s in [(1.0, "1"), (0.1875, "0.1875"), (1.160454, "1.16045"), (1e-12, "1e-12"), (123456789.0, "1.23457e+08"),
                     (-0.5, "-0.5"), (math.nan, "NaN"), (math.inf, "+Inf"), (-math.inf, "-Inf")]:
            self.assertEqual(P.num(f), s)


if __name__ == "__main__":
    unittest.main()
