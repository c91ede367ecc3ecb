"""RAJAPerf's input initialisation and checksum, reproduced from their definitions.

Initialisation (the suite's data utilities):

- ``real(n)``: ``v[i] = f*(i + 1.1)/(i + 1.12345)`` with ``f`` alternating 0.2, 0.1, 0.2, ... by
  the order of initialisation calls in a kernel's set-up (every call counts, constants too);
- ``const(n, c)``: all ``c``;
- ``rand_sign(n)``: ``real`` values with a sign drawn from C ``rand()`` seeded with 4793;
- ``rand_value(n)``: ``rand()/RAND_MAX`` (seed 4793);
- ``ints(n)``: +1/-1 from C ``rand()`` (seed 4793), then one random entry set to -58 and one to 19;
- ``scalar()``: ``f*1.1/1.12345``.

C ``rand()`` here is glibc's (the additive-feedback generator behind ``random()``), so integer
data matches the suite's on Linux.

Checksum: a sum of ``(|sin(j+1)| + 0.5) * data[j]`` (float64 products), times a scale factor.
The suite accumulates in ``long double`` with Kahan compensation; we add the products in numpy's
``longdouble`` (the same 80-bit format on x86-64; exactly rounded ``math.fsum`` where numpy has
no wider type), vectorised so that 64M-element outputs take well under a second.
"""
from __future__ import annotations

import math

import numpy as np

RAND_MAX = 2**31 - 1


_RAND: dict = {}


def glibc_rand(seed: int, count: int) -> np.ndarray:
    """The first ``count`` values of glibc ``rand()`` after ``srand(seed)`` (int64 array; the
    longest sequence made per seed is kept, a pure-Python loop being slow at 64M values)."""
    kept = _RAND.get(seed)
    if kept is None or kept.size < count:
        kept = _RAND[seed] = _glibc_rand(seed, count)
        kept.flags.writeable = False
    return kept[:count].copy()


def _glibc_rand(seed: int, count: int) -> np.ndarray:
    r = [0] * 34
    r[0] = seed
    for i in range(1, 31):
        # 16807 * r[i-1] mod (2^31 - 1) by Schrage's method, as glibc does it
        hi, lo = divmod(r[i - 1], 127773)
        word = 16807 * lo - 2836 * hi
        if word < 0:
            word += 2147483647
        r[i] = word
    for i in range(31, 34):
        r[i] = r[i - 31]
    state = r
    out = np.empty(count, dtype=np.int64)
    mask = 0xFFFFFFFF
    # 310 discarded outputs, then ``count`` kept: o_k = (r[k-31] + r[k-3]) mod 2^32, out = o >> 1
    total = 310 + count
    head = min(total, _RAND_BLOCK)
    buf = state + [0] * head
    for k in range(34, 34 + head):
        buf[k] = (buf[k - 31] + buf[k - 3]) & mask
    vals = np.zeros(34 + total, dtype=np.uint64)
    vals[:34 + head] = buf
    _extend(vals, 34 + head)
    out[:] = (vals[34 + 310:] >> np.uint64(1)).astype(np.int64)
    return out


#: values per vectorised step of the recurrence
_RAND_BLOCK = 1 << 16


def _block_matrix(size: int) -> np.ndarray:
    """M (transposed) with o[K + j] = sum_i M[i, j] o[K - 31 + i] mod 2^32 (the recurrence
    unrolled)."""
    rows = np.zeros((31 + size, 31), dtype=np.uint64)
    rows[:31] = np.eye(31, dtype=np.uint64)
    for j in range(31, 31 + size):
        rows[j] = (rows[j - 31] + rows[j - 3]) & np.uint64(0xFFFFFFFF)
    return np.ascontiguousarray(rows[31:].T.astype(np.float64))   # (31, size); < 2^32: exact


