#!/usr/bin/env python3
"""devkit-report.py: the device kit's figures against optlab's goals, as
markdown (scripts/devkit-run.sh writes it to results.md).

Reads bench.txt (the raw output of bench/torch_step.py and of the bench
package's benchmarks, each run after a "## …" marker line) and memory.txt.
Goals (docs/BENCHMARKS.md, "GPU"): optlab/PyTorch ≤ 0.95 for SGD and ≤ 0.90
for SAM; SAM plugin process / in-process ≤ 1.02; OT-MDR (K = 1) / SAM ≤ 1.05.
"""

import argparse
import re
import sys

GOALS = {"sgd": 0.95, "sam": 0.90}
PLUGIN_GOAL = 1.02
OTMDR_GOAL = 1.05
ARCHS = ["cnn", "resnet18", "wrn28-10"]

TORCH = re.compile(r"^torch model=(\S+) .*?method=(\S+) feed=(\S+)(?: precision=(\S+))?.*? median_ms=([\d.]+)(.*)$")
GOBENCH = re.compile(r"^Benchmark(\S+?)(?:-\d+)?\s+(\d+)\s+(.*)$")
METRIC = re.compile(r"([-+\d.eE]+) (\S+)")


def metrics(rest):
    return {unit: float(v) for v, unit in METRIC.findall(rest)}


def parse_bench(path):
    torch, train, plugin, otmdr = {}, {}, {}, {}
    marker = ""
    for line in open(path, errors="replace"):
        line = line.rstrip("\n")
        if line.startswith("## "):
            marker = line[3:]
            continue
        m = TORCH.match(line)
        if m:
            arch, method, _, prec, med, rest = m.groups()
            extra = dict(re.findall(r"(peak_\w+)=([\d.]+)", line))  # before median_ms
            prec = prec or "fp32"
            if "tf32=yes" in line:  # fp32 with TensorFloat-32 allowed
                prec = "tf32"
            torch[(prec, method, arch)] = (float(med), extra)
            continue
        m = GOBENCH.match(line)
        if not m:
            continue
        name, _, rest = m.groups()
        mt = metrics(rest)
        parts = name.split("/")
        if parts[0] == "TrainStep" and len(parts) >= 3:
            prec = marker.split()[-1] if marker.startswith("optlab TrainStep") else "fp32"
            train[(prec, parts[1], parts[2])] = mt
        elif parts[0] == "SAMStep" and len(parts) >= 2:
            plugin[parts[1]] = mt
        elif parts[0] == "OTMDRvsSAM" and len(parts) >= 3:
            otmdr[(parts[1], parts[2])] = mt
    return torch, train, plugin, otmdr


def profile_section(path):
    """The markdown that scripts/devkit-ncu.py printed into bench.txt after
    "## profile", and optlabstep's own median lines."""
    out, on = [], False
    for line in open(path, errors="replace"):
        line = line.rstrip("\n")
        if line.startswith("## "):
            on = line.startswith("## profile")
            continue
        if on and (line.startswith(("### ", "|", "optlab model=")) or not line):
            out.append(line)
    return out


def verdict(ratio, goal):
    return "yes" if ratio <= goal else "**no**"


