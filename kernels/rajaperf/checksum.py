"""RAJAPerf's input initialisation and checksum, reproduced from their definitions.

Initialisation (the suite's data utilities):

- ``real(n)``: ``v[i] = f*(i + 1.1)/(i + 1.12345)`` with ``f`` alternating 0.2, 0.1, 0.2, ... by
  the order of initialisation calls in a kernel's set-up (every call counts, constants too);
- ``const(n, c)``: all ``c``;
- ``rand_sign(n)``: ``real`` values with a sign drawn from C ``rand()`` seeded with 4793;
- ``rand_value(n)``: ``rand()/RAND_MAX`` (seed 4793);
- ``ints(n)``: +1/-1 from C ``rand()`` (seed 4793), then one random entry set to -58 and one to 19;
- ``scalar()``: ``f*1.1/1.12345``.

C ``rand()`` here is glibc's (the additive-feedback generator behind ``random()``, see
:mod:`._rand`), so integer data matches the suite's on Linux.

Checksum: a sum of ``(|sin(j+1)| + 0.5) * data[j]`` (float64 products), times a scale factor.
The suite accumulates in ``long double`` with Kahan compensation; we add the products in numpy's
``longdouble`` (the same 80-bit format on x86-64; exactly rounded ``math.fsum`` where numpy has
no wider type), by chunks of 4M elements summed on threads and added in order, so that
64M-element outputs take well under a second.
"""
from __future__ import annotations

import math
import threading

import numpy as np

from ._host import in_chunks
from ._rand import RAND_MAX, _rand_view, glibc_rand

__all__ = ["RAND_MAX", "DataInit", "checksum", "checksum_of", "glibc_rand", "relative_diff",
           "trim_weights"]

#: rand() <= _HALF exactly when rand()/RAND_MAX < 0.5 (the nearest quotients differ from 0.5 by
#: ~2e-10, far above float64's rounding there)
_HALF = RAND_MAX // 2
#: elements per chunk of the set-up formulas (chunks run on threads; no 64M-element temporaries)
_INIT_CHUNK = 1 << 20


def _real(f: float, n: int) -> np.ndarray:
    """``f * (i + 1.1) / (i + 1.12345)`` for i in [0, n), by chunks into one array (elementwise,
    so the same bits as the one-expression form)."""
    out = np.empty(n, dtype=np.float64)

    def fill(start, stop):
        i = np.arange(start, stop, dtype=np.float64)
        num = i + 1.1
        num *= f
        i += 1.12345
        np.divide(num, i, out=out[start:stop])
    in_chunks(fill, n, _INIT_CHUNK)
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
        return _real(self._factor(), n)

    def const(self, n: int, value: float) -> np.ndarray:
        self.count += 1
        if value == 0.0 and math.copysign(1.0, value) > 0:
            return np.zeros(n, dtype=np.float64)      # untouched pages until used
        return np.full(n, value, dtype=np.float64)

    def skip(self, calls: int = 1) -> None:
        """Initialisations the suite makes whose data the port does not need (outputs a kernel
        overwrites): they count for the order of the factors."""
        self.count += calls

    def rand_sign(self, n: int) -> np.ndarray:
        """``real`` values, negated where ``rand()/RAND_MAX < 0.5``: the suite's
        ``sign * f * (i + 1.1) / (i + 1.12345)`` rounds the same as the negated ``real``."""
        v = _real(self._factor(), n)
        np.negative(v, out=v, where=_rand_view(4793, n) <= _HALF)
        return v

    def rand_value(self, n: int) -> np.ndarray:
        """Values in [0, 1] from C ``rand()`` seeded with 4793."""
        self.count += 1
        return _rand_view(4793, n) / RAND_MAX

    def ints(self, n: int) -> np.ndarray:
        self.count += 1
        raw = _rand_view(4793, n + 2)
        v = np.ones(n, dtype=np.int32)
        v[raw[:n] <= _HALF] = -1
        v[int(n * (raw[n] / RAND_MAX))] = -58
        v[int(n * (raw[n + 1] / RAND_MAX))] = 19
        return v

    def scalar(self) -> float:
        return self._factor() * 1.1 / 1.12345


