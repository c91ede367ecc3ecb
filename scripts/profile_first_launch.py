"""Where a kernel's first launch in a fresh process spends kaio's Python time, with no GPU.

    python scripts/profile_first_launch.py [--kernel saxpy|softmax] [--runs 5] [--profile]

kaio's whole CUDA backend runs on ``scripts/stub_libcuda.c`` (built with gcc into a temporary
folder and put first on ``LD_LIBRARY_PATH``: a libcuda that answers as one sm_90 device and runs
nothing), so every figure is kaio's (and cuda.bindings') host work, never the driver's. Each run
is a fresh process sharing one new compile-cache directory:

- *cold*: the first process (imports of the code generators, frontend, passes, PTX, cache
  writes), with the time of each compile stage and of the kaio modules imported during the call
  (``-X importtime``);
- *warm*: the later processes (the warm disk cache), with the time of each step of the warm
  path (exclusive of the steps inside it), the files the call opened or listed, and the modules
  it imported (none: a cache hit needs neither the frontend nor a code generator).

``--profile`` adds cProfile's top functions of one warm first call (cProfile slows Python-heavy
steps 1.5-3x: use it to find them, the timed table to size them). kaio's modules are
byte-compiled first (``compileall``, as ``pip install`` does). Local, CPU-side figures: the
driver's own work (module load, launch) is absent by construction.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

_CHILD = r'''
import json, sys, time
import numpy as np
import kaio
from kaio import f32
kernel_name, mode = sys.argv[1], sys.argv[2]


@kaio.kernel
def saxpy(a: f32, x: kaio.In[f32], y: kaio.Region[f32]):
    for i in y.owned():
        y[i] = a * x[i] + y[i]


parts = {}
%TIMED%

from kaio import cache, launch, warm
from kaio.backends import cuda, cuda_cubin, cuda_planned
for owner, name, label in [
        (warm, "package_stamp", "warm key: package stamp"),
        (warm, "function_key", "warm key: function fingerprint"),
        (warm, "warm_key", "warm key: the rest"),
        (cache.CompileCache, "get", "cache reads (verified)"),
        (warm, "kernel_from_json", "entry: signature from JSON"),
        (warm, "lookup", "entry: the rest"),
        (cuda.CudaBackend, "load_ptx", "load: kaio's (key, ABI, packer)"),
        (cuda_cubin, "load_module", "load: cubin lookup"),
        (launch, "plan_launch", "launch checks + plan"),
        (cuda_planned.PlannedLaunch, "_compile", "planned launch: compile()"),
        (launch._BoundLaunch, "remember", "planned launch: the rest"),
        (cuda.CudaBackend, "_launch", "launch (full path)")]:
    timed(owner, name, label)
if mode == "cold-imported":   # the compile's own work: its modules imported beforehand
    import kaio.backends.ptx, kaio.frontend, kaio.frontend.coarsen, kaio.passes  # noqa: F401,E401
    kaio.passes._import_passes()
if mode.startswith("cold"):
    from kaio.backends import targets
    for owner, name, label in [(warm, "compile_kernel", "compile: the rest"),
                               (launch.KernelFunction, "coarsening", "compile: coarsening analysis"),
                               (launch.KernelFunction, "specialize_ir", "compile: frontend (parse, "
                                "lower, regions proof, fold)"),
                               (targets, "lower", "compile: target passes"),
                               (targets, "_ptx", "compile: PTX emission"),
                               (cache, "compiler_fingerprint", "compile: compiler fingerprint"),
                               (warm, "store", "compile: warm entry store")]:
        timed(owner, name, label)
    # the stages hold their functions: point them at the timed ones
    targets.TARGETS = {n: t.__class__(t.name, t.family, t.warp_size, t.codegen, tuple(
        s.__class__(s.name, s.needs, getattr(targets, s.run.__name__, s.run), s.binary, s.doc)
        for s in t.stages), t.loads) for n, t in targets.TARGETS.items()}
kaio.set_backend("cuda")
kaio.get_backend()
if kernel_name == "saxpy":
    k, args = saxpy, (2.0, np.ones(1024, np.float32), np.zeros(1024, np.float32))
else:
    from kaio.kernels.ml.norms import softmax_kernel
    x = np.ones((8, 64), np.float32)
    k, args = softmax_kernel("f32", "f32"), (x, np.empty_like(x))
args = tuple(kaio.to_device(a) if isinstance(a, np.ndarray) else a for a in args)
kaio.synchronize()
parts.clear()
opened = []
sys.addaudithook(lambda ev, a: opened.append(f"{ev} {a[0]}")
                 if ev in ("open", "os.scandir", "os.listdir") else None)
before = set(sys.modules)
print("--- first call", file=sys.stderr, flush=True)   # -X importtime: what follows is the call's
if mode == "profile":
    import cProfile
    prof = cProfile.Profile()
    prof.enable()
t, c = time.perf_counter(), time.process_time()
k(*args)
kaio.synchronize()
first, first_cpu = time.perf_counter() - t, time.process_time() - c
if mode == "profile":
    prof.disable()
first_parts = dict(parts)   # the first call's (the second makes the plan's fast function)
new = sorted(set(sys.modules) - before)
n_opened = len(opened)
t = time.perf_counter()
k(*args)
kaio.synchronize()
second = time.perf_counter() - t
out = {"first_ms": first * 1e3, "first_cpu_ms": first_cpu * 1e3, "second_ms": second * 1e3, "parts_ms":
       {n: v * 1e3 for n, v in first_parts.items()}, "opened": opened[:n_opened], "imported": new}
if mode == "profile":
    import pstats
    st = pstats.Stats(prof).stats
    out["profile"] = [(v[3] * 1e3, v[2] * 1e3, v[1], f"{k[0]}:{k[1]}({k[2]})")
                      for k, v in sorted(st.items(), key=lambda kv: -kv[1][3])[:40]]
print(json.dumps(out))
'''


def build_stub(tmp: str) -> dict:
    lib = os.path.join(tmp, "libcuda.so.1")
    subprocess.run(["gcc", "-O2", "-shared", "-fPIC", "-o", lib,
                    os.path.join(ROOT, "scripts", "stub_libcuda.c")], check=True)
    env = dict(os.environ, KAIO_CACHE_DIR=os.path.join(tmp, "cache"), KAIO_AUTOTUNE="0",
               KAIO_PROGRESS="0")
    env.pop("KAIO_CACHE_DISABLE", None)
    env.pop("KAIO_BACKEND", None)
    env["LD_LIBRARY_PATH"] = os.pathsep.join(p for p in (tmp, env.get("LD_LIBRARY_PATH")) if p)
    return env


def run_child(script: str, kernel: str, mode: str, env: dict, importtime: bool = False) -> dict:
    cmd = [sys.executable, *(["-X", "importtime"] if importtime else []), script, kernel, mode]
    p = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if p.returncode != 0:
        raise RuntimeError(f"child failed ({kernel}, {mode}):\n{p.stderr[-3000:]}")
    out = json.loads(p.stdout.strip().splitlines()[-1])
    if importtime:
        out["imports_us"] = _imports_after_mark(p.stderr)
    return out


def _imports_after_mark(stderr: str) -> list:
    """(self us, cumulative us, module) of the modules imported during the first call."""
    lines = stderr.split("--- first call", 1)[-1].splitlines()
    rows = []
    for line in lines:
        if not line.startswith("import time:") or "|" not in line:
            continue
        fields = [f.strip() for f in line.split(":", 1)[1].split("|")]
        if fields[0].isdigit():
            rows.append((int(fields[0]), int(fields[1]), fields[2]))
    return rows


def _median_run(runs: list) -> dict:
    """The runs' median of every figure and part (the first run's file and module lists)."""
    out = dict(runs[0])
    for f in ("first_ms", "first_cpu_ms", "second_ms"):
        out[f] = statistics.median(r[f] for r in runs)
    names = {n for r in runs for n in r["parts_ms"]}
    out["parts_ms"] = {n: statistics.median(r["parts_ms"].get(n, 0.0) for r in runs) for n in names}
    return out


def table(title: str, parts: dict) -> str:
    rows = sorted(parts.items(), key=lambda kv: -kv[1])
    return (f"\n{title}\n\n| part | ms |\n|---|---|\n" +
            "".join(f"| {n} | {v:.3f} |\n" for n, v in rows) +
            f"| (sum) | {sum(parts.values()):.3f} |\n")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kernel", default="saxpy", choices=("saxpy", "softmax"))
    ap.add_argument("--runs", type=int, default=5, help="warm processes (median)")
    ap.add_argument("--cold-runs", type=int, default=3, help="cold processes (median)")
    ap.add_argument("--profile", action="store_true", help="cProfile one warm first call")
    a = ap.parse_args(argv)
    tmp = tempfile.mkdtemp(prefix="kaio-first-launch-")
    env = build_stub(tmp)
    # kaio's modules byte-compiled, as pip does on install (under PYTHONDONTWRITEBYTECODE=1 an
    # edited module is otherwise compiled from source in every process, and its import looks slow)
    subprocess.run([sys.executable, "-m", "compileall", "-q", *(os.path.join(ROOT, d) for d in (
        "kaio_core", "backends", "regions", "kernels"))], check=False, capture_output=True)
    script = os.path.join(tmp, "first_launch_child.py")   # kernels need a file to read
    sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
    from bench_startup import TIMED  # the same exclusive timers as the start-up benchmark
    with open(script, "w") as f:
        f.write(_CHILD.replace("%TIMED%", TIMED))
    colds, colds_imported = [], []
    for r in range(a.cold_runs):   # each in a new, empty cache
        colds.append(run_child(script, a.kernel, "cold", dict(
            env, KAIO_CACHE_DIR=os.path.join(tmp, f"cache-cold-{r}")), importtime=True))
        colds_imported.append(run_child(script, a.kernel, "cold-imported", dict(
            env, KAIO_CACHE_DIR=os.path.join(tmp, f"cache-imported-{r}"))))
    cold, cold_imported = _median_run(colds), _median_run(colds_imported)
    run_child(script, a.kernel, "cold", env)   # fills the cache the warm runs read
    warms = [run_child(script, a.kernel, "warm", env) for _ in range(a.runs)]
    warm = _median_run(warms)
    med = warm["parts_ms"]
    print(f"{a.kernel}: local CPU-side figures on the libcuda stub (no driver work; medians of "
          f"{a.cold_runs} cold and {a.runs} warm processes)\n")
    print(f"cold first call {cold['first_ms']:.1f} ms ({cold['first_cpu_ms']:.1f} ms CPU), with "
          f"its modules imported beforehand {cold_imported['first_ms']:.1f} ms; warm first call "
          f"{warm['first_ms']:.3f} ms ({warm['first_cpu_ms']:.3f} ms CPU), second call "
          f"{warm['second_ms']:.3f} ms")
    print(table("Cold first call, by part (ms; each part includes the modules it imports):",
                cold["parts_ms"]))
    print(table("Cold first call with its modules imported beforehand (the compile's own work), "
                "by part (ms):", cold_imported["parts_ms"]))
    mods = sorted(cold["imports_us"], key=lambda r: -r[0])
    print(f"Modules imported by the cold call: {len(mods)}, "
          f"{sum(r[0] for r in mods) / 1e3:.1f} ms in all (self times); the largest:")
    for s, _, m in mods[:12]:
        print(f"  {s / 1e3:6.2f} ms  {m.strip()}")
    print(table("Warm first call, by part (median ms):", med))
    w = warms[0]
    print(f"Warm call: {len(w['opened'])} files opened or listed; modules imported: "
          f"{w['imported'] or 'none'}")
    for o in w["opened"]:
        print("  ", o)
    if a.profile:
        p = run_child(script, a.kernel, "profile", env)
        print("\ncProfile of one warm first call (cumulative ms, own ms, calls, function):")
        for cum, own, n, fn in p["profile"]:
            print(f"  {cum:7.3f} {own:7.3f} {n:5d} {fn.replace(ROOT + os.sep, '')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
