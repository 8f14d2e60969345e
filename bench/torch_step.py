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

--method sam times SAM instead (ρ 0.05: a first pass, the ascent to
θ + ρ·g/‖g‖, a second pass with BatchNorm's running statistics frozen, the
SGD step from θ with the second gradient), as the sam plugin does.

--feed times what a training loop pays, as optlab's BenchmarkTrainStep
(bench/train_test.go) does through host/train: every step gets a fresh
batch cut from a device-resident synthetic set (20 batches; float N(0,1)
samples, as optlab's synthetic data), in an order drawn on the device each
epoch, with CIFAR's augmentation done on the device (pad 4 and a random
32×32 crop as two gathers, random horizontal flips; offsets and flips
drawn on the device each epoch: no host→device copy in a step), and the
loss is read back one step late instead of at once. Without --feed the
batch is fixed and every step's loss is read at once (compare.sh).

--precision bf16 runs the forward pass and the loss under torch.autocast
with bfloat16 (optlab's train.precision = "bf16"). On CUDA each line also
gives the peak memory PyTorch's allocator held for that model
(peak_alloc_mib: torch.cuda.max_memory_allocated; peak_reserved_mib: the
caching allocator's reserve).

Numerics are set explicitly, to what optlab does by default: cuDNN's
autotuning off (torch.backends.cudnn.benchmark) and TensorFloat-32 off in
both cuDNN's convolutions and cuBLAS's matrix products. PyTorch's own
default allows TF32 in convolutions, which on an Ampere or later GPU makes
fp32 a different, lower-precision computation than optlab's fp32. --tf32
allows it in both (optlab's train.tf32 = true); the line then says tf32=yes.

Usage (Debian's PyTorch; the python3 on PATH may have no torch):

    /usr/bin/python3 bench/torch_step.py --model cnn --steps 30 --warmup 5
    /usr/bin/python3 bench/torch_step.py --device cuda --feed --method sam --model resnet18 --steps 200 --warmup 20
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


RHO = 0.05
CROP = 4
FEED_BATCHES = 20

# What --precision sets: autocast's device type and dtype, or None for fp32.
AUTOCAST = {"device_type": "cpu", "dtype": None}


def loss_of(model, x, y):
    """The mean cross-entropy of model on (x, y), the forward pass under
    autocast when --precision bf16 asks for it."""
    if AUTOCAST["dtype"] is None:
        return F.cross_entropy(model(x), y)
    with torch.autocast(device_type=AUTOCAST["device_type"], dtype=AUTOCAST["dtype"]):
        return F.cross_entropy(model(x), y)


def module_stepper(model, x, y):
    """Returns a step function using the module's parameters and torch.optim.SGD.

    x and y are the batch, or functions that return the step's batch."""
    opt = torch.optim.SGD(model.parameters(), lr=LR, momentum=MOMENTUM, weight_decay=WEIGHT_DECAY)
    batch = x if callable(x) else (lambda: (x, y))

    def step():
        bx, by = batch()
        opt.zero_grad(set_to_none=True)
        loss = loss_of(model, bx, by)
        loss.backward()
        opt.step()
        return loss

    return step


def sam_stepper(model, x, y):
    """Returns a SAM step function (ρ = RHO) over the module's parameters."""
    opt = torch.optim.SGD(model.parameters(), lr=LR, momentum=MOMENTUM, weight_decay=WEIGHT_DECAY)
    params = [p for p in model.parameters() if p.requires_grad]
    bns = [m for m in model.modules() if isinstance(m, torch.nn.modules.batchnorm._BatchNorm)]
    batch = x if callable(x) else (lambda: (x, y))

    def step():
        bx, by = batch()
        opt.zero_grad(set_to_none=True)
        loss = loss_of(model, bx, by)
        loss.backward()
        with torch.no_grad():
            norm = torch.norm(torch.stack([p.grad.norm() for p in params]))
            scale = RHO / (norm + 1e-12)
            eps = [p.grad * scale for p in params]
            for p, e in zip(params, eps):
                p.add_(e)
        momenta = [m.momentum for m in bns]
        for m in bns:
            m.momentum = 0.0  # batch statistics, running statistics unchanged
        opt.zero_grad(set_to_none=True)
        loss_of(model, bx, by).backward()
        for m, mom in zip(bns, momenta):
            m.momentum = mom
        with torch.no_grad():
            for p, e in zip(params, eps):
                p.sub_(e)
        opt.step()
        return loss

    return step


def feeder(batch, device):
    """Returns a function giving a fresh augmented batch per call (see --feed)."""
    n = FEED_BATCHES * batch
    data_x = torch.randn(n, 3, 32, 32, device=device)
    data_y = torch.randint(0, 10, (n,), device=device)
    ar = torch.arange(32, device=device)
    state = {"i": FEED_BATCHES}

    def next_batch():
        if state["i"] == FEED_BATCHES:
            state["perm"] = torch.randperm(n, device=device)
            state["off"] = torch.randint(0, 2 * CROP + 1, (n, 2), device=device)
            state["flip"] = torch.randint(0, 2, (n,), device=device, dtype=torch.bool)
            state["i"] = 0
        lo = state["i"] * batch
        state["i"] += 1
        idx = state["perm"][lo:lo + batch]
        x = data_x.index_select(0, idx)
        off = state["off"][lo:lo + batch]
        padded = F.pad(x, (CROP, CROP, CROP, CROP))
        rows = (off[:, 0].view(-1, 1, 1, 1) + ar.view(1, 1, 32, 1)).expand(batch, 3, 32, 32 + 2 * CROP)
        x = padded.gather(2, rows)
        cols = (off[:, 1].view(-1, 1, 1, 1) + ar.view(1, 1, 1, 32)).expand(batch, 3, 32, 32)
        x = x.gather(3, cols)
        x = torch.where(state["flip"][lo:lo + batch].view(-1, 1, 1, 1), x.flip(3), x)
        return x, data_y.index_select(0, idx)

    return next_batch


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


def make_step(arch, batch, layout, seed, device, method="sgd", feed=False):
    """Builds arch on device with a fixed synthetic batch (or, with feed, a
    feeder of fresh ones) and returns its step function."""
    torch.manual_seed(seed)
    model = torch_models.build(arch, 10, (3, 32, 32)).to(device).train()
    if feed:
        x, y = feeder(batch, device), None
    else:
        x = torch.randn(batch, 3, 32, 32).to(device)
        y = torch.randint(0, 10, (batch,)).to(device)
    if method == "sam":
        if layout != "modules":
            raise SystemExit("torch_step.py: --method sam needs --layout modules")
        return sam_stepper(model, x, y)
    if layout == "modules":
        step = module_stepper(model, x, y)
    else:
        if feed:
            raise SystemExit("torch_step.py: --feed needs --layout modules")
        step = flat_stepper(model, x, y, split=layout == "flat-split")
    return step


class Timer:
    """Times steps: each step's loss is read on the host at once, or, with
    late, the step before's after the step was issued (as host/train does)."""

    def __init__(self, step, late=False):
        self.step, self.late, self.prev = step, late, None

    def __call__(self):
        """Runs one step and returns its wall time in milliseconds."""
        t0 = time.perf_counter()
        loss = self.step()
        if self.late:
            if self.prev is not None:
                float(self.prev)
            self.prev = loss
        else:
            float(loss)  # the step's result on the host, as optlab returns it
        return (time.perf_counter() - t0) * 1e3


def measure(arch, batch, steps, warmup, layout, seed, device, method="sgd", feed=False):
    """Returns the per-step wall times in milliseconds after warm-up."""
    timed = Timer(make_step(arch, batch, layout, seed, device, method, feed), late=feed)
    for _ in range(warmup):
        timed()
    return [timed() for _ in range(steps)]


def serve(arch, batch, warmup, layout, seed, device, method="sgd", feed=False):
    """Answers "step N" lines on stdin with the N step times."""
    timed = Timer(make_step(arch, batch, layout, seed, device, method, feed), late=feed)
    for _ in range(warmup):
        timed()
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
            wall.append(timed())
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
    ap.add_argument("--method", choices=["sgd", "sam"], default="sgd")
    ap.add_argument("--feed", action="store_true", help="fresh augmented batches on the device, loss read a step late")
    ap.add_argument("--precision", choices=["fp32", "bf16"], default="fp32", help="bf16: forward and loss under torch.autocast")
    ap.add_argument("--tf32", action="store_true", help="allow TensorFloat-32 in cuDNN and cuBLAS (optlab's train.tf32 = true)")
    args = ap.parse_args(argv)
    # optlab's numerics (train.cudnn_benchmark and train.tf32 false unless set).
    torch.backends.cudnn.benchmark = False
    torch.backends.cudnn.allow_tf32 = args.tf32
    torch.backends.cuda.matmul.allow_tf32 = args.tf32
    if args.precision == "bf16":
        if args.layout != "modules":
            ap.error("--precision bf16 needs --layout modules")
        AUTOCAST.update(device_type=torch.device(args.device).type, dtype=torch.bfloat16)
    cuda = torch.device(args.device).type == "cuda"
    threads = args.threads if args.threads > 0 else os.cpu_count()
    torch.set_num_threads(threads)
    if args.serve:
        if not args.model or len(args.model) != 1:
            ap.error("--serve takes exactly one --model")
        return serve(args.model[0], args.batch, args.warmup, args.layout, args.seed, args.device, args.method, args.feed)
    for arch in args.model or ["resnet18", "cnn"]:
        if cuda:
            torch.cuda.empty_cache()
            torch.cuda.reset_peak_memory_stats(args.device)
        times = measure(arch, args.batch, args.steps, args.warmup, args.layout, args.seed, args.device, args.method, args.feed)
        extra = ""
        if args.method != "sgd" or args.feed:
            extra = " method=%s feed=%s" % (args.method, "yes" if args.feed else "no")
        if args.precision != "fp32":
            extra += " precision=" + args.precision
        if args.tf32:
            extra += " tf32=yes"
        if cuda:
            extra += " peak_alloc_mib=%.1f peak_reserved_mib=%.1f" % (
                torch.cuda.max_memory_allocated(args.device) / 2**20, torch.cuda.max_memory_reserved(args.device) / 2**20)
        print("torch model=%s batch=%d device=%s threads=%d steps=%d warmup=%d layout=%s%s median_ms=%.3f mean_ms=%.3f min_ms=%.3f"
              % (arch, args.batch, args.device, torch.get_num_threads(), args.steps, args.warmup, args.layout, extra,
                 statistics.median(times), statistics.fmean(times), min(times)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
