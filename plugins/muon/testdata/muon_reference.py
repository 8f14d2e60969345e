#!/usr/bin/env python3
"""The PyTorch float64 reference of plugins/muon (TestMatchesPyTorch).

Written from Keller Jordan's muon.py (github.com/KellerJordan/Muon):
SingleDeviceMuonWithAuxAdam with its muon_update, adam_update and
zeropower_via_newtonschulz5, in float64 (his iteration runs in bfloat16),
with Muon for the tensors of two or more dims and AdamW for the others, and
AdamW's rate following the schedule in proportion (adamw_lr·lr/lr_peak).

Reads JSON from stdin: {"tensors": [{"name", "shape"}], "theta0": [...],
"grads": [[...] per step], "lrs": [...], "hparams": {...}} and writes
{"thetas": [[...] after every step]}. The gradients are the ones the Go run
took (optimtest's exact host), so every step's update is compared on the
same gradient.
"""

import json
import sys

import torch


def zeropower(g, steps, a=3.4445, b=-4.7750, c=2.0315, eps=1e-7):
    """zeropower_via_newtonschulz5 in g's dtype (float64 here)."""
    x = g
    tall = g.size(-2) > g.size(-1)
    if tall:
        x = x.mT
    x = x / (x.norm(dim=(-2, -1), keepdim=True) + eps)
    for _ in range(steps):
        gram = x @ x.mT
        poly = b * gram + c * gram @ gram
        x = a * x + poly @ x
    if tall:
        x = x.mT
    return x


def muon_update(grad, buf, beta, steps, nesterov):
    buf.lerp_(grad, 1 - beta)
    upd = grad.lerp(buf, beta) if nesterov else buf.clone()
    mat = upd.reshape(upd.size(0), -1)  # the 2-D view [d0, rest]
    mat = zeropower(mat, steps)
    mat = mat * max(1, mat.size(-2) / mat.size(-1)) ** 0.5  # the view's rows/cols (see muon.go)
    return mat.reshape(upd.shape)


def adam_update(grad, m1, m2, step, betas, eps):
    m1.lerp_(grad, 1 - betas[0])
    m2.lerp_(grad.square(), 1 - betas[1])
    m1c = m1 / (1 - betas[0] ** step)
    m2c = m2 / (1 - betas[1] ** step)
    return m1c / (m2c.sqrt() + eps)


def main():
    req = json.load(sys.stdin)
    hp = req["hparams"]
    theta = torch.tensor(req["theta0"], dtype=torch.float64)
    params, off = [], 0
    for t in req["tensors"]:
        n = 1
        for d in t["shape"]:
            n *= d
        params.append(theta[off:off + n].clone().reshape(t["shape"]))
        off += n
    state = [None] * len(params)
    peak = hp["lr_peak"] if hp["lr_peak"] > 0 else req["lrs"][0]
    thetas = []
    for k, (flat, lr) in enumerate(zip(req["grads"], req["lrs"])):
        g_all = torch.tensor(flat, dtype=torch.float64)
        off = 0
        for i, p in enumerate(params):
            g = g_all[off:off + p.numel()].reshape(p.shape)
            off += p.numel()
            if p.ndim >= 2:
                if state[i] is None:
                    state[i] = torch.zeros_like(p)
                u = muon_update(g, state[i], hp["momentum"], hp["ns_steps"], hp["nesterov"])
                p.mul_(1 - lr * hp["weight_decay"])
                p.add_(u, alpha=-lr)
            else:
                if state[i] is None:
                    state[i] = (torch.zeros_like(p), torch.zeros_like(p))
                alr = hp["adamw_lr"] * lr / peak
                u = adam_update(g, state[i][0], state[i][1], k + 1, (hp["adamw_beta1"], hp["adamw_beta2"]),
                                hp["adamw_eps"])
                p.mul_(1 - alr * hp["adamw_weight_decay"])
                p.add_(u, alpha=-alr)
        thetas.append(torch.cat([p.flatten() for p in params]).tolist())
    json.dump({"torch": torch.__version__, "thetas": thetas}, sys.stdout)


if __name__ == "__main__":
    main()
