#!/usr/bin/env python3
"""devkit-libtch.py: compile the device kit's libtch.so (gotch's C++ wrapper,
prepared by tools/gotchprep) against the libtorch of this machine, in
parallel chunks, stubbing the generated wrappers that do not compile here.

The device kit's Go binaries (built with the tag optlab_extlibtch) link
libtch.so from $ORIGIN/../lib; this script writes it there. It mirrors
tools/gotchprep, which needs Go, for a machine that has none:

  - the libtorch: the one inside the torch package of the Python running
    this script (include/ and lib/ beside torch/__init__.py), or Debian's
    (/usr/include, /usr/lib/<multiarch>) when that package has no headers
    (Debian's python3-torch); --include and --libdir override;
  - the C++ ABI flag: torch._C._GLIBCXX_USE_CXX11_ABI (else libc10.so's
    symbols); the C++ standard: the highest one that a "#if __cplusplus < N"
    guard followed by an #error asks for in libtorch's entry headers, at
    least C++17, raised when g++ says "C++NN or later … is required";
  - the generated wrappers (torch_api_generated.cpp.h) are cut into chunks
    at function boundaries, compiled with a precompiled header of the torch
    headers, --jobs at a time; a chunk that does not compile has each
    function g++ blames replaced by a stub that fails at run time, as
    gotchprep does (at most 6 passes), and is compiled again;
  - it stops, naming them, when a stubbed op is one optlab uses
    (USED_OPS.txt, which gotchprep computed from host/tensor);
  - it links libtch.so against libtorch (and, for a pip CUDA PyTorch, the
    NVIDIA libraries beside it, linked directly with their folders as run
    path, as gotchprep does for bin/host), and checks that it exports every
    symbol in SYMBOLS.txt.

Usage: python3 scripts/devkit-libtch.py --kit DIR [--jobs N] [--chunks N]
It prints one summary line at the end and exits non-zero on failure.
"""

import argparse
import concurrent.futures
import glob
import os
import re
import shutil
import subprocess
import sys
import time

MIN_STD = 17
STD_HEADERS = [
    "torch/csrc/api/include/torch/all.h",
    "torch/csrc/api/include/torch/torch.h",
    "torch/all.h",
    "torch/torch.h",
    "ATen/ATen.h",
    "ATen/core/Tensor.h",
    "c10/macros/Macros.h",
    "c10/util/C++17.h",
    "torch/script.h",
    "torch/csrc/jit/api/module.h",
]
GUARD = re.compile(r"^\s*#\s*(?:el)?if\b.*__cplusplus\s*<\s*(\d{6})L?\b")
STD_ERROR = re.compile(r"C\+\+(\d\d) or later compatible compiler is required")
HEADER_TYPES = ("int ", "int64_t ", "double ", "bool ", "tensor ", "tensor *", "scalar ", "void ")


def log(msg):
    print("devkit-libtch: " + msg, file=sys.stderr, flush=True)


def standard_of(v):
    if v > 202302:
        return 26
    if v > 202002:
        return 23
    if v > 201703:
        return 20
    if v > 201402:
        return 17
    if v > 201103:
        return 14
    return 11


def cxx_standard(include):
    """The C++ standard the libtorch headers' #error guards ask for (std.go)."""
    best = MIN_STD
    for rel in STD_HEADERS:
        try:
            with open(os.path.join(include, rel), errors="replace") as f:
                lines = f.read().split("\n")
        except OSError:
            continue
        for i, l in enumerate(lines):
            m = GUARD.match(l)
            if not m:
                continue
            for t in lines[i + 1:i + 4]:
                t = t.strip()
                if t.startswith("#") and t[1:].strip().startswith("error"):
                    best = max(best, standard_of(int(m.group(1))))
                    break
                if t.startswith("#"):
                    break
    return best


def multiarch():
    try:
        out = subprocess.run(["gcc", "-print-multiarch"], capture_output=True, text=True).stdout.strip()
        if out:
            return out
    except OSError:
        pass
    return "x86_64-linux-gnu"