def _extend(vals: np.ndarray, start: int) -> None:
    """Fill ``vals[start:]`` by o_k = o_{k-31} + o_{k-3} mod 2^32, a block at a time: each block
    is M @ (the 31 values before it), done exactly in float64 by splitting those values into
    11-bit pieces (products < 2^43, sums of 31 < 2^48)."""
    if start >= vals.size:
        return
    m = _block_matrix(_RAND_BLOCK)
    mask32 = np.uint64(0xFFFFFFFF)
    for k in range(start, vals.size, _RAND_BLOCK):
        prev = vals[k - 31:k]
        pieces = np.stack([prev & np.uint64(0x7FF), (prev >> np.uint64(11)) & np.uint64(0x7FF),
                           prev >> np.uint64(22)]).astype(np.float64)
        n = min(_RAND_BLOCK, vals.size - k)
        r = (pieces @ m[:, :n]).astype(np.uint64)
        vals[k:k + n] = (r[0] + (r[1] << np.uint64(11)) + (r[2] << np.uint64(22))) & mask32


class DataInit:
    """Deterministic inputs in the suite's order: one instance per kernel set-up."""

    def __init__(self):
        self.count = 0

    def _factor(self) -> float:
        f = 0.1 if self.count % 2 else 0.2
        self.count += 1
        return f

    def real(self, n: int) -> np.ndarray:
        f = self._factor()
        i = np.arange(n, dtype=np.float64)
        return f * (i + 1.1) / (i + 1.12345)

    def const(self, n: int, value: float) -> np.ndarray:
        self.count += 1
        return np.full(n, value, dtype=np.float64)

    def rand_sign(self, n: int) -> np.ndarray:
        f = self._factor()
        i = np.arange(n, dtype=np.float64)
        sign = np.where(glibc_rand(4793, n) / RAND_MAX < 0.5, -1.0, 1.0)
        return sign * f * (i + 1.1) / (i + 1.12345)

    def rand_value(self, n: int) -> np.ndarray:
        """Values in [0, 1] from C ``rand()`` seeded with 4793."""
        self.count += 1
        return glibc_rand(4793, n) / RAND_MAX

    def ints(self, n: int) -> np.ndarray:
        self.count += 1
        r = glibc_rand(4793, n + 2) / RAND_MAX
        v = np.where(r[:n] < 0.5, -1, 1).astype(np.int32)
        v[int(n * r[n])] = -58
        v[int(n * r[n + 1])] = 19
        return v

    def scalar(self) -> float:
        return self._factor() * 1.1 / 1.12345


def checksum(data, scale: float = 1.0) -> float:
    """Kahan-compensated weighted sum ``sum_j (|sin(j+1)| + 0.5) * data[j]``, times ``scale``.

    A 0-d array is a reduction result: the suite adds such scalars to the checksum unweighted.
    """
    d = np.asarray(data, dtype=np.float64)
    if d.ndim == 0:
        return float(d) * scale
    d = d.ravel()
    total = _Sum()
    for start in range(0, d.size, _CHUNK):
        part = d[start:start + _CHUNK]
        total.add(_weights(start, part.size) * part)   # the suite's float64 products
    return float(total.value) * scale


#: elements per vectorised step (bounds the temporaries at large --sizefact)
_CHUNK = 1 << 22
_WEIGHTS = [np.empty(0)]
_LONG = np.finfo(np.longdouble).eps < np.finfo(np.float64).eps


def _weights(start: int, count: int) -> np.ndarray:
    """|sin(j + 1)| + 0.5 for j in [start, start + count): computed once, the longest kept."""
    end = start + count
    if _WEIGHTS[0].size < end:
        _WEIGHTS[0] = np.abs(np.sin(np.arange(1, end + 1, dtype=np.float64))) + 0.5
    return _WEIGHTS[0][start:end]


class _Sum:
    """The suite's long-double accumulation: numpy's extended precision where the platform has
    it (x86-64: 64-bit mantissa, as the suite's ``long double``), else exactly rounded fsum."""

    def __init__(self):
        self.value = np.longdouble(0.0) if _LONG else 0.0
        self._parts = []

    def add(self, terms: np.ndarray) -> None:
        if _LONG:
            self.value += np.sum(terms.astype(np.longdouble))
        else:
            self._parts.append(math.fsum(terms.tolist()))
            self.value = math.fsum(self._parts)


def checksum_of(*arrays, scale: float = 1.0) -> float:
    """Sum of the checksums of several outputs (the suite adds them)."""
    return math.fsum(checksum(a, scale) for a in arrays)


def relative_diff(a: float, b: float) -> float:
    """The suite's comparison of two checksums: ``|a - b| / |a|`` (absolute when a == 0)."""
    return abs(a - b) / abs(a) if a != 0 else abs(a - b)
