"""glibc's ``rand()`` sequence, made with numpy (the suite's random initialisations call it).

glibc's ``rand()`` is ``random_r`` of TYPE_3: 31 words seeded by ``16807 * r mod (2^31 - 1)``,
then o_k = o_{k-31} + o_{k-3} mod 2^32, the first 310 values discarded, ``rand()`` = o >> 1.
"""
from __future__ import annotations

import numpy as np

from ._host import in_chunks

RAND_MAX = 2**31 - 1


def glibc_rand(seed: int, count: int) -> np.ndarray:
    """The first ``count`` values of glibc ``rand()`` after ``srand(seed)`` (int64 array; the
    longest sequence made per seed is kept, a pure-Python loop being slow at 64M values)."""
    return _rand_view(seed, count).copy()


_RAND: dict = {}


def _rand_view(seed: int, count: int) -> np.ndarray:
    """:func:`glibc_rand` without the copy: a read-only view of the kept sequence (made a little
    longer than asked, so that ``n`` and ``n + 2`` values share one generation)."""
    kept = _RAND.get(seed)
    if kept is None or kept.size < count:
        kept = _RAND[seed] = _glibc_rand(seed, -(-count // _RAND_ROUND) * _RAND_ROUND)
        kept.flags.writeable = False
    return kept[:count]


#: generated lengths are multiples of this
_RAND_ROUND = 1 << 16
_MASK = 0xFFFFFFFF


def _glibc_rand(seed: int, count: int) -> np.ndarray:
    """glibc's ``random_r`` (TYPE_3): o_k = o_{k-31} + o_{k-3} mod 2^32 after a seeded start and
    310 discarded values; ``rand()`` is o >> 1.

    The sequence is cut into ``streams`` consecutive stretches of ``length`` values. The 31 values
    before each stretch come from jumping ahead by the recurrence's matrix power, then all
    stretches advance together, three values per numpy step (the shortest lag is 3), in uint32
    arithmetic, which wraps mod 2^32 as the recurrence does."""
    r = [1 if seed == 0 else seed]          # glibc seeds 0 as 1
    for i in range(1, 31):
        # 16807 * r[i-1] mod (2^31 - 1) by Schrage's method, as glibc does it
        hi, lo = divmod(r[i - 1], 127773)
        word = 16807 * lo - 2836 * hi
        r.append(word + 2147483647 if word < 0 else word)
    o = r + r[:3]                           # o_31..o_33 = o_0..o_2, then the recurrence
    for k in range(34, 344):
        o.append((o[k - 31] + o[k - 3]) & _MASK)
    streams = max(1, min(4096, count // 256))
    length = -(-count // streams)
    jump = _matrix_power(length)
    windows = np.empty((31, streams), dtype=np.uint64)
    windows[:, 0] = o[-31:]                 # o_313..o_343, the 31 values before o_344
    for j in range(1, streams):
        windows[:, j] = (jump @ windows[:, j - 1]) & np.uint64(_MASK)
    seq = np.empty((31 + length, streams), dtype=np.uint32)
    seq[:31] = windows
    for t in range(31, 31 + length, 3):
        e = min(t + 3, 31 + length)
        np.add(seq[t - 31:e - 31], seq[t - 3:e - 3], out=seq[t:e])
    out = np.empty(streams * length, dtype=np.int64)
    rows, body = out.reshape(streams, length), seq[31:]

    def transpose(first, last):             # by blocks of streams: far fewer cache misses
        np.right_shift(body[:, first:last].T, 1, out=rows[first:last], casting="unsafe")
    in_chunks(transpose, streams, 64)
    return out[:count]


def _matrix_power(steps: int) -> np.ndarray:
    """A^steps mod 2^32 for A, the map from the 31 values before o_k to the 31 before o_{k+1}
    (uint64 products of values < 2^32 wrap mod 2^64, a multiple of 2^32, so masking after each
    product is exact)."""
    a = np.zeros((31, 31), dtype=np.uint64)
    a[np.arange(30), np.arange(1, 31)] = 1  # shift the window by one
    a[30, 0] = a[30, 28] = 1                # o_k = o_{k-31} + o_{k-3}
    result = np.eye(31, dtype=np.uint64)
    mask = np.uint64(_MASK)
    while steps:
        if steps & 1:
            result = (result @ a) & mask
        a = (a @ a) & mask
        steps >>= 1
    return result
