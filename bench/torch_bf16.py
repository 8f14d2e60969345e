#!/usr/bin/env python3
"""PyTorch reference for optlab's bf16 benchmark (BenchmarkBF16, docs/BENCHMARKS.md):
the fixed-batch SGD step of bench/torch_step.py (which also has the --feed and
--method sam options), with PyTorch's own autocast and channels_last.

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

--autocast bf16 runs forward and loss under torch.autocast(device,
dtype=torch.bfloat16) (backward outside it, as PyTorch recommends; the
parameters and the SGD step stay float32), as optlab's train.precision =
"bf16" does; --channels-last converts the model and the batch to
torch.channels_last (model.memory_format = "channels_last"). With
--interleave, one process builds two identical models and batches, one in
float32 (contiguous) and one as --autocast/--channels-last say, and times
their steps alternately (who goes first rotates every step), as Go's
BenchmarkBF16 does, then prints both medians and the ratio:

    torch model=cnn … interleave fp32_median_ms=… bf16_median_ms=… ratio=… … min_ratio=… … cpu_ratio=…

(ratio: of the wall-time medians; min_ratio: of the fastest steps;
cpu_ratio: of the medians of the process's CPU time per step).

--in sets the per-sample input shape (e.g. 1x28x28 for lenet5 on
Fashion-MNIST-sized samples; default 3x32x32).

Usage (Debian's PyTorch; the python3 on PATH may have no torch):

    /usr/bin/python3 bench/torch_bf16.py --model cnn --steps 30 --warmup 5
    /usr/bin/python3 bench/torch_bf16.py --model lenet5 --in 1x28x28 --autocast bf16 --interleave --steps 40
"""

import argparse
import os
import statistics
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_models  # noqa: E402  pylint: disable=wrong-import-position
from torch_step import LR, MOMENTUM, WEIGHT_DECAY, flat_stepper  # noqa: E402  the same step, one definition


def module_stepper(model, x, y, autocast=None):
    """Returns a step function using the module's parameters and torch.optim.SGD;
    autocast (a dtype) runs forward and loss under torch.autocast."""
    opt = torch.optim.SGD(model.parameters(), lr=LR, momentum=MOMENTUM, weight_decay=WEIGHT_DECAY)
    device_type = x.device.type

    def step():
        opt.zero_grad(set_to_none=True)
        with torch.autocast(device_type, dtype=autocast or torch.bfloat16, enabled=autocast is not None):
            loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss

    return step


AUTOCAST = {"none": None, "bf16": torch.bfloat16}


def make_step(arch, batch, layout, seed, device, in_shape=(3, 32, 32), autocast=None, channels_last=False):
    """Builds arch on device with a fixed synthetic batch and returns its step function."""
    torch.manual_seed(seed)
    model = torch_models.build(arch, 10, in_shape).to(device).train()
    x = torch.randn(batch, *in_shape).to(device)
    y = torch.randint(0, 10, (batch,)).to(device)
    if channels_last:
        model = model.to(memory_format=torch.channels_last)
        x = x.contiguous(memory_format=torch.channels_last)
    if layout == "modules":
        step = module_stepper(model, x, y, autocast)
    elif autocast is not None or channels_last:
        raise ValueError("--autocast and --channels-last need --layout modules")
    else:
        step = flat_stepper(model, x, y, split=layout == "flat-split")
    return step


def interleave(arch, batch, steps, warmup, seed, device, in_shape, autocast, channels_last):
    """Times a float32 step and an autocast/channels-last step of identical
    models alternately; returns both lists of (wall ms, CPU ms)."""
    steps2 = [make_step(arch, batch, "modules", seed, device, in_shape),
              make_step(arch, batch, "modules", seed, device, in_shape, autocast, channels_last)]
    for _ in range(warmup):
        for st in steps2:
            st()
    out = [[], []]
    for r in range(steps):
        for j in range(2):
            i = (r + j) % 2
            c0 = time.process_time()
            w = timed(steps2[i])
            out[i].append((w, (time.process_time() - c0) * 1e3))
    return out


