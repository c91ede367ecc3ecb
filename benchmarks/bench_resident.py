"""The automatic interface with and without a residency scope, against the manual one.

Jacobi-1D (the RAJAPerf JACOBI_1D update) on 4M doubles, 100 steps, three ways in one process:
numpy arguments (a copy in and out per launch), numpy arguments inside ``kaio.resident`` (copies
on entry and exit only), and device arrays (the manual interface). Issue 15's goal: the scoped
automatic loop within 1.05x of the manual one.

    python3 benchmarks/bench_resident.py [--n N] [--steps S]     # device_run.sh step resident
"""
import argparse
import sys
import time

import numpy as np

import kaio
from kaio import f64


@kaio.kernel
def jacobi_1d(a: kaio.In[f64], b: kaio.Region[f64]):
    for i in b.owned():
        if i > 0 and i < b.shape[0] - 1:
            b[i] = 0.3333333333333333 * (a[i - 1] + a[i] + a[i + 1])


def _loop(a, b, steps):
    for _ in range(steps):
        jacobi_1d(a, b)
        jacobi_1d(b, a)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=4 * 1024 * 1024)
    ap.add_argument("--steps", type=int, default=100)
    args = ap.parse_args(argv)
    a0 = np.random.default_rng(0).standard_normal(args.n)
    times, results = {}, {}

    a, b = a0.copy(), a0.copy()
    _loop(a, b, 1)                                   # compile, warm the copies
    a, b = a0.copy(), a0.copy()
    t = time.perf_counter()
    _loop(a, b, args.steps)
    times["numpy arguments"] = time.perf_counter() - t
    results["numpy arguments"] = a

    a, b = a0.copy(), a0.copy()
    t = time.perf_counter()
    with kaio.resident(a, b):
        _loop(a, b, args.steps)
    times["numpy in kaio.resident"] = time.perf_counter() - t
    results["numpy in kaio.resident"] = a

    da, db = kaio.to_device(a0), kaio.to_device(a0)
    t = time.perf_counter()
    _loop(da, db, args.steps)
    out = da.to_host()
    times["device arrays (manual)"] = time.perf_counter() - t
    results["device arrays (manual)"] = out

    manual = times["device arrays (manual)"]
    for k, v in times.items():
        same = np.array_equal(results[k], out)
        print(f"{k:<26} {v * 1e3:9.2f} ms  {v / manual:6.2f}x manual  result {'same' if same else 'DIFFERS'}")
    ok = all(np.array_equal(r, out) for r in results.values())
    print(f"scoped / manual: {times['numpy in kaio.resident'] / manual:.2f}x (goal <= 1.05x)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
