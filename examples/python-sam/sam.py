#!/usr/bin/env python3
"""SAM (Foret et al.) as an optlab plugin in Python: the same algorithm, op
for op, as the Go plugin plugins/sam (davda54/sam semantics), with ASAM and
m-sharpness as options. Use it from an experiment with

    [[method]]
    name = "SAM (Python)"
    path = "examples/python-sam/sam.py"
    [method.params]
    rho = 0.05

Per step and member: g = ∇L(θ), n = ‖g‖, e = ρ·g/(n+1e-12), g' = ∇L(θ+e)
with BatchNorm frozen, θ restored from a saved copy, then the host's base
step with g'. One host call per step with no blocking read: ρ/(‖g‖+1e-12)
is a register on the device (protocol minor 5), and the loss and accuracy
at θ are reported to the host's metrics from the device.
"""

import os
import sys
from dataclasses import dataclass

try:
    import optlab
except ImportError:  # run from a checkout of optlab: use its sdk/python
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.realpath(__file__)), "..", "..", "sdk", "python"))
    import optlab


@dataclass
class Params:
    rho: float = optlab.param(0.05, range="[0,)", doc="neighbourhood radius ρ (davda54 example: 0.05 for SAM, 2.0 for ASAM)")
    adaptive: bool = optlab.param(False, doc="ASAM: scale the ascent elementwise by T = |θ|+η on all parameters")
    eta: float = optlab.param(0.01, range="[0,)", doc="ASAM offset η (official ASAM 0.01, davda54 0)")
    adaptive_scope: str = optlab.param("all", enum=["all", "weights"], doc='ASAM: "all" parameters (davda54) or "weights": tensors whose name contains "weight", as official ASAM')
    freeze_bn_second: bool = optlab.param(True, doc="freeze BatchNorm running statistics in the perturbed pass")
    m: int = optlab.param(1, range="[1,batch]", doc="m-sharpness: sub-batches perturbed separately (1 = plain SAM)")


class Vecs:
    """One member's handles: g[j] the gradient of batch part j; saved, θ
    before the perturbation; t, ASAM's T; scratch, T⊙g or the mean gradient;
    mask and rest, the weight mask and its complement."""

    def __init__(self, g, saved, t=0, scratch=0):
        self.g, self.saved, self.t, self.scratch = g, saved, t, scratch
        self.mask = self.rest = 0


