#!/usr/bin/env python3
"""PyTorch reference for optlab's SGD step benchmark.

Times one training step of an architecture from bench/torch_models.py (the
same models optlab defines in host/model) on a fixed synthetic CIFAR-shaped
batch: forward, mean cross-entropy, backward, torch.optim.SGD step with
momentum 0.9 and weight decay 5e-4 (what bench/cmd/optlabstep and the Go
benchmarks configure). It prints one line per model in the format of
bench/cmd/optlabstep, e.g.

    torch model=cnn batch=128 device=cpu threads=2 steps=30 warmup=5 layout=modules median_ms=…

median_ms is the median over --steps timed steps after --warmup untimed
ones. bench/compare.sh runs this and the optlab side alternately.

With --serve it times steps on request instead, for bench/compare.sh: after
building the model and the warm-up steps it prints "ready"; then every input
line "step N" runs N steps and prints "ms W1 ... WN cpu C1 ... CN": each step's
wall time and the CPU time of the process (user + system, all threads) in
milliseconds. "quit" or the end of the input ends it.

--layout selects how the parameters are held, to find where a gap between
optlab and PyTorch comes from:

  modules      the nn.Module's own parameters (the reference);
  flat-narrow  optlab's layout: one flat leaf vector, every parameter a
               narrow().view() of it, the gradient taken with respect to the
               flat vector (torch.autograd.grad), SGD on the flat vectors;
  flat-split   the same, with the views cut by one torch.split call.

Usage (Debian's PyTorch; the python3 on PATH may have no torch):

    /usr/bin/python3 bench/torch_step.py --model cnn --steps 30 --warmup 5
"""

import argparse
import os
import statistics
import sys
import time

import torch
import torch.nn.functional as F
from torch.nn.utils import stateless

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_models  # noqa: E402  pylint: disable=wrong-import-position

LR = 0.05
MOMENTUM = 0.9
WEIGHT_DECAY = 5e-4


def module_stepper(model, x, y):
    """Returns a step function using the module's parameters and torch.optim.SGD."""
    opt = torch.optim.SGD(model.parameters(), lr=LR, momentum=MOMENTUM, weight_decay=WEIGHT_DECAY)

    def step():
        opt.zero_grad(set_to_none=True)
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss

    return step


def flat_stepper(model, x, y, split):
    """Returns a step function over one flat parameter vector, as optlab holds it."""
    names = [n for n, _ in model.named_parameters()]
    shapes = [p.shape for _, p in model.named_parameters()]
    sizes = [p.numel() for _, p in model.named_parameters()]
    with torch.no_grad():
        flat = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
    buf = torch.zeros_like(flat)
    state = {"first": True}

    def views(leaf):
        if split:
            parts = torch.split(leaf, sizes)
        else:
            parts, off = [], 0
            for n in sizes:
                parts.append(leaf.narrow(0, off, n))
                off += n
        return {name: v.view(shape) for name, v, shape in zip(names, parts, shapes)}

    def step():
        leaf = flat.detach().requires_grad_(True)
        loss = F.cross_entropy(stateless.functional_call(model, views(leaf), (x,)), y)
        (g,) = torch.autograd.grad(loss, leaf)
        with torch.no_grad():
            d = g.add(flat, alpha=WEIGHT_DECAY)
            if state["first"]:
                buf.copy_(d)
                state["first"] = False
            else:
                buf.mul_(MOMENTUM).add_(d)
            flat.add_(buf, alpha=-LR)
        return loss

    return step


def make_step(arch, batch, layout, seed, device):
    """Builds arch on device with a fixed synthetic batch and returns its step function."""
    torch.manual_seed(seed)
    model = torch_models.build(arch, 10, (3, 32, 32)).to(device).train()
    x = torch.randn(batch, 3, 32, 32).to(device)
    y = torch.randint(0, 10, (batch,)).to(device)
    if layout == "modules":
        step = module_stepper(model, x, y)
    else:
        step = flat_stepper(model, x, y, split=layout == "flat-split")
    return step


def timed(step):
    """Runs one step and returns its wall time in milliseconds."""
    t0 = time.perf_counter()
    loss = step()
    float(loss)  # the step's result on the host, as optlab returns it
    return (time.perf_counter() - t0) * 1e3


def measure(arch, batch, steps, warmup, layout, seed, device):
    """Returns the per-step wall times in milliseconds after warm-up."""
    step = make_step(arch, batch, layout, seed, device)
    for _ in range(warmup):
        step()
    return [timed(step) for _ in range(steps)]


def serve(arch, batch, warmup, layout, seed, device):
    """Answers "step N" lines on stdin with the N step times."""
    step = make_step(arch, batch, layout, seed, device)
    for _ in range(warmup):
        step()
    print("ready", flush=True)
    for line in sys.stdin:
        f = line.split()
        if f == ["quit"]:
            return 0
        if len(f) != 2 or f[0] != "step" or not f[1].isdigit() or int(f[1]) < 1:
            print("torch_step.py: bad request %r" % line, file=sys.stderr)
            return 2
        wall, cpu = [], []
        for _ in range(int(f[1])):
            c0 = time.process_time()
            wall.append(timed(step))
            cpu.append((time.process_time() - c0) * 1e3)
        print("ms %s cpu %s" % (" ".join("%.3f" % v for v in wall), " ".join("%.3f" % v for v in cpu)), flush=True)
    return 0


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    ap.add_argument("--model", action="append", help="architecture (repeatable; default resnet18 and cnn)")
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--steps", type=int, default=10, help="timed steps")
    ap.add_argument("--warmup", type=int, default=2, help="untimed steps first")
    ap.add_argument("--threads", type=int, default=0, help="torch intra-op threads (0: number of cores)")
    ap.add_argument("--layout", choices=["modules", "flat-narrow", "flat-split"], default="modules")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--device", default="cpu", help="cpu, cuda or cuda:N")
    ap.add_argument("--serve", action="store_true", help="time steps on request from stdin (one --model)")
    args = ap.parse_args(argv)
    threads = args.threads if args.threads > 0 else os.cpu_count()
    torch.set_num_threads(threads)
    if args.serve:
        if not args.model or len(args.model) != 1:
            ap.error("--serve takes exactly one --model")
        return serve(args.model[0], args.batch, args.warmup, args.layout, args.seed, args.device)
    for arch in args.model or ["resnet18", "cnn"]:
        times = measure(arch, args.batch, args.steps, args.warmup, args.layout, args.seed, args.device)
        print("torch model=%s batch=%d device=%s threads=%d steps=%d warmup=%d layout=%s median_ms=%.3f mean_ms=%.3f min_ms=%.3f"
              % (arch, args.batch, args.device, torch.get_num_threads(), args.steps, args.warmup, args.layout,
                 statistics.median(times), statistics.fmean(times), min(times)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
