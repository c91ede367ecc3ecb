"""Per-launch host overhead: kaio vs a raw ``cuLaunchKernel`` through cuda.bindings.

Both launch the same PTX (the one kaio emits for a one-store kernel) on the same device
buffer, back to back without synchronizing, so the wall time per launch is the host-side cost
of issuing it. Prints a table and one JSON line. Needs an NVIDIA GPU.

    python scripts/bench_launch_overhead.py [--launches 20000]

:func:`setup` and :func:`kaio_rows` are shared with scripts/bench_cuda_core.py.
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


def per_launch_us(fn, n: int, sync, warmup: int = 200) -> float:
    """Best of 3 of the wall time per call of ``fn`` over ``n`` calls, synchronized at the end."""
    for _ in range(warmup):  # warm up: module loads, allocator, caches
        fn()
    sync()
    best = float("inf")
    for _ in range(3):
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        sync()
        best = min(best, (time.perf_counter() - t0) / n * 1e6)
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
    return Setup(be, compiled, compiled.artifacts["ptx"], compiled.artifacts["abi"],
                 kaio.device_array(1, kaio.f32), lambda: drv.call("cuCtxSynchronize"))


def kaio_rows(st: Setup, launches: int) -> dict:
    """us per launch: a raw cuLaunchKernel, kaio's backend.launch, a kaio kernel call, a graph
    replay (per captured launch) and a call with a numpy argument (copies and sync included)."""
    from cuda.bindings import driver as d

    from kaio.backends import cuda_driver as drv
    y, sync = st.y, st.sync
    # raw: its own module, parameters packed once, the launch call alone in the loop
    mod = drv.check("cuModuleLoadData", d.cuModuleLoadData(st.ptx.encode() + b"\0"))
    fn = drv.check("cuModuleGetFunction", d.cuModuleGetFunction(mod, st.abi.entry.encode()))
    vals = [np.array([y.ptr], np.uint64), np.array([1], np.int32), np.array([2.0], np.float32)]
    ptrs = np.array([v.ctypes.data for v in vals], np.uint64)
    addr = ptrs.ctypes.data

    def raw():
        d.cuLaunchKernel(fn, 1, 1, 1, 32, 1, 1, 0, 0, addr, 0)

    cfg = touch[1, 32]
    rows = {
        "raw cuLaunchKernel (cuda.bindings)": per_launch_us(raw, launches, sync),
        "kaio backend.launch(compiled, ...)": per_launch_us(
            lambda: st.be.launch(st.compiled, (1, 1, 1), (32, 1, 1), [y, 2.0]), launches, sync),
        "kaio touch[1, 32](y, 2.0)": per_launch_us(lambda: cfg(y, 2.0), launches, sync),
    }
    with kaio.graph() as g:
        for _ in range(100):
            cfg(y, 3.0)
    rows["kaio graph replay, per captured launch"] = per_launch_us(
        g.replay, max(10, launches // 100), sync) / 100
    assert y.to_host()[0] == 3.0
    host = np.zeros(1, np.float32)
    rows["kaio touch[1, 32](numpy, 2.0) incl. copies+sync"] = per_launch_us(
        lambda: cfg(host, 2.0), max(1000, launches // 10), sync)
    return rows


def print_rows(title: str, rows: dict) -> None:
    print(title)
    for k, v in rows.items():
        print(f"  {k:<58s} {v:8.2f} us")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--launches", type=int, default=20000)
    args = ap.parse_args()
    st = setup()
    results = kaio_rows(st, args.launches)
    name = st.be.props.name
    print_rows(f"launch overhead on {name}, {args.launches} launches, best of 3:", results)
    print(json.dumps({"device": name, "us_per_launch": {k: round(v, 3) for k, v in results.items()}}))


if __name__ == "__main__":
    main()
