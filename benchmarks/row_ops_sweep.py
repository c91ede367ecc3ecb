"""Launch shapes and register caps of the library's register-resident row ops, side by side.

    python3 benchmarks/row_ops_sweep.py [--out DIR] [--quick]

For softmax, rmsnorm and layernorm (kernels/ml/norms.py) in f32 and f16, at rows of 4096x1024,
4096x8192 and 1024x32768, times every (threads per block, columns per thread) the resident
kernels can take (16-byte chunks, columns per thread a power of two up to 32) under register
caps of 64 (the library's), 48 and 40, with kaio's events: 20 back-to-back launches, median of 5.
It prints one table and marks the shape the library picks (``norms.resident_plan``), so the
library's choices can be set from a measurement (docs/performance.md).
"""
from __future__ import annotations

import argparse
import json
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

SHAPES = ((4096, 1024), (4096, 8192), (1024, 32768))
CAPS = (64, 48, 40)


def plans(cols: int, vec: int):
    """Every (threads, per) with per a power of two in [vec, 32] and threads <= 1024 covering."""
    out = []
    per = vec
    while per <= 32:
        threads = -(-cols // per)
        if threads <= 1024 and threads * per == cols and threads % 32 == 0:
            out.append((threads, per))
        per *= 2
    return out


def variant(factory, dt, vec, cap):
    from kaio.launch import KernelFunction
    base = factory(dt, dt, vec=vec)
    return KernelFunction(base.fn, max_registers=cap)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=os.environ.get("OUT", "."))
    ap.add_argument("--quick", action="store_true", help="4096x8192 only, f32 and f16")
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args(argv)
    import bench_gpu

    import kaio
    from kaio.kernels.ml import norms

    def timed(fn):
        return bench_gpu.timed(fn, args.reps, args.rounds, 2, event=kaio.Event,
                               synchronize=kaio.synchronize)

    factories = {"softmax": norms.softmax_resident_kernel, "rmsnorm": norms.rmsnorm_resident_kernel,
                 "layernorm": norms.layernorm_resident_kernel}
    rows_out = []
    shapes = ((4096, 8192),) if args.quick else SHAPES
    print("| op | dtype | shape | threads x per | cap | us | GB/s | library's pick |")
    print("|---|---|---|---|---|---|---|---|")
    for (rows, cols) in shapes:
        for dt, npdt in (("f32", np.float32), ("f16", np.float16)):
            rng = np.random.default_rng(0)
            x = kaio.to_device(rng.standard_normal((rows, cols)).astype(npdt))
            w = kaio.to_device(rng.standard_normal(cols).astype(npdt))
            b = kaio.to_device(rng.standard_normal(cols).astype(npdt))
            y = kaio.device_array((rows, cols), np.dtype(npdt))
            vec = norms.resident_vec(dt, dt, cols)
            pick = norms.resident_plan(cols, vec)
            nbytes = 2 * rows * cols * np.dtype(npdt).itemsize
            for op, factory in factories.items():
                extra = {"softmax": (), "rmsnorm": (w,), "layernorm": (w, b)}[op]
                scal = () if op == "softmax" else (1e-5,)
                for threads, per in plans(cols, vec):
                    for cap in CAPS:
                        try:
                            k = variant(factory, dt, vec, cap)[(rows,), (threads,)]
                            call = (x, *extra, y, *scal)
                            us = timed(lambda k=k, call=call, per=per: k(*call, PER=per)) * 1e3
                            cell = {"us": round(us, 1), "GBps": round(nbytes / us / 1e3)}
                        except Exception as e:  # a shape that does not compile or launch
                            cell = {"error": f"{type(e).__name__}: {str(e)[:120]}"}
                        row = {"op": op, "dtype": dt, "shape": f"{rows}x{cols}", "threads": threads,
                               "per": per, "cap": cap, **cell,
                               "pick": (threads, per) == tuple(pick or ()) and cap == norms.RESIDENT_REGS}
                        rows_out.append(row)
                        print(f"| {op} | {dt} | {rows}x{cols} | {threads} x {per} | {cap} | "
                              f"{cell.get('us', cell.get('error'))} | {cell.get('GBps', '')} | "
                              f"{'<-' if row['pick'] else ''} |", flush=True)
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "row_ops_sweep.json"), "w") as f:
        json.dump(rows_out, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
