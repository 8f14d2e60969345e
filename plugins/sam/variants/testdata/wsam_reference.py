#!/usr/bin/env python3
"""The PyTorch float64 reference of plugins/sam/variants' WSAM (TestReferences).

Written from the authors' WeightedSAM (Yue et al., "Sharpness-Aware
Minimization Revisited: Weighted Sharpness as a Regularization Term", KDD
2023) in intelligent-machine-learning/dlrover, atorch/atorch/optimizers/
wsam.py at commit 19e5d79036f93a4d71cd34382e39667fed3b64ca: α = γ/(1−γ);
first_step perturbs by e = ρ·g/(‖g‖+1e-12) (adaptive = False), then clips
g (clip_grad_norm_ when max_norm is set) and keeps it; second_step clips the
perturbed gradient g_s, then either (decouple) steps the base optimizer with
g and adds −lr·α·(g_s − g) to θ, or steps it with α·g_s + (1−α)·g.
optlab's choice (docs/METHODS.md): θ is restored from a copy, not by
subtracting e. Input and output: samref.py.
"""

import torch

import samref


def clip(x, max_norm):
    """torch.nn.utils.clip_grad_norm_ on one flat gradient."""
    total = x.norm()
    coef = torch.clamp(max_norm / (total + 1e-6), max=1.0)
    return x * coef


def main():
    run = samref.Run()
    rho, gamma, decouple, max_norm = run.hp["rho"], run.hp["gamma"], run.hp["decouple"], run.hp["max_norm"]
    alpha = gamma / (1 - gamma)
    for t, batch, lr in run.steps():
        g = run.grad(batch)
        e_w = g * (rho / (g.norm() + 1e-12))
        gs = run.grad(batch, at=run.theta + e_w)
        if max_norm > 0:
            g, gs = clip(g, max_norm), clip(gs, max_norm)
        run.sam_steps.append(True)
        if not decouple:
            run.base_step(gs * alpha + g * (1.0 - alpha))
            continue
        sharpness = gs - g
        run.base_step(g)
        run.theta.add_(sharpness, alpha=-lr * alpha)
    run.write()


if __name__ == "__main__":
    main()