class SAM(optlab.Optimizer):
    def info(self):
        return optlab.Info(name="python-sam", version="0.1.0", features=optlab.Features(members=True, base_step=True),
                           params=optlab.specs(Params))

    def configure(self, host, config):
        # m is bounded by the batch it splits: check it before allocating a
        # vector per sub-batch (as the Go plugin does, layout first).
        self.host = host
        layout = host.layout()
        batch = layout.batch_size
        with optlab.wrap_errors("sam"):
            self.cfg = cfg = optlab.apply(Params, config.params)
        if batch > 0 and cfg.m > batch:
            raise optlab.Error(f'sam: hparams: "m": {cfg.m} is out of range [1,batch]: want ≥ 1 and ≤ {batch}, the batch size')
        if cfg.adaptive_scope != "all" and not cfg.adaptive:
            raise optlab.Error(f'sam: adaptive_scope "{cfg.adaptive_scope}" applies to ASAM only: set adaptive = true')
        members = max(config.members, 1)
        self.hs = hs = config.namespace("sam")
        # Handles in the Go plugin's order, so that traces match.
        grads = [[] for _ in range(members)]
        for j in range(cfg.m):
            name = "g" if cfg.m == 1 else f"g{j}"
            for m, g in enumerate(hs.per_member(name, members)):
                grads[m].append(g)
        saved = hs.per_member("saved", members)
        t = hs.per_member("t", members) if cfg.adaptive else None
        scratch = hs.per_member("scratch", members) if cfg.adaptive or cfg.m > 1 else None
        self.members = []
        p = hs.prog()
        for m in range(members):
            v = Vecs(g=grads[m], saved=saved[m], t=t[m] if t else 0, scratch=scratch[m] if scratch else 0)
            for g in v.g:
                p.alloc(g, m)
            p.alloc(v.saved, m)
            if t:
                p.alloc(v.t, m)
            if scratch:
                p.alloc(v.scratch, m)
            self.members.append(v)
        if self.weights_only():
            self.build_masks(layout, p)
        with optlab.wrap_errors("sam: configure"):
            host.exec(p)

    def weights_only(self):
        return self.cfg.adaptive and self.cfg.adaptive_scope == "weights"

    def batch(self, j):
        return optlab.ALL if self.cfg.m == 1 else optlab.Batch(part=j, of=self.cfg.m)

    def build_masks(self, layout, p):
        """Every member's weight mask (1 on tensors named *weight*) and its complement."""
        if len(layout.members) < len(self.members):
            raise optlab.Error(f"sam: layout has {len(layout.members)} members, want {len(self.members)}")
        masks = self.hs.per_member("mask", len(self.members))
        rests = self.hs.per_member("rest", len(self.members))
        for m, v in enumerate(self.members):
            v.mask, v.rest = masks[m], rests[m]
            p.alloc(v.mask, m)
            weights = [t for t in layout.members[m].tensors if "weight" in t.name]
            for t in weights:
                p.fill_range(v.mask, t.offset, t.numel, 1)
            if not weights:
                raise optlab.Error(f'sam: adaptive_scope "weights": member {m} ({layout.members[m].arch}) has no tensor named *weight*')
            p.alloc(v.rest, m).fill(v.rest, 1).axpy(v.rest, -1, v.mask)

    def step(self, inp):
        """One Exec with no blocking read: the ascent coefficient
        ρ/(‖g‖+1e-12) is a register on the device and scales the
        perturbation directly, and the loss and accuracy at θ are reported
        to the host's logs."""
        cfg = self.cfg
        p = self.hs.prog()
        evs = []
        norms = []  # per member and batch part
        for m, v in enumerate(self.members):
            th = optlab.params_of(m)
            if self.weights_only():  # T = M⊙(|θ|+η) + (1−M), exact
                p.unary(v.t, th, optlab.ABS).add_const(v.t, cfg.eta) \
                    .binary(v.t, v.t, v.mask, optlab.MUL).binary(v.t, v.t, v.rest, optlab.ADD)
            elif cfg.adaptive:
                p.unary(v.t, th, optlab.ABS).add_const(v.t, cfg.eta)
            parts = []
            for j, g in enumerate(v.g):
                evs.append(p.grad(g, th, self.batch(j), optlab.BN_UPDATE))
                x = g
                if cfg.adaptive:
                    p.binary(v.scratch, v.t, g, optlab.MUL)
                    x = v.scratch
                parts.append(p.norm(x))
            norms.append(parts)

        bn = optlab.BN_FREEZE if cfg.freeze_bn_second else optlab.BN_UPDATE
        for m, v in enumerate(self.members):
            th = optlab.params_of(m)
            p.copy(v.saved, th)
            avg = []
            for j, g in enumerate(v.g):
                s, e = p.div(cfg.rho, p.add(norms[m][j], 1e-12)), g
                if cfg.adaptive:
                    p.binary(v.scratch, v.t, e, optlab.MUL).binary(v.scratch, v.t, v.scratch, optlab.MUL)
                    e = v.scratch
                p.axpy(th, s, e)
                p.grad(g, th, self.batch(j), bn)
                p.copy(th, v.saved)
                avg.append((1 / float(cfg.m), g))
            g = v.g[0]
            if cfg.m > 1:
                g = v.scratch
                p.lin_comb(g, *avg)
            p.base_step(th, g)
        p.report_metrics(*p.mean(evs))
        with optlab.wrap_errors("sam: step"):
            self.host.exec(p)
        return {}


if __name__ == "__main__":
    optlab.serve(SAM)
