"""Per-launch host overhead: kaio vs a raw ``cuLaunchKernel`` through cuda.bindings.

Both launch the same PTX (the one kaio emits for a one-store kernel) on the same device
buffer, back to back without synchronizing, so the wall time per launch is the host-side cost
of issuing it. Prints a table and one JSON line. Needs an NVIDIA GPU.

    python scripts/bench_launch_overhead.py [--launches 20000] [--fake]

``--fake`` needs no GPU: it runs against the fake driver of tests/test_cuda_runtime_fake.py with
a ``cuLaunchKernel`` that does nothing, so the rows are kaio's own Python cost per launch (CPU
time, which other load on the machine disturbs less than wall time). Where cuda.bindings can load
a libcuda that does nothing (scripts/stub_libcuda.c: ``LD_LIBRARY_PATH=DIR``), that launch is
cuda.bindings' own ``cuLaunchKernel``, so the rows include its per-call argument handling as on a
GPU (the argument forms kaio passes cost what they cost there).

:func:`setup`, :func:`kaio_cases` and :func:`measure` are shared with scripts/bench_cuda_core.py.
"""
from __future__ import annotations

import argparse
import json
import time
from dataclasses import dataclass

import numpy as np

import kaio
from kaio import f32


@kaio.kernel
def touch(y: kaio.Raw[f32], v: f32):
    if kaio.global_id() == 0:
        y[0] = v


@dataclass
class Case:
    """One timed operation: ``fn`` called ``n`` times per round; the figure is per call divided
    by ``per`` (e.g. the launches in one graph replay)."""

    fn: object
    n: int
    per: int = 1
    warmup: int = 200


def measure(cases: dict, sync, rounds: int = 3, errors: dict | None = None,
            clock=time.perf_counter) -> dict:
    """Best-of-``rounds`` microseconds per operation for each case. The cases take turns within
    each round, so a machine that speeds up or slows down over the run (clocks, other load)
    biases every row alike. A case that raises is dropped and, with ``errors``, reported there."""
    live = dict(cases)
    for name, c in list(live.items()):
        try:
            for _ in range(c.warmup):  # module loads, allocator, caches
                c.fn()
            sync()
        except Exception as e:  # one unsupported operation must not hide the others
            if errors is None:
                raise
            errors[name] = f"{type(e).__name__}: {e}"
            del live[name]
    best = {name: float("inf") for name in live}
    for _ in range(rounds):
        for name, c in live.items():
            t0 = clock()
            for _ in range(c.n):
                c.fn()
            sync()
            best[name] = min(best[name], (clock() - t0) / c.n / c.per * 1e6)
    return best


@dataclass
class Setup:
    """The CUDA backend, the compiled ``touch`` kernel, its PTX and ABI, and its output."""

    be: object
    compiled: object
    ptx: str
    abi: object
    y: object          # kaio.DeviceArray of one f32
    sync: object       # wait for the whole device


def setup() -> Setup:
    from kaio.backends import cuda_driver as drv
    kaio.set_backend("cuda")
    be = kaio.get_backend("cuda")
    compiled = touch.compile(be)
    return Setup(be, compiled, compiled.artifacts["ptx"], compiled.handle.abi,  # as loaded
                 kaio.device_array(1, kaio.f32), lambda: drv.call("cuCtxSynchronize"))


def use_fake_driver() -> str:
    """Run on the fake driver of tests/test_cuda_runtime_fake.py, its launches doing nothing:
    through cuda.bindings' ``cuLaunchKernel`` where a libcuda stub loads, else a Python no-op
    (which says)."""
    import os
    import sys
    import tempfile
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))
    os.environ.setdefault("KAIO_CACHE_DIR", tempfile.mkdtemp())
    from test_cuda_runtime_fake import FakeDriver

    from kaio.backends import cuda_driver as drv

    bindings = _stub_bindings()

    class NoLaunch(FakeDriver):
        done = (0,)

        def cuLaunchKernel(self, *args):
            return self.done

        def cuModuleLoadData(self, image):
            return 0, ("module", image)

        def cuModuleGetFunction(self, mod, name):
            r = FakeDriver.cuModuleGetFunction(self, mod, name)
            return (0, bindings.CUfunction()) if bindings else r
    if bindings:
        NoLaunch.cuLaunchKernel = staticmethod(bindings.cuLaunchKernel)
        NoLaunch.CUresult = bindings.CUresult
    drv.set_driver(NoLaunch())
    return ("cuda.bindings' cuLaunchKernel on a libcuda stub" if bindings
            else "a Python no-op (no libcuda stub: scripts/stub_libcuda.c)")