def main(argv):
    ap = argparse.ArgumentParser()
    ap.add_argument("--bench", required=True)
    ap.add_argument("--memory", required=True)
    ap.add_argument("--facts")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--only", action="append", help="keep only the sections whose heading starts so (repeatable)")
    ap.add_argument("--shift", type=int, default=0, help="headings this many levels deeper (for a document's section)")
    a = ap.parse_args(argv)
    torch, train, plugin, otmdr = parse_bench(a.bench)
    out = []
    w = out.append
    if a.device != "cuda":
        w("**No GPU: these figures come from the CPU plumbing run (small models, a few steps); they are not GPU figures "
          "and not for comparison.**\n")
    w("## Step time: optlab / PyTorch, batch 128, device %s" % a.device)
    w("")
    w("optlab: `BenchmarkTrainStep` (host/train's loop, the real plugin process, a fresh augmented batch cut on the "
      "device every step, the loss read a step late; median of the steady steps). PyTorch: `bench/torch_step.py "
      "--feed` (the same work in PyTorch; median). Run one after the other, not interleaved. Goals: SGD ≤ %.2f, "
      "SAM ≤ %.2f. Both sides set the same numerics: cuDNN autotuning off; fp32 with TensorFloat-32 off in convolutions "
      "and matrix products (optlab's default; PyTorch's own default allows it in convolutions), tf32 with it on "
      "(optlab's train.tf32 = true, torch_step.py --tf32)." % (GOALS["sgd"], GOALS["sam"]))
    w("")
    w("| precision | method | model | optlab ms/step | PyTorch ms/step | optlab/PyTorch | goal met |")
    w("|---|---|---|---:|---:|---:|---|")
    n = 0
    for prec in ("fp32", "tf32", "bf16"):
        for method in ("sgd", "sam"):
            for arch in ARCHS:
                o = train.get((prec, method, arch))
                t = torch.get((prec, method, arch))
                if not o and not t:
                    continue
                om = o.get("ms/step") if o else None
                tm = t[0] if t else None
                ratio = om / tm if om and tm else None
                w("| %s | %s | %s | %s | %s | %s | %s |" % (
                    prec, method.upper(), arch,
                    "%.2f" % om if om else "—", "%.2f" % tm if tm else "—",
                    "%.3f" % ratio if ratio else "—",
                    verdict(ratio, GOALS[method]) if ratio else "—"))
                n += 1
    if not n:
        w("| (no step times were measured) | | | | | | |")
    w("")
    h2d = [(k, v) for k, v in sorted(train.items()) if "h2d-steady/step" in v]
    if h2d:
        w("Host→device copies per step in optlab (expected: h2d/step 0.05, one per epoch of 20 steps; h2d-steady/step 0; "
          "blocking/step: 1 on a GPU, the delivery of the step before's reports, read a step late; 0 on the CPU): " + "; ".join("%s %s %s: %g, %g, %g" % (k[0], k[1], k[2], v.get("h2d/step", -1),
                                                                         v.get("h2d-steady/step", -1), v.get("blocking/step", -1)) for k, v in h2d))
        w("")
    w("## SAM: plugin process / in-process (goal ≤ %.2f)" % PLUGIN_GOAL)
    w("")
    w("| model | plugin ms/step | in-process ms/step | plugin/in-process | goal met | RPC/step | bytes/step |")
    w("|---|---:|---:|---:|---|---:|---:|")
    for arch in ARCHS:
        p = plugin.get(arch)
        if p and "plugin/inproc" in p:
            w("| %s | %.2f | %.2f | %.3f | %s | %g | %g |" % (arch, p.get("plugin-ms/step", 0), p.get("inproc-ms/step", 0),
                                                        p["plugin/inproc"], verdict(p["plugin/inproc"], PLUGIN_GOAL),
                                                        p.get("RPC/step", 0), p.get("B/step", 0)))
    if not plugin:
        w("| (not measured) | | | | | | |")
    w("")
    w("## OT-MDR (K = 1) / SAM, both through their plugins (goal ≤ %.2f; the paper's Table 5: 1.36–1.54)" % OTMDR_GOAL)
    w("")
    w("| model | SAM ms/step | OT-MDR ms/step | OT-MDR/SAM | goal met |")
    w("|---|---:|---:|---:|---|")
    for (arch, k), v in sorted(otmdr.items()):
        if "otmdr/sam" in v:
            w("| %s (%s) | %.2f | %.2f | %.3f | %s |" % (arch, k, v.get("sam-ms/step", 0), v.get("otmdr-ms/step", 0),
                                                   v["otmdr/sam"], verdict(v["otmdr/sam"], OTMDR_GOAL)))
    if not otmdr:
        w("| (not measured) | | | | |")
    w("")
    w("## Memory")
    w("")
    try:
        mem = open(a.memory, errors="replace").read().split("\n")
    except OSError:
        mem = []
    rows = [l for l in mem if l.startswith("method=")]
    if rows:
        w("Peak GPU memory per method (optlab, `bin/host run` of one epoch; nvidia-smi's memory.used, which includes "
          "the CUDA context; sampled every 100 ms):")
        w("")
        w("| method | model | peak − idle (MiB) | seconds | exit |")
        w("|---|---|---:|---:|---|")
        for l in rows:
            f = dict(kv.split("=", 1) for kv in l.split() if "=" in kv)
            w("| %s | %s | %s | %s | %s |" % (f.get("method"), f.get("arch"), f.get("peak_minus_idle_mib", "—"),
                                           f.get("seconds", "—"), f.get("exit")))
        w("")
    peaks = [(k, v[1]) for k, v in sorted(torch.items()) if v[1]]
    if peaks:
        w("PyTorch's own peak (torch.cuda.max_memory_allocated / max_memory_reserved, MiB): " +
          "; ".join("%s %s %s %s/%s" % (k[0], k[1], k[2], e.get("peak_alloc_mib"), e.get("peak_reserved_mib")) for k, e in peaks))
        w("")
    soak = [l for l in mem if l.startswith("soak GPU") or "VmRSS" in l or l.startswith(("--- PASS", "--- FAIL", "PASS", "FAIL"))]
    if soak:
        w("Over 2,000 steps (`TestSoakRSS`, cnn, batch 128):")
        w("")
        w("```")
        out.extend(soak)
        w("```")
    if not rows and not soak:
        w("(not measured)")
    prof = profile_section(a.bench)
    if prof:
        w("")
        w("## Where a step's time goes (Nsight Compute; optlab's in-process step against PyTorch's)")
        w("")
        out.extend(prof)
    if a.only:
        kept, keep = [], False
        for l in out:
            if l.startswith("## "):
                keep = any(l[3:].startswith(o) for o in a.only)
            if keep:
                kept.append(l)
        out = kept
    if a.shift > 0:
        out = ["#" * a.shift + l if l.startswith("#") else l for l in out]
    print("\n".join(out))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
