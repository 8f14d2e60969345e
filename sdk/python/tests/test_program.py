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
    lf, rf, q = hs.new("L"), hs.new("R"), hs.new("Q")
    p.alloc_factor(lf, 0, optlab.LEFT_FACTOR, 0).alloc_factor(rf, 0, optlab.RIGHT_FACTOR, 256).alloc_factor(q, 0, optlab.LEFT_FACTOR, 0)
    p.gram(lf, g, 0.99, 0.01).gram(rf, g, 1, 1).seg_reduce(optlab.SEG_SUM_SQ, optlab.PER_COLUMN, g, 0)
    p.inv_root(lf, lf, 4, 1e-12).mat_func(rf, rf, optlab.PINV_ROOT, 2, 1e-6).mat_func(q, lf, optlab.EIGVECS, 0, 0)
    p.mat_func(q, q, optlab.QR, 0, 0).mat_func(q, lf, optlab.EIGVALS, 0, 0)
    p.mat_mul(t, lf, g, rf).mat_mul(t, 0, g, rf).mat_mul_op(optlab.MatMul(dst=t, src=g, left=q, right=q, trans_left=True))
    p.mat_mul(q, lf, q, 0).sort_columns(q, lf, t).sort_columns(rf, rf, 0)
    p.if_(n, lambda p: p.scale(g, 0.5).norm(g))
    lb, la = hs.new("lb"), hs.new("la")
    p.base_state(t, optlab.PARAMS, "momentum_buffer").alloc_samples(lb, 0).alloc_samples(la, 0)
    p.grad_op(optlab.Grad(out=g, at=optlab.PARAMS, out_losses=lb))
    p.grad_op(optlab.Grad(at=optlab.PARAMS, bn=optlab.BN_FREEZE, out_losses=la))
    p.binary(la, la, lb, optlab.SUB)
    p.grad_op(optlab.Grad(out=g, at=optlab.PARAMS, rank=la, keep=3))
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

    def test_factor_ops(self):
        # alloc_factor, gram, mat_mul(_op), inv_root and mat_func build Go's
        # ops (AllocFactor, Gram, MatMul, MatMulOp, InvRoot, MatFunc) and
        # cross the wire as they are (protocol minor 8).
        from optlab import wire
        hs = optlab.Handles().sub("shampoo")
        g, u, lf, rf = hs.new("g"), hs.new("u"), hs.new("L"), hs.new("R")
        p = hs.prog().alloc_factor(lf, 1, optlab.LEFT_FACTOR).alloc_factor(rf, 1, optlab.RIGHT_FACTOR, 1024)
        p.gram(lf, g, 0.9, 0.1).gram(rf, g, 0.9, 0.1)
        p.inv_root(lf, lf, 4, 1e-12).mat_func(rf, rf, optlab.PINV_ROOT, 4, 1e-6).mat_func(u, lf, optlab.QR)
        p.mat_mul(u, lf, g, rf).mat_mul_op(optlab.MatMul(u, g, lf, 0, trans_left=True))
        self.assertEqual(p.ops, [
            optlab.Alloc(lf, 1, optlab.VecShape.LEFT, 0), optlab.Alloc(rf, 1, optlab.VecShape.RIGHT, 1024),
            optlab.Gram(lf, g, 0.9, 0.1), optlab.Gram(rf, g, 0.9, 0.1),
            optlab.MatFunc(lf, lf, optlab.MatFuncKind.INV_ROOT, 4.0, 1e-12),
            optlab.MatFunc(rf, rf, optlab.MatFuncKind.PINV_ROOT, 4.0, 1e-6),
            optlab.MatFunc(u, lf, optlab.MatFuncKind.QR, 0.0, 0.0),
            optlab.MatMul(u, g, lf, rf, False, False), optlab.MatMul(u, g, lf, 0, True, False)])
        self.assertEqual(optlab.Alloc(g, 0), optlab.Alloc(g, 0, optlab.PARAM_SHAPE, 0))
        self.assertEqual([optlab.op_spec(op)["since"] for op in p.ops[2:]], [8] * 7)
        self.assertEqual(sum(optlab.emits(op) for op in p.ops), 0)
        self.assertEqual(str(p).splitlines(), [
            " 0 Alloc     shampoo/L member=1 shape=left",
            " 1 Alloc     shampoo/R member=1 shape=right block=1024",
            " 2 Gram      shampoo/L = 0.9·shampoo/L + 0.1·gram(shampoo/g)",
            " 3 Gram      shampoo/R = 0.9·shampoo/R + 0.1·gram(shampoo/g)",
            " 4 MatFunc   shampoo/L = inv_root(shampoo/L) root=4 eps=1e-12",
            " 5 MatFunc   shampoo/R = pinv_root(shampoo/R) root=4 eps=1e-06",
            " 6 MatFunc   shampoo/u = qr(shampoo/L)",
            " 7 MatMul    shampoo/u = shampoo/L·shampoo/g·shampoo/R",
            " 8 MatMul    shampoo/u = shampoo/L·shampoo/g·_ left transposed"])
        m = wire.program_to_pb(p)
        self.assertEqual((m.ops[1].alloc.shape, m.ops[1].alloc.block), (2, 1024))
        self.assertEqual(m.ops[8].mat_mul.trans_left, True)
        back = wire.exec_request_from_pb(wire.exec_request_to_pb(p))
        self.assertEqual(back.ops, p.ops)
        self.assertIs(type(back.ops[0].shape), optlab.VecShape)
        with self.assertRaises(ValueError):
            p.alloc_factor(u, 0, 4)
        with self.assertRaises(ValueError):
            p.mat_func(u, lf, 6)

    def test_factor_enums(self):
        self.assertEqual((optlab.PARAM_SHAPE, optlab.LEFT_FACTOR, optlab.RIGHT_FACTOR), (0, 1, 2))
        self.assertIs(optlab.LEFT_FACTOR, optlab.VecShape.LEFT)
        self.assertEqual((optlab.INV_ROOT, optlab.PINV_ROOT, optlab.EIGVECS, optlab.EIGVALS, optlab.QR), (1, 2, 3, 4, 5))
        self.assertIs(optlab.QR, optlab.MatFuncKind.QR)
        self.assertIs(optlab.PER_COLUMN, optlab.Segmentation.PER_COLUMN)
        self.assertEqual((int(optlab.PER_COLUMN), optlab.MAX_BLOCK), (3, 8192))
        self.assertEqual(optlab.PARAMS, 0)  # still the handle, not a VecShape

    def test_num_is_go_g6(self):
        for f, s in [(1.0, "1"), (0.1875, "0.1875"), (1.160454, "1.16045"), (1e-12, "1e-12"), (123456789.0, "1.23457e+08"),
                     (-0.5, "-0.5"), (math.nan, "NaN"), (math.inf, "+Inf"), (-math.inf, "-Inf")]:
            self.assertEqual(P.num(f), s)


