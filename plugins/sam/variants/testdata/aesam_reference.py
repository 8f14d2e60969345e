#!/usr/bin/env python3
"""The PyTorch float64 reference of plugins/sam/variants' AE-SAM (TestReferences).

Written from Jiang et al., "An Adaptive Policy to Employ Sharpness-Aware
Minimization", ICLR 2023, Algorithm 1 and §3.1 (no code by the authors was
found): the squared norm of the stochastic gradient s = ‖g‖² is taken as
normal with EMA mean and variance, μ_t = δμ_{t−1} + (1−δ)s,
σ²_t = δσ²_{t−1} + (1−δ)(s − μ_t)² (both 0 before the first step); the
step is SAM (the gradient at w + ρ·g/‖g‖) when s ≥ μ_t + c_t·σ_t, else
ERM with g; c_t moves linearly from λ2 at t = 0 to λ1 at t = T (here
c_start and c_end). optlab's choices (docs/METHODS.md): SAM when
s − (μ_t + c_t·σ_t) > 0 (a tie is SGD; the device's If tests > 0); SAM's
1e-12 in the ascent. Input and output: samref.py.
"""

import math

import samref

EPS = 1e-12


def main():
    run = samref.Run()
    rho, delta = run.hp["rho"], run.hp["delta"]
    c0, c1, total = run.hp["c_start"], run.hp["c_end"], run.req["total_steps"]
    mu, var = 0.0, 0.0
    for t, batch, _ in run.steps():
        g = run.grad(batch)
        s = float((g * g).sum())
        mu = delta * mu + (1 - delta) * s
        var = delta * var + (1 - delta) * (s - mu) ** 2
        c = c0 + (c1 - c0) * t / total
        sam = s - (mu + c * math.sqrt(var)) > 0
        if sam:
            g = run.grad(batch, at=run.theta + g * (rho / (g.norm() + EPS)))
        run.sam_steps.append(sam)
        run.base_step(g)
    run.write()


if __name__ == "__main__":
    main()
