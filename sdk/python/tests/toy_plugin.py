#!/usr/bin/env python3
"""A toy optimizer plugin for the protocol tests (test_serve.py): one
gradient, its norm and the base step per member, with switches that make
a step misbehave, a predictive and a state. It reads what it returns
(Read ops), as plugins do that need values for control flow."""

import os
import sys
import threading
import time
from dataclasses import dataclass

sys.path.insert(0, os.path.join(os.path.dirname(os.path.realpath(__file__)), ".."))
import optlab  # noqa: E402


@dataclass
class Params:
    scale: float = optlab.param(1.0, range="(0,)", doc="multiplies the reported loss")
    fault: str = optlab.param("none", enum=["none", "fail", "raise", "bad-op", "ghost", "print", "regs",
                                                      "thread"],
                              doc="what the next steps do wrong")


class Toy(optlab.Optimizer):
    def __init__(self):
        self.steps = 0

    def info(self):
        return optlab.Info(name="toy", version="1.2.3", params=optlab.specs(Params),
                           features=optlab.Features(members=True, base_step=True, predictive=True, state=True,
                                                    finalize=True))

    def configure(self, host, config):
        with optlab.wrap_errors("toy"):
            self.cfg = optlab.apply(Params, config.params)
        self.host, self.hs = host, config.namespace("toy")
        self.g = self.hs.per_member("g", config.members)
        p = self.hs.prog()
        for m, g in enumerate(self.g):
            p.alloc(g, m)
        host.exec(p)

    def step(self, inp):
        fault = self.cfg.fault
        if fault == "fail":
            raise optlab.Error(f"toy: failure at step {inp.step}")
        if fault == "raise":
            raise KeyError("boom")
        if fault == "print":
            print("hello from step", inp.step)
            print("to stderr", file=sys.stderr)
        p = self.hs.prog()
        evs = []
        for m, g in enumerate(self.g):
            evs.append(p.grad(g, optlab.params_of(m)))
            n = p.norm(g)
            p.base_step(optlab.params_of(m), g)
        if fault == "bad-op":
            p.norm(999)
        if fault == "ghost":
            p.free(self.hs.new("ghost"))
        for ev in evs:
            p.read(ev.loss, ev.acc)
        p.read(n)
        with optlab.wrap_errors("toy: step"):
            r = self.host.exec(p)
        if fault == "thread":  # a thread of the plugin's own serves no call: its Exec names none
            late = self.hs.prog()
            late.norm(self.g[0])
            t = threading.Thread(target=self.host.exec, args=(late,))
            t.start()
            t.join()
        self.steps += 1
        if fault == "regs":  # the registers themselves, not their values
            return optlab.metrics(evs[0].loss, evs[0].acc)
        loss, acc = r.mean(evs)
        return {"loss": loss * self.cfg.scale, "acc": acc, "norm": r.get(n), "lr": inp.lr}

    def resolved(self):
        return {"scale": self.cfg.scale}

    def predictive(self):
        return optlab.Predictive(kind=optlab.PredictiveKind.MEMBERS, vecs=list(self.g), weights=[1.0] * len(self.g),
                                 masks=list(self.g))

    def save_state(self):
        return str(self.steps).encode(), list(self.g)

    def load_state(self, blob):
        self.steps = int(blob.decode())

    def finalize(self):
        self.host.exec(self.hs.prog().update_bn(optlab.params_of(0)))


if __name__ == "__main__":
    optlab.serve(Toy)
