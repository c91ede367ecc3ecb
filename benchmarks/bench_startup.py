"""Start-up costs: ``import kaio`` and a kernel's first launch in a fresh process.

    python benchmarks/bench_startup.py [--backend cuda|hip|reference|stub|stub-driver] [--runs 5]
                                       [--installed] [--kaio DIR] [--out DIR]

Each figure comes from a fresh Python process (so nothing is in memory), all sharing one new,
empty compile-cache directory (``KAIO_CACHE_DIR``):

- ``import kaio``: the import alone, timed inside the child;
- the first launch of a user kernel (saxpy) and of a library kernel (the general softmax),
  timed from the call until the result is synchronized, minus the same launch's third call (a
  repeated launch): *cold* (the first process: frontend, passes, code generation, cache
  writes) and *warm* (later processes: the compile cache on disk, docs/performance.md
  "Start-up"); and what the second call costs beyond the third (the CUDA backend compiles the
  plan's fast launch function then: kaio.launch's ``_second_launch``);
- the process from start to after the first launch, measured by the parent;
- where the warm processes' time goes (median, each part exclusive of the others): importing
  numpy, ml_dtypes, kaio, kaio's CUDA backend and cuda.bindings; ``cuInit``; the context (the
  driver's calls apart from kaio's work); per first launch the warm key, the cache reads with
  the signature and kaio's part of loading (rows starting "-" are parts of these two: the
  package stamp, the function's fingerprint, the signature, the verified cache reads), the
  driver's module load, other driver calls, the first signature's launch checks and plan, the
  ``compile()`` of the planned launch's guarded function, and the rest (the launch) beyond
  what a repeated launch costs.

Before measuring, kaio's modules are byte-compiled (``compileall``, what ``pip install`` does for
a package it installs): an editable install under ``PYTHONDONTWRITEBYTECODE=1`` otherwise compiles
every kaio module from source in every process (2-3x the import time on the development
machine). ``--as-is`` measures the tree as it is (the table's header says which).
``--installed`` measures kaio as a wheel installs it (``pip install --target``), whose warm key
stamps one file (the dist-info RECORD) instead of every source file.

``--backend stub``: no GPU needed. The kernels are compiled for sm_90 through the CUDA
backend's stages by a stand-in backend whose loader does nothing, so the first "launch" is the
time from the call until the PTX is available (what the warm cache saves, without the driver).
``--backend stub-driver``: no GPU needed either. kaio's CUDA backend runs whole -- cuda.bindings,
``cuInit``, the context, module loads, launches -- on ``scripts/stub_libcuda.c`` (built with gcc
into the run's folder and put first on ``LD_LIBRARY_PATH``), a libcuda that answers as one sm_90
device and runs nothing: kaio's and cuda.bindings' host work without the driver's.
Prints a table; ``--out DIR`` also writes DIR/startup.md and DIR/startup.json.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

#: ``timed(owner, name, label)``, for a child script that keeps its parts in a dict ``parts``:
#: wraps ``owner.name`` so that its calls add their own time, exclusive of the other timed
#: calls inside them, to ``parts[label]`` (scripts/profile_first_launch.py uses it too)
TIMED = r'''
import time as _time
inner = [0.0]   # time of the timed calls inside the one running: each part is exclusive


def timed(owner, name, label):
    f = getattr(owner, name)
    static = isinstance(owner, type) and isinstance(owner.__dict__.get(name), staticmethod)

    def w(*a, **k):
        t = _time.perf_counter()
        inner.append(0.0)
        try:
            return f(*a, **k)
        finally:
            took = _time.perf_counter() - t
            parts[label] = parts.get(label, 0.0) + took - inner.pop()
            inner[-1] += took
    setattr(owner, name, staticmethod(w) if static else w)
'''

_CHILD = r'''
import json, sys, time
t0, c0 = time.perf_counter(), time.process_time()
import numpy as np
t_numpy = time.perf_counter() - t0
try:
    import ml_dtypes  # noqa: F401  (kaio imports it; timed apart: it is not kaio's)
except ImportError:
    pass
t_ml = time.perf_counter() - t0 - t_numpy
import kaio
t_import, c_import = time.perf_counter() - t0, time.process_time() - c0
from kaio import f32
backend, kernel_name = sys.argv[1], sys.argv[2]
parts = {"import numpy": t_numpy, "import ml_dtypes": t_ml,
         "import kaio (its own)": t_import - t_numpy - t_ml}


%TIMED%


@kaio.kernel
def saxpy(a: f32, x: kaio.In[f32], y: kaio.Region[f32]):
    for i in y.owned():
        y[i] = a * x[i] + y[i]

def make():
    if kernel_name == "saxpy":
        n = 1 << 10 if backend in ("reference", "stub", "stub-driver") else 1 << 20
        x, y = np.ones(n, np.float32), np.zeros(n, np.float32)
        return saxpy, (2.0, x, y)
    from kaio.kernels.ml.norms import softmax_kernel
    rows, cols = (8, 64) if backend in ("reference", "stub", "stub-driver") else (4096, 1024)
    x = np.random.default_rng(0).standard_normal((rows, cols)).astype(np.float32)
    return softmax_kernel("f32", "f32"), (x, np.empty_like(x))

from kaio import warm
timed(warm, "warm_key", "first launch: warm key")
timed(warm, "lookup", "first launch: cache read, signature, kaio's load")
# the parts of those, and the first signature's checks (each part exclusive of the others; a
# function an older checkout lacks is skipped)
from kaio import cache as kcache, launch as klaunch
for owner, name, label in [
        (warm, "package_stamp", "first launch: - warm key: package stamp (its import-time thread)"),
        (warm, "function_key", "first launch: - warm key: function fingerprint"),
        (warm, "kernel_from_json", "first launch: - signature from JSON"),
        (kcache.CompileCache, "get", "first launch: - cache reads (verified)"),
        (klaunch, "plan_launch", "first launch: launch checks + plan (once per signature)")]:
    if hasattr(owner, name):
        timed(owner, name, label)
cuda = backend in ("cuda", "stub-driver")
if cuda:   # the driver's own calls, apart from kaio's work around them
    t = time.perf_counter()
    from kaio.backends import cuda as kcuda, cuda_driver as drv
    parts["start: import kaio's CUDA backend"] = time.perf_counter() - t
    t = time.perf_counter()
    try:
        from cuda.bindings import driver as _d  # noqa: F401
    except ImportError:
        pass
    parts["start: import cuda.bindings"] = time.perf_counter() - t
    t = time.perf_counter()
    drv.probe()
    parts["start: cuInit + device count"] = time.perf_counter() - t
    timed(drv, "call", "driver calls")
    try:   # the guarded launch function a plan compiles from source (absent in older checkouts)
        from kaio.backends import cuda_planned
        timed(cuda_planned.PlannedLaunch, "_compile",
              "first launch: planned launch: compile() of its guarded function")
    except ImportError:
        pass
    load = "first launch: module load (driver: cubin, or PTX)"
    timed(kcuda, "load_module", load)
    try:   # the cached cubin's load (kaio.backends.cuda_cubin; absent in older checkouts)
        from kaio.backends import cuda_cubin
        timed(cuda_cubin, "_load_image", load)
    except ImportError:
        pass
if backend == "stub":
    from kaio.backends import Backend
    from kaio.backends.targets import get_target

    class Stub(Backend):
        # sm_90 PTX through the CUDA stages; loading and launching do nothing
        name = "stub"
        def compile_options(self, kernel_options=None):
            return get_target("sm_90").options(kernel_options, ptx_version="8.0")

    stub = Stub()
    k, args = make()
    t, c = time.perf_counter(), time.process_time()
    k._compile(stub, {}, True)       # what k(args) compiles: kaio picks the launch shape
    first, first_cpu = time.perf_counter() - t, time.process_time() - c
    second = again = 0.0
    init = 0.0
else:
    t = time.perf_counter()
    kaio.set_backend("cuda" if cuda else backend)
    kaio.get_backend()               # the driver and the context (cuInit, cuCtx...)
    init = time.perf_counter() - t
    if cuda:
        parts["start: context (driver calls)"] = parts.pop("driver calls", 0.0)
        parts["start: kaio's own"] = init - parts["start: context (driver calls)"]
        init += sum(v for n, v in parts.items() if n.startswith("start: import")
                    ) + parts["start: cuInit + device count"]
    k, args = make()
    if backend != "reference":
        args = tuple(kaio.to_device(a) if isinstance(a, np.ndarray) else a for a in args)
    parts.pop("driver calls", None)
    t, c = time.perf_counter(), time.process_time()
    k(*args)
    kaio.synchronize()
    first, first_cpu = time.perf_counter() - t, time.process_time() - c
    if cuda:
        parts["first launch: other driver calls"] = parts.pop("driver calls", 0.0)
    kept = dict(parts)   # the first call's parts (the timers go on adding up)
    times = []
    for _ in range(2):   # the second call (which makes the plan's fast function), a repeated one
        t = time.perf_counter()
        k(*args)
        kaio.synchronize()
        times.append(time.perf_counter() - t)
    parts.clear()
    parts.update(kept)
    again, second = times[0] - times[1], times[1]
launch_parts = [v for n, v in parts.items() if n.startswith("first launch:")]
# what else the first call did beyond what a repeated launch (the third call) does
parts["first launch: the rest (launch, ...)"] = first - second - sum(launch_parts)
print(json.dumps({"import_ms": t_import * 1e3, "init_ms": init * 1e3, "first_ms": (first - second) * 1e3,
                  "launch_ms": second * 1e3, "second_extra_ms": again * 1e3,
                  "process_to_launch_ms": (time.perf_counter() - t0) * 1e3,
                  "import_cpu_ms": c_import * 1e3, "first_cpu_ms": first_cpu * 1e3,
                  "process_to_launch_cpu_ms": (time.process_time() - c0) * 1e3,
                  "parts_ms": {n: v * 1e3 for n, v in parts.items()}}))
'''


def child(script: str, backend: str, kernel: str, env: dict) -> dict:
    t = time.perf_counter()
    p = subprocess.run([sys.executable, script, backend, kernel], env=env,
                       capture_output=True, text=True)
    wall = (time.perf_counter() - t) * 1e3
    if p.returncode != 0:
        raise RuntimeError(f"child failed ({backend}, {kernel}):\n{p.stderr[-3000:]}")
    out = json.loads(p.stdout.strip().splitlines()[-1])
    out["process_ms"] = wall
    return out


def import_only(env: dict) -> tuple:
    """(wall ms, CPU ms) of ``import kaio`` in a fresh process."""
    code = ("import time; t, c = time.perf_counter(), time.process_time(); import kaio; "
            "print((time.perf_counter() - t) * 1e3, (time.process_time() - c) * 1e3)")
    p = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                       check=True)
    return tuple(map(float, p.stdout.split()))


def precompile(env: dict) -> str:
    """Byte-compile the folders the children import kaio from; the header's bytecode note."""
    code = ("import kaio, kaio.backends, kaio.regions, kaio.kernels\n"
            "for m in (kaio, kaio.backends, kaio.regions, kaio.kernels):\n"
            "    print(*m.__path__, sep='\\n')")
    p = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                       check=True)
    dirs = sorted(set(p.stdout.split("\n")) - {""})
    c = subprocess.run([sys.executable, "-m", "compileall", "-q", *dirs], env=env,
                       capture_output=True, text=True)
    return "bytecode precompiled" if c.returncode == 0 else "bytecode: compileall failed"