def header_version(include):
    path = os.path.join(include, "torch/csrc/api/include/torch/version.h")
    try:
        s = open(path).read()
    except OSError:
        return ""
    m = re.search(r'TORCH_VERSION\s*\\?\s*"([^"]+)"', s)
    if m:
        return m.group(1)
    parts = dict(re.findall(r"TORCH_VERSION_(MAJOR|MINOR|PATCH)\s+(\d+)", s))
    if "MAJOR" in parts:
        return "%s.%s.%s" % (parts["MAJOR"], parts.get("MINOR", "0"), parts.get("PATCH", "0"))
    return ""


def needed(path):
    try:
        out = subprocess.run(["readelf", "-d", path], capture_output=True, text=True).stdout
    except OSError:
        return []
    return re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", out)


def nvidia_libs(libdir):
    """A pip PyTorch's CUDA libraries (site-packages/nvidia/*/lib) and which
    of them libtorch needs, followed through each other (locate.go)."""
    torch_dir = os.path.dirname(libdir)
    if os.path.basename(torch_dir) != "torch":
        return [], []
    dirs = sorted(d for d in glob.glob(os.path.join(os.path.dirname(torch_dir), "nvidia", "*", "lib"))
                  if any(".so" in f for f in os.listdir(d)))
    where = {}
    for d in dirs:
        for f in sorted(os.listdir(d)):
            if f.startswith("lib") and ".so" in f:
                where.setdefault(f, d)
    queue = [os.path.join(libdir, "lib%s.so" % n) for n in ("torch", "torch_cpu", "c10", "torch_cuda", "c10_cuda")]
    libs, seen = [], set()
    while queue:
        for n in needed(queue.pop(0)):
            if n in where and n not in seen:
                seen.add(n)
                libs.append(n)
                queue.append(os.path.join(where[n], n))
    return dirs, sorted(libs)


class Libtorch:
    def __init__(self, args):
        import torch  # pylint: disable=import-outside-toplevel

        self.torch_version = torch.__version__
        tdir = os.path.dirname(torch.__file__)
        inc, lib = os.path.join(tdir, "include"), os.path.join(tdir, "lib")
        self.source = "python (%s)" % sys.executable
        debian_lib = "/usr/lib/" + multiarch()
        if not os.path.exists(os.path.join(inc, "torch/csrc/api/include/torch/torch.h")):
            inc, lib = "/usr/include", debian_lib
            self.source = "debian (python3's torch at %s has no headers)" % tdir
        elif os.path.dirname(os.path.realpath(os.path.join(lib, "libtorch_cpu.so"))) == debian_lib:
            # Debian's python3-torch links to libtorch-dev's libraries (and
            # python3-torch-cuda to libtorch-cuda-dev's, whose libtorch_cuda
            # only /usr/lib has): use libtorch-dev's folders, as gotchprep does.
            inc, lib = "/usr/include", debian_lib
            self.source = "debian (python3's torch at %s links to it)" % tdir
        self.include = args.include or inc
        self.libdir = args.libdir or lib
        if not os.path.exists(os.path.join(self.include, "torch/csrc/api/include/torch/torch.h")):
            raise SystemExit("devkit-libtch: no libtorch headers in %s" % self.include)
        if not os.path.exists(os.path.join(self.libdir, "libtorch_cpu.so")):
            raise SystemExit("devkit-libtch: no libtorch_cpu.so in %s" % self.libdir)
        self.version = header_version(self.include) or self.torch_version.split("+")[0]
        self.cuda = os.path.exists(os.path.join(self.libdir, "libtorch_cuda.so"))
        abi = getattr(torch._C, "_GLIBCXX_USE_CXX11_ABI", None)  # pylint: disable=protected-access
        if abi is None:
            nm = subprocess.run(["nm", "-D", "--defined-only", os.path.join(self.libdir, "libc10.so")],
                                capture_output=True, text=True).stdout
            abi = "__cxx11" in nm
        self.abi = int(bool(abi))
        self.std = cxx_standard(self.include)
        self.nv_dirs, self.nv_libs = nvidia_libs(self.libdir) if self.cuda else ([], [])

    def system(self, d):
        return d in ("/usr/include", "/usr/lib") or (d.startswith("/usr/lib/") and "/" not in d[len("/usr/lib/"):])

    def cxxflags(self):
        f = ["-std=c++%d" % self.std, "-fPIC", "-D_GLIBCXX_USE_CXX11_ABI=%d" % self.abi, "-I."]
        if not self.system(self.include):
            f.append("-I" + self.include)
        f.append("-I" + os.path.join(self.include, "torch/csrc/api/include"))
        return f

    def ldflags(self):
        f = []
        if not self.system(self.libdir):
            f += ["-L" + self.libdir, "-Wl,-rpath," + self.libdir]
        for d in self.nv_dirs:
            f += ["-L" + d, "-Wl,-rpath," + d]
        if self.nv_dirs:
            f.append("-Wl,--disable-new-dtags")
        f += ["-Wl,--no-as-needed", "-ltorch", "-ltorch_cpu", "-lc10"]
        if self.cuda:
            f += ["-ltorch_cuda", "-lc10_cuda"]
        f += ["-l:" + n for n in self.nv_libs]
        return f + ["-Wl,--as-needed", "-lstdc++"]

    def __str__(self):
        return "libtorch %s %s at %s (%s; torch %s, C++ ABI %d, -std=c++%d)" % (
            self.version, "CUDA" if self.cuda else "CPU", self.libdir, self.source, self.torch_version, self.abi, self.std)


