#!/usr/bin/env python3
"""The PyTorch float64 reference of plugins/sam/variants' GSAM (TestReferences).

Written from juntang-zhuang/GSAM (Zhuang et al., "Surrogate Gap Guided
Sharpness-Aware Minimization", ICLR 2022), gsam/gsam.py and
gsam/scheduler.py at commit a770275b3324a3ed4bf4a1cddb976b2782ba852b:
perturb_weights moves θ by ρ_t·g/(‖g‖+1e-12) and keeps g ("old_g");
gradient_decompose takes cos = ⟨g, g_p⟩/(‖g_p‖‖g‖+1e-12) and subtracts
α·(g − cos·‖g‖·g_p/(‖g_p‖+1e-12)) from the perturbed gradient g_p; the base
optimizer steps with the result. ρ_t is ProportionScheduler's
ρ_min + (ρ_max − ρ_min)·(lr − lr_min)/(lr_max − lr_min) at the step's rate
(lr_max > lr_min), else ρ. optlab's choices (docs/METHODS.md): θ restored
from a copy, not by subtracting e; ρ_t follows the rate of the step itself
(the official example's first step uses ρ_min). Input and output:
samref.py.
"""

import samref

EPS = 1e-12


def main():
    run = samref.Run()
    hp = run.hp
    alpha = hp["alpha"]
    for t, batch, lr in run.steps():
        rho = hp["rho"]
        if hp["lr_max"] > hp["lr_min"]:
            rho = hp["rho_min"] + (hp["rho"] - hp["rho_min"]) * (lr - hp["lr_min"]) / (hp["lr_max"] - hp["lr_min"])
        old_g = run.grad(batch)
        old_norm = old_g.norm()
        e_w = old_g * (rho / (old_norm + EPS))
        gp = run.grad(batch, at=run.theta + e_w)
        new_norm = gp.norm()
        cosine = (old_g * gp).sum() / (new_norm * old_norm + EPS)
        vertical = old_g - cosine * old_norm * gp / (new_norm + EPS)
        gp.add_(vertical, alpha=-alpha)
        run.sam_steps.append(True)
        run.base_step(gp)
    run.write()


if __name__ == "__main__":
    main()
