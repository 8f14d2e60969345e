#!/usr/bin/env python3
"""The PyTorch float64 reference of plugins/sam/variants' LookSAM (TestReferences).

Written from Liu et al., "Towards Efficient and Scalable Sharpness-Aware
Minimization", CVPR 2022, Algorithm 1 (the authors published no code): on
the steps t ≡ 0 (mod k) the SAM gradient g_s at w + ρ·g/‖g‖ and its
component orthogonal to g, g_v = g_s − ‖g_s‖·cos(g, g_s)·g/‖g‖, kept; on
the others g_s = g + α·‖g‖/‖g_v‖·g_v; then the base optimizer with g_s.
optlab's choices (docs/METHODS.md): t counts from 0, so the first step is a
SAM step (the paper's t from 1 would reuse a g_v it has not computed); the
denominators take SAM's 1e-12. Input and output: samref.py.
"""

import samref

EPS = 1e-12


def main():
    run = samref.Run()
    rho, k, alpha = run.hp["rho"], run.hp["k"], run.hp["alpha"]
    gv = None
    for t, batch, _ in run.steps():
        g = run.grad(batch)
        gnorm = g.norm()
        if t % k == 0:
            e_w = g * (rho / (gnorm + EPS))
            gs = run.grad(batch, at=run.theta + e_w)
            gsnorm = gs.norm()
            cos = (g * gs).sum() / (gnorm * gsnorm + EPS)
            gv = gs - (gsnorm * cos / (gnorm + EPS)) * g
            run.sam_steps.append(True)
        else:
            gs = g + (alpha * gnorm / (gv.norm() + EPS)) * gv
            run.sam_steps.append(False)
        run.base_step(gs)
    run.write()


if __name__ == "__main__":
    main()