class FactorLayoutTest(unittest.TestCase):
    # Go's MemberLayout.Segments, SegmentOf, Matrices, Tiles, Factors and
    # CheckFactors (sdk/optim/factors.go) on a small layout, by hand.
    def layout(self):
        T = optlab.Tensor
        return optlab.MemberLayout("tiny", 26, [T("fc.weight", [3, 5], 0, "weight"), T("fc.bias", [3], 15, "bias"),
                                                T("conv.weight", [2, 1, 2, 2], 18, "weight")])

    def test_segments(self):
        m = self.layout()
        self.assertEqual(m.segments(optlab.PER_TENSOR), [15, 3, 8])
        self.assertEqual(m.segments(optlab.PER_ROW), [5, 5, 5, 1, 1, 1, 4, 4])
        self.assertEqual(m.segments(optlab.PER_COLUMN), [3, 3, 3, 3, 3, 3, 2, 2, 2, 2])
        self.assertEqual(m.segment_of(optlab.PER_TENSOR), [0] * 15 + [1] * 3 + [2] * 8)
        self.assertEqual(m.segment_of(optlab.PER_COLUMN), [0, 1, 2, 3, 4] * 3 + [5] * 3 + [6, 7, 8, 9] * 2)
        self.assertEqual(m.segment_of(optlab.PER_ROW)[12:20], [2, 2, 2, 3, 4, 5, 6, 6])
        self.assertIsNone(m.segments(4))
        self.assertEqual(optlab.MemberLayout("flat", 4, []).segments(optlab.PER_COLUMN), [4])

    def test_tiles(self):
        m = self.layout()
        fc, conv = optlab.Matrix(0, 0, 3, 5), optlab.Matrix(2, 18, 2, 4)
        self.assertEqual(m.matrices(), [fc, conv])
        self.assertEqual(m.tiles(0), [optlab.Tile(fc, 0, 0, 3, 5), optlab.Tile(conv, 0, 0, 2, 4)])
        self.assertEqual([(t.matrix.tensor, t.row, t.col, t.rows, t.cols) for t in m.tiles(2)], [
            (0, 0, 0, 2, 2), (0, 0, 2, 2, 2), (0, 0, 4, 2, 1), (0, 2, 0, 1, 2), (0, 2, 2, 1, 2), (0, 2, 4, 1, 1),
            (2, 0, 0, 2, 2), (2, 0, 2, 2, 2)])

    def test_factors(self):
        m = self.layout()
        self.assertIs(m.factors(optlab.PARAM_SHAPE), m)

        def of(f):
            return f.numel, [(t.name, t.shape, t.offset, t.kind) for t in f.tensors]

        self.assertEqual(of(m.factors(optlab.LEFT_FACTOR)),
                         (13, [("fc.weight.L", [3, 3], 0, "factor"), ("conv.weight.L", [2, 2], 9, "factor")]))
        self.assertEqual(of(m.factors(optlab.RIGHT_FACTOR)),
                         (41, [("fc.weight.R", [5, 5], 0, "factor"), ("conv.weight.R", [4, 4], 25, "factor")]))
        self.assertEqual(of(m.factors(optlab.RIGHT_FACTOR, 2)), (26, [
            ("fc.weight.R[0,0]", [2, 2], 0, "factor"), ("fc.weight.R[0,1]", [2, 2], 4, "factor"),
            ("fc.weight.R[0,2]", [1, 1], 8, "factor"), ("fc.weight.R[1,0]", [2, 2], 9, "factor"),
            ("fc.weight.R[1,1]", [2, 2], 13, "factor"), ("fc.weight.R[1,2]", [1, 1], 17, "factor"),
            ("conv.weight.R[0,0]", [2, 2], 18, "factor"), ("conv.weight.R[0,1]", [2, 2], 22, "factor")]))
        self.assertEqual(m.factors(optlab.LEFT_FACTOR, 2).numel, 23)
        lay = optlab.Layout([m])
        self.assertEqual(lay.of(optlab.VecLayout(0, optlab.LEFT_FACTOR, 2)), m.factors(optlab.LEFT_FACTOR, 2))
        self.assertEqual(lay.of(optlab.VecLayout(1)).numel, 0)
        self.assertEqual(lay.tiles_of(optlab.VecLayout(0), 2), m.tiles(2))
        # A factor vector's tiles are its own matrices, whole.
        self.assertEqual([(t.rows, t.cols) for t in lay.tiles_of(optlab.VecLayout(0, optlab.LEFT_FACTOR, 2), 2)],
                         [(2, 2)] * 3 + [(1, 1)] * 3 + [(2, 2)] * 2)

    def test_check_factors(self):
        m = self.layout()
        self.assertIsNone(m.check_factors(optlab.LEFT_FACTOR, 0))
        self.assertIsNone(m.check_factors(optlab.PARAM_SHAPE, 0))
        wide = optlab.MemberLayout("wide", 90000, [optlab.Tensor("emb", [9, 10000], 0, "weight")])
        self.assertIsNone(wide.check_factors(optlab.LEFT_FACTOR, 0))
        self.assertIsNone(wide.check_factors(optlab.RIGHT_FACTOR, 1024))
        for got, want in [
            (wide.check_factors(optlab.RIGHT_FACTOR, 0),
             "tensor emb, as the matrix 9×10000, would have a right factor of 10000×10000 (0.4 GiB in float32), "
             "over the largest side 8192: set a block size ≤ 8192 (Distributed Shampoo's default is 1024)"),
            (m.check_factors(4, 0), "unknown vector shape 4"),
            (m.check_factors(optlab.LEFT_FACTOR, 8193), "block 8193 is outside [0, 8192] (0: whole rows and columns)"),
            (m.check_factors(optlab.PARAM_SHAPE, 4),
             "block 4 set for a parameter-shaped vector: blocks apply to factor shapes (left, right)"),
            (optlab.MemberLayout("b", 3, [optlab.Tensor("b", [3], 0, "bias")]).check_factors(optlab.LEFT_FACTOR, 0),
             "a left factor vector needs matrix tensors (2+ dims); this layout has none")]:
            self.assertIsInstance(got, ValueError)
            self.assertEqual(str(got), want)


if __name__ == "__main__":
    unittest.main()
