#!/usr/bin/env python3
"""Compare two results folders of the same experiment run by two optlab builds.

    scripts/compare-results.py results/qs-ckpt OTHER/results/qs-ckpt

For every run key in both folders it compares:
  - the record's metrics (runs.jsonl) and config hash,
  - the curve (curves/*.csv) without its wall-clock column,
  - the final model (checkpoints/*.safetensors, written when train.checkpoint
    is set): every tensor's bytes, and the largest relative difference
    max|a-b| / max|b| over each tensor when they differ.
It prints one line per run and exits 0 when everything is bitwise equal, 1
otherwise. Standard library only (safetensors is parsed by hand).
"""

import csv
import json
import os
import struct
import sys
from array import array


def stem(key):
    """The file name stem of a run key, as host/results.KeyFileStem makes it."""
    out = []
    for c in key.encode():
        ch = chr(c)
        if ch == "/":
            out.append(",")
        elif ch.isascii() and (ch.isalnum() or ch in "._=+-"):
            out.append(ch)
        else:
            out.append("%%%02X" % c)
    return "".join(out)


def records(folder):
    out = {}
    with open(os.path.join(folder, "runs.jsonl")) as f:
        for line in f:
            if line.strip():
                r = json.loads(line)
                out[r["key"]] = r
    return out


def curve(folder, key):
    name = stem(key) + ".csv"
    path = os.path.join(folder, "curves", name)
    if not os.path.exists(path):
        return None
    with open(path) as f:
        rows = list(csv.reader(f))
    i = rows[0].index("seconds") if rows and "seconds" in rows[0] else None
    return [[c for j, c in enumerate(r) if j != i] for r in rows]


def tensors(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    header.pop("__metadata__", None)
    return {k: (v["dtype"], data[v["data_offsets"][0]:v["data_offsets"][1]]) for k, v in header.items()}


def rel_diff(dtype, a, b):
    code = {"F32": "f", "F64": "d"}.get(dtype)
    if code is None:
        return float("inf")
    x, y = array(code, a), array(code, b)
    scale = max((abs(v) for v in y), default=0.0) or 1.0
    return max((abs(p - q) for p, q in zip(x, y)), default=0.0) / scale


def main(a, b):
    ra, rb = records(a), records(b)
    keys = sorted(set(ra) & set(rb))
    if not keys:
        print("no run key in both folders")
        return 1
    same = True
    for k in keys:
        notes = []
        if ra[k]["metrics"] != rb[k]["metrics"]:
            diff = [m for m in ra[k]["metrics"] if ra[k]["metrics"].get(m) != rb[k]["metrics"].get(m)]
            notes.append("metrics differ: " + ", ".join(diff))
        if ra[k]["config_hash"] != rb[k]["config_hash"]:
            notes.append("config hash %s vs %s" % (ra[k]["config_hash"], rb[k]["config_hash"]))
        if curve(a, k) != curve(b, k):
            notes.append("curve differs")
        ck = os.path.join("checkpoints", stem(k) + ".safetensors")
        pa, pb = os.path.join(a, ck), os.path.join(b, ck)
        if os.path.exists(pa) and os.path.exists(pb):
            ta, tb = tensors(pa), tensors(pb)
            worst = 0.0
            for name in sorted(set(ta) | set(tb)):
                if name not in ta or name not in tb or ta[name][1] != tb[name][1]:
                    worst = max(worst, rel_diff(ta.get(name, ("?", b""))[0], ta.get(name, ("", b""))[1], tb.get(name, ("", b""))[1]))
            if worst:
                notes.append("weights differ (largest relative difference %.3g)" % worst)
            else:
                notes.append("weights bitwise equal")
        else:
            notes.append("no checkpoints")
        bad = any(not n.startswith(("weights bitwise", "no checkpoints")) for n in notes)
        same = same and not bad
        print("%-40s %s" % (k, "; ".join(notes) if notes else "equal"))
    print("all bitwise equal" if same else "DIFFERENCES")
    return 0 if same else 1


if __name__ == "__main__":
    if len(sys.argv) != 3:
        print(__doc__)
        sys.exit(2)
    sys.exit(main(sys.argv[1], sys.argv[2]))
