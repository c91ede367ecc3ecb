"""The automatic interface with and without a residency scope, against the manual one.

Jacobi-1D (the RAJAPerf JACOBI_1D update) on 4M doubles, 100 steps, in one process:

- numpy arguments: a copy in and out per launch;
- numpy in ``kaio.resident``: the whole scope, i.e. the two arrays copied in on entry and back on
  exit (both are written) around the loop;
- device arrays (manual): the same program by hand, ``kaio.to_device`` of both arrays, the loop,
  and both copied back, so it moves the same bytes as the scope;
- and the loop alone (from its first launch to a synchronize), inside the scope and on device
  arrays: the per-launch cost a scope adds, without the copies.

Issue 15's goal: the scoped program within 1.05x of the manual one. Every variant must give the
same bits as the manual one.

    python3 benchmarks/bench_resident.py [--n N] [--steps S]     # device_run.sh step resident
    python3 benchmarks/bench_resident.py --fake                  # no GPU: kaio's own cost

``--fake`` runs on the fake CUDA driver of tests/test_cuda_runtime_fake.py, whose launches do
nothing (scripts/bench_launch_overhead.py), with a small array and more steps: the loop rows are
then kaio's own Python cost per launch, in a scope and on device arrays (CPU time).
"""
import argparse
import os
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


def _use_fake_driver() -> None:
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "scripts"))
    from bench_launch_overhead import use_fake_driver
    use_fake_driver()
    kaio.set_backend("cuda")


def run(n: int, steps: int, clock=time.perf_counter) -> tuple[dict, dict]:
    """(seconds per variant, final ``a`` per variant) for ``steps`` steps on ``n`` doubles."""
    a0 = np.random.default_rng(0).standard_normal(n)
    times, results = {}, {}

    a, b = a0.copy(), a0.copy()
    _loop(a, b, 1)                                   # compile, warm the copies and the plans
    with kaio.resident(a, b):
        _loop(a, b, 1)
    da, db = kaio.to_device(a0), kaio.to_device(a0)
    _loop(da, db, 1)
    kaio.synchronize()

    a, b = a0.copy(), a0.copy()
    t = clock()
    _loop(a, b, steps)
    times["numpy arguments"] = clock() - t
    results["numpy arguments"] = a

    a, b = a0.copy(), a0.copy()
    t = clock()
    with kaio.resident(a, b):
        t_loop = clock()
        _loop(a, b, steps)
        kaio.synchronize()
        times["loop in kaio.resident"] = clock() - t_loop
    times["numpy in kaio.resident"] = clock() - t
    results["numpy in kaio.resident"] = results["loop in kaio.resident"] = a

    a, b = a0.copy(), a0.copy()
    t = clock()
    da, db = kaio.to_device(a), kaio.to_device(b)
    t_loop = clock()
    _loop(da, db, steps)
    kaio.synchronize()
    times["loop on device arrays"] = clock() - t_loop
    da.copy_to_host(a)
    db.copy_to_host(b)
    times["device arrays (manual)"] = clock() - t
    results["device arrays (manual)"] = results["loop on device arrays"] = a
    return times, results


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=None, help="doubles (default 4M; --fake: 4096)")
    ap.add_argument("--steps", type=int, default=None, help="steps (default 100; --fake: 5000)")
    ap.add_argument("--fake", action="store_true", help="no GPU: kaio's own cost on a fake driver")
    args = ap.parse_args(argv)
    if args.fake:
        _use_fake_driver()
    n = args.n or (4096 if args.fake else 4 * 1024 * 1024)
    steps = args.steps or (5000 if args.fake else 100)
    times, results = run(n, steps, time.process_time if args.fake else time.perf_counter)
    manual, loop = times["device arrays (manual)"], times["loop on device arrays"]
    print(f"Jacobi-1D, {n} doubles, {steps} steps ({2 * steps} launches)"
          + (", fake driver (launches do nothing), CPU time" if args.fake else ""))
    for k, v in times.items():
        ref = loop if k.startswith("loop") else manual
        same = args.fake or np.array_equal(results[k], results["device arrays (manual)"])
        print(f"  {k:<26} {v * 1e3:9.2f} ms  {v / ref:6.2f}x {'loop' if ref is loop else 'manual'}"
              f"  {v / (2 * steps) * 1e6:8.2f} us/launch  result {'same' if same else 'DIFFERS'}")
    print(f"scoped / manual: {times['numpy in kaio.resident'] / manual:.2f}x (goal <= 1.05x); "
          f"loop in the scope / loop on device arrays: {times['loop in kaio.resident'] / loop:.2f}x")
    ok = args.fake or all(np.array_equal(r, results["device arrays (manual)"]) for r in results.values())
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
