#!/usr/bin/env python3
"""The PyTorch float64 reference of plugins/soap (TestMatchesPyTorch).

Written from Vyas et al. (2024), "SOAP: Improving and Stabilizing Shampoo
using Adam", and its official code (github.com/nikhilvyas/SOAP, soap.py at
a1e5535), step by step as soap.py's SOAP.step runs it with its defaults
(merge_dims False, precondition_1d False, normalize_grads False):

- the first call only accumulates the factors GG (lerp with
  1 - shampoo_beta) and takes their eigenvectors, by descending eigenvalue
  (torch.linalg.eigh, flipped), as the bases Q; the parameters do not move;
- every later call (step k = 1, 2, ...): g' = Q_L^T g Q_R; Adam's moments
  of g' in that basis; the step -lr*sqrt(1-b2^k)/(1-b1^k) * Q_L (m/(sqrt(v)+eps)) Q_R^T;
  then p <- p - lr*wd*p; then the factors take g, and every
  precondition_frequency steps the bases are refreshed by one power
  iteration: the eigenvalue estimates diag(Q^T L Q) sort Q's columns
  (descending) and Adam's second moment along that side, and
  Q <- qr(L Q).Q; the first moment is carried back to the original space
  before and into the new basis after (soap.py does that every step; it
  changes nothing but rounding when the basis did not change).
- a tensor of one dim is Adam's with SOAP's step size (no basis).

A tensor of more than two dims is its 2-D view [d0, d1*d2*...] here, as in
the Go code (soap.py keeps one factor per dim: a documented departure of
plugins/soap). Sides above max_precond_dim are not used by the tests (soap.py
leaves such a side unrotated; plugins/soap cuts it into blocks instead).
argsort is stable here, as the SortColumns op is (soap.py's is not; equal
estimates do not occur in the tests).

Reads JSON from stdin: {"tensors": [{"name", "shape"}], "theta0": [...],
"grads": [[...] per step], "lrs": [...], "hparams": {...}} and writes
{"thetas": [[...] after every step]}.
"""

import json
import sys

import torch


def eigenbasis(m):
    """soap.py's get_orthogonal_matrix: eigh's vectors, by descending eigenvalue."""
    _, q = torch.linalg.eigh(m + 1e-30 * torch.eye(m.shape[0], dtype=m.dtype))
    return torch.flip(q, [1])


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
    b1, b2, eps = hp["beta1"], hp["beta2"], hp["eps"]
    sb = hp["shampoo_beta"] if hp["shampoo_beta"] >= 0 else b2
    freq, wd, correct = hp["precondition_frequency"], hp["weight_decay"], hp["correct_bias"]
    state = [{} for _ in params]
    thetas = []
    for flat, lr in zip(req["grads"], req["lrs"]):
        g_all = torch.tensor(flat, dtype=torch.float64)
        off = 0
        for p, st in zip(params, state):
            n = p.numel()
            g = g_all[off:off + n].reshape(p.shape)
            off += n
            mat = p.dim() >= 2
            if mat:
                g = g.reshape(p.shape[0], -1)
            if "step" not in st:
                st["step"] = 0
                st["m"] = torch.zeros_like(g)
                st["v"] = torch.zeros_like(g)
                if mat:
                    r, c = g.shape
                    st["L"] = torch.zeros(r, r, dtype=torch.float64).lerp_(g @ g.T, 1 - sb)
                    st["R"] = torch.zeros(c, c, dtype=torch.float64).lerp_(g.T @ g, 1 - sb)
                    st["QL"], st["QR"] = eigenbasis(st["L"]), eigenbasis(st["R"])
                continue  # the first step only sets up the bases
            gp = st["QL"].T @ g @ st["QR"] if mat else g
            st["step"] += 1
            k = st["step"]
            st["m"].mul_(b1).add_(gp, alpha=1 - b1)
            st["v"].mul_(b2).add_(gp.square(), alpha=1 - b2)
            denom = st["v"].sqrt().add_(eps)
            step_size = lr
            if correct:
                step_size = lr * (1 - b2 ** k) ** 0.5 / (1 - b1 ** k)
            u = st["m"] / denom
            if mat:
                u = st["QL"] @ u @ st["QR"].T
            p.add_(u.reshape(p.shape), alpha=-step_size)
            if wd > 0:
                p.add_(p, alpha=-lr * wd)
            if not mat:
                continue
            # update_preconditioner: m back to the original space, the
            # factors, the refresh, m into the (new) basis.
            st["m"] = st["QL"] @ st["m"] @ st["QR"].T
            st["L"].lerp_(g @ g.T, 1 - sb)
            st["R"].lerp_(g.T @ g, 1 - sb)
            if k % freq == 0:
                v = st["v"]
                for side, (f, qn) in enumerate([("L", "QL"), ("R", "QR")]):
                    q = st[qn]
                    est = torch.diag(q.T @ st[f] @ q)
                    idx = torch.sort(est, descending=True, stable=True).indices
                    v = v.index_select(side, idx)
                    q = q[:, idx]
                    st[qn], _ = torch.linalg.qr(st[f] @ q)
                st["v"] = v
            st["m"] = st["QL"].T @ st["m"] @ st["QR"]
        thetas.append(torch.cat([p.reshape(-1) for p in params]).tolist())
    json.dump({"thetas": thetas}, sys.stdout)


if __name__ == "__main__":
    main()
