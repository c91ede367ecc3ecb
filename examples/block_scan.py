"""An inclusive prefix sum (scan) of up to 1024 integers in one block, with warp operations.

    python examples/block_scan.py [--n 1000]
    KAIO_BACKEND=reference python examples/block_scan.py --n 300     # no GPU needed

The classic two-level scan:

1. each warp scans its own values in registers: ``log2(warp size)`` rounds of ``shuffle_up``
   (Hillis-Steele), no shared memory;
2. the last lane of each warp puts its warp's total in a shared array; after a barrier every
   warp scans those totals the same way and adds the ones of the warps before it.

``kaio.warp_size`` is 32 on NVIDIA and 64 on AMD (wave64), so the same kernel runs on both.
The shared array has one slot per warp, written by one lane of each: the race checker proves
that from the code, with no annotation.
"""
from __future__ import annotations

import argparse

import numpy as np

import kaio
from kaio import i32

MAX_N = 1024          # one block: at most 1024 threads
MAX_WARPS = MAX_N // 32


@kaio.func
def warp_inclusive_scan(v: i32) -> i32:
    """Each lane gets the sum of its warp's values up to and including its own."""
    lane = kaio.lane_id()
    d = 1
    while d < kaio.warp_size:
        up = kaio.shuffle_up(v, d)   # the value d lanes below (its own where there is none)
        if lane >= d:
            v += up
        d *= 2
    return v


@kaio.kernel
def block_scan(x: kaio.In[i32], y: kaio.Region[i32]):
    t = kaio.thread_idx.x
    lane = kaio.lane_id()
    warp = t // kaio.warp_size
    n_warps = (kaio.block_dim.x + kaio.warp_size - 1) // kaio.warp_size
    v = i32(0)
    if t < x.shape[0]:
        v = x[t]
    v = warp_inclusive_scan(v)

    totals = kaio.shared_array(i32, MAX_WARPS)
    if lane == kaio.warp_size - 1:
        totals[warp] = v                 # one slot per warp, one writer each
    kaio.sync()
    s = i32(0)
    if lane < n_warps:
        s = totals[lane]
    s = warp_inclusive_scan(s)           # every warp scans the warp totals for itself
    before = kaio.shuffle(s, max(warp - 1, 0))
    if warp > 0:
        v += before                      # the totals of the warps before this one
    for i in y.owned():
        y[i] = v


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description="one-block inclusive scan with warp shuffles")
    p.add_argument("--n", type=int, default=1000, help=f"values to scan, 1..{MAX_N} (default 1000)")
    args = p.parse_args(argv)
    if not 1 <= args.n <= MAX_N:
        raise SystemExit(f"--n must be between 1 and {MAX_N}")
    rng = np.random.default_rng(0)
    x = rng.integers(-100, 100, args.n).astype(np.int32)
    y = np.zeros_like(x)
    block = -(-args.n // 64) * 64        # whole warps on 32- and 64-lane targets
    block_scan[(1,), (block,)](x, y)
    want = np.cumsum(x, dtype=np.int32)
    if not np.array_equal(y, want):
        bad = int(np.flatnonzero(y != want)[0])
        raise SystemExit(f"block_scan: y[{bad}] = {y[bad]}, numpy says {want[bad]}")
    backend = kaio.get_backend()
    print(f"block_scan n={args.n} on {backend.name} (warp size {backend.warp_size}): "
          f"identical to numpy.cumsum; total {y[-1]}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