def is_header(l):
    return bool(l) and l[0] != " " and "atg_" in l and l.endswith("{") and l.startswith(HEADER_TYPES)


def stub_functions(lines, at, version):
    """Replaces the PROTECT block of each function containing one of the
    (0-based) line indexes at, bottom-up (main.go's stubFunctions). Returns
    the new lines and the stubbed names."""
    spans = {}
    for ln in at:
        h = ln
        while h >= 0 and not is_header(lines[h]):
            h -= 1
        if h < 0:
            raise ValueError("line %d: no enclosing generated function" % (ln + 1))
        if h in spans:
            continue
        name = lines[h][lines[h].index("atg_"):]
        name = name[:name.index("(")]
        frm = next((i for i in range(h + 1, len(lines)) if lines[i].strip() == "PROTECT(" or lines[i].startswith("}")), None)
        if frm is None or lines[frm].startswith("}"):
            raise ValueError("%s has no PROTECT block" % name)
        to = frm + 1
        while to < len(lines) and lines[to] != "  )":
            to += 1
        if to == len(lines):
            raise ValueError("unterminated PROTECT block in %s" % name)
        spans[h] = (name, frm, to)
    names = []
    for name, frm, to in sorted(spans.values(), key=lambda s: -s[1]):
        msg = "%s is not available in the installed libtorch (libtorch %s); stubbed by optlab's devkit-libtch" % (name, version)
        stub = ["  // OPTLAB_STUB: the generated call does not compile against libtorch %s." % version,
                "  if (torch_last_err) free(torch_last_err);",
                '  torch_last_err = strdup("%s");' % msg,
                "#if 0 // original body"] + lines[frm:to + 1] + ["#endif"]
        lines = lines[:frm] + stub + lines[to + 1:]
        names.append(name)
    return lines, names


CHUNK_HEAD = '#include "pch.h"\n#include "torch_api_chunk.h"\n'


class Chunk:
    def __init__(self, idx, body):
        self.idx, self.body = idx, body  # body: the generated functions' lines
        self.name = "chunk%02d.cpp" % idx
        self.stubbed = []

    def text(self):
        return CHUNK_HEAD + "\n".join(self.body) + "\n"


def split_generated(text, n):
    lines = text.split("\n")
    starts = [i for i, l in enumerate(lines) if is_header(l)]
    if not starts:
        raise SystemExit("devkit-libtch: no generated functions found")
    bounds = [starts[0]]
    per = len(lines) / n
    for s in starts[1:]:
        if s - bounds[-1] >= per and len(bounds) < n:
            bounds.append(s)
    bounds.append(len(lines))
    head = lines[:starts[0]]
    chunks = []
    for i in range(len(bounds) - 1):
        body = lines[bounds[i]:bounds[i + 1]]
        if i == 0:
            body = head + body
        chunks.append(Chunk(i + 1, body))
    return chunks


def compile_one(build, name, flags, opt):
    obj = name[:-4] + ".o"
    cmd = ["g++", "-c", opt, "-w", "-fmax-errors=0"] + flags + [name, "-o", obj]
    p = subprocess.run(cmd, cwd=build, capture_output=True, text=True)
    return p.returncode == 0, p.stderr


