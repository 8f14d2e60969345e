"""The builder, handles, slots and listings (sdk/optim's program.go,
handles.go and listing.go in Python)."""

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


class ProgramTest(unittest.TestCase):
    def test_slots(self):
        p = optlab.Program()
        ev = p.alloc(1, 0).grad(1, optlab.PARAMS)
        n = p.norm(1)
        d = p.dot(1, 1)
        ev2 = p.grad_op(optlab.Grad(out=1, at=optlab.PARAMS, eps=2, out_rho=3))
        j = p.joint_grad([1, 0], [optlab.params_of(0), optlab.params_of(1)])
        self.assertEqual([ev.loss.i, ev.acc.i, n.i, d.i, ev2.loss.i, ev2.acc.i, j.loss.i, j.acc.i], [1, 2, 3, 4, 5, 6, 7, 8])
        r = optlab.Result([10, 11, 12, 13, 14, 15, 16, 17])
        self.assertEqual((r.get(ev.loss), r.get(n), r.get(j.acc)), (10, 12, 17))
        self.assertTrue(math.isnan(r.get(optlab.Scalar())))
        self.assertTrue(math.isnan(optlab.Result([1]).get(n)))

    def test_ops_appended_directly_are_counted(self):
        p = optlab.Program()
        p.ops.append(optlab.Norm(1))
        p.ops.append(optlab.Grad(1, 0))
        self.assertEqual(p.norm(2).i, 4)
        p.ops[:] = []  # a reset program counts from the start
        self.assertEqual(p.norm(2).i, 1)

    def test_emits_and_names(self):
        self.assertEqual([optlab.emits(o) for o in (optlab.Dot(1, 2), optlab.Norm(1), optlab.Grad(1, 0),
                                                    optlab.JointGrad([], [0]), optlab.Alloc(1))], [1, 1, 2, 2, 0])
        self.assertEqual(optlab.op_name(optlab.FillRange(1, 0, 2, 1.0)), "FillRange")

    def test_mean(self):
        p = optlab.Program()
        evs = [p.grad(1, 0), p.grad(2, -1)]
        loss, acc = optlab.Result([1.0, 0.25, 2.0, 0.75]).mean(evs)
        self.assertEqual((loss, acc), (1.0 / 2 + 2.0 / 2, 0.25 / 2 + 0.75 / 2))
        self.assertTrue(all(math.isnan(x) for x in optlab.Result().mean([])))

    def test_listing_matches_go(self):
        # Lines of plugins/sam/testdata/trace.golden and Go's listing_test.
        hs = optlab.Handles().sub("sam")
        g, saved = hs.new("g[0]"), hs.new("saved[0]")
        p = hs.prog()
        p.alloc(g, 0)
        ev = p.grad(g, optlab.PARAMS)
        p.norm(g)
        p.copy(saved, optlab.PARAMS).axpy(optlab.PARAMS, 0.0877017, g)
        p.grad(g, optlab.PARAMS, bn=optlab.BN_FREEZE)
        p.copy_state(optlab.PARAMS, saved).base_step(optlab.PARAMS, g)
        p.lin_comb(saved, (0.5, g), optlab.Term(0.5, saved))
        p.unary(saved, optlab.PARAMS, optlab.ABS).binary(saved, saved, g, optlab.MUL)
        p.fill_range(saved, 4, 6, 1).fill(g, 0).scale(g, 2).add_const(g, 0.01).rand_n(g, 1e-7, 3).set_lr(1, 0.1)
        p.grad(0, optlab.PARAMS, optlab.Batch(part=1, of=2, shuffle=5))
        p.joint_grad([g, 0], [optlab.params_of(0), optlab.params_of(1)], optlab.Batch(1, 2))
        p.free(g)
        want = (
            " 0 Alloc     sam/g[0] member=0\n"
            " 1 Grad      sam/g[0] = ∇L(params[0]) batch=all bn=update  → loss #1, acc #2\n"
            " 2 Norm      sam/g[0]  → #3\n"
            " 3 Copy      sam/saved[0] = params[0]\n"
            " 4 Axpy      params[0] += 0.0877017·sam/g[0]\n"
            " 5 Grad      sam/g[0] = ∇L(params[0]) batch=all bn=freeze  → loss #4, acc #5\n"
            " 6 Copy      params[0] = sam/saved[0] (with BatchNorm statistics)\n"
            " 7 BaseStep  params[0] with gradient sam/g[0]\n"
            " 8 LinComb   sam/saved[0] = 0.5·sam/g[0] + 0.5·sam/saved[0]\n"
            " 9 Unary     sam/saved[0] = abs(params[0])\n"
            "10 Binary    sam/saved[0] = mul(sam/saved[0], sam/g[0])\n"
            "11 FillRange sam/saved[0][4:10] = 1\n"
            "12 Fill      sam/g[0] = 0\n"
            "13 Scale     sam/g[0] *= 2\n"
            "14 AddConst  sam/g[0] += 0.01\n"
            "15 RandN     sam/g[0] ~ N(0, 1e-07²) seed=3\n"
            "16 SetLR     member=1 lr=0.1\n"
            "17 Grad      _ = ∇L(params[0]) batch=1/2 shuffle=5 bn=update  → loss #6, acc #7\n"
            "18 JointGrad [sam/g[0] _] = ∇L([params[0] params[1]]) batch=1/2 bn=update  → loss #8, acc #9\n"
            "19 Free      sam/g[0]\n"
        )
        self.assertEqual(str(p), want)
        self.assertEqual(ev.acc.i, 2)
        self.assertEqual(optlab.listing(None), "<nil program>")

    def test_num_is_go_g6(self):
        for f, s in [(1.0, "1"), (0.1875, "0.1875"), (1.160454, "1.16045"), (1e-12, "1e-12"), (123456789.0, "1.23457e+08"),
                     (-0.5, "-0.5"), (math.nan, "NaN"), (math.inf, "+Inf"), (-math.inf, "-Inf")]:
            self.assertEqual(P.num(f), s)


if __name__ == "__main__":
    unittest.main()