def timed(step):
    """Runs one step and returns its wall time in milliseconds."""
    t0 = time.perf_counter()
    loss = step()
    float(loss)  # the step's result on the host, as optlab returns it
    return (time.perf_counter() - t0) * 1e3


def measure(arch, batch, steps, warmup, layout, seed, device, in_shape=(3, 32, 32), autocast=None, channels_last=False):
    """Returns the per-step wall times in milliseconds after warm-up."""
    step = make_step(arch, batch, layout, seed, device, in_shape, autocast, channels_last)
    for _ in range(warmup):
        step()
    return [timed(step) for _ in range(steps)]


def serve(arch, batch, warmup, layout, seed, device, in_shape=(3, 32, 32), autocast=None, channels_last=False):
    """Answers "step N" lines on stdin with the N step times."""
    step = make_step(arch, batch, layout, seed, device, in_shape, autocast, channels_last)
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
    ap.add_argument("--in", dest="in_shape", default="3x32x32", help="per-sample input shape CxHxW")
    ap.add_argument("--autocast", choices=sorted(AUTOCAST), default="none",
                    help="forward and loss under torch.autocast to this dtype")
    ap.add_argument("--channels-last", action="store_true", help="model and batch in torch.channels_last")
    ap.add_argument("--interleave", action="store_true",
                    help="time float32 steps and --autocast/--channels-last steps alternately, print the ratio")
    args = ap.parse_args(argv)
    threads = args.threads if args.threads > 0 else os.cpu_count()
    torch.set_num_threads(threads)
    try:
        in_shape = tuple(int(v) for v in args.in_shape.split("x"))
    except ValueError:
        ap.error("--in: want CxHxW, e.g. 1x28x28 (got %r)" % args.in_shape)
    autocast = AUTOCAST[args.autocast]
    if args.serve:
        if not args.model or len(args.model) != 1:
            ap.error("--serve takes exactly one --model")
        return serve(args.model[0], args.batch, args.warmup, args.layout, args.seed, args.device,
                     in_shape, autocast, args.channels_last)
    variant = args.autocast if autocast is not None else "fp32"
    if args.channels_last:
        variant += "-cl"
    for arch in args.model or ["resnet18", "cnn"]:
        common = "torch model=%s batch=%d device=%s threads=%d steps=%d warmup=%d" % (
            arch, args.batch, args.device, torch.get_num_threads(), args.steps, args.warmup)
        extra = "" if (args.in_shape, variant) == ("3x32x32", "fp32") else " in=%s precision=%s" % (args.in_shape, variant)
        if args.interleave:
            if variant == "fp32":
                ap.error("--interleave needs --autocast or --channels-last")
            base, other = interleave(arch, args.batch, args.steps, args.warmup, args.seed, args.device,
                                     in_shape, autocast, args.channels_last)
            med = lambda ts, k: statistics.median(t[k] for t in ts)  # noqa: E731
            low = lambda ts: min(t[0] for t in ts)  # noqa: E731
            print("%s in=%s interleave fp32_median_ms=%.3f %s_median_ms=%.3f ratio=%.4f fp32_min_ms=%.3f %s_min_ms=%.3f min_ratio=%.4f"
                  " fp32_cpu_ms=%.3f %s_cpu_ms=%.3f cpu_ratio=%.4f"
                  % (common, args.in_shape, med(base, 0), variant, med(other, 0), med(other, 0) / med(base, 0),
                     low(base), variant, low(other), low(other) / low(base),
                     med(base, 1), variant, med(other, 1), med(other, 1) / med(base, 1)), flush=True)
            continue
        times = measure(arch, args.batch, args.steps, args.warmup, args.layout, args.seed, args.device,
                        in_shape, autocast, args.channels_last)
        print("%s layout=%s median_ms=%.3f mean_ms=%.3f min_ms=%.3f%s"
              % (common, args.layout, statistics.median(times), statistics.fmean(times), min(times), extra), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
