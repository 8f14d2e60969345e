"""Float64 reference of Momentum-SAM as the official code computes it
(MarlonBecker/MSAM, optimizer/msam.py and the training loop of main.py, at
commit 780fa4f623fe0c99760fd7cfb1a94d14f00179ee), written from its
semantics for plugins/msam's TestMatchesPyTorch, on optimtest's MLP.

stdin: {"tensors": [{"name", "shape"}], "theta0": [...], "steps_per_epoch": k,
        "steps": [{"x": [[...]], "y": [...], "lr": lr}], "hparams": {"rho", "momentum", "weight_decay"}}
stdout: {"thetas": [θ after each step]}, θ unperturbed (what main.py's
move_back_from_momentumAscent gives before an evaluation).

As msam.py: the parameters hold the perturbed point θ̃ = θ − ρ·v/‖v‖
between steps; a step takes the gradient at θ̃, adds weight decay at θ̃,
moves back by +ρ·v_old/(‖v_old‖+1e-12), updates the buffer v = μ·v + d
(zero-initialised, no dampening, no Nesterov), descends by −lr·v, and
perturbs again by −ρ·v/(‖v‖+1e-12). main.py moves up at the start of an
epoch and back at its end.
"""
import json
import sys

import torch
import torch.nn.functional as F

torch.set_default_dtype(torch.float64)


class MomentumSAM:
    def __init__(self, params, momentum, weight_decay, rho):
        self.params = params
        self.momentum, self.weight_decay, self.rho = momentum, weight_decay, rho
        self.bufs = [torch.zeros_like(p) for p in params]
        self.inv_norm = 0.0

    @torch.no_grad()
    def step(self, lr):
        for p, b in zip(self.params, self.bufs):
            d = p.grad.clone()
            if self.weight_decay != 0:
                d.add_(p, alpha=self.weight_decay)  # at the perturbed point
            p.add_(b, alpha=self.rho * self.inv_norm)  # back from the old perturbation
            b.mul_(self.momentum).add_(d)
            p.add_(b, alpha=-lr)
        norm = torch.norm(torch.stack([b.norm(p=2) for b in self.bufs]), p=2)
        self.inv_norm = float(1 / (norm + 1e-12))
        for p, b in zip(self.params, self.bufs):
            p.sub_(b, alpha=self.rho * self.inv_norm)

    @torch.no_grad()
    def move_up(self):
        for p, b in zip(self.params, self.bufs):
            p.sub_(b, alpha=self.rho * self.inv_norm)

    @torch.no_grad()
    def move_back(self):
        for p, b in zip(self.params, self.bufs):
            p.add_(b, alpha=self.rho * self.inv_norm)


def main():
    inp = json.load(sys.stdin)
    theta0 = torch.tensor(inp["theta0"])
    params, off = [], 0
    for t in inp["tensors"]:
        n = 1
        for s in t["shape"]:
            n *= s
        params.append(theta0[off:off + n].reshape(t["shape"]).clone().requires_grad_(True))
        off += n
    w1, b1, w2, b2 = params
    hp = inp["hparams"]
    opt = MomentumSAM(params, hp["momentum"], hp["weight_decay"], hp["rho"])
    spe = inp["steps_per_epoch"]
    thetas = []
    for k, st in enumerate(inp["steps"]):
        if k % spe == 0:
            opt.move_up()
        x, y = torch.tensor(st["x"]), torch.tensor(st["y"])
        loss = F.cross_entropy(F.linear(torch.tanh(F.linear(x, w1, b1)), w2, b2), y)
        for p in params:
            p.grad = None
        loss.backward()
        opt.step(st["lr"])
        moved_back = (k + 1) % spe == 0
        if moved_back:
            opt.move_back()
        with torch.no_grad():
            flat = []
            for p, b in zip(params, opt.bufs):
                q = p.clone()
                if not moved_back:
                    q.add_(b, alpha=opt.rho * opt.inv_norm)
                flat.append(q.reshape(-1))
            thetas.append(torch.cat(flat).tolist())
    json.dump({"thetas": thetas}, sys.stdout)


if __name__ == "__main__":
    main()