def error_lines(stderr, fname):
    out = set()
    for l in stderr.split("\n"):
        i = l.find(fname + ":")
        if i < 0 or not (": error" in l or "required from here" in l):
            continue
        m = re.match(r"(\d+)", l[i + len(fname) + 1:])
        if m:
            out.add(int(m.group(1)))
    return sorted(out)


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    ap.add_argument("--kit", required=True, help="the unpacked kit (libtch/ sources in, lib/libtch.so out)")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--chunks", type=int, default=0, help="chunks of the generated wrappers (default: jobs, at least 2)")
    ap.add_argument("--opt", default=os.environ.get("DEVKIT_CXXOPT", "-O1"), help="g++ optimisation flag (-O1)")
    ap.add_argument("--include", help="libtorch's include folder (default: found from python's torch)")
    ap.add_argument("--libdir", help="libtorch's library folder")
    ap.add_argument("--force-stub", default="", help="comma-separated generated wrappers to stub although they compile "
                    "(for testing the used-op check, as gotchprep's -force-stub)")
    args = ap.parse_args(argv)
    t0 = time.time()
    src = os.path.join(args.kit, "libtch")
    build = os.path.join(args.kit, "libtch-build")
    out = os.path.join(args.kit, "lib")
    lt = Libtorch(args)
    log(str(lt))
    used = {}
    for l in open(os.path.join(src, "USED_OPS.txt")):
        f = l.rstrip("\n").split("\t")
        if f and f[0]:
            used[f[0]] = f[1:]
    shutil.rmtree(build, ignore_errors=True)
    os.makedirs(build)
    os.makedirs(out, exist_ok=True)
    for f in os.listdir(src):
        if f.endswith((".h", ".cpp")):
            shutil.copy(os.path.join(src, f), build)
    api_h = open(os.path.join(build, "torch_api.h")).read()
    decl = "thread_local char *torch_last_err = nullptr;"
    if decl not in api_h:
        raise SystemExit("devkit-libtch: torch_api.h does not define torch_last_err as expected; was gotch changed?")
    open(os.path.join(build, "torch_api_chunk.h"), "w").write(api_h.replace(decl, "extern thread_local char *torch_last_err;"))
    cpp = open(os.path.join(build, "torch_api.cpp")).read()
    inc = '#include "torch_api_generated.cpp.h"'
    if inc not in cpp:
        raise SystemExit("devkit-libtch: torch_api.cpp does not include the generated wrappers; was gotch changed?")
    # The headers every chunk needs, precompiled once: torch_api.cpp's own
    # includes of libtorch.
    pch = [l for l in cpp.split("\n") if l.startswith("#include <") or l.startswith('#include "ATen')]
    open(os.path.join(build, "pch.h"), "w").write("#pragma once\n" + "\n".join(pch) + "\n")
    open(os.path.join(build, "chunk00.cpp"), "w").write('#include "pch.h"\n' + cpp.replace(inc, "// (generated wrappers: the other chunks)"))
    gen = open(os.path.join(build, "torch_api_generated.cpp.h")).read()
    nchunks = args.chunks or max(2, args.jobs)
    chunks = split_generated(gen, nchunks)
    info = ['-DOPTLAB_LIBTORCH_VERSION="%s"' % lt.version, "-DOPTLAB_LIBTORCH_CUDA=%d" % int(lt.cuda),
            '-DOPTLAB_LIBTORCH_DIR="%s"' % lt.libdir]

    # The precompiled header; g++ names the standard the headers need when
    # the one read from their guards is too low.
    for _ in range(3):
        t = time.time()
        p = subprocess.run(["g++", "-x", "c++-header", args.opt, "-w"] + lt.cxxflags() + ["pch.h", "-o", "pch.h.gch"],
                           cwd=build, capture_output=True, text=True)
        if p.returncode == 0:
            log("precompiled header in %.0f s (-std=c++%d)" % (time.time() - t, lt.std))
            break
        need = max([int(v) for v in STD_ERROR.findall(p.stderr)] or [0])
        if need > lt.std:
            log("the libtorch headers need C++%d; compiling again with -std=c++%d" % (need, need))
            lt.std = need
            continue
        raise SystemExit("devkit-libtch: the libtorch headers do not compile:\n" + "\n".join(p.stderr.split("\n")[-40:]))
    flags = lt.cxxflags()

    for name in filter(None, args.force_stub.split(",")):
        hit = [(c, i) for c in chunks for i, l in enumerate(c.body) if is_header(l) and (" %s(" % name in l or "*%s(" % name in l)]
        if not hit:
            raise SystemExit("devkit-libtch: --force-stub: %s is not a generated wrapper" % name)
        c, i = hit[0]
        c.body, names = stub_functions(c.body, [i + 1], lt.version)
        c.stubbed += names
        log("stubbed %s as --force-stub asks" % name)
    for c in chunks:
        open(os.path.join(build, c.name), "w").write(c.text())
    todo = [("chunk00.cpp", None)] + [(c.name, c) for c in chunks]
    log("compiling %d chunks (%d generated), %d at a time, %s" % (len(todo), len(chunks), args.jobs, args.opt))
    for npass in range(1, 7):
        with concurrent.futures.ThreadPoolExecutor(max_workers=args.jobs) as ex:
            futs = {ex.submit(compile_one, build, name, flags + (info if c is None else []), args.opt): (name, c) for name, c in todo}
            results = [(futs[f], f.result()) for f in concurrent.futures.as_completed(futs)]
        again = []
        for (name, c), (ok, stderr) in sorted(results, key=lambda r: r[0][0]):
            if ok:
                continue
            if c is None:
                raise SystemExit("devkit-libtch: the hand-written wrapper (torch_api.cpp) does not compile against %s:\n%s"
                                 % (lt, "\n".join(stderr.split("\n")[-40:])))
            head = CHUNK_HEAD.count("\n")
            at = [n - 1 - head for n in error_lines(stderr, name)]
            at = [a for a in at if a >= 0]
            if not at:
                raise SystemExit("devkit-libtch: %s does not compile, and not because of generated ops:\n%s"
                                 % (name, "\n".join(stderr.split("\n")[-40:])))
            c.body, names = stub_functions(c.body, at, lt.version)
            c.stubbed += names
            log("pass %d: %s: stubbed %d: %s" % (npass, name, len(names), " ".join(names)))
            open(os.path.join(build, name), "w").write(c.text())
            again.append((name, c))
        if not again:
            break
        todo = again
    else:
        raise SystemExit("devkit-libtch: chunks still do not compile after 6 stub passes")
    stubbed = sorted(n for c in chunks for n in c.stubbed)
    with open(os.path.join(out, "STUBBED_OPS.txt"), "w") as f:
        f.write("".join(n + "\n" for n in stubbed))
    bad = [n for n in stubbed if n in used]
    if bad:
        msg = ["devkit-libtch: %d op(s) that optlab uses were stubbed (they do not compile against libtorch %s%s):"
               % (len(bad), lt.version, ", or --force-stub asked" if args.force_stub else "")]
        for n in bad:
            msg.append("  %s, called as %s" % (n, " at ".join(used[n])))
        raise SystemExit("\n".join(msg))
    objs = ["chunk00.o"] + [c.name[:-4] + ".o" for c in chunks]
    so = os.path.join(out, "libtch.so")
    p = subprocess.run(["g++", "-shared", "-o", so, "-Wl,-soname,libtch.so"] + objs + lt.ldflags(),
                       cwd=build, capture_output=True, text=True)
    if p.returncode != 0:
        raise SystemExit("devkit-libtch: linking libtch.so failed:\n" + p.stderr[-4000:])
    defined = set(subprocess.run(["nm", "-D", "--defined-only", so], capture_output=True, text=True).stdout.split())
    missing = [s for s in open(os.path.join(src, "SYMBOLS.txt")).read().split() if s not in defined]
    if missing:
        raise SystemExit("devkit-libtch: libtch.so lacks %d exported functions: %s" % (len(missing), " ".join(missing[:20])))
    print("libtch.so for %s: %d chunks on %d jobs, %d ops stubbed (none that optlab uses), %.0f s"
          % (lt, len(objs), args.jobs, len(stubbed), time.time() - t0), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
