"""How the compiler's passes scale with kernel size (host-only; an experiment, not a gate).

    python3 benchmarks/ir_scaling.py [--n 40] [--factor 8] [--repeat 3]

Builds a straight-line kernel of ``n`` portable math calls (exp, sin, log in turn) and one of
``factor * n``, then times ``expand_math`` alone and the whole ``target_pipeline`` on each (best
of ``--repeat``). A pass that is linear in the kernel's size shows a time ratio near ``factor``;
one that walks the whole kernel for every replacement shows about ``factor ** 2``.

Each stage is timed twice: as it runs normally, and with Python's cyclic garbage collector off.
The IR is a graph of many small objects in reference cycles (ops and their values), and the
collector's full collections, which traverse every live object, make the larger kernel cost more
than its size alone explains; with the collector off the ratio is the passes' own work.
"""
from __future__ import annotations

import argparse
import gc
import time


def chain_kernel(n: int):
    """``y[i] = f_n(...f_1(x[i]))`` with ``n`` math calls, built directly in IR."""
    from kaio import dtypes as dt
    from kaio.ir import BufType, Builder, Param
    b = Builder.for_kernel("chain", [
        ("x", BufType(dt.f32, 1, "global", "in"), Param("x", "buffer")),
        ("y", BufType(dt.f32, 1, "global", "raw"), Param("y", "buffer"))])
    x, y = b.kernel.args
    i = b.special("thread_idx", axis=0)
    v = b.load(x, [i])
    for k in range(n):
        v = b.math(("exp", "sin", "log")[k % 3], v)
    b.store(y, [i], v)
    return b.finish()


def best_time(fn, repeat: int, collector: bool) -> float:
    best = float("inf")
    for _ in range(repeat):
        gc.collect()
        if not collector:
            gc.disable()
        try:
            t0 = time.perf_counter()
            fn()
            best = min(best, time.perf_counter() - t0)
        finally:
            gc.enable()
    return best


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=40)
    ap.add_argument("--factor", type=int, default=8)
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args(argv)
    from kaio.ir.rewrite import clone_kernel
    from kaio.passes import expand_math, target_pipeline
    stages = {"expand_math": lambda k: expand_math.run(clone_kernel(k)),
              "target_pipeline": lambda k: target_pipeline(k, 32)}
    small, large = chain_kernel(a.n), chain_kernel(a.factor * a.n)
    for name, fn in stages.items():
        for collector in (True, False):
            ts = best_time(lambda f=fn: f(small), a.repeat, collector)
            tl = best_time(lambda f=fn: f(large), a.repeat, collector)
            print(f"{name:16s} gc {'on ' if collector else 'off'} n={a.n:5d}: {ts * 1e3:9.1f} ms"
                  f"   n={a.factor * a.n:5d}: {tl * 1e3:9.1f} ms   ratio {tl / ts:5.1f} "
                  f"(ops x{a.factor})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