def _stub_bindings():
    """cuda.bindings.driver where its cuLaunchKernel runs (a libcuda stub on a machine without
    a GPU), else None."""
    try:
        from cuda.bindings import driver as d
        ok = d.cuLaunchKernel(d.CUfunction(), 1, 1, 1, 1, 1, 1, 0, None, 0, 0)[0] == 0
    except Exception:  # no cuda-python, or no libcuda to load
        return None
    return d if ok else None


def kaio_cases(st: Setup, launches: int, fake: bool = False) -> dict:
    """A raw cuLaunchKernel, kaio's backend.launch, a kaio kernel call (bound once, and indexed
    in the loop), a graph replay (per captured launch) and a call with a numpy argument (copies
    and sync included; ``fake``: the first four only)."""
    from kaio.backends import cuda_driver as drv
    d = drv.driver()  # cuda.bindings.driver (or the fake one)
    y = st.y
    # raw: its own module, parameters packed once, the launch call alone in the loop
    mod = drv.check("cuModuleLoadData", d.cuModuleLoadData(st.ptx.encode() + b"\0"))
    fn = drv.check("cuModuleGetFunction", d.cuModuleGetFunction(mod, st.abi.entry.encode()))
    vals = [np.array([y.ptr], np.uint64), np.array([1], np.int32), np.array([2.0], np.float32)]
    ptrs = np.array([v.ctypes.data for v in vals], np.uint64)
    addr = ptrs.ctypes.data

    def raw():
        d.cuLaunchKernel(fn, 1, 1, 1, 32, 1, 1, 0, 0, addr, 0)

    def raw_none():  # kaio's form: cuda.bindings builds no CUstream for None
        d.cuLaunchKernel(fn, 1, 1, 1, 32, 1, 1, 0, None, addr, 0)

    cfg = touch[1, 32]
    cases = {
        "raw cuLaunchKernel (cuda.bindings)": Case(raw, launches),
        "raw cuLaunchKernel, default stream as None": Case(raw_none, launches),
        "kaio backend.launch(compiled, ...)": Case(
            lambda: st.be.launch(st.compiled, (1, 1, 1), (32, 1, 1), [y, 2.0]), launches),
        "kaio touch[1, 32](y, 2.0)": Case(lambda: cfg(y, 2.0), launches),
        "kaio touch[1, 32](y, 2.0), indexed in the loop": Case(lambda: touch[1, 32](y, 2.0), launches),
    }
    if not fake:  # these need kernels that run
        with kaio.graph() as g:
            for _ in range(100):
                cfg(y, 3.0)
        g.replay()
        g.synchronize()
        assert y.to_host()[0] == 3.0, "the graph replay did not run its launches"
        host = np.zeros(1, np.float32)
        cases["kaio graph replay, per captured launch"] = Case(g.replay, max(10, launches // 100), per=100)
        cases["kaio touch[1, 32](numpy, 2.0) incl. copies+sync"] = Case(
            lambda: cfg(host, 2.0), max(1000, launches // 10))
    return cases


def resident_case(launches: int, sync, clock) -> dict:
    """The bound call with a numpy array resident in a ``kaio.resident`` scope (it launches
    with the array's device mirror, no copies), timed on its own: while a scope is open every
    launch looks for resident arguments, which the rows above must not pay."""
    host = np.zeros(1, np.float32)
    cfg = touch[1, 32]
    with kaio.resident(host):
        return measure({"kaio touch[1, 32](numpy in kaio.resident, 2.0)":
                        Case(lambda: cfg(host, 2.0), launches)}, sync, clock=clock)


def print_rows(title: str, rows: dict) -> None:
    print(title)
    for k, v in rows.items():
        print(f"  {k:<58s} {v:8.2f} us")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--launches", type=int, default=20000)
    ap.add_argument("--fake", action="store_true", help="no GPU: kaio's own cost on a fake driver")
    args = ap.parse_args()
    if args.fake:
        print("fake driver, launches through", use_fake_driver())
    st = setup()
    cases = kaio_cases(st, args.launches, fake=args.fake)
    clock = time.process_time if args.fake else time.perf_counter
    results = measure(cases, st.sync, clock=clock)
    results.update(resident_case(args.launches, st.sync, clock))
    name = st.be.props.name
    print_rows(f"launch overhead on {name}, {args.launches} launches, best of 3:", results)
    raw = results["raw cuLaunchKernel (cuda.bindings)"]
    ratios = {k: round(v / raw, 2) for k, v in results.items()
              if k.startswith("kaio touch[1, 32](y") or "resident" in k}
    for k, r in ratios.items():  # on the fake the raw launch costs nothing: no ratio to speak of
        print(f"  {k}: " + (f"{results[k] - raw:.2f} us of kaio's own" if args.fake
                            else f"{r:.2f}x raw (issue 15 goal: <= 1.2x)"))
    print(json.dumps({"device": name, "us_per_launch": {k: round(v, 3) for k, v in results.items()},
                      "x_raw": ratios}))


if __name__ == "__main__":
    main()
