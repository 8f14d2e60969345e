#!/usr/bin/env python3
"""torch.optim.AdamW in float64 fed given gradients (the engine tests'
reference of plugins/adamw on the host's own models).

Reads JSON from stdin: {"tensors": [{"name", "shape"}], "theta0": [...],
"grads": [[...] per step], "lrs": [...], "hparams": {"beta1", "beta2",
"eps", "weight_decay"}} and writes {"thetas": [[...] after every step]}.
"""

import json
import sys

import torch


def main():
    req = json.load(sys.stdin)
    hp = req["hparams"]
    theta = torch.tensor(req["theta0"], dtype=torch.float64)
    params, off = [], 0
    for t in req["tensors"]:
        n = 1
        for d in t["shape"]:
            n *= d
        params.append(torch.nn.Parameter(theta[off:off + n].clone().reshape(t["shape"])))
        off += n
    opt = torch.optim.AdamW(params, lr=req["lrs"][0], betas=(hp["beta1"], hp["beta2"]), eps=hp["eps"],
                            weight_decay=hp["weight_decay"], foreach=False)
    thetas = []
    for flat, lr in zip(req["grads"], req["lrs"]):
        g_all = torch.tensor(flat, dtype=torch.float64)
        off = 0
        for p in params:
            p.grad = g_all[off:off + p.numel()].reshape(p.shape).clone()
            off += p.numel()
        for group in opt.param_groups:
            group["lr"] = lr
        opt.step()
        thetas.append(torch.cat([p.detach().flatten() for p in params]).tolist())
    json.dump({"torch": torch.__version__, "thetas": thetas}, sys.stdout)


if __name__ == "__main__":
    main()
