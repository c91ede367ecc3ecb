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

Checksum: a Kahan-compensated sum of ``(|sin(j+1)| + 0.5) * data[j]``, times a scale factor. The
suite sums in ``long double``; we sum in float64 with the same compensation, which agrees to
far below the suite's tightest tolerance for the sizes used here.
"""
from __future__ import annotations

import math

import numpy as np

RAND_MAX = 2**31 - 1


def glibc_rand(seed: int, count: int) -> np.ndarray:
    """The first ``count`` values of glibc ``rand()`` after ``srand(seed)`` (int64 array)."""
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
    buf = state + [0] * total
    for k in range(34, 34 + total):
        buf[k] = (buf[k - 31] + buf[k - 3]) & mask
    vals = np.array(buf[34 + 310 - 0: 34 + total], dtype=np.int64)
    out[:] = vals >> 1
    return out


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
    weights = np.abs(np.sin(np.arange(1, d.size + 1, dtype=np.float64))) + 0.5
    terms = (weights * d).tolist()
    total = 0.0
    comp = 0.0
    for x in terms:
        y = x - comp
        t = total + y
        comp = (t - total) - y
        total = t
    return total * scale


def checksum_of(*arrays, scale: float = 1.0) -> float:
    """Sum of the checksums of several outputs (the suite adds them)."""
    return math.fsum(checksum(a, scale) for a in arrays)


def relative_diff(a: float, b: float) -> float:
    """The suite's comparison of two checksums: ``|a - b| / |a|`` (absolute when a == 0)."""
    return abs(a - b) / abs(a) if a != 0 else abs(a - b)
