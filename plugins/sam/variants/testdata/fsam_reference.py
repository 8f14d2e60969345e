#!/usr/bin/env python3
"""The PyTorch float64 reference of plugins/sam/variants' Friendly-SAM (TestReferences).

Written from nblt/F-SAM (Li et al., "Friendly Sharpness-Aware
Minimization", CVPR 2024), utils.py, class FriendlySAM, at commit
2e2f9899ab473880430640fa5def4ad8f5aa2401: first_step keeps, per parameter,
an EMA "momentum" m of the gradients (set to g on the first step), and from
the second step on perturbs along g − σ·m (m before its update), then
m ← λ·m + (1−λ)·g; the ascent is ρ·d/(‖d‖+1e-12) (adaptive = 0, as train.py
builds it); second_step restores θ from a copy and takes the base step with
the gradient at the perturbed point. Input and output: samref.py.
"""

import samref


def main():
    run = samref.Run()
    rho, sigma, lmbda = run.hp["rho"], run.hp["sigma"], run.hp["lambda"]
    m = None
    for t, batch, _ in run.steps():
        g = run.grad(batch)
        d = g.clone()
        if m is None:
            m = g.clone()
        else:
            d -= m * sigma
            m = m * lmbda + g * (1 - lmbda)
        e_w = d * (rho / (d.norm() + 1e-12))
        gs = run.grad(batch, at=run.theta + e_w)
        run.sam_steps.append(True)
        run.base_step(gs)
    run.write()


if __name__ == "__main__":
    main()
