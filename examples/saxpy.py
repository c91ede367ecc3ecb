"""saxpy, y = a x + y: a first kaio kernel, run on the best backend and checked against numpy.

    python examples/saxpy.py [--n 1000000]
    KAIO_BACKEND=reference python examples/saxpy.py --n 10000     # no GPU needed

``y`` is a Region: each thread owns the elements ``y.owned()`` gives it (its global index, when
it is below ``len(y)``), so the compiler can prove no two threads write the same element. The
first call passes numpy arrays (copied to the device and back by intent: ``In`` in only, the
Region both ways); the second keeps the data on the device and times the kernel alone.
"""
from __future__ import annotations

import argparse

import numpy as np

import kaio
from kaio import f32


@kaio.kernel
def saxpy(a: f32, x: kaio.In[f32], y: kaio.Region[f32]):
    for i in y.owned():
        y[i] = a * x[i] + y[i]


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description="saxpy on the best backend, checked against numpy")
    p.add_argument("--n", type=int, default=None,
                   help="elements (default: 2^24 on a GPU, 10000 on the reference backend)")
    args = p.parse_args(argv)
    backend = kaio.get_backend().name
    n = args.n or (10_000 if backend == "reference" else 1 << 24)

    rng = np.random.default_rng(0)
    x = rng.standard_normal(n).astype(np.float32)
    y = rng.standard_normal(n).astype(np.float32)
    want = np.float32(2.0) * x + y       # f32 arithmetic, as the kernel does it

    out = y.copy()
    saxpy(2.0, x, out)                   # numpy in and out; the launch shape comes from y
    if not np.array_equal(out, want):
        raise SystemExit("saxpy differs from numpy")

    dx, dy = kaio.to_device(x), kaio.to_device(y)  # device-resident data: launches only
    saxpy(2.0, dx, dy)                   # warm-up (compiles once, then cached)
    start, end = kaio.Event(), kaio.Event()
    start.record()
    saxpy(2.0, dx, dy)
    end.record()
    end.synchronize()
    ms = start.elapsed_time(end)
    if not np.array_equal(dy.to_host(), np.float32(2.0) * x + want):  # two calls: y + 2x + 2x
        raise SystemExit("saxpy on device arrays differs from numpy")
    print(f"saxpy n={n} on {backend}: matches numpy; {ms:.3f} ms, {12 * n / ms / 1e6:.1f} GB/s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
