#!/usr/bin/env python3
"""Per-step GPU kernels of optlab and PyTorch from Nsight Compute's CSV.

scripts/devkit-run.sh's profile step runs each side twice under
`ncu --metrics gpu__time_duration.sum --csv --print-units base`, once with
a few steps and once with more, after the same warm-up. The model's set-up
and the warm-up launch the same kernels in both runs, so the difference
divided by the difference in steps is one step's: the kernels launched and
the GPU time they took. A step's wall time well above its GPU time means
the GPU waits for the host (launches, the plugin's round trip, Python).

Usage:
    devkit-ncu.py --label "cnn sgd" --steps 3 8 \
        --optlab optlab-3.csv optlab-8.csv --torch torch-3.csv torch-8.csv

Prints a markdown table (kernels/step, GPU µs/step, both sides) and the
kernels that differ most between the sides.
"""

import argparse
import collections
import csv
import io
import sys

UNIT = {"nsecond": 1e-3, "ns": 1e-3, "usecond": 1.0, "us": 1.0, "msecond": 1e3, "ms": 1e3, "second": 1e6, "s": 1e6}


def kernels(path):
    """Returns {kernel name: [count, µs]} of one ncu CSV (its quoted lines)."""
    with open(path, encoding="utf-8", errors="replace") as f:
        lines = [ln for ln in f if ln.startswith('"')]
    out = collections.defaultdict(lambda: [0, 0.0])
    for row in csv.DictReader(io.StringIO("".join(lines))):
        if row.get("Metric Name") != "gpu__time_duration.sum":
            continue
        unit = UNIT.get((row.get("Metric Unit") or "nsecond").strip(), 1e-3)
        try:
            v = float((row.get("Metric Value") or "").replace(",", "")) * unit
        except ValueError:
            continue
        name = (row.get("Kernel Name") or row.get("Function Name") or "?").strip()
        out[name][0] += 1
        out[name][1] += v
    return out


def per_step(few, many, dsteps):
    """The difference of two runs' kernels, per step."""
    names = set(few) | set(many)
    d = {}
    for n in names:
        c = (many.get(n, [0, 0.0])[0] - few.get(n, [0, 0.0])[0]) / dsteps
        t = (many.get(n, [0, 0.0])[1] - few.get(n, [0, 0.0])[1]) / dsteps
        if c or t:
            d[n] = (c, t)
    return d


def short(name, width=70):
    name = name.split("(")[0] if "(" in name and not name.startswith("void") else name
    return name if len(name) <= width else name[: width - 1] + "…"


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--label", required=True)
    ap.add_argument("--steps", nargs=2, type=int, required=True)
    ap.add_argument("--optlab", nargs=2, required=True)
    ap.add_argument("--torch", nargs=2, required=True)
    ap.add_argument("--top", type=int, default=8)
    args = ap.parse_args(argv)
    ds = args.steps[1] - args.steps[0]
    if ds <= 0:
        ap.error("--steps: the second count must be larger")
    sides = {}
    for side, (a, b) in (("optlab", args.optlab), ("PyTorch", args.torch)):
        try:
            sides[side] = per_step(kernels(a), kernels(b), ds)
        except OSError as e:
            print("devkit-ncu: %s: %s" % (side, e), file=sys.stderr)
            return 1
    print("### GPU kernels per step: %s, fp32, batch 128 (ncu, steps %d and %d)" % (args.label, *args.steps))
    print()
    print("| side | kernels/step | GPU µs/step |")
    print("|---|---:|---:|")
    for side, d in sides.items():
        print("| %s | %.1f | %.1f |" % (side, sum(c for c, _ in d.values()), sum(t for _, t in d.values())))
    print()
    o, t = sides["optlab"], sides["PyTorch"]
    diff = sorted(set(o) | set(t), key=lambda n: -abs(o.get(n, (0, 0))[1] - t.get(n, (0, 0))[1]))
    print("| kernel | optlab n/step | optlab µs/step | PyTorch n/step | PyTorch µs/step |")
    print("|---|---:|---:|---:|---:|")
    for n in diff[: args.top]:
        oc, ot = o.get(n, (0, 0.0))
        tc, tt = t.get(n, (0, 0.0))
        print("| `%s` | %.1f | %.1f | %.1f | %.1f |" % (short(n), oc, ot, tc, tt))
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
