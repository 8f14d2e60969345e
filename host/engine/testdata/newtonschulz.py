#!/usr/bin/env python3
"""The reference of TestNewtonSchulzMatchesPyTorch (newtonschulz_torch_test.go).

Reads JSON from stdin, {"steps", "a", "b", "c", "eps", "tensors": [{"shape",
"data"}]}, and writes {"results": [flat lists]} to stdout: every tensor of
two or more dims, viewed as [d0, rest] as muon.py's muon_update views a conv
filter, through the quintic Newton–Schulz iteration of Keller Jordan's
zeropower_via_newtonschulz5 (github.com/KellerJordan/Muon, muon.py), here in
float64 where his runs in bfloat16; other tensors come back as they are.
"""

import json
import sys

import torch


def newton_schulz(g, steps, a, b, c, eps):
    """Keller Jordan's quintic iteration of matrix g, in g's dtype."""
    assert g.ndim == 2
    tall = g.size(0) > g.size(1)
    x = g.T if tall else g
    x = x / (x.norm() + eps)
    for _ in range(steps):
        gram = x @ x.T
        poly = b * gram + c * gram @ gram
        x = a * x + poly @ x
    return x.T if tall else x


def main():
    req = json.load(sys.stdin)
    out = []
    for t in req["tensors"]:
        v = torch.tensor(t["data"], dtype=torch.float64).reshape(t["shape"])
        if v.ndim >= 2:
            m = v.reshape(v.size(0), -1)
            v = newton_schulz(m, req["steps"], req["a"], req["b"], req["c"], req["eps"]).reshape(v.shape)
        out.append(v.flatten().tolist())
    json.dump({"torch": torch.__version__, "results": out}, sys.stdout)


if __name__ == "__main__":
    main()