def install(tree: str, tmp: str, env: dict) -> str:
    """pip-install the kaio source ``tree`` into ``tmp``/site (no dependencies, no build
    isolation: nothing is downloaded) and return that folder."""
    site = os.path.join(tmp, "site")
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps",
                    "--no-build-isolation", "--target", site, os.path.abspath(tree)],
                   env=env, check=True, capture_output=True)
    return site


def stub_driver(tmp: str, env: dict) -> None:
    """Build scripts/stub_libcuda.c into ``tmp`` and put it first on ``env``'s library path:
    the children's CUDA backend then runs on a libcuda that answers as an sm_90 device and
    does nothing (docs/performance.md, "Start-up")."""
    src = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "scripts", "stub_libcuda.c")
    lib = os.path.join(tmp, "libcuda.so.1")
    subprocess.run(["gcc", "-O2", "-shared", "-fPIC", "-o", lib, src], check=True)
    env["LD_LIBRARY_PATH"] = os.pathsep.join(p for p in (tmp, env.get("LD_LIBRARY_PATH")) if p)


_ORDER = ["first launch: warm key", "first launch: - warm key: package stamp (its import-time thread)",
          "first launch: - warm key: function fingerprint",
          "first launch: cache read, signature, kaio's load", "first launch: - cache reads (verified)",
          "first launch: - signature from JSON", "first launch: module load (driver: cubin, or PTX)",
          "first launch: other driver calls",
          "first launch: launch checks + plan (once per signature)",
          "first launch: planned launch: compile() of its guarded function",
          "first launch: the rest (launch, ...)"]


