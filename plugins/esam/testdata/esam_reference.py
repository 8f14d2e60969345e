"""Float64 reference of Efficient SAM as the official code computes it
(dydjw9/Efficient_SAM, utils/Esam.py's ESAM.step, first_step and
second_step, with train.py's torch.optim.SGD as the base optimizer, at
commit 1e06840c466beaebfafb049096d6a1733cb77a8c), written from its
semantics for plugins/esam's TestMatchesPyTorch, on optimtest's MLP.

stdin: {"tensors": [{"name", "shape"}], "theta0": [...],
        "steps": [{"x": [[...]], "y": [...], "lr": lr, "kept": [0/1 per tensor]}],
        "hparams": {"rho", "beta", "gamma", "momentum", "weight_decay"}}
stdout: {"thetas": [θ after each step]}

The random choice of Stochastic Weight Perturbation (Python's random in
Esam.py, the host's seeded stream in the plugin) is an input: "kept" says
which tensors took part in a step's first backward pass (requires_grad),
as the Go run drew them.
"""
import json
import sys

import torch
import torch.nn.functional as F

torch.set_default_dtype(torch.float64)


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
    model = lambda x: F.linear(torch.tanh(F.linear(x, w1, b1)), w2, b2)
    hp = inp["hparams"]
    rho, beta, gamma = hp["rho"], hp["beta"], hp["gamma"]
    base = torch.optim.SGD(params, lr=0.1, momentum=hp["momentum"], weight_decay=hp["weight_decay"])
    thetas = []
    for st in inp["steps"]:
        x, y = torch.tensor(st["x"]), torch.tensor(st["y"])
        for p, k in zip(params, st["kept"]):
            p.requires_grad_(bool(k))
        # First pass: per-sample losses and the gradient of their mean.
        losses = F.cross_entropy(model(x), y, reduction="none")
        l_before = losses.detach().clone()
        if any(st["kept"]):  # with no tensor drawn Esam.py's backward would fail; the plugin perturbs nothing
            losses.mean().backward()
        # first_step: ascend along the gradient of the tensors that have one.
        with torch.no_grad():
            norm = torch.norm(torch.stack([p.grad.norm(p=2) if p.grad is not None else torch.zeros(()) for p in params]), p=2)
            scale = rho / (norm + 1e-7) / beta
            e_w = []
            for p in params:
                p.requires_grad_(True)
                if p.grad is None:
                    e_w.append(None)
                    continue
                e = p.grad * scale
                p.add_(e)
                e_w.append(e)
        for p in params:
            p.grad = None
        # The samples whose loss rises most.
        with torch.no_grad():
            sharpness = F.cross_entropy(model(x), y, reduction="none") - l_before
            if gamma >= 0.99:
                idx = torch.ones(len(y), dtype=torch.bool)
            elif not any(st["kept"]):
                # Esam.py fails at the first backward; the plugin, with no
                # perturbation, sees equal rises (0) and keeps the first
                # ⌊B·γ⌋ − 1 samples (ties to the lower position).
                idx = torch.arange(len(y)) < int(len(y) * gamma) - 1
            else:
                position = int(len(y) * gamma)
                cutoff = torch.topk(sharpness, position).values[-1]
                idx = sharpness > cutoff
        F.cross_entropy(model(x[idx]), y[idx]).backward()
        # second_step: back to w, then the base optimizer.
        with torch.no_grad():
            for p, e in zip(params, e_w):
                if e is not None:
                    p.sub_(e)
        for g in base.param_groups:
            g["lr"] = st["lr"]
        base.step()
        for p in params:
            p.grad = None
        thetas.append(torch.cat([p.detach().reshape(-1) for p in params]).tolist())
    json.dump({"thetas": thetas}, sys.stdout)


if __name__ == "__main__":
    main()
