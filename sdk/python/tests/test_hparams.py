"""Hyperparameter dataclasses: schema, conversions and Go's messages."""

import os
import sys
import unittest
from dataclasses import dataclass

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import optlab  # noqa: E402
from optlab.hparams import convert, go_value  # noqa: E402


@dataclass
class Params:
    rho: float = optlab.param(0.05, range="[0,)", doc="radius")
    m: int = optlab.param(1, range="[1,)", doc="parts")
    adaptive: bool = optlab.param(False, doc="ASAM")
    scope: str = optlab.param("all", enum=["all", "weights"], doc="where")
    lam: float = optlab.param(0.5, range="(0,1]", name="lambda")
    plain: int = 3


class SpecsTest(unittest.TestCase):
    def test_specs(self):
        specs = optlab.specs(Params)
        self.assertEqual([(s.name, s.type, s.default) for s in specs], [
            ("rho", "float", 0.05), ("m", "int", 1), ("adaptive", "bool", False), ("scope", "string", "all"),
            ("lambda", "float", 0.5), ("plain", "int", 3)])
        self.assertEqual((specs[0].doc, specs[0].range), ("radius", "[0,)"))
        self.assertEqual(specs[3].enum, ["all", "weights"])

    def test_instance_values_are_defaults(self):
        self.assertEqual(optlab.specs(Params(rho=0.1))[0].default, 0.1)

    def test_malformed(self):
        @dataclass
        class BadEnum:
            x: float = optlab.param(1.0, enum=["a"])

        @dataclass
        class BadRange:
            x: float = optlab.param(1.0, range="[1,0]")

        @dataclass
        class BadDefault:
            x: float = optlab.param(-1.0, range="[0,)")

        @dataclass
        class BadType:
            x: list = None

        for cls, msg in [(BadEnum, "enum applies to string hyperparameters only"),
                         (BadRange, 'range "[1,0]": want an interval'),
                         (BadDefault, 'default of \'x\': -1 is out of range [0,): want ≥ 0'),
                         (BadType, "unsupported type")]:
            with self.assertRaises(TypeError) as cm:
                optlab.specs(cls)
            self.assertIn(msg, str(cm.exception))


class ApplyTest(unittest.TestCase):
    def test_apply(self):
        p = optlab.apply(Params, {"rho": 2, "m": 2.0, "scope": "weights", "lambda": 1.0})
        self.assertEqual(p, Params(rho=2.0, m=2, scope="weights", lam=1.0))
        self.assertIsInstance(p.rho, float)
        self.assertIsInstance(p.m, int)
        self.assertEqual(optlab.apply(p, {"adaptive": True}), Params(rho=2.0, m=2, adaptive=True, scope="weights", lam=1.0))

    def test_messages_are_go_s(self):
        for params, msg in [
            ({"eta": 1.0}, 'hparams: "eta": unknown hyperparameter (have rho, m, adaptive, scope, lambda, plain)'),
            ({"rho": -1.0}, 'hparams: "rho": -1 is out of range [0,): want ≥ 0'),
            ({"lambda": 0.0}, 'hparams: "lambda": 0 is out of range (0,1]: want > 0 and ≤ 1'),
            ({"m": 0}, 'hparams: "m": 0 is out of range [1,): want ≥ 1'),
            ({"m": 1.5}, 'hparams: "m": 1.5 is not an integer'),
            ({"scope": "some"}, 'hparams: "scope": "some" is not one of "all", "weights"'),
            ({"adaptive": 1}, 'hparams: "adaptive": value 1 of type int64 is not a valid bool'),
            ({"rho": "big"}, 'hparams: "rho": value big of type string is not a valid float'),
            ({"m": True}, 'hparams: "m": value true of type bool is not a valid int'),
        ]:
            with self.assertRaises(optlab.Error) as cm:
                optlab.apply(Params, params)
            self.assertEqual(str(cm.exception), msg)

    def test_batch_bound(self):
        # "[1,batch]": the host checks the batch size; the plugin leaves it open.
        from optlab.hparams import check
        from optlab.optimizer import INT, ParamSpec
        spec = ParamSpec(name="m", type=INT, doc="", enum=[], range="[1,batch]", default=1)
        self.assertEqual(check(spec, 1000), "")
        self.assertEqual(check(spec, 0), "0 is out of range [1,batch]: want ≥ 1")

    def test_convert(self):
        self.assertEqual(convert("float", 3), 3.0)
        self.assertEqual(convert("int", 4.0), 4)
        with self.assertRaises(ValueError):
            convert("int", 2.0 ** 60)

    def test_go_value(self):
        for v, s in [(1.0, "1"), (-1.0, "-1"), (0.05, "0.05"), (1e6, "1e+06"), (123456.0, "123456"), (1e-5, "1e-05"),
                     (0.0001, "0.0001"), (1.5e21, "1.5e+21"), (-0.0, "-0"), (float("nan"), "NaN"), (float("inf"), "+Inf"),
                     (True, "true"), (7, "7"), ("x", "x")]:
            self.assertEqual(go_value(v), s)


class ErrorsTest(unittest.TestCase):
    def test_wrap(self):
        op = optlab.OpError(3, "Grad", "bad")
        e = optlab.Error("op 3 (Grad): bad", optlab.Code.FAILED_PRECONDITION, op)
        w = e.wrap("sam: ascent")
        self.assertEqual((str(w), w.code, w.op), ("sam: ascent: op 3 (Grad): bad", optlab.Code.FAILED_PRECONDITION, op))
        with self.assertRaises(optlab.Error) as cm:
            with optlab.wrap_errors("sam"):
                raise e
        self.assertEqual(str(cm.exception), "sam: op 3 (Grad): bad")
        self.assertEqual(str(op), "op 3 (Grad): bad")


if __name__ == "__main__":
    unittest.main()
