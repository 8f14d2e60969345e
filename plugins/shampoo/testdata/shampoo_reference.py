#!/usr/bin/env python3
"""The PyTorch float64 reference of plugins/shampoo (TestMatchesPyTorch).

Written from Gupta, Koren & Singer (2018), Algorithm 1 (one factor per
side of a matrix, the inverse 4th roots), with the practical choices of
Meta's Distributed Shampoo (github.com/facebookresearch/optimizers,
distributed_shampoo): every parameter block has its own factors; the
factors are exponential moving averages (beta2 < 1, bias corrected) or sums
(beta2 = 1) of G·Gᵀ and Gᵀ·G; the inverse roots are recomputed every
precondition_frequency steps from (L/(1-beta2^t) + eps·I) by a symmetric
eigendecomposition; the update direction is the filtered gradient
(an EMA with beta1, bias corrected) preconditioned on both sides, grafted to
the norm of Adam's (or SGD's) direction; before start_preconditioning_step
the grafted direction is used; decoupled weight decay. Tensors of fewer
than two dims take the grafted direction (a documented departure of
plugins/shampoo). The graft norm is taken per tensor, the matrix of a
tensor of more than two dims is its 2-D view [d0, rest], as in the Go code.

Reads JSON from stdin: {"tensors": [{"name", "shape"}], "theta0": [...],
"grads": [[...] per step], "lrs": [...], "hparams": {...}} and writes
{"thetas": [[...] after every step]}.
"""

import json
import sys

import torch


def inv_root(a, root, eps):
    """(A_sym + eps·I)^(-1/root) as V·diag((max(λ, 0) + eps)^(-1/root))·Vᵀ."""
    sym = (a + a.mT) / 2
    lam, v = torch.linalg.eigh(sym)
    w = (lam.clamp_min(0) + eps) ** (-1.0 / root)
    return (v * w) @ v.mT


def blocks(rows, cols, block):
    """The blocks of a rows×cols matrix: (r0, r1, c0, c1), row-major."""
    out = []
    for r0 in range(0, rows, block):
        for c0 in range(0, cols, block):
            out.append((r0, min(r0 + block, rows), c0, min(c0 + block, cols)))
    return out


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
    b1, b2, eps, root = hp["beta1"], hp["beta2"], hp["epsilon"], hp["root"]
    freq, block = hp["precondition_frequency"], hp["block"]
    start = hp["start_preconditioning_step"]
    if start < 0:
        start = freq
    state = []
    for p in params:
        st = {"m": torch.zeros_like(p), "v": torch.zeros_like(p), "blocks": []}
        if p.ndim >= 2:
            rows, cols = p.shape[0], p.numel() // p.shape[0]
            for (r0, r1, c0, c1) in blocks(rows, cols, block):
                st["blocks"].append({"at": (r0, r1, c0, c1),
                                     "L": torch.zeros(r1 - r0, r1 - r0, dtype=torch.float64),
                                     "R": torch.zeros(c1 - c0, c1 - c0, dtype=torch.float64),
                                     "PL": torch.zeros(r1 - r0, r1 - r0, dtype=torch.float64),
                                     "PR": torch.zeros(c1 - c0, c1 - c0, dtype=torch.float64)})
        state.append(st)
    thetas = []
    for k, (flat, lr) in enumerate(zip(req["grads"], req["lrs"])):
        t = k + 1
        bc1 = 1 - b1 ** t if hp["bias_correction"] else 1.0
        bc2 = 1 - b2 ** t if hp["bias_correction"] and b2 < 1 else 1.0
        g_all = torch.tensor(flat, dtype=torch.float64)
        off = 0
        for p, st in zip(params, state):
            g = g_all[off:off + p.numel()].reshape(p.shape)
            off += p.numel()
            st["m"].mul_(b1).add_(g, alpha=1 - b1)
            mhat = st["m"] / bc1
            if hp["grafting"] == "adam":
                gb = hp["graft_beta2"]
                st["v"].mul_(gb).add_(g.square(), alpha=1 - gb)
                d = mhat / ((st["v"] / (1 - gb ** t)).sqrt() + hp["graft_eps"])
            else:
                d = mhat
            direction = d
            if p.ndim >= 2:
                g2, m2 = g.reshape(p.shape[0], -1), mhat.reshape(p.shape[0], -1)
                alpha = 1 - b2 if b2 < 1 else 1.0
                u = torch.empty_like(m2)
                for blk in st["blocks"]:
                    r0, r1, c0, c1 = blk["at"]
                    gb_ = g2[r0:r1, c0:c1]
                    blk["L"] = b2 * blk["L"] + alpha * gb_ @ gb_.mT
                    blk["R"] = b2 * blk["R"] + alpha * gb_.mT @ gb_
                    if t % freq == 0:
                        blk["PL"] = inv_root(blk["L"] / bc2, root, eps)
                        blk["PR"] = inv_root(blk["R"] / bc2, root, eps)
                    u[r0:r1, c0:c1] = blk["PL"] @ m2[r0:r1, c0:c1] @ blk["PR"]
                if t >= start:
                    u = u.reshape(p.shape)
                    direction = u * (d.norm() / (u.norm() + 1e-16))
            p.mul_(1 - lr * hp["weight_decay"])
            p.add_(direction, alpha=-lr)
        thetas.append(torch.cat([p.flatten() for p in params]).tolist())
    json.dump({"torch": torch.__version__, "thetas": thetas}, sys.stdout)


if __name__ == "__main__":
    main()
