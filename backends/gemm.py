"""What every backend's BLAS shares for :func:`kaio.blas.gemm`: the column-major call a vendor
library takes for a row-major product, and the float64 product the reference backend computes.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .. import dtypes as dt
from ..semantics import _as, round_f64


class GemmCall(NamedTuple):   # a tuple, not a frozen dataclass: built on every gemm call
    """One gemm in the column-major terms vendor BLAS libraries use.

    A row-major ``m x n`` result ``C`` is the column-major ``n x m`` matrix ``C^T``, and
    ``C^T = op(B)^T op(A)^T``: so the library multiplies B's buffer by A's buffer (swapped), each
    transposed exactly when the caller asked for it, with leading dimensions equal to the
    row-major row lengths."""
    trans_first: bool      # transpose flag for the first operand (B's buffer)
    trans_second: bool     # ... for the second operand (A's buffer)
    m: int                 # rows of the column-major result (= n of the row-major one)
    n: int                 # columns of the column-major result (= m)
    k: int
    ld_first: int
    ld_second: int
    ld_out: int


def column_major_call(a_shape, b_shape, trans_a: bool, trans_b: bool) -> GemmCall:
    """The column-major call for row-major ``op(a) @ op(b)`` (shapes already checked)."""
    m = a_shape[1] if trans_a else a_shape[0]
    k = a_shape[0] if trans_a else a_shape[1]
    n = b_shape[0] if trans_b else b_shape[1]
    return GemmCall(trans_b, trans_a, n, m, k, ld_first=max(1, b_shape[1]),
                    ld_second=max(1, a_shape[1]), ld_out=max(1, n))


def reference_gemm(a: np.ndarray, b: np.ndarray, out, alpha, beta, trans_a, trans_b, t: dt.DType):
    """``alpha * op(a) @ op(b) + beta * out`` in float64, rounded once to ``t``."""
    x = _as(t, a).astype(np.float64)
    y = _as(t, b).astype(np.float64)
    acc = float(alpha) * ((x.T if trans_a else x) @ (y.T if trans_b else y))
    if beta != 0:
        acc = acc + float(beta) * _as(t, out).astype(np.float64)
    return round_f64(t, acc)