def checksum(data, scale: float = 1.0) -> float:
    """Kahan-compensated weighted sum ``sum_j (|sin(j+1)| + 0.5) * data[j]``, times ``scale``.

    A 0-d array is a reduction result: the suite adds such scalars to the checksum unweighted.
    Chunks of ``_CHUNK`` elements are summed on threads, then added in order.
    """
    d = np.asarray(data, dtype=np.float64)
    if d.ndim == 0:
        return float(d) * scale
    d = d.ravel()
    total = _Sum()
    for part in in_chunks(lambda start, stop: _chunk_sum(d[start:stop], start), d.size, _CHUNK):
        total.add(part)
    return float(total.value) * scale


#: elements per summed chunk (part of the result's definition: the long-double sum of each chunk
#: is pairwise, then the chunks are added in order)
_CHUNK = 1 << 22
#: weight chunks kept for the whole run (64M elements, 512 MB); longer outputs' chunks are kept
#: until :func:`trim_weights` (the runner calls it after each kernel, whose variants share them)
_KEPT_WEIGHT_CHUNKS = 16
_WEIGHTS: dict = {}
_LONG = np.finfo(np.longdouble).eps < np.finfo(np.float64).eps
_BUFFERS = threading.local()


def _weights(start: int, count: int) -> np.ndarray:
    """|sin(j + 1)| + 0.5 for j in [start, start + count), ``start`` a multiple of _CHUNK."""
    index = start // _CHUNK
    kept = _WEIGHTS.get(index)
    if kept is not None and kept.size >= count:
        return kept[:count]
    w = np.abs(np.sin(np.arange(start + 1, start + _CHUNK + 1, dtype=np.float64)))
    w += 0.5
    _WEIGHTS[index] = w
    return w[:count]


def trim_weights() -> None:
    """Drop the weight chunks past the first ``_KEPT_WEIGHT_CHUNKS`` (the checksum weights of
    outputs longer than 64M elements: up to 7 GB for DIFF_PREDICT at 64x)."""
    for index in [i for i in _WEIGHTS if i >= _KEPT_WEIGHT_CHUNKS]:
        del _WEIGHTS[index]


def _chunk_sum(part: np.ndarray, start: int):
    """One chunk's sum of the suite's float64 products ``weight * data``: in long double
    (pairwise, numpy's ``sum``), else exactly rounded. The buffers are per thread and reused."""
    n = part.size
    if getattr(_BUFFERS, "size", 0) < n:
        _BUFFERS.size = max(n, min(_CHUNK, 2 * n))
        _BUFFERS.prod = np.empty(_BUFFERS.size, np.float64)
        _BUFFERS.wide = np.empty(_BUFFERS.size, np.longdouble) if _LONG else None
    terms = np.multiply(_weights(start, n), part, out=_BUFFERS.prod[:n])
    if not _LONG:
        return math.fsum(terms.tolist())
    wide = _BUFFERS.wide[:n]
    wide[...] = terms
    return np.sum(wide)


class _Sum:
    """The suite's long-double accumulation: numpy's extended precision where the platform has
    it (x86-64: 64-bit mantissa, as the suite's ``long double``), else exactly rounded fsum.
    ``add`` takes one chunk's sum (:func:`_chunk_sum`)."""

    def __init__(self):
        self.value = np.longdouble(0.0) if _LONG else 0.0
        self._parts = []

    def add(self, part) -> None:
        if _LONG:
            self.value += part
        else:
            self._parts.append(part)
            self.value = math.fsum(self._parts)


def checksum_of(*arrays, scale: float = 1.0) -> float:
    """Sum of the checksums of several outputs (the suite adds them)."""
    return math.fsum(checksum(a, scale) for a in arrays)


def relative_diff(a: float, b: float) -> float:
    """The suite's comparison of two checksums: ``|a - b| / |a|`` (absolute when a == 0)."""
    return abs(a - b) / abs(a) if a != 0 else abs(a - b)
