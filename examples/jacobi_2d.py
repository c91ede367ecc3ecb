"""2-D Jacobi relaxation with a Region, through the automatic and the manual interface.

    python examples/jacobi_2d.py [--n 2048] [--steps 100]
    KAIO_BACKEND=reference python examples/jacobi_2d.py --n 48 --steps 4    # no GPU needed

Each step writes the 5-point average of ``a`` into the interior of ``b``, then of ``b`` into
``a`` (RAJAPerf's JACOBI_2D). ``b`` is ``Region[f64, 2, tiles()]``: the launch's blocks tile the
grid and each thread owns the element at its 2-D index, so the checker proves that no two
threads write one element; reading the neighbours of ``a`` is free, since it is ``In``.

1. automatic: numpy arrays in, copied to the device and back at every call (simple; the copies
   dominate on a GPU);
2. manual: the grids stay on the device (``kaio.to_device``), the steps are launched on a
   stream with an explicit grid and block, and one copy back ends the run.

Both must agree with numpy bit for bit (the kernel's additions are in numpy's order, and kaio
never fuses a multiply and an add).
"""
from __future__ import annotations

import argparse
import time

import numpy as np

import kaio
from kaio import f64
from kaio.regions import tiles


@kaio.kernel
def jacobi_step(a: kaio.In[f64, 2], b: kaio.Region[f64, 2, tiles()]):
    n, m = b.shape[0], b.shape[1]
    for i, j in b.owned():
        if i > 0 and i < n - 1 and j > 0 and j < m - 1:
            b[i, j] = 0.2 * (a[i, j] + a[i, j - 1] + a[i, j + 1] + a[i + 1, j] + a[i - 1, j])


def numpy_steps(a, b, steps):
    a, b = a.copy(), b.copy()
    for _ in range(steps):
        for src, dst in ((a, b), (b, a)):
            dst[1:-1, 1:-1] = 0.2 * (src[1:-1, 1:-1] + src[1:-1, :-2] + src[1:-1, 2:]
                                     + src[2:, 1:-1] + src[:-2, 1:-1])
    return a, b


def automatic(a, b, steps):
    """numpy in, numpy out: kaio copies ``a`` in and ``b`` in and out at every launch."""
    a, b = a.copy(), b.copy()
    for _ in range(steps):
        jacobi_step(a, b)        # launch shape from b's partition: (32, 8) blocks covering it
        jacobi_step(b, a)
    return a, b


def manual(a, b, steps):
    """Device arrays, a stream and an explicit launch shape; no copies until the end."""
    da, db = kaio.to_device(a), kaio.to_device(b)
    block = (32, 8)
    grid = (-(-a.shape[1] // block[0]), -(-a.shape[0] // block[1]))   # x covers columns
    stream = kaio.Stream()
    step = jacobi_step[grid, block, 0, stream]
    for _ in range(steps):
        step(da, db)             # asynchronous: returns before the kernel has run on a GPU
        step(db, da)
    stream.synchronize()
    return da.to_host(), db.to_host()


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description="2-D Jacobi with a Region, automatic and manual")
    p.add_argument("--n", type=int, default=None,
                   help="grid n x n (default: 2048 on a GPU, 48 on the reference backend)")
    p.add_argument("--steps", type=int, default=None,
                   help="steps of two half-steps each (default: 100 on a GPU, 4 on the reference backend)")
    args = p.parse_args(argv)
    backend = kaio.get_backend().name
    small = backend == "reference"
    n = args.n or (48 if small else 2048)
    steps = args.steps or (4 if small else 100)

    i, j = np.meshgrid(np.arange(n, dtype=np.float64), np.arange(n, dtype=np.float64), indexing="ij")
    a0, b0 = (i * (j + 2) + 2.0) / n, (i * (j + 3) + 3.0) / n
    want = numpy_steps(a0, b0, steps)

    jacobi_step(a0.copy(), b0.copy())  # compile once, outside the timings
    for name, run in (("automatic", automatic), ("manual", manual)):
        t0 = time.perf_counter()
        got = run(a0, b0, steps)
        seconds = time.perf_counter() - t0
        if not all(np.array_equal(g, w) for g, w in zip(got, want)):
            worst = max(float(np.abs(g - w).max()) for g, w in zip(got, want))
            raise SystemExit(f"jacobi_2d {name}: differs from numpy (max |err| {worst:.3g})")
        print(f"jacobi_2d {name:9s} n={n} steps={steps} on {backend}: identical to numpy; "
              f"{seconds * 1e3 / steps:.3f} ms per step")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
