#!/usr/bin/env python3
"""faultplugin in Python: the twin of internal/testplugin/faultplugin (plain
SGD that misbehaves at a chosen step, picked by its hyperparameters), for
the end-to-end tests that check a Python plugin's failures read exactly as
a Go plugin's:

    crash_at = k   write a line to stderr and exit with status 3 at step k
    hang_at = k    sleep for an hour at step k, ignoring the call's deadline
    nan_at = k     report a NaN loss at step k
    fail_at = k    raise optlab.Error from step at step k
    raise_at = k   raise ZeroDivisionError at step k (a bug: Go's panic)
    bad_op_at = k  send a program whose op 1 names an unallocated vector

A negative value (the default) turns a fault off. Steps count from 0 and
restart with every run.
"""

import math
import os
import sys
import time
from dataclasses import dataclass

sys.path.insert(0, os.path.join(os.path.dirname(os.path.realpath(__file__)), "..", "..", "..", "sdk", "python"))
import optlab  # noqa: E402


@dataclass
class Params:
    crash_at: int = optlab.param(-1, doc="exit with status 3 at this step (-1: never)")
    hang_at: int = optlab.param(-1, doc="sleep for an hour at this step (-1: never)")
    nan_at: int = optlab.param(-1, doc="report a NaN loss at this step (-1: never)")
    fail_at: int = optlab.param(-1, doc="return an error from Step at this step (-1: never)")
    raise_at: int = optlab.param(-1, doc="raise ZeroDivisionError at this step (-1: never)")
    bad_op_at: int = optlab.param(-1, doc="send an op on an unallocated vector at this step (-1: never)")


def raw_stderr(line):
    """Straight to file descriptor 2, as a dying interpreter would."""
    os.write(2, (line + "\n").encode())


class Faulty(optlab.Optimizer):
    def info(self):
        return optlab.Info(name="faulty", version="0.0.1", features=optlab.Features(members=True, base_step=True),
                           params=optlab.specs(Params))

    def configure(self, host, config):
        with optlab.wrap_errors("faulty"):
            self.cfg = optlab.apply(Params, config.params)
        self.host, self.hs = host, config.namespace("faulty")
        self.grads = self.hs.per_member("g", max(config.members, 1))
        p = self.hs.prog()
        for m, g in enumerate(self.grads):
            p.alloc(g, m)
        with optlab.wrap_errors("faulty: configure"):
            host.exec(p)

    def step(self, inp):
        k, cfg = inp.step, self.cfg
        if k == cfg.crash_at:
            raw_stderr(f"faulty: simulated crash at step {k}")
            os._exit(3)
        if k == cfg.hang_at:
            raw_stderr(f"faulty: hanging at step {k}")
            time.sleep(3600)
        if k == cfg.fail_at:
            raise optlab.Error(f"faulty: simulated failure at step {k}")
        if k == cfg.raise_at:
            return {"loss": 1 / 0}
        p = self.hs.prog()
        if k == cfg.bad_op_at:
            p.grad(self.grads[0], optlab.PARAMS)
            p.norm(self.hs.new("unallocated"))
        evs = []
        for m, g in enumerate(self.grads):
            evs.append(p.grad(g, optlab.params_of(m)))
            p.base_step(optlab.params_of(m), g)
        loss, acc = p.mean(evs)
        if k == cfg.nan_at:
            loss = p.mul(loss, math.nan)
        p.report_metrics(loss, acc)
        with optlab.wrap_errors("faulty: step"):
            self.host.exec(p)
        return {}


if __name__ == "__main__":
    optlab.serve(Faulty)
