"""What the SAM variants' float64 references share (not a method of its own).

The model, loss and data of optlab's optimtest.NewMLP in PyTorch float64: a
one-hidden-layer tanh network (fc1 → tanh → fc2; or softmax regression fc)
with mean cross-entropy, its parameters one flat vector θ laid out as the
tensors listed (weights row-major [out, in], then biases), as optimtest's
Tensors() gives them; and the host's base optimizer, torch.optim.SGD on that
flat θ (momentum, dampening, Nesterov, coupled weight decay).

A reference script reads on stdin {"tensors": [{"name", "shape"}],
"theta0": [...], "x": [[...] per sample], "y": [...], "batches": [[sample
indices] per step], "lrs": [...], "total_steps": T, "base": {"momentum",
"dampening", "nesterov", "weight_decay"}, "hparams": {...}} and writes
{"thetas": [θ after every step], "sam_steps": [whether a step took a second
gradient]}.
"""

import json
import sys

import torch

torch.set_default_dtype(torch.float64)


class Problem:
    """optimtest's MLP on its training set, θ a flat float64 vector."""

    def __init__(self, req):
        self.x = torch.tensor(req["x"], dtype=torch.float64)
        self.y = torch.tensor(req["y"], dtype=torch.long)
        self.shapes, off = {}, 0
        for t in req["tensors"]:
            n = 1
            for d in t["shape"]:
                n *= d
            self.shapes[t["name"]] = (off, n, t["shape"])
            off += n
        self.numel = off

    def view(self, theta, name):
        off, n, shape = self.shapes[name]
        return theta[off:off + n].reshape(shape)

    def loss(self, theta, batch):
        """Mean cross-entropy over the samples batch at θ."""
        x, y = self.x[batch], self.y[batch]
        if "fc1.weight" in self.shapes:
            h = torch.tanh(x @ self.view(theta, "fc1.weight").T + self.view(theta, "fc1.bias"))
            z = h @ self.view(theta, "fc2.weight").T + self.view(theta, "fc2.bias")
        else:
            z = x @ self.view(theta, "fc.weight").T + self.view(theta, "fc.bias")
        return torch.nn.functional.cross_entropy(z, y)

    def grad(self, theta, batch):
        """∇L(θ) on batch, a new tensor; θ is not changed."""
        w = theta.detach().clone().requires_grad_(True)
        (g,) = torch.autograd.grad(self.loss(w, batch), w)
        return g


class Run:
    """The request, the problem, θ and the base optimizer over it."""

    def __init__(self):
        self.req = json.load(sys.stdin)
        self.hp = self.req["hparams"]
        self.problem = Problem(self.req)
        self.theta = torch.tensor(self.req["theta0"], dtype=torch.float64)
        b = self.req["base"]
        self.base = torch.optim.SGD([self.theta], lr=0.0, momentum=b["momentum"], dampening=b["dampening"],
                                    nesterov=b["nesterov"], weight_decay=b["weight_decay"])
        self.thetas, self.sam_steps = [], []

    def steps(self):
        """Yields (t, batch, lr) for every step, recording θ after each."""
        for t, (batch, lr) in enumerate(zip(self.req["batches"], self.req["lrs"])):
            self.base.param_groups[0]["lr"] = lr
            yield t, batch, lr
            self.thetas.append(self.theta.tolist())

    def grad(self, batch, at=None):
        return self.problem.grad(self.theta if at is None else at, batch)

    def base_step(self, d):
        """The host's base step (torch.optim.SGD) with gradient d."""
        self.theta.grad = d.clone()
        self.base.step()

    def write(self):
        json.dump({"thetas": self.thetas, "sam_steps": self.sam_steps}, sys.stdout)