def breakdown(kernels: dict) -> str:
    """The warm processes' parts (median ms): the one-time start, then each kernel's first
    launch; the driver's rows apart from kaio's."""
    first = next(iter(kernels.values()))["warm_median"]["parts_ms"]
    start = [(n, v) for n, v in first.items() if not n.startswith("first launch:")]
    out = ("\nWhere the time goes, warm cache (median ms of the warm processes; cuda.bindings, "
           "cuInit, module load and driver calls are NVIDIA's, the rest kaio's; a row starting "
           "'-' is a part of the nearest row above it without one, which shows its rest):\n\n"
           "| part | " + " | ".join(kernels) + " |\n|---|" + "---|" * len(kernels) + "\n")
    out += "".join(f"| {n} | {v:.2f} |" + " |" * (len(kernels) - 1) + "\n" for n, v in start)
    # each part after the row it is part of (that row shows the rest of it)
    names = sorted((n for n in first if n.startswith("first launch:")),
                   key=lambda n: _ORDER.index(n) if n in _ORDER else len(_ORDER))
    for n in names:
        out += (f"| {n} | " + " | ".join(f"{k['warm_median']['parts_ms'].get(n, 0.0):.3f}"
                                         for k in kernels.values()) + " |\n")
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--backend", default=os.environ.get("KAIO_BACKEND", "cuda"),
                    help="cuda, hip, reference, stub (sm_90 PTX, no GPU: time to the PTX) or "
                         "stub-driver (the CUDA backend on scripts/stub_libcuda.c, built with gcc)")
    ap.add_argument("--runs", type=int, default=5, help="warm processes per kernel (median)")
    ap.add_argument("--out", help="folder for startup.md and startup.json")
    ap.add_argument("--kaio", help="measure this source checkout instead (a folder named kaio, "
                                   "e.g. an earlier commit: git archive REV | tar -x -C DIR/kaio)")
    ap.add_argument("--kernels", default="saxpy,softmax",
                    help="which first launches to measure (comma-separated: saxpy, softmax)")
    ap.add_argument("--installed", action="store_true",
                    help="measure kaio installed (pip install --target, no build isolation: the "
                         "layout a wheel gives, whose warm key stamps one RECORD file instead of "
                         "every source file)")
    ap.add_argument("--as-is", action="store_true",
                    help="do not byte-compile kaio first (under PYTHONDONTWRITEBYTECODE=1 and "
                         "without .pyc files every process compiles kaio from source)")
    a = ap.parse_args(argv)
    tmp = tempfile.mkdtemp(prefix="kaio-startup-")
    env = dict(os.environ, KAIO_CACHE_DIR=os.path.join(tmp, "cache"), KAIO_AUTOTUNE="0",
               KAIO_PROGRESS="0")
    script = os.path.join(tmp, "startup_child.py")   # kernels need a file: kaio reads their source
    with open(script, "w") as f:
        f.write(_CHILD.replace("%TIMED%", TIMED))
    env.pop("KAIO_CACHE_DISABLE", None)
    if a.backend == "stub-driver":
        stub_driver(tmp, env)
    if a.installed:   # as a wheel installs it: site/kaio and site/kaio-VERSION.dist-info
        env["PYTHONPATH"] = install(a.kaio or os.path.join(os.path.dirname(__file__), ".."), tmp,
                                    env)
    elif a.kaio:   # the checkout's parent first on the path: `import kaio` finds the checkout
        env["PYTHONPATH"] = os.path.dirname(os.path.abspath(a.kaio))
    bytecode = ("bytecode as found (PYTHONDONTWRITEBYTECODE="
                f"{env.get('PYTHONDONTWRITEBYTECODE', '')!r})") if a.as_is else precompile(env)
    both = [import_only(env) for _ in range(a.runs)]
    imports, import_cpu = sorted(w for w, _ in both), sorted(c for _, c in both)
    rows = [("import kaio", "", f"{statistics.median(imports):.1f}", "", "")]
    report = {"backend": a.backend, "bytecode": bytecode, "import_ms": imports, "kernels": {}}
    for kernel in a.kernels.split(","):
        cold = child(script, a.backend, kernel, env)
        warm = [child(script, a.backend, kernel, env) for _ in range(a.runs)]
        med = {f: statistics.median(w[f] for w in warm) for f in warm[0] if f != "parts_ms"}
        med["parts_ms"] = {n: statistics.median(w["parts_ms"].get(n, 0.0) for w in warm)
                           for n in warm[0]["parts_ms"]}
        report["kernels"][kernel] = {"cold": cold, "warm": warm, "warm_median": med}
        rows.append((f"{kernel}: first launch", f"{cold['first_ms']:.1f}", f"{med['first_ms']:.2f}",
                     f"{cold['process_to_launch_ms']:.0f}", f"{med['process_to_launch_ms']:.0f}"))
        if a.backend != "stub":   # (which has no second call)
            rows.append((f"{kernel}: second launch, beyond a repeated one",
                         f"{cold['second_extra_ms']:.2f}", f"{med['second_extra_ms']:.2f}", "", ""))
    rows.append(("backend start (set_backend + get_backend)", "", f"{med['init_ms']:.1f}", "", ""))
    layout = "kaio installed (pip --target)" if a.installed else "kaio from its source tree"
    head = (f"Start-up on backend {a.backend} (ms; warm: median of {a.runs} fresh processes; "
            f"first launch: first call minus third call; {layout}; {bytecode})\n\n"
            "| what | cold cache | warm cache | process to launch, cold | process to launch, warm |\n"
            "|---|---|---|---|---|\n")
    table = head + "".join(f"| {' | '.join(r)} |\n" for r in rows)
    cpu = {k: v["warm_median"] for k, v in report["kernels"].items()}
    table += (f"\nCPU time (a loaded machine's wall times vary; median): import kaio "
              f"{statistics.median(import_cpu):.1f} ms; process to launch, warm: " +
              ", ".join(f"{k} {m['process_to_launch_cpu_ms']:.0f} ms" for k, m in cpu.items()) +
              "; the first call, warm: " +
              ", ".join(f"{k} {m['first_cpu_ms']:.2f} ms" for k, m in cpu.items()) +
              "\n")
    report["import_cpu_ms"] = import_cpu
    table += breakdown(report["kernels"])
    print(table)
    if a.out:
        os.makedirs(a.out, exist_ok=True)
        with open(os.path.join(a.out, "startup.md"), "w") as f:
            f.write(table)
        with open(os.path.join(a.out, "startup.json"), "w") as f:
            json.dump(report, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
